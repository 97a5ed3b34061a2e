// Scoring: lines framing matches the training loss; stream windows match a per-token
// brute force; errors name the text.
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/tape.h"
#include "base/error.h"
#include "broken_logits.h"
#include "generate/score.h"
#include "support.h"

using namespace atto;
using namespace atto::gen;

namespace {

using atto::test::error_of;
using Ids = std::vector<int32_t>;

std::unique_ptr<GPT> tiny_scoring_gpt(int64_t V, int64_t block_size, uint64_t seed) {
  GPTConfig c;
  c.vocab_size = V;
  c.block_size = block_size;
  c.n_layers = 2;
  c.n_heads = 2;
  c.d_model = 16;
  Rng rng(seed);
  auto m = std::make_unique<GPT>(c, rng);
  for (auto& p : m->named_parameters()) p.tensor.copy_from(Tensor::randn(p.tensor.shape(), rng, 0.0f, 0.3f));
  m->eval();
  return m;
}

}  // namespace

TEST(Score, LinesLogProbsSumToMinusTheTrainingLoss) {
  // <eos> a e m: "emma" is framed [<eos> e m m a] -> [e m m a <eos>].
  const auto tok = CharTokenizer::from_chars({U'a', U'e', U'm'}, true);
  auto m = tiny_scoring_gpt(tok.vocab_size(), 8, 1);
  const ScoreResult r = score_text(*m, tok, "emma");
  EXPECT_EQ(r.targets, (Ids{2, 3, 3, 1, 0}));
  ASSERT_EQ(r.logprobs.size(), 5u);
  for (double lp : r.logprobs) EXPECT_LT(lp, 0.0);
  NoGradGuard ng;
  const Tensor logits = m->forward({0, 2, 3, 3, 1}, 1, 5);
  const double ce_sum = cross_entropy(logits, r.targets, {.reduction = CrossEntropyOptions::Reduction::Sum}).item();
  const double ce_mean = cross_entropy(logits, r.targets).item();
  EXPECT_NEAR(r.total_nll(), ce_sum, 1e-4 * std::abs(ce_sum));
  EXPECT_NEAR(r.mean_nll(), ce_mean, 1e-4 * std::abs(ce_mean));
  // The empty line scores only the end token: ln p(<eos> | <eos>).
  const ScoreResult empty = score_lines(*m, {}, 0);
  EXPECT_EQ(empty.targets, (Ids{0}));
  EXPECT_NEAR(empty.logprobs[0], -cross_entropy(m->forward({0}, 1, 1), {0}).item(), 1e-5);
}

TEST(Score, LinesTextMustFitTheBlock) {
  const auto tok = CharTokenizer::from_chars({U'a', U'b'}, true);
  auto m = tiny_scoring_gpt(tok.vocab_size(), 4, 2);
  EXPECT_EQ(score_text(*m, tok, "abb").targets.size(), 4u);  // 3 + <eos> == block size: fits
  const std::string msg = error_of([&] { score_text(*m, tok, "abba"); });
  EXPECT_NE(msg.find("\"abba\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("4 characters"), std::string::npos) << msg;
  EXPECT_NE(error_of([&] { score_text(*m, tok, "abc"); }).find("position 2"), std::string::npos);
}

TEST(Score, StreamConditionsEachTokenOnUpToBlockSizePreviousTokens) {
  const int64_t V = 7, BS = 5;
  auto m = tiny_scoring_gpt(V, BS, 3);
  Rng rng(4);
  Ids ids(80);  // > kWindowsPerBatch windows past the first block: two batches
  for (auto& t : ids) t = static_cast<int32_t>(rng.below(V));
  const ScoreResult r = score_stream(*m, ids);
  ASSERT_EQ(r.logprobs.size(), ids.size() - 1);
  EXPECT_EQ(r.targets, Ids(ids.begin() + 1, ids.end()));
  NoGradGuard ng;
  for (size_t i = 1; i < ids.size(); ++i) {
    const size_t start = i > static_cast<size_t>(BS) ? i - BS : 0;
    const Ids window(ids.begin() + start, ids.begin() + i);
    const auto T = static_cast<int64_t>(window.size());
    const double ce =
        cross_entropy(m->forward(window, 1, T).as_strided({1, V}, {V, 1}, (T - 1) * V).contiguous(), {ids[i]}).item();
    EXPECT_NEAR(r.logprobs[i - 1], -ce, 1e-4 * std::max(1.0, ce)) << i;
  }
  // A short text: one window, identical to the loss over it.
  const ScoreResult s = score_stream(*m, {1, 2, 3});
  const double ce =
      cross_entropy(m->forward({1, 2, 3}, 1, 3).as_strided({2, V}, {V, 1}, 0).contiguous(), {2, 3}).item();
  EXPECT_NEAR(s.mean_nll(), ce, 1e-5);
}

TEST(Score, StreamTextNeedsTwoCharacters) {
  const auto tok = CharTokenizer::from_chars({U'\n', U'a', U'b'}, false);
  auto m = tiny_scoring_gpt(tok.vocab_size(), 4, 5);
  const std::string msg = error_of([&] { score_text(*m, tok, "a"); });
  EXPECT_NE(msg.find("\"a\""), std::string::npos) << msg;
  EXPECT_NE(msg.find("at least 2"), std::string::npos) << msg;
  EXPECT_NE(error_of([&] { score_text(*m, tok, "ab\nba ba"); }).find("position 5"), std::string::npos);
  EXPECT_EQ(score_text(*m, tok, "ab\nba").targets, (Ids{2, 0, 2, 1}));
}

// A non-finite logit of a token that is not the target is refused too: the old check looked
// only at the target's log-probability, which a -inf logit elsewhere leaves finite.
TEST(Score, NonFiniteLogitsAreRefused) {
  for (float row : {-3e38f, 3e38f, std::nanf("")}) {
    auto m = tiny_scoring_gpt(9, 8, 3);
    atto::testing::break_logit(*m, 7, row);
    EXPECT_EQ(error_of([&] {
                score_lines(*m, {1, 2, 3}, 0);
              }),
              "the model produced non-finite logits while scoring; the weights may be damaged");
    EXPECT_EQ(error_of([&] {
                score_stream(*m, {1, 2, 3, 4});
              }),
              "the model produced non-finite logits while scoring; the weights may be damaged");
  }
}
