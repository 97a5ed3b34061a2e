#include <gmock/gmock.h>
#include <sys/stat.h>

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "base/error.h"
#include "data/parallel.h"
#include "support.h"
#include "tokenize/word_tokenizer.h"

using namespace atto;
using atto::test::error_of;
using atto::test::TempDir;
using ::testing::HasSubstr;

TEST(Parallel, ReadsAlignedFilesAndSkipsPairsWithAnEmptySide) {
  TempDir dir;
  const auto src = dir.write("a.de", "\xEF\xBB\xBFHallo Welt\r\nDanke\n\nGut\n  \nJa");
  const auto tgt = dir.write("a.en", "Hello world\nThanks\nempty source\nGood\nblank\n\n");
  // a.de has 6 lines (no final newline); a.en has 6 lines (the 6th is empty).
  const ParallelCorpus c = read_parallel(src, tgt);
  ASSERT_EQ(c.pairs.size(), 3u);
  EXPECT_EQ(c.pairs[0].src, "Hallo Welt");  // BOM dropped, \r\n normalised
  EXPECT_EQ(c.pairs[0].tgt, "Hello world");
  EXPECT_EQ(c.pairs[2].src, "Gut");
  EXPECT_EQ(c.pairs[2].line, 4);
  EXPECT_EQ(c.lines, 6);
  EXPECT_EQ(c.skipped_empty, 3);  // line 3 (empty source), 5 (blank source), 6 (empty target)
  EXPECT_EQ(c.summary(), fmt::format("3 sentence pairs from '{}' and '{}' (3 pairs with an empty "
                                     "side skipped)",
                                     src, tgt));
  EXPECT_EQ(c.sources(), (std::vector<std::string>{"Hallo Welt", "Danke", "Gut"}));
  EXPECT_EQ(c.targets(), (std::vector<std::string>{"Hello world", "Thanks", "Good"}));
}

TEST(Parallel, DifferentLineCountsNameBothFilesAndCounts) {
  TempDir dir;
  const auto src = dir.write("s.txt", "a\nb\nc\n");
  const auto tgt = dir.write("t.txt", "x\ny\n");
  const std::string e = error_of([&] { read_parallel(src, tgt); });
  EXPECT_THAT(e, HasSubstr(src));
  EXPECT_THAT(e, HasSubstr(tgt));
  EXPECT_THAT(e, HasSubstr("has 3 lines"));
  EXPECT_THAT(e, HasSubstr("has 2"));
  EXPECT_THAT(error_of([&] { read_parallel(src, dir / "missing.en"); }), HasSubstr("missing.en"));
  EXPECT_THAT(error_of([&] { read_parallel(src, dir.write("e.txt", "")); }), HasSubstr("is empty"));
  // A device or a FIFO is refused by stat, before it is opened (a FIFO used to block here).
  EXPECT_THAT(error_of([&] { read_parallel("/dev/zero", tgt); }), HasSubstr("source file '/dev/zero' is a character"));
  const std::string fifo = dir / "fifo.en";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  EXPECT_THAT(error_of([&] { read_parallel(src, fifo); }), HasSubstr("target file '" + fifo + "' is a FIFO"));
  EXPECT_THAT(error_of([&] { read_parallel_tsv(fifo); }), HasSubstr("not a regular file"));
  EXPECT_THAT(error_of([&] { read_parallel(src, dir.write("bad.txt", "ok\n\xFF\nz\n")); }), HasSubstr("line 2"));
  EXPECT_THAT(error_of([] { make_parallel("s", "\n\n", "t", "x\ny\n"); }), HasSubstr("no text"));
  EXPECT_THAT(error_of([] { make_parallel("s", " \nb", "t", "x\n "); }), HasSubstr("none of its 2 line(s)"));
}

