// LinesDataset: the seeded split, the batch layout, sampling and evaluation.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <string>

#include "base/error.h"
#include "data/lines_dataset.h"

using namespace atto;

namespace {

// n distinct lines "l0", "l1", ... (digits only, so the vocabulary is small).
TextFile numbered_lines(int n) {
  std::string text;
  for (int i = 0; i < n; ++i) text += fmt::format("l{}\n", i);
  return make_text_file("numbered.txt", text);
}

// Holds out a split from 2 lines on, so that small files exercise the split (the default keeps
// corpora under 50 lines whole: TinyCorpusIsNotSplit).
LinesDataset make_lines(const TextFile& f, uint64_t seed = 1337) {
  return LinesDataset(f, build_tokenizer(f, DataMode::Lines), {.split_seed = seed, .min_holdout = 2});
}

// The text of row b of a lines batch, read back from the inputs (after the leading <eos>,
// up to the first <eos> target), checking the framing on the way.
std::string row_text(const Batch& batch, int64_t b, const CharTokenizer& tok) {
  const int32_t* x = &batch.x[static_cast<size_t>(b * batch.T)];
  const int32_t* y = &batch.y[static_cast<size_t>(b * batch.T)];
  EXPECT_EQ(x[0], tok.boundary_id());
  std::vector<int32_t> ids;
  int64_t t = 0;
  while (t < batch.T && y[t] != tok.boundary_id()) ids.push_back(y[t++]);
  EXPECT_LT(t, batch.T) << "row " << b << " has no <eos> target";
  return tok.decode(ids);
}

}  // namespace

TEST(LinesDataset, ValSizeRule) {
  EXPECT_EQ(LinesDataset::val_size_for(2, 2), 1);
  EXPECT_EQ(LinesDataset::val_size_for(19, 2), 1);
  EXPECT_EQ(LinesDataset::val_size_for(25, 2), 2);
  EXPECT_EQ(LinesDataset::val_size_for(49), 0);  // the default: nothing held out below 50 lines
  EXPECT_EQ(LinesDataset::val_size_for(50), 5);
  EXPECT_EQ(LinesDataset::val_size_for(100), 10);
  EXPECT_EQ(LinesDataset::val_size_for(10009), 1000);
  EXPECT_EQ(LinesDataset::val_size_for(32033), 1000);  // names.txt, as in makemore
  for (int n : {2, 3, 25, 100}) {
    auto d = make_lines(numbered_lines(n));
    EXPECT_EQ(d.size(Split::Val), LinesDataset::val_size_for(n, 2)) << n;
    EXPECT_EQ(d.size(Split::Train) + d.size(Split::Val), n) << n;
  }
  auto big = make_lines(numbered_lines(12000));
  EXPECT_EQ(big.size(Split::Val), 1000);
  EXPECT_EQ(big.size(Split::Train), 11000);
}

TEST(LinesDataset, TinyCorpusIsNotSplit) {
  // 3 lines (the default rule): every line is trained on, and validation scores the same lines.
  const TextFile f = make_text_file("toy.txt", "hello my name\nhello messi\nmy name is messi\n");
  LinesDataset d(f, build_tokenizer(f, DataMode::Lines));
  EXPECT_TRUE(d.val_is_train());
  EXPECT_EQ(d.size(Split::Train), 3);
  EXPECT_EQ(d.lines(Split::Val), d.lines(Split::Train));
  EXPECT_EQ(d.novelty("hello messi"), LinesDataset::Novelty::Train);
  // 49 lines still whole, 50 split off 5.
  EXPECT_TRUE(LinesDataset(numbered_lines(49), build_tokenizer(numbered_lines(49), DataMode::Lines)).val_is_train());
  const LinesDataset d50(numbered_lines(50), build_tokenizer(numbered_lines(50), DataMode::Lines));
  EXPECT_FALSE(d50.val_is_train());
  EXPECT_EQ(d50.size(Split::Val), 5);
  EXPECT_EQ(d50.size(Split::Train), 45);
}

