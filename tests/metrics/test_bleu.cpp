#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "base/error.h"
#include "metrics/bleu.h"

using namespace atto::metrics;

namespace {

// sacreBLEU's README example (also its test_bleu.py): 3 hypotheses, 2 reference streams.
const std::vector<std::string> kHyps = {"The dog bit the man.", "It wasn't surprising.",
                                        "The man had just bitten him."};
const std::vector<std::vector<std::string>> kRefs = {
    {"The dog bit the man.", "It was not unexpected.", "The man bit him first."},
    {"The dog had bit the man.", "No one was surprised.", "The man had bitten the dog."}};

using Streams = std::vector<std::vector<std::string>>;

}  // namespace

TEST(Bleu, SacrebleuReadmeExample13a) {
  const BleuResult r = corpus_bleu(kHyps, kRefs);
  EXPECT_NEAR(r.score, 48.530827, 1e-6);  // test_bleu.py: abs(bleu - 48.530827) < 1e-8
  EXPECT_NEAR(r.score, 48.530827, 1e-8);
  EXPECT_EQ(r.format(),
            "BLEU = 48.53 82.4/50.0/45.5/37.5 (BP = 0.943 ratio = 0.944 hyp_len = 17 "
            "ref_len = 18)");
  EXPECT_EQ(r.signature(), "nrefs:2|case:mixed|eff:no|tok:13a|smooth:exp|version:atto");
  EXPECT_EQ(r.counts, (std::vector<int64_t>{14, 7, 5, 3}));
  EXPECT_EQ(r.totals, (std::vector<int64_t>{17, 14, 11, 8}));
  EXPECT_EQ(r.sys_len, 17);
  EXPECT_EQ(r.ref_len, 18);
}

TEST(Bleu, SacrebleuReadmeExampleOtherSettings) {
  EXPECT_NEAR(corpus_bleu(kHyps, kRefs, {.tokenize = "none"}).score, 49.1919566, 1e-7);
  EXPECT_NEAR(corpus_bleu(kHyps, kRefs, {.smooth = "none"}).score, 48.530827, 1e-8);
  // test_bleu.py test_max_ngram_order: printed to 2 decimals.
  const char* want[] = {"77.65", "60.50", "53.93", "48.53", "46.14", "43.28"};
  for (int order = 1; order <= 6; ++order) {
    const BleuResult r = corpus_bleu(kHyps, kRefs, {.max_order = order});
    EXPECT_EQ(fmt::format("{:.2f}", r.score), want[order - 1]) << "max_order " << order;
  }
}

TEST(Bleu, VariableNumberOfReferences) {
  Streams refs = kRefs;
  refs[0][0] = "";  // README: "" means no reference in this stream for this sentence
  const BleuResult r = corpus_bleu(kHyps, refs);
  EXPECT_EQ(r.format(),
            "BLEU = 29.44 82.4/42.9/27.3/12.5 (BP = 0.889 ratio = 0.895 hyp_len = 17 "
            "ref_len = 19)");
  EXPECT_EQ(r.signature(), "nrefs:var|case:mixed|eff:no|tok:13a|smooth:exp|version:atto");
  refs[1][0] = "";
  EXPECT_THROW(corpus_bleu(kHyps, refs), atto::Error);  // sentence 1 has no reference left
}

TEST(Bleu, IdenticalIsHundredEmptyIsZero) {
  const BleuResult same = corpus_bleu(kRefs[0], {kRefs[0]});
  EXPECT_DOUBLE_EQ(same.score, 100.0);
  EXPECT_DOUBLE_EQ(same.bp, 1.0);
  const BleuResult empty = corpus_bleu({"", "", ""}, kRefs);  // empty hypotheses still count
  EXPECT_EQ(empty.score, 0.0);
  EXPECT_EQ(empty.sys_len, 0);
  EXPECT_EQ(empty.ref_len, 6 + 5 + 6);  // per sentence the reference closest to 0 words
  EXPECT_EQ(empty.bp, 0.0);
}

TEST(Bleu, BrevityPenaltyByHand) {
  // hyp "the cat sat on" (4 words) vs ref "the cat sat on the mat" (6 words): every n-gram of
  // the hypothesis matches (4/4, 3/3, 2/2, 1/1), so BLEU = BP = exp(1 - 6/4) = exp(-0.5).
  const BleuResult r = corpus_bleu({"the cat sat on"}, {{"the cat sat on the mat"}});
  EXPECT_NEAR(r.bp, std::exp(-0.5), 1e-15);
  EXPECT_NEAR(r.score, 100 * std::exp(-0.5), 1e-12);  // 60.653065971263...
  EXPECT_EQ(r.precisions, (std::vector<double>{100, 100, 100, 100}));
}

