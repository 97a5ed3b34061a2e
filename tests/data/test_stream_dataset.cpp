// StreamDataset: the positional split, random windows, and evaluation coverage.
#include <gtest/gtest.h>

#include <map>
#include <string>

#include "base/error.h"
#include "data/stream_dataset.h"
#include "tokenize/utf8.h"

using namespace atto;

namespace {

// n distinct characters (U+0100, U+0101, ...): the id of a token tells its position.
TextFile distinct_chars(int n) {
  std::vector<char32_t> cps;
  for (int i = 0; i < n; ++i) cps.push_back(static_cast<char32_t>(0x100 + i));
  return make_text_file("distinct.txt", utf8::encode(cps));
}

// Position in `s` of the window whose inputs are `x` (-1 if none).
int64_t find_window(std::span<const int32_t> s, const int32_t* x, int64_t T) {
  for (int64_t i = 0; i + T <= static_cast<int64_t>(s.size()); ++i) {
    if (std::equal(x, x + T, s.begin() + i)) return i;
  }
  return -1;
}

}  // namespace

TEST(StreamDataset, SplitIsFirstNinetyPercentAndTheRest) {
  EXPECT_EQ(StreamDataset::train_size_for(1115394), 1003854);  // tinyshakespeare, as in nanoGPT
  EXPECT_EQ(StreamDataset::train_size_for(100), 90);
  EXPECT_EQ(StreamDataset::train_size_for(109), 98);
  auto f = distinct_chars(109);
  auto tok = build_tokenizer(f, DataMode::Stream);
  StreamDataset d(f, tok);
  EXPECT_EQ(d.size(Split::Train), 98);
  EXPECT_EQ(d.size(Split::Val), 11);
  EXPECT_EQ(d.tokens(Split::Train)[0], d.all_tokens()[0]);
  EXPECT_EQ(d.tokens(Split::Val)[0], d.all_tokens()[98]);
  EXPECT_EQ(d.tokens(Split::Val).back(), d.all_tokens().back());
  EXPECT_EQ(d.max_block_size(), 10);
  EXPECT_EQ(tok.decode(d.all_tokens()), f.text);
}

TEST(StreamDataset, NewlinesArePartOfTheStream) {
  auto f = make_text_file("p.txt", "ab\n\ncd\r\nef");  // blank line kept, CRLF normalised
  auto tok = build_tokenizer(f, DataMode::Stream);
  StreamDataset d(f, tok);
  EXPECT_EQ(tok.decode(d.all_tokens()), "ab\n\ncd\nef");
}

TEST(StreamDataset, RandomWindowsAreShiftedByOneAndReachBothEnds) {
  auto f = distinct_chars(200);  // train 180 tokens
  StreamDataset d(f, build_tokenizer(f, DataMode::Stream));
  const int64_t T = 8;
  const auto train = d.tokens(Split::Train);
  Rng rng(3);
  std::map<int64_t, int> starts;
  for (int step = 0; step < 300; ++step) {
    const Batch b = d.sample_batch(rng, 8, T);
    for (int64_t r = 0; r < b.B; ++r) {
      const int32_t* x = &b.x[static_cast<size_t>(r * T)];
      const int32_t* y = &b.y[static_cast<size_t>(r * T)];
      const int64_t i = find_window(train, x, T);
      ASSERT_GE(i, 0) << "window not in the train split";
      ASSERT_TRUE(std::equal(y, y + T, train.begin() + i + 1)) << "targets are not x shifted by 1";
      ++starts[i];
    }
  }
  // Starts are uniform over [0, n - T): 172 values; 2400 draws reach both ends and never beyond.
  EXPECT_EQ(starts.begin()->first, 0);
  EXPECT_EQ(starts.rbegin()->first, 180 - T - 1);
  EXPECT_EQ(static_cast<int64_t>(starts.size()), 180 - T);
  // Val windows come from the val split.
  const Batch v = d.sample_batch(rng, 4, 5, Split::Val);
  for (int64_t r = 0; r < v.B; ++r) EXPECT_GE(find_window(d.tokens(Split::Val), &v.x[r * 5], 5), 0);
}