TEST(LinesDataset, SplitIsDisjointCoversAllLinesAndSkipsEmptyLines) {
  auto f = make_text_file("x.txt", "aa\n\nbb\ncc\n\n\ndd\nee\nff\ngg\nhh\nii\njj\nkk");
  auto d = make_lines(f);
  std::set<int64_t> seen;
  for (Split s : {Split::Train, Split::Val}) {
    const auto& nums = d.line_numbers(s);
    EXPECT_TRUE(std::is_sorted(nums.begin(), nums.end()));  // file order within a split
    for (size_t i = 0; i < nums.size(); ++i) {
      EXPECT_TRUE(seen.insert(nums[i]).second) << "line " << nums[i] << " in both splits";
      // The stored text is the file's line with that number.
      EXPECT_EQ(d.lines(s)[i], std::string(split_lines(f.text)[nums[i] - 1].text));
    }
  }
  EXPECT_EQ(seen, (std::set<int64_t>{1, 3, 4, 7, 8, 9, 10, 11, 12, 13, 14}));
}

TEST(LinesDataset, SplitIsFixedBySeedAndChangesWithIt) {
  const TextFile f = numbered_lines(200);
  const auto a = make_lines(f, 7).line_numbers(Split::Val);
  EXPECT_EQ(make_lines(f, 7).line_numbers(Split::Val), a);
  EXPECT_NE(make_lines(f, 8).line_numbers(Split::Val), a);
  // Not just the first lines: the validation lines are spread over the file.
  EXPECT_GT(a.back() - a.front(), 100);
}