TEST(Bleu, ExpSmoothingByHand) {
  // Case-sensitive: of "THE DOG BIT THE MAN ." only "." matches. Orders 2, 3, 4 have no match:
  // exp smoothing gives them 100 / (2 * 5), 100 / (4 * 4), 100 / (8 * 3); BP = 1.
  const BleuResult r = corpus_bleu({"THE DOG BIT THE MAN."}, {{"the dog bit the man."}});
  const double want = std::pow(100.0 / 6 * (100.0 / 10) * (100.0 / 16) * (100.0 / 24), 0.25);
  EXPECT_NEAR(r.score, want, 1e-9);  // 8.1167...
  const BleuResult lc = corpus_bleu({"THE DOG BIT THE MAN."}, {{"the dog bit the man."}}, {.lowercase = true});
  EXPECT_DOUBLE_EQ(lc.score, 100.0);
  EXPECT_EQ(lc.signature(), "nrefs:1|case:lc|eff:no|tok:13a|smooth:exp|version:atto");
}

TEST(Bleu, SacrebleuStatisticsAndFloorSmoothingCases) {
  // test_bleu.py: raw_corpus_bleu = tokenize none, floor smoothing, effective order.
  const BleuOptions raw{.tokenize = "none", .smooth = "floor", .effective_order = true};
  const BleuResult s = corpus_bleu({"am I am a character sequence"}, {{"I am a symbol string sequence a a"}}, raw);
  EXPECT_EQ(s.counts, (std::vector<int64_t>{4, 2, 1, 0}));
  EXPECT_EQ(s.totals, (std::vector<int64_t>{6, 5, 4, 3}));
  EXPECT_NEAR(s.score / 100, 0.1555722182, 1e-8);  // default floor value 0.1
  BleuOptions zero = raw;
  zero.smooth_value = 0.0;
  EXPECT_EQ(corpus_bleu({"am I am a character sequence"}, {{"I am a symbol string sequence a a"}}, zero).score, 0.0);
  BleuOptions floor01 = raw;
  floor01.smooth_value = 0.01;
  EXPECT_NEAR(corpus_bleu({"test"}, {{"a test"}}, floor01).score / 100, 0.3678794411714425, 1e-8);
  EXPECT_NEAR(corpus_bleu({"a test"}, {{"a test"}}, floor01).score / 100, 1.0, 1e-8);
  EXPECT_NEAR(corpus_bleu({"a little test"}, {{"a test"}}, floor01).score / 100, 0.03218297948685433, 1e-8);
  EXPECT_NEAR(compute_bleu({9, 7, 5, 3}, {10, 8, 6, 4}, 11, 11, {.smooth = "none"}).score / 100, 0.8375922397, 1e-8);
  EXPECT_EQ(compute_bleu({6, 5, 4, 0}, {6, 5, 4, 3}, 6, 6, {.smooth = "floor", .smooth_value = 0.0}).score, 0.0);
  EXPECT_EQ(BleuResult{.options = floor01}.signature(),
            "nrefs:0|case:mixed|eff:yes|tok:none|smooth:floor[0.01]|version:atto");
}

TEST(Bleu, SegmentsAreRightStrippedBeforeTokenizing) {
  // sacreBLEU rstrips first: "d-\n" -> "d-" stays one word; tokenize_13a alone would join it.
  EXPECT_DOUBLE_EQ(corpus_bleu({"a b c d-\n"}, {{"a b c d-"}}).score, 100.0);
  // "none" splits on Python whitespace, so U+00A0 separates words.
  EXPECT_DOUBLE_EQ(corpus_bleu({"a\u00a0b c d"}, {{"a b c d"}}, {.tokenize = "none"}).score, 100.0);
}

TEST(Bleu, BadInputNamesTheProblem) {
  try {
    corpus_bleu({"a", "b"}, {{"a"}});
    FAIL() << "expected atto::Error";
  } catch (const atto::Error& e) {
    EXPECT_NE(std::string(e.what()).find("reference stream 1 has 1 sentences but there are 2"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(corpus_bleu({"a"}, {}), atto::Error);
  EXPECT_THROW(corpus_bleu({"a"}, {{"a"}}, {.tokenize = "intl"}), atto::Error);
  EXPECT_THROW(corpus_bleu({"a"}, {{"a"}}, {.smooth = "lin"}), atto::Error);
  try {
    corpus_bleu({"ok", "bad \xC3("}, {{"ok", "ok"}});
    FAIL() << "expected atto::Error";
  } catch (const atto::Error& e) {
    EXPECT_NE(std::string(e.what()).find("hypothesis 2"), std::string::npos) << e.what();
  }
}
