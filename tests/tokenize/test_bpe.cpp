// Byte-level BPE: GPT-2's pre-tokenisation, encoding by merge rank, training, tokenizer.json.
// (Exactness against tiktoken's gpt2 encoding on real text: the CLI test cli.gpt2_tokenizer.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <random>
#include "base/error.h"
#include "tokenize/bpe.h"
#include "tokenize/pretokenize.h"

using namespace atto;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

namespace {

std::vector<std::string> chunks(std::string_view text) {
  std::vector<std::string> out;
  Gpt2Splitter::instance().each(text, [&](std::string_view c) { out.emplace_back(c); });
  return out;
}

BpeTokenizer train(std::string_view text, int64_t vocab) {
  const std::string_view texts[] = {text};
  return BpeTokenizer::train(texts, {.vocab_size = vocab, .min_frequency = 2});
}

}  // namespace

TEST(Gpt2Splitter, SplitsAsGpt2sPattern) {
  EXPECT_THAT(chunks("Hello world's  end\n"), ElementsAre("Hello", " world", "'s", " ", " end", "\n"));
  // \s+(?!\S): a run of spaces gives its last one to the next word; at the end it stays whole.
  EXPECT_THAT(chunks("a   b  "), ElementsAre("a", "  ", " b", "  "));
  EXPECT_THAT(chunks("I'll do 42 things!!"), ElementsAre("I", "'ll", " do", " 42", " things", "!!"));
  EXPECT_THAT(chunks("caf\xC3\xA9 \xD9\xA3\xD9\xA4"),
              ElementsAre("caf\xC3\xA9", " \xD9\xA3\xD9\xA4"));  // é, Arabic-Indic 34
  // Unicode White_Space, spelled out: no-break spaces are spaces (as punctuation they would be
  // one chunk), though not the " " that may lead a word; a zero width space is not a space.
  EXPECT_THAT(chunks("a\xC2\xA0\xC2\xA0"
                     "b"),
              ElementsAre("a", "\xC2\xA0", "\xC2\xA0", "b"));
  EXPECT_THAT(chunks("a\xE2\x80\x8B"
                     "b"),
              ElementsAre("a", "\xE2\x80\x8B", "b"));
}

TEST(Gpt2Splitter, InvalidUtf8BecomesChunksOfItsOwnAndNothingIsLost) {
  const std::string text =
      "ab\xFF\xFE"
      "cd \xC3(x\x80";
  const auto c = chunks(text);
  EXPECT_THAT(c, ElementsAre("ab", "\xFF\xFE", "cd", " ", "\xC3", "(", "x", "\x80"));
  std::string joined;
  for (const auto& s : c) joined += s;
  EXPECT_EQ(joined, text);
}

TEST(Bpe, RoundTripsAnyBytes) {
  const BpeTokenizer t = train(
      "the cat sat on the mat; the cat ate the rat. "
      "\xE2\x82\xAC\xE2\x82\xAC",
      300);
  std::mt19937 rng(5);
  for (int n = 0; n < 200; ++n) {
    std::string s(rng() % 64, '\0');
    for (char& c : s) c = static_cast<char>(rng() % 256);
    EXPECT_EQ(t.decode(t.encode(s)), s);
  }
  EXPECT_TRUE(t.encode("").empty());
  EXPECT_EQ(t.decode(t.encode("<|endoftext|>")), "<|endoftext|>");  // ordinary text, not the special id
  for (int32_t id : t.encode("<|endoftext|>")) EXPECT_NE(id, t.end_of_text());
}

TEST(Bpe, TrainingMergesTheMostFrequentPairFirstAndIsDeterministic) {
  // " a" 5 times, then "ab" 3 times ("ab" words): the first merge is (' ', 'a').
  const std::string text = "ab ab ab a a a a a";
  const BpeTokenizer t = train(text, 258);  // 256 bytes + 1 merge + <|endoftext|>
  ASSERT_EQ(t.merge_count(), 1);
  EXPECT_EQ(t.token_bytes(256), " a");
  EXPECT_EQ(t.end_of_text(), 257);
  EXPECT_EQ(t.token_bytes(257), "<|endoftext|>");
  EXPECT_THAT(t.encode(" a ab"), ElementsAre(256, 256, 'b'));
  // Pairs seen once are never merged: the vocabulary stops short of the size asked for.
  EXPECT_EQ(train("xyz", 1000).merge_count(), 0);
  // Same text, same tokenizer.
  EXPECT_EQ(train(text + " the the the", 300).to_json(), train(text + " the the the", 300).to_json());
}

TEST(Bpe, EncodesByMergeRankLeftmostFirst) {
  // Merges by rank: (a, a) -> "aa" (rank 0), then ("aa", a) -> "aaa" (rank 1). "aaaa": rank 0
  // at (0, 1), then rank 0 again at the new (1, 2): "aa" "aa", which no merge joins. "aaa": "aa"
  // then ("aa", a) -> "aaa".
  nlohmann::json j = train("x", 300).to_json();
  j["vocab"].push_back("aa");
  j["vocab"].push_back("aaa");
  j["merges"] = {"a a", "aa a"};
  const BpeTokenizer t = BpeTokenizer::from_json(j, "test");
  const auto aa = static_cast<int32_t>(t.vocab_size() - 2), aaa = aa + 1;
  EXPECT_THAT(t.encode("aaaa"), ElementsAre(aa, aa));
  EXPECT_THAT(t.encode("aaa"), ElementsAre(aaa));
  EXPECT_THAT(t.encode("aaaaa"), ElementsAre(aa, aaa));  // (0,1), (2,3), then ("aa", a) at the end
}

TEST(Bpe, JsonRoundTripsAndRefusesWhatDoesNotFit) {
  const BpeTokenizer t = train("hello hello hello world world wide web\n\n", 280);
  const nlohmann::json j = t.to_json();
  const BpeTokenizer back = BpeTokenizer::from_json(j, "tok.json");
  EXPECT_EQ(back.to_json(), j);
  EXPECT_EQ(back.encode("hello wide world"), t.encode("hello wide world"));
  auto refused = [&](const std::function<void(nlohmann::json&)>& damage, const std::string& says) {
    nlohmann::json bad = j;
    damage(bad);
    try {
      BpeTokenizer::from_json(bad, "tok.json");
      ADD_FAILURE() << "accepted: " << says;
    } catch (const Error& e) {
      EXPECT_THAT(e.what(), HasSubstr("tok.json"));
      EXPECT_THAT(e.what(), HasSubstr(says));
    }
  };
  refused([](nlohmann::json& b) { b["merges"].push_back("zz qq"); }, "lacks");
  refused([](nlohmann::json& b) { b["vocab"][65] = "AA"; }, "byte 0x41");  // byte 'A' has no token
  refused([](nlohmann::json& b) { b["special_tokens"]["<|endoftext|>"] = 3; }, "special token");
  refused([](nlohmann::json& b) { b["vocab"][260] = "\xE2\x82\xAC"; }, "no byte");  // '€' is no GPT-2 byte char
  refused([](nlohmann::json& b) { b["version"] = 2; }, "version");
  refused([](nlohmann::json& b) { b["pattern"] = "llama3"; }, "pattern");
  EXPECT_THROW(t.decode(std::vector<int32_t>{static_cast<int32_t>(t.vocab_size())}), Error);
}