TEST(Parallel, TsvNeedsExactlyOneTabPerLine) {
  const ParallelCorpus c = make_parallel_tsv("c.tsv", "eins\tone\n\nzwei\t\ndrei\tthree\n");
  ASSERT_EQ(c.pairs.size(), 2u);
  EXPECT_EQ(c.pairs[1].src, "drei");
  EXPECT_EQ(c.pairs[1].tgt, "three");
  EXPECT_EQ(c.pairs[1].line, 4);
  EXPECT_EQ(c.skipped_empty, 2);  // the empty line and "zwei\t" (empty target)
  EXPECT_EQ(c.summary(), "2 sentence pairs from 'c.tsv' (2 pairs with an empty side skipped)");
  std::string e = error_of([] { make_parallel_tsv("c.tsv", "a\tb\nno tab here\n"); });
  EXPECT_THAT(e, HasSubstr("c.tsv"));
  EXPECT_THAT(e, HasSubstr("line 2"));
  EXPECT_THAT(e, HasSubstr("0 tab(s)"));
  e = error_of([] { make_parallel_tsv("c.tsv", "a\tb\tc\n"); });
  EXPECT_THAT(e, HasSubstr("line 1"));
  EXPECT_THAT(e, HasSubstr("2 tab(s)"));
  TempDir dir;
  EXPECT_EQ(read_parallel_tsv(dir.write("x.tsv", "a\tb\n")).pairs.size(), 1u);
}

TEST(Parallel, LengthFilterDropsLongPairsAndReports) {
  const ParallelCorpus c = make_parallel("s", "a b\na b c d\na\na b c\n", "t", "x\nx\nx y z w\nx y\n");
  const auto tok = WordTokenizer::build({"a b c d x y z w"});
  std::vector<EncodedPair> enc = encode_pairs(c, tok, tok);
  ASSERT_EQ(enc.size(), 4u);
  EXPECT_EQ(enc[1].src.size(), 4u);
  const LengthFilterReport r = filter_by_length(enc, 3, 3);
  EXPECT_EQ(r.dropped, 2);  // line 2 (source 4 > 3) and line 3 (target 4 > 3)
  EXPECT_EQ(r.kept, 2);
  EXPECT_EQ(r.first_dropped_line, 2);
  ASSERT_EQ(enc.size(), 2u);
  EXPECT_EQ(enc[0].line, 1);
  EXPECT_EQ(enc[1].line, 4);
  EXPECT_EQ(r.summary(),
            "dropped 2 of 4 sentence pairs longer than 3 source / 3 target tokens "
            "(first: line 2)");
  std::vector<EncodedPair> all = encode_pairs(c, tok, tok);
  EXPECT_EQ(filter_by_length(all, 0, 0).dropped, 0);  // 0 = no limit
  EXPECT_EQ(filter_by_length(all, 0, 3).dropped, 1);
  EXPECT_THROW(filter_by_length(all, -1, 0), Error);
}

TEST(Parallel, TinyCorpusIsNotSplit) {
  // Under 50 pairs every pair is trained on and validation scores the training pairs.
  const TrainValSplit s = split_train_val(3, 1337);
  EXPECT_TRUE(s.val_is_train);
  EXPECT_EQ(s.train, (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(s.val, s.train);
  EXPECT_EQ(parallel_val_size(49), 0);
  EXPECT_EQ(parallel_val_size(50), 5);
  EXPECT_FALSE(split_train_val(50, 1337).val_is_train);
}

TEST(Parallel, SeededValidationSplit) {
  EXPECT_EQ(parallel_val_size(2, 2), 1);
  EXPECT_EQ(parallel_val_size(95), 9);
  EXPECT_EQ(parallel_val_size(50000), 1000);
  const TrainValSplit a = split_train_val(95, 1337), b = split_train_val(95, 1337);
  EXPECT_EQ(a.val, b.val);
  EXPECT_EQ(a.train, b.train);
  EXPECT_EQ(a.val.size(), 9u);
  EXPECT_EQ(a.train.size(), 86u);
  EXPECT_TRUE(std::is_sorted(a.val.begin(), a.val.end()));
  std::set<int64_t> all(a.val.begin(), a.val.end());
  all.insert(a.train.begin(), a.train.end());
  EXPECT_EQ(all.size(), 95u);  // a partition of 0..94
  EXPECT_EQ(*all.rbegin(), 94);
  EXPECT_NE(split_train_val(95, 1).val, a.val);  // the seed matters
  EXPECT_THROW(split_train_val(1, 1337, 2), Error);
  const std::vector<std::string> items = {"a", "b", "c"};
  EXPECT_EQ(select(items, {2, 0}), (std::vector<std::string>{"c", "a"}));
}
