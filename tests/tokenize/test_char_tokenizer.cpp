#include <gmock/gmock.h>

#include <functional>
#include <nlohmann/json.hpp>
#include <string>

#include "base/error.h"
#include "support.h"
#include "tokenize/char_tokenizer.h"

using namespace atto;

namespace {

using atto::test::error_of;
using ::testing::HasSubstr;

const CharTokenizerOptions kLines{.boundary = true, .include_newline = false};
const CharTokenizerOptions kStream{.boundary = false, .include_newline = true};

}  // namespace

TEST(CharTokenizer, VocabularyIsSortedSetWithBoundaryFirst) {
  auto tok = CharTokenizer::build("emma\nolivia\nava\n", kLines);
  EXPECT_EQ(tok.chars(), (std::vector<char32_t>{'a', 'e', 'i', 'l', 'm', 'o', 'v'}));
  EXPECT_EQ(tok.vocab_size(), 8);
  EXPECT_TRUE(tok.has_boundary());
  EXPECT_EQ(tok.boundary_id(), 0);
  EXPECT_EQ(tok.id_of('a'), 1);
  EXPECT_EQ(tok.id_of('v'), 7);
  EXPECT_EQ(tok.id_of('\n'), -1);  // newline excluded in lines mode
  EXPECT_EQ(tok.id_to_string(0), "<eos>");
  EXPECT_EQ(tok.encode("ava"), (std::vector<int32_t>{1, 7, 1}));
}

TEST(CharTokenizer, StreamVocabularyKeepsNewlineAndHasNoSpecialTokens) {
  auto tok = CharTokenizer::build("ab\nba\n", kStream);
  EXPECT_EQ(tok.vocab_size(), 3);
  EXPECT_EQ(tok.boundary_id(), -1);
  EXPECT_EQ(tok.id_of('\n'), 0);  // '\n' (0x0A) sorts first
  EXPECT_EQ(tok.id_to_string(0), "\\n");
  EXPECT_EQ(tok.encode("a\nb"), (std::vector<int32_t>{1, 0, 2}));
}

TEST(CharTokenizer, RoundTripAsciiAndNonAscii) {
  const std::string ascii = "First Citizen:\nBefore we proceed any further, hear me speak.\n";
  auto t1 = CharTokenizer::build(ascii, kStream);
  EXPECT_EQ(t1.decode(t1.encode(ascii)), ascii);

  const std::string text = "Grüße, café! 𝄞 日本語 — naïve\n";
  auto t2 = CharTokenizer::build(text, kStream);
  const auto ids = t2.encode(text);
  EXPECT_EQ(ids.size(), 27u);  // code points, not bytes (python3: len(text) == 27)
  EXPECT_EQ(t2.decode(ids), text);
  // Ids are dense and every id decodes to a distinct character.
  for (int32_t id = 0; id < t2.vocab_size(); ++id) {
    EXPECT_EQ(t2.id_of(t2.char_of(id)), id);
  }
}

TEST(CharTokenizer, DecodeSkipsBoundaryAndRejectsOutOfRange) {
  auto tok = CharTokenizer::build("abc", kLines);
  EXPECT_EQ(tok.decode({0, 1, 2, 3, 0}), "abc");
  EXPECT_THROW(tok.decode({4}), Error);
  EXPECT_THROW(tok.decode({-1}), Error);
  EXPECT_THROW(tok.id_to_string(99), Error);
}

TEST(CharTokenizer, UnknownCharacterErrorNamesCharacterAndPosition) {
  auto tok = CharTokenizer::build("abcdef", kLines);
  const std::string msg = error_of([&] { tok.encode("caf\xC3\xA9"); });
  EXPECT_THAT(msg, HasSubstr("unknown character '\xC3\xA9' (U+00E9) at position 3 of \"caf\xC3\xA9\""));
  EXPECT_THAT(msg, HasSubstr("built from the training data"));
  EXPECT_THAT(msg, HasSubstr("abcdef"));  // shows the vocabulary
}

