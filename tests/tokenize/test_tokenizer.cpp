// The common seq2seq Tokenizer interface: the char wrapper and load_tokenizer_json dispatch.
#include <gmock/gmock.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "support.h"
#include "tokenize/tokenizer.h"

using namespace atto;
using atto::test::error_of;
using atto::test::TempDir;
using ::testing::HasSubstr;

TEST(CharSeqTokenizer, SpecialsFirstThenSortedCharacters) {
  auto tok = CharSeqTokenizer::build({"cab", "ba"});
  EXPECT_EQ(tok.chars(), (std::vector<char32_t>{'a', 'b', 'c'}));
  EXPECT_EQ(tok.vocab_size(), 7);
  EXPECT_EQ(tok.encode("abc"), (std::vector<int32_t>{4, 5, 6}));
  EXPECT_EQ(tok.id_to_string(kPadId), "<pad>");
  EXPECT_EQ(tok.id_to_string(kUnkId), "<unk>");
  EXPECT_EQ(tok.id_to_string(6), "c");
  EXPECT_THROW(tok.id_to_string(7), Error);
}

TEST(CharSeqTokenizer, RoundTripUnknownAndSpecials) {
  const std::vector<std::string> lines = {"Grüße, café!", "日本語 𝄞 naïve"};
  auto tok = CharSeqTokenizer::build(lines);
  for (const auto& line : lines) EXPECT_EQ(tok.decode(tok.encode(line)), line);
  const auto ids = tok.encode("café?");  // '?' is not in the training text
  ASSERT_EQ(ids.size(), 5u);             // code points, not bytes
  EXPECT_EQ(ids[4], kUnkId);
  std::vector<int32_t> framed = {kBosId};
  framed.insert(framed.end(), ids.begin(), ids.end());
  framed.insert(framed.end(), {kEosId, kPadId, kPadId});
  EXPECT_EQ(tok.decode(framed), "café<unk>");
  EXPECT_THROW(tok.decode({static_cast<int32_t>(tok.vocab_size())}), Error);
  EXPECT_THROW(tok.encode("\xC3"), Error);  // invalid UTF-8
  EXPECT_THROW(CharSeqTokenizer::build({"", ""}), Error);
}

TEST(CharSeqTokenizer, JsonRoundTripAndGptJsonRefused) {
  auto tok = CharSeqTokenizer::build({"hello", "world"});
  const nlohmann::json j = tok.to_json();
  EXPECT_EQ(j["type"], "char");
  EXPECT_EQ(j["special_tokens"], nlohmann::json({"<pad>", "<bos>", "<eos>", "<unk>"}));
  auto back = load_tokenizer_json(nlohmann::json::parse(j.dump()), "t.json", ".");
  EXPECT_EQ(back->type(), "char");
  EXPECT_EQ(back->encode("held"), tok.encode("held"));
  EXPECT_EQ(back->to_json(), j);

  const CharTokenizer gpt = CharTokenizer::build("abc", {.boundary = true, .include_newline = false});
  const std::string e = error_of([&] { load_tokenizer_json(gpt.to_json(), "gpt/tokenizer.json", "."); });
  EXPECT_THAT(e, HasSubstr("gpt/tokenizer.json"));
  EXPECT_THAT(e, HasSubstr("decoder-only"));
  nlohmann::json dup = j;
  dup["chars"].push_back("h");
  EXPECT_THAT(error_of([&] { CharSeqTokenizer::from_json(dup, "t.json"); }), HasSubstr("duplicate"));
}

TEST(LoadTokenizer, DispatchesOnTypeAndRejectsUnknown) {
  EXPECT_THAT(error_of([] {
                load_tokenizer_json({{"type", "bpe"}}, "x.json", ".");
              }),
              HasSubstr("unknown \"type\" \"bpe\""));
  EXPECT_THAT(error_of([] { load_tokenizer_json({{"chars", {"a"}}}, "x.json", "."); }), HasSubstr("\"type\""));
  EXPECT_THROW(load_tokenizer_json(nlohmann::json::array(), "x.json", "."), Error);
  EXPECT_THROW(parse_tokenizer_kind("wordpiece"), Error);      // --tokenizer and config.json name the kinds
  EXPECT_EQ(parse_tokenizer_kind("bpe"), TokenizerKind::Bpe);  // a GPT's (a seq2seq run refuses it)
}

TEST(LoadTokenizer, FromFileUsesItsFolder) {
  TempDir dir;
  auto tok = train_tokenizer({.type = TokenizerKind::Word}, {"a b c", "c b"}, dir.str());
  const std::string path = dir / "tokenizer.json";
  std::ofstream(path) << tok->to_json().dump(1);
  auto back = load_tokenizer_file(path);
  EXPECT_EQ(back->encode("c b a z"), tok->encode("c b a z"));
  std::ofstream(path) << "{not json";
  EXPECT_THAT(error_of([&] { load_tokenizer_file(path); }), HasSubstr("not valid JSON"));
  EXPECT_THAT(error_of([&] { load_tokenizer_file(dir / "none.json"); }), HasSubstr("none.json"));
}
