#include <gmock/gmock.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "support.h"
#include "tokenize/word_tokenizer.h"

using namespace atto;
using atto::test::error_of;
using ::testing::HasSubstr;

TEST(WordTokenizer, VocabularyBySpecialsThenCountThenBytes) {
  auto tok = WordTokenizer::build({"3 1 2", "2 2 1", "b a"});
  // counts: 2 x3, 1 x2, then 3, a, b once each (byte order)
  EXPECT_EQ(tok.words(), (std::vector<std::string>{"2", "1", "3", "a", "b"}));
  EXPECT_EQ(tok.vocab_size(), 9);
  EXPECT_EQ(tok.id_to_string(kPadId), "<pad>");
  EXPECT_EQ(tok.id_to_string(kBosId), "<bos>");
  EXPECT_EQ(tok.id_to_string(kEosId), "<eos>");
  EXPECT_EQ(tok.id_to_string(kUnkId), "<unk>");
  EXPECT_EQ(tok.id_to_string(4), "2");
  EXPECT_EQ(tok.pad_id(), 0);
  EXPECT_EQ(tok.bos_id(), 1);
  EXPECT_EQ(tok.eos_id(), 2);
  EXPECT_EQ(tok.unk_id(), 3);
}

TEST(WordTokenizer, RoundTripAndUnknownWords) {
  const std::vector<std::string> lines = {"the cat sat on the mat", "a dog ran", "Grüße aus 日本"};
  auto tok = WordTokenizer::build(lines);
  for (const auto& line : lines) EXPECT_EQ(tok.decode(tok.encode(line)), line);
  EXPECT_EQ(tok.decode(tok.encode("  the\tcat \n ran ")), "the cat ran");  // whitespace collapsed
  const auto ids = tok.encode("the zebra sat");
  ASSERT_EQ(ids.size(), 3u);
  EXPECT_EQ(ids[1], kUnkId);
  EXPECT_EQ(ids[0], tok.id_of("the"));
  EXPECT_EQ(tok.decode(ids), "the <unk> sat");
  EXPECT_EQ(tok.decode({kBosId, tok.id_of("cat"), kEosId, kPadId, kPadId}), "cat");
  EXPECT_TRUE(tok.encode("").empty());
  EXPECT_THROW(tok.decode({static_cast<int32_t>(tok.vocab_size())}), Error);
  EXPECT_THROW(tok.decode({-1}), Error);
  EXPECT_THROW(tok.encode("bad \xFF"), Error);
}

TEST(WordTokenizer, MinCountAndMaxSize) {
  const std::vector<std::string> lines = {"a a a b b c", "a b d"};
  EXPECT_EQ(WordTokenizer::build(lines, {.min_count = 2}).words(), (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(WordTokenizer::build(lines, {.max_size = 5}).words(), (std::vector<std::string>{"a"}));
  auto capped = WordTokenizer::build(lines, {.max_size = 6});
  EXPECT_EQ(capped.vocab_size(), 6);
  EXPECT_EQ(capped.encode("c d"), (std::vector<int32_t>{kUnkId, kUnkId}));
  EXPECT_THAT(error_of([&] { WordTokenizer::build(lines, {.max_size = 4}); }), HasSubstr("special tokens"));
  EXPECT_THROW(WordTokenizer::build(lines, {.min_count = 0}), Error);
  EXPECT_THAT(error_of([&] { WordTokenizer::build(lines, {.min_count = 9}); }), HasSubstr("none seen at least 9"));
  EXPECT_THROW(WordTokenizer::build({"", "  "}), Error);
}

TEST(WordTokenizer, SpecialTokenSpellingsMapToSpecialIds) {
  auto tok = WordTokenizer::build({"x <unk> y <eos>"});
  EXPECT_EQ(tok.words(), (std::vector<std::string>{"x", "y"}));  // specials are not words
  EXPECT_EQ(tok.encode("<unk> x <bos>"), (std::vector<int32_t>{kUnkId, 4, kBosId}));
}

TEST(WordTokenizer, JsonRoundTripThroughTheFactory) {
  auto tok = WordTokenizer::build({"the cat sat", "the dog"});
  const nlohmann::json j = tok.to_json();
  EXPECT_EQ(j["type"], "word");
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["special_tokens"], nlohmann::json({"<pad>", "<bos>", "<eos>", "<unk>"}));
  EXPECT_EQ(j["words"], nlohmann::json({"the", "cat", "dog", "sat"}));
  auto back = load_tokenizer_json(nlohmann::json::parse(j.dump()), "tokenizer.json", ".");
  EXPECT_EQ(back->type(), "word");
  EXPECT_EQ(back->vocab_size(), tok.vocab_size());
  EXPECT_EQ(back->encode("the dog sat on"), tok.encode("the dog sat on"));
  EXPECT_EQ(back->to_json(), j);
}

TEST(WordTokenizer, JsonValidationNamesTheFileAndField) {
  const nlohmann::json good = WordTokenizer::build({"a b"}).to_json();
  auto with = [&](const char* key, nlohmann::json v) {
    nlohmann::json j = good;
    j[key] = std::move(v);
    return error_of([&] { WordTokenizer::from_json(j, "run/tokenizer.json"); });
  };
  std::string e = with("words", {"a", "b", "a"});
  EXPECT_THAT(e, HasSubstr("run/tokenizer.json"));
  EXPECT_THAT(e, HasSubstr("words[2]"));
  EXPECT_THAT(e, HasSubstr("duplicate"));
  EXPECT_THAT(with("words", {"a b"}), HasSubstr("whitespace"));
  EXPECT_THAT(with("words", {"<unk>"}), HasSubstr("special token"));
  EXPECT_THAT(with("words", {""}), HasSubstr("empty"));
  EXPECT_THAT(with("words", {1}), HasSubstr("must be a string"));
  EXPECT_THAT(with("words", nlohmann::json::array()), HasSubstr("non-empty array"));
  EXPECT_THAT(with("special_tokens", {"<eos>"}), HasSubstr("special_tokens"));
  EXPECT_THAT(with("version", 2), HasSubstr("version"));
  EXPECT_THAT(with("type", "char"), HasSubstr("\"word\""));
}
