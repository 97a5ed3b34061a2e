#include <gmock/gmock.h>

#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "base/error.h"
#include "data/parallel.h"
#include "data/synth.h"

using namespace atto;
using ::testing::AllOf;
using ::testing::AnyOf;
using ::testing::Eq;
using ::testing::Ge;
using ::testing::Le;

namespace {

std::vector<int64_t> numbers(const std::string& s) {
  std::istringstream in(s);
  std::vector<int64_t> v;
  for (int64_t x; in >> x;) v.push_back(x);
  return v;
}

}  // namespace

TEST(Synth, TargetsAreReversedCopiedSorted) {
  for (SynthTask task : {SynthTask::Reverse, SynthTask::Copy, SynthTask::Sort}) {
    const auto pairs = make_synth(task, 200, {.seed = 5});
    ASSERT_EQ(pairs.size(), 200u);
    for (const auto& [src, tgt] : pairs) {
      std::vector<int64_t> s = numbers(src), t = numbers(tgt);
      ASSERT_EQ(src.find("  "), std::string::npos);  // single spaces
      if (task == SynthTask::Reverse) std::reverse(s.begin(), s.end());
      if (task == SynthTask::Sort) std::sort(s.begin(), s.end());
      ASSERT_EQ(s, t) << to_string(task) << ": " << src << " -> " << tgt;
    }
  }
  EXPECT_EQ(synth_target(SynthTask::Sort, {3, 1, 10, 1}), (std::vector<int64_t>{1, 1, 3, 10}));
  EXPECT_EQ(synth_target(SynthTask::Reverse, {3, 1, 2}), (std::vector<int64_t>{2, 1, 3}));
}

TEST(Synth, LengthsAndSymbolsInRange) {
  const SynthOptions o{.vocab = 13, .min_len = 2, .max_len = 5, .seed = 9};
  std::vector<int> seen_len(6, 0), seen_sym(13, 0);
  for (const auto& [src, tgt] : make_synth(SynthTask::Copy, 2000, o)) {
    const auto s = numbers(src);
    ASSERT_GE(s.size(), 2u);
    ASSERT_LE(s.size(), 5u);
    ++seen_len[s.size()];
    for (int64_t x : s) {
      ASSERT_GE(x, 0);
      ASSERT_LT(x, 13);
      ++seen_sym[static_cast<size_t>(x)];
    }
  }
  for (size_t len = 2; len <= 5; ++len) EXPECT_GT(seen_len[len], 300) << "length " << len;
  for (int count : seen_sym) EXPECT_GT(count, 300);  // every symbol, roughly uniform (~540)
  // Defaults: digits 0-9, lengths 3..10.
  for (const auto& [src, tgt] : make_synth(SynthTask::Copy, 300)) {
    const auto s = numbers(src);
    ASSERT_GE(s.size(), 3u);
    ASSERT_LE(s.size(), 10u);
    for (char c : src) ASSERT_THAT(c, AnyOf(Eq(' '), AllOf(Ge('0'), Le('9')))) << src;
  }
}

TEST(Synth, SameSeedSameDataAndPrefixStable) {
  const auto a = make_synth(SynthTask::Reverse, 50, {.seed = 42});
  EXPECT_EQ(a, make_synth(SynthTask::Reverse, 50, {.seed = 42}));
  EXPECT_NE(a, make_synth(SynthTask::Reverse, 50, {.seed = 43}));
  const auto first = make_synth(SynthTask::Reverse, 10, {.seed = 42});
  EXPECT_TRUE(std::equal(first.begin(), first.end(), a.begin()));
  // The task changes targets only: the sources of copy and sort match those of reverse.
  const auto sorted = make_synth(SynthTask::Sort, 50, {.seed = 42});
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i].first, sorted[i].first);
  // Pinned (the example in synth.h): a change of the draw order would change every data set.
  const auto ex = make_synth(SynthTask::Reverse, 2, {.seed = 1});
  EXPECT_EQ(ex[0].first, "2 0 3 1 2 6 9 1");
  EXPECT_EQ(ex[0].second, "1 9 6 2 1 3 0 2");
  EXPECT_EQ(ex[1].first, "1 0 1");
}

TEST(Synth, BadOptionsAreUsageErrors) {
  EXPECT_THROW(make_synth(SynthTask::Copy, 0), UsageError);
  EXPECT_THROW(make_synth(SynthTask::Copy, 5, {.vocab = 0}), UsageError);
  EXPECT_THROW(make_synth(SynthTask::Copy, 5, {.min_len = 0}), UsageError);
  EXPECT_THROW(make_synth(SynthTask::Copy, 5, {.min_len = 4, .max_len = 3}), UsageError);
  EXPECT_EQ(parse_synth_task("sort"), SynthTask::Sort);
  EXPECT_THROW(parse_synth_task("shuffle"), UsageError);
}

TEST(Synth, WritesAlignedFilesThatReadBack) {
  std::string tmpl = (std::filesystem::temp_directory_path() / "atto_synth_XXXXXX").string();
  ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
  const std::string prefix = tmpl + "/rev";
  write_synth(SynthTask::Reverse, 100, {.seed = 3}, prefix);
  const ParallelCorpus c = read_parallel(prefix + ".src", prefix + ".tgt");
  const auto pairs = make_synth(SynthTask::Reverse, 100, {.seed = 3});
  ASSERT_EQ(c.pairs.size(), 100u);
  EXPECT_EQ(c.skipped_empty, 0);
  for (size_t i = 0; i < pairs.size(); ++i) {
    EXPECT_EQ(c.pairs[i].src, pairs[i].first);
    EXPECT_EQ(c.pairs[i].tgt, pairs[i].second);
  }
  EXPECT_FALSE(std::filesystem::exists(prefix + ".src.tmp"));
  EXPECT_THROW(write_synth(SynthTask::Copy, 5, {}, tmpl + "/no/such/dir/x"), Error);
  std::filesystem::remove_all(tmpl);
}