TEST(LinesDataset, BatchLayoutIsBosLinePaddingAndShiftedTargets) {
  // Lines "ab" and "c"; vocabulary <eos>=0 a=1 b=2 c=3. With 2 lines, 1 is val and 1 train.
  auto f = make_text_file("x.txt", "ab\nc\n");
  auto tok = build_tokenizer(f, DataMode::Lines);
  LinesDataset d(f, tok, {.min_holdout = 2});
  const int64_t T = 5;
  std::map<std::string, std::pair<std::vector<int32_t>, std::vector<int32_t>>> expect = {
      {"ab", {{0, 1, 2, 0, 0}, {1, 2, 0, -1, -1}}},
      {"c", {{0, 3, 0, 0, 0}, {3, 0, -1, -1, -1}}},
  };
  for (Split s : {Split::Train, Split::Val}) {
    ASSERT_EQ(d.num_eval_batches(s, 4, T), 1);
    const Batch b = d.eval_batch(s, 0, 4, T);
    ASSERT_EQ(b.B, 1);
    ASSERT_EQ(b.T, T);
    const auto& [x, y] = expect.at(d.lines(s)[0]);
    EXPECT_EQ(b.x, x);
    EXPECT_EQ(b.y, y);
    EXPECT_EQ(b.num_targets(), static_cast<int64_t>(d.lines(s)[0].size()) + 1);
  }
  // The tightest block size: a line of n characters fills T = n + 1 exactly, with no padding.
  const Batch tight = d.eval_batch(d.lines(Split::Train)[0] == "ab" ? Split::Train : Split::Val, 0, 1, 3);
  EXPECT_EQ(tight.x, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(tight.y, (std::vector<int32_t>{1, 2, 0}));
}

TEST(LinesDataset, NonAsciiLinesCountCharacters) {
  auto f = make_text_file("x.txt", "zo\xC3\xAB\nj\xC3\xBCrgen\nana\n");  // zoë (3), jürgen (6)
  auto tok = build_tokenizer(f, DataMode::Lines);
  LinesDataset d(f, tok);
  EXPECT_EQ(d.min_block_size(), 7);
  for (Split s : {Split::Train, Split::Val}) {
    for (int64_t i = 0; i < d.num_eval_batches(s, 2, 7); ++i) {
      const Batch b = d.eval_batch(s, i, 2, 7);
      for (int64_t r = 0; r < b.B; ++r) {
        EXPECT_EQ(row_text(b, r, tok), d.lines(s)[static_cast<size_t>(i * 2 + r)]);
      }
    }
  }
}

TEST(LinesDataset, SampleBatchDrawsTrainLinesAndIsAFunctionOfTheRngState) {
  const TextFile f = numbered_lines(30);  // 27 train, 3 val
  auto tok = build_tokenizer(f, DataMode::Lines);
  LinesDataset d(f, tok);
  const std::set<std::string> train(d.lines(Split::Train).begin(), d.lines(Split::Train).end());
  const std::set<std::string> val(d.lines(Split::Val).begin(), d.lines(Split::Val).end());
  Rng rng(42);
  std::set<std::string> drawn_train, drawn_val;
  for (int step = 0; step < 40; ++step) {
    const Batch b = d.sample_batch(rng, 8, 6);
    ASSERT_EQ(b.x.size(), 48u);
    for (int64_t r = 0; r < b.B; ++r) drawn_train.insert(row_text(b, r, tok));
    const Batch v = d.sample_batch(rng, 8, 6, Split::Val);
    for (int64_t r = 0; r < v.B; ++r) drawn_val.insert(row_text(v, r, tok));
  }
  EXPECT_EQ(drawn_train, train);  // 320 draws reach every one of the 27 lines, and only those
  EXPECT_EQ(drawn_val, val);

  // Resume: restoring the Rng state reproduces the batch sequence exactly.
  Rng a(5);
  d.sample_batch(a, 4, 6);
  const auto saved = a.state();
  const Batch next1 = d.sample_batch(a, 4, 6);
  const Batch next2 = d.sample_batch(a, 4, 6);
  Rng b;
  b.set_state(saved);
  EXPECT_EQ(d.sample_batch(b, 4, 6).x, next1.x);
  EXPECT_EQ(d.sample_batch(b, 4, 6).y, next2.y);
  EXPECT_EQ(a.state(), b.state());
}

TEST(LinesDataset, EvaluationCoversEachLineOnceWithAShortLastBatch) {
  const TextFile f = numbered_lines(257);  // val 25 lines, train 232
  auto tok = build_tokenizer(f, DataMode::Lines);
  LinesDataset d(f, tok);
  for (Split s : {Split::Train, Split::Val}) {
    for (int64_t B : {1, 7, 25, 1000}) {
      const int64_t n = d.size(s);
      const int64_t nb = d.num_eval_batches(s, B, 5);
      EXPECT_EQ(nb, (n + B - 1) / B);
      std::vector<std::string> got;
      int64_t targets = 0;
      for (int64_t i = 0; i < nb; ++i) {
        const Batch b = d.eval_batch(s, i, B, 5);
        EXPECT_EQ(b.B, i + 1 < nb ? B : n - (nb - 1) * B);
        for (int64_t r = 0; r < b.B; ++r) got.push_back(row_text(b, r, tok));
        targets += b.num_targets();
      }
      EXPECT_EQ(got, d.lines(s));  // each line once, in order
      int64_t expected_targets = 0;
      for (const auto& line : d.lines(s)) expected_targets += static_cast<int64_t>(line.size()) + 1;
      EXPECT_EQ(targets, expected_targets);
      EXPECT_THROW(d.eval_batch(s, nb, B, 5), Error);
    }
  }
}

TEST(LinesDataset, NoveltyReportsTrainValOrNew) {
  auto d = make_lines(numbered_lines(20));
  EXPECT_EQ(d.novelty(d.lines(Split::Train)[0]), LinesDataset::Novelty::Train);
  EXPECT_EQ(d.novelty(d.lines(Split::Val)[0]), LinesDataset::Novelty::Val);
  EXPECT_EQ(d.novelty("l999"), LinesDataset::Novelty::New);
  EXPECT_EQ(d.novelty(""), LinesDataset::Novelty::New);
}

TEST(LinesDataset, RejectsBadBatchArguments) {
  auto d = make_lines(numbered_lines(20));
  Rng rng(0);
  EXPECT_THROW(d.sample_batch(rng, 0, 8), Error);
  EXPECT_THROW(d.sample_batch(rng, 4, 0), Error);
  EXPECT_THROW(d.eval_batch(Split::Val, -1, 4, 8), Error);
}
