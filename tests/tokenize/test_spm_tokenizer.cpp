#include <gmock/gmock.h>

#include <algorithm>
#include <cstdint>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/error.h"
#include "support.h"
#include "tokenize/spm_tokenizer.h"

using namespace atto;

namespace {

using atto::test::error_of;
using atto::test::TempDir;
using ::testing::HasSubstr;

// 300 sentences of 3..12 words drawn from 30 words (single spaces, ASCII): a corpus on which
// SentencePiece's normalisation is the identity, so decode(encode(s)) == s exactly.
std::vector<std::string> corpus() {
  static const char* words[] = {"the",   "a",     "cat",     "dog",    "sat",    "ran",   "on",    "under",
                                "mat",   "table", "quickly", "slowly", "red",    "blue",  "green", "small",
                                "large", "house", "garden",  "river",  "jumped", "over",  "and",   "then",
                                "slept", "near",  "tree",    "bird",   "sang",   "loudly"};
  uint64_t x = 7;  // a 64-bit LCG (Knuth's MMIX constants): the same corpus everywhere
  auto below = [&](uint64_t n) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    return (x >> 33) % n;
  };
  std::vector<std::string> lines;
  for (int i = 0; i < 300; ++i) {
    std::string s;
    const auto n = 3 + below(10);
    for (uint64_t k = 0; k < n; ++k) {
      if (k) s += ' ';
      s += words[below(30)];
    }
    lines.push_back(s);
  }
  return lines;
}

}  // namespace

TEST(SpmTokenizer, TrainSaveLoadRoundTrip) {
  TempDir dir;
  const auto lines = corpus();
  const SpmTokenizer tok = SpmTokenizer::train(lines, {.vocab_size = 56}, dir.str());
  EXPECT_TRUE(std::filesystem::exists(dir / "spm.model"));
  EXPECT_EQ(tok.vocab_size(), 56);
  EXPECT_EQ(tok.id_to_string(kPadId), "<pad>");
  EXPECT_EQ(tok.id_to_string(kBosId), "<bos>");
  EXPECT_EQ(tok.id_to_string(kEosId), "<eos>");
  EXPECT_EQ(tok.id_to_string(kUnkId), "<unk>");
  for (const auto& line : lines) {
    const auto ids = tok.encode(line);
    for (int32_t id : ids) ASSERT_GE(id, kNumSpecialTokens) << line;  // no unk, no specials
    ASSERT_EQ(tok.decode(ids), line);
  }
  const SpmTokenizer again = SpmTokenizer::load(dir / "spm.model");
  EXPECT_EQ(again.model_bytes(), tok.model_bytes());
  EXPECT_EQ(again.encode(lines[5]), tok.encode(lines[5]));
  // Specials decode to nothing; an unseen character is <unk>.
  std::vector<int32_t> framed = {kBosId};
  for (int32_t id : tok.encode("the cat")) framed.push_back(id);
  framed.push_back(kEosId);
  EXPECT_EQ(tok.decode(framed), "the cat");
  const auto unk = tok.encode("the cat Z");
  EXPECT_NE(std::find(unk.begin(), unk.end(), kUnkId), unk.end());
  EXPECT_THROW(tok.decode({56}), Error);
}

TEST(SpmTokenizer, BpeRoundTrip) {
  TempDir dir;
  const auto lines = corpus();
  const SpmTokenizer tok = SpmTokenizer::train(lines, {.vocab_size = 60, .model_type = "bpe"}, dir.str());
  EXPECT_EQ(tok.vocab_size(), 60);
  for (const auto& line : lines) ASSERT_EQ(tok.decode(tok.encode(line)), line);
}

TEST(SpmTokenizer, TrainingIsDeterministic) {
  TempDir a, b;
  const auto lines = corpus();
  const SpmTokenizer t1 = SpmTokenizer::train(lines, {.vocab_size = 52}, a.str());
  const SpmTokenizer t2 = SpmTokenizer::train(lines, {.vocab_size = 52}, b.str());
  ASSERT_EQ(t1.vocab_size(), t2.vocab_size());
  for (int32_t id = 0; id < t1.vocab_size(); ++id) EXPECT_EQ(t1.id_to_string(id), t2.id_to_string(id));
  EXPECT_EQ(t1.model_bytes(), t2.model_bytes());
}

TEST(SpmTokenizer, JsonRoundTripThroughTheFactory) {
  TempDir dir;
  auto tok = train_tokenizer({.type = TokenizerKind::Spm, .vocab_size = 50}, corpus(), dir.str());
  const nlohmann::json j = tok->to_json();
  EXPECT_EQ(j["type"], "spm");
  EXPECT_EQ(j["model"], "spm.model");
  EXPECT_EQ(j["vocab_size"], 50);
  auto back = load_tokenizer_json(j, "tokenizer.json", dir.str());
  EXPECT_EQ(back->type(), "spm");
  EXPECT_EQ(back->encode("the red bird sang"), tok->encode("the red bird sang"));
  // write_files copies the model into another run directory.
  TempDir other;
  back->write_files(other.str());
  EXPECT_EQ(load_tokenizer_json(j, "copy", other.str())->encode("a tree"), tok->encode("a tree"));
  nlohmann::json wrong = j;
  wrong["vocab_size"] = 51;
  EXPECT_THAT(error_of([&] { load_tokenizer_json(wrong, "t.json", dir.str()); }), HasSubstr("has 50 pieces"));
}

TEST(SpmTokenizer, MissingOrBadModelNamesThePath) {
  TempDir dir;
  const std::string missing = dir / "nope/spm.model";
  std::string e = error_of([&] { SpmTokenizer::load(missing); });
  EXPECT_THAT(e, HasSubstr(missing));
  const nlohmann::json j = {{"type", "spm"},
                            {"version", 1},
                            {"model", "other.model"},
                            {"special_tokens", {"<pad>", "<bos>", "<eos>", "<unk>"}}};
  e = error_of([&] { load_tokenizer_json(j, "run/tokenizer.json", dir.str()); });
  EXPECT_THAT(e, HasSubstr(dir / "other.model"));
  dir.write("garbage.model", "this is not a protobuf");
  e = error_of([&] { SpmTokenizer::load(dir / "garbage.model"); });
  EXPECT_THAT(e, HasSubstr("garbage.model"));
  EXPECT_THAT(e, HasSubstr("cannot be loaded"));
}

TEST(SpmTokenizer, BadTrainingRequestsAreErrors) {
  TempDir dir;
  const auto lines = corpus();
  std::string e = error_of([&] { SpmTokenizer::train(lines, {.vocab_size = 5000}, dir.str()); });
  EXPECT_THAT(e, HasSubstr("Vocabulary size too high"));  // SentencePiece's own hint
  EXPECT_THROW(SpmTokenizer::train(lines, {.vocab_size = 50, .model_type = "word"}, dir.str()), Error);
  EXPECT_THROW(SpmTokenizer::train(lines, {.vocab_size = 4}, dir.str()), Error);
  EXPECT_THROW(SpmTokenizer::train({"", ""}, {.vocab_size = 50}, dir.str()), Error);
  EXPECT_THROW(train_tokenizer({.type = TokenizerKind::Spm}, lines, dir.str()), Error);  // no vocab size
}