TEST(StreamDataset, SampleBatchIsAFunctionOfTheRngState) {
  auto f = distinct_chars(300);
  StreamDataset d(f, build_tokenizer(f, DataMode::Stream));
  Rng a(11), b(11);
  for (int i = 0; i < 3; ++i) EXPECT_EQ(d.sample_batch(a, 4, 16).x, d.sample_batch(b, 4, 16).x);
  Rng c;
  c.set_state(a.state());
  EXPECT_EQ(d.sample_batch(a, 4, 16).y, d.sample_batch(c, 4, 16).y);
  Rng other(12);
  EXPECT_NE(d.sample_batch(other, 4, 16).x, d.sample_batch(a, 4, 16).x);
}

TEST(StreamDataset, EvaluationScoresEveryTargetExactlyOnce) {
  auto f = distinct_chars(1000);  // val: 100 tokens, 99 targets
  StreamDataset d(f, build_tokenizer(f, DataMode::Stream));
  for (Split split : {Split::Val, Split::Train}) {
    const auto s = d.tokens(split);
    const int64_t n = static_cast<int64_t>(s.size());
    for (int64_t T : {1, 3, 9, 33, 98, 99}) {
      for (int64_t B : {1, 4, 7}) {
        SCOPED_TRACE(fmt::format("{} T={} B={}", to_string(split), T, B));
        std::vector<int> scored(static_cast<size_t>(n), 0);
        const int64_t nb = d.num_eval_batches(split, B, T);
        for (int64_t i = 0; i < nb; ++i) {
          const Batch b = d.eval_batch(split, i, B, T);
          ASSERT_TRUE(b.B == B || i == nb - 1);
          for (int64_t r = 0; r < b.B; ++r) {
            const int64_t start = find_window(s, &b.x[static_cast<size_t>(r * T)], T);
            ASSERT_GE(start, 0);
            for (int64_t t = 0; t < T; ++t) {
              const int32_t y = b.y[static_cast<size_t>(r * T + t)];
              if (y == kIgnoreIndex) continue;
              ASSERT_EQ(y, s[static_cast<size_t>(start + t + 1)]);
              ++scored[static_cast<size_t>(start + t + 1)];
            }
          }
        }
        EXPECT_EQ(scored[0], 0);  // the first token is only context
        for (int64_t k = 1; k < n; ++k) ASSERT_EQ(scored[static_cast<size_t>(k)], 1) << "token " << k;
        EXPECT_THROW(d.eval_batch(split, nb, B, T), Error);
      }
    }
  }
}

TEST(StreamDataset, TailWindowEndsAtTheSplitEndWithFullContext) {
  auto f = distinct_chars(1000);  // val 100 tokens: targets 1..99; T=10 -> 9 full windows (targets 1..90) + a tail
  StreamDataset d(f, build_tokenizer(f, DataMode::Stream));
  const auto s = d.tokens(Split::Val);
  ASSERT_EQ(d.num_eval_batches(Split::Val, 100, 10), 1);
  const Batch b = d.eval_batch(Split::Val, 0, 100, 10);
  ASSERT_EQ(b.B, 10);
  const int32_t* x = &b.x[90];
  const int32_t* y = &b.y[90];
  EXPECT_EQ(x[0], s[89]);  // starts at n - 1 - T = 89
  EXPECT_EQ(y[9], s[99]);  // last target is the split's last token
  // Windows 0..8 scored targets 1..90; the tail (targets 90..99) skips only target 90.
  EXPECT_EQ(y[0], kIgnoreIndex);
  for (int t = 1; t < 10; ++t) EXPECT_EQ(y[t], s[90 + t]);
  EXPECT_EQ(b.num_targets(), 99);
}