TEST(CharTokenizer, UnknownCharacterErrorListsAllPositionsOfAllCharacters) {
  auto tok = CharTokenizer::build("abc", kLines);
  // x at 1 and 4, é at 2, newline at 5 (not in a lines vocabulary)
  const std::string msg = error_of([&] {
    tok.encode(
        "ax\xC3\xA9"
        "bx\nc");
  });
  EXPECT_THAT(msg, HasSubstr("unknown characters in \"ax\xC3\xA9"
                             "bx\\nc\": "));
  EXPECT_THAT(msg, HasSubstr("'x' (U+0078) at positions 1, 4"));
  EXPECT_THAT(msg, HasSubstr("(U+00E9) at position 2"));
  EXPECT_THAT(msg, HasSubstr("'\\n' (U+000A) at position 5"));
}

TEST(CharTokenizer, EncodeRejectsInvalidUtf8) {
  auto tok = CharTokenizer::build("abc", kLines);
  const std::string msg = error_of([&] { tok.encode("ab\xFF"); });
  EXPECT_THAT(msg, HasSubstr("byte offset 2"));
}

TEST(CharTokenizer, BuildRejectsEmptyVocabulary) {
  EXPECT_THROW(CharTokenizer::build("", kStream), Error);
  EXPECT_THROW(CharTokenizer::build("\n\n", kLines), Error);
  EXPECT_THROW(CharTokenizer::build("a\xC3", kLines), Error);
}

TEST(CharTokenizer, JsonRoundTrip) {
  for (const auto& opts : {kLines, kStream}) {
    auto tok = CharTokenizer::build("Grüße\tcafé \"x\" \\ 𝄞\n", opts);
    const std::string text = tok.to_json().dump();
    auto back = CharTokenizer::from_json_text(text, "tokenizer.json");
    EXPECT_EQ(back, tok);
    EXPECT_EQ(back.vocab_size(), tok.vocab_size());
    EXPECT_EQ(back.encode("café"), tok.encode("café"));
  }
}

TEST(CharTokenizer, JsonFormatIsAsDocumented) {
  auto tok = CharTokenizer::build("ba", kLines);
  const nlohmann::json j = tok.to_json();
  EXPECT_EQ(j["type"], "char");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["special_tokens"], nlohmann::json::array({"<eos>"}));
  EXPECT_EQ(j["chars"], nlohmann::json::array({"a", "b"}));
}

TEST(CharTokenizer, CorruptedJsonGivesErrorsNamingTheProblem) {
  const nlohmann::json good = CharTokenizer::build("abc", kLines).to_json();
  struct Case {
    const char* name;
    std::function<void(nlohmann::json&)> corrupt;
    const char* expect;
  };
  const std::vector<Case> cases = {
      {"missing chars", [](auto& j) { j.erase("chars"); }, "missing field \"chars\""},
      {"missing type", [](auto& j) { j.erase("type"); }, "missing field \"type\""},
      {"missing version", [](auto& j) { j.erase("version"); }, "missing field \"version\""},
      {"wrong type", [](auto& j) { j["type"] = "bpe"; }, "\"bpe\""},
      {"future version", [](auto& j) { j["version"] = 2; }, "version 2"},
      {"duplicate", [](auto& j) { j["chars"].push_back("a"); }, "duplicate"},
      {"two code points", [](auto& j) { j["chars"][1] = "bc"; }, "exactly one character"},
      {"empty string", [](auto& j) { j["chars"][1] = ""; }, "exactly one character"},
      {"number entry", [](auto& j) { j["chars"][0] = 97; }, "chars[0]"},
      {"empty chars", [](auto& j) { j["chars"] = nlohmann::json::array(); }, "non-empty"},
      {"bad special", [](auto& j) { j["special_tokens"] = {"<pad>"}; }, "special_tokens"},
      {"not an object", [](auto& j) { j = nlohmann::json::array(); }, "JSON object"},
  };
  for (const auto& c : cases) {
    SCOPED_TRACE(c.name);
    nlohmann::json j = good;
    c.corrupt(j);
    const std::string msg = error_of([&] { CharTokenizer::from_json(j, "runs/x/tokenizer.json"); });
    EXPECT_THAT(msg, HasSubstr("runs/x/tokenizer.json"));
    EXPECT_THAT(msg, HasSubstr(c.expect));
  }
  const std::string msg = error_of([] { CharTokenizer::from_json_text("{\"type\": \"char\",", "t.json"); });
  EXPECT_THAT(msg, HasSubstr("t.json"));
  EXPECT_THAT(msg, HasSubstr("not valid JSON"));
}
