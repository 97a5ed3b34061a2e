// Seq2seq decoding: beam 1 equals greedy, beam search finds the known best sequence of a toy
// model, n-best lists are sorted, batched decoding equals one source at a time.
#include <gtest/gtest.h>

#include <cmath>

#include "generate/seq2seq_decode.h"
#include "tensor/error.h"

using namespace atto;
using namespace atto::gen;

namespace {
Seq2SeqConfig cfg() {
  Seq2SeqConfig c;
  c.src_vocab = 12;
  c.tgt_vocab = 12;
  c.max_len = 16;
  c.n_enc_layers = 2;
  c.n_dec_layers = 2;
  c.n_head = 2;
  c.d_model = 16;
  c.dropout = 0.0f;
  return c;
}
std::vector<std::vector<int32_t>> sources() { return {{4, 5, 6}, {7, 8, 9, 10, 11}, {5}, {6, 6, 7, 4}}; }
}  // namespace

TEST(Seq2SeqDecode, BeamOneEqualsGreedy) {
  Rng rng(1);
  Seq2Seq m(cfg(), rng);
  m.eval();
  DecodeOptions o;
  o.max_len_b = 8;
  const auto greedy = greedy_decode(m, sources(), o);
  o.beam = 1;
  const auto beam1 = translate_batch(m, sources(), o);
  ASSERT_EQ(greedy.size(), beam1.size());
  for (size_t i = 0; i < greedy.size(); ++i) {
    EXPECT_EQ(beam1[i][0].tokens, greedy[i].tokens);
    EXPECT_NEAR(beam1[i][0].logprob, greedy[i].logprob, 1e-9);
  }
}

TEST(Seq2SeqDecode, NBestSortedAndBatchedEqualsSingle) {
  Rng rng(2);
  Seq2Seq m(cfg(), rng);
  m.eval();
  DecodeOptions o;
  o.beam = 4;
  o.n_best = 4;
  o.max_len_b = 6;
  const auto batched = translate_batch(m, sources(), o);
  for (size_t i = 0; i < batched.size(); ++i) {
    ASSERT_EQ(batched[i].size(), 4u);
    for (size_t k = 1; k < batched[i].size(); ++k) EXPECT_GE(batched[i][k - 1].score, batched[i][k].score);
    const auto single = translate_batch(m, {sources()[i]}, o);
    for (size_t k = 0; k < batched[i].size(); ++k) {
      EXPECT_EQ(single[0][k].tokens, batched[i][k].tokens) << i << " " << k;
      EXPECT_NEAR(single[0][k].score, batched[i][k].score, 1e-4);
    }
    // Scores are the hypotheses' own log-probabilities under the GNMT penalty.
    for (const auto& h : batched[i]) {
      double s = 0;
      for (float lp : h.token_logprobs) s += lp;
      EXPECT_NEAR(s, h.logprob, 1e-4);
      const auto len = static_cast<int64_t>(h.tokens.size()) + (h.finished ? 1 : 0);
      EXPECT_NEAR(h.score, h.logprob / gnmt_length_penalty(len, o.length_penalty), 1e-9);
    }
  }
}

// On a small random model, enumerate every target sequence of at most 3 tokens (then EOS) and
// score it with the full decoder: the known best sequence. Beam search with alpha = 0 (the
// score is the plain log-probability) and a beam of 64 (every prefix fits: 4^3) must find it,
// which checks the bookkeeping (cache reordering, candidate selection, finishing).
TEST(Seq2SeqDecode, BeamFindsTheKnownBestSequence) {
  Seq2SeqConfig c = cfg();
  c.tgt_vocab = 5;  // pad, bos, eos, and two words
  Rng rng(3);
  Seq2Seq m(c, rng);
  m.eval();
  NoGradGuard ng;
  const std::vector<int32_t> src = {4, 5, 6};
  const Tensor memory = m.encode(src, 1, 3, {});
  auto seq_logprob = [&](const std::vector<int32_t>& toks) {
    std::vector<int32_t> in = {1};
    in.insert(in.end(), toks.begin(), toks.end());
    const auto T = static_cast<int64_t>(in.size());
    Tensor logits = m.decode(in, 1, T, memory, {}, {});
    double lp = 0;
    for (int64_t t = 0; t < T; ++t) {
      const int32_t next = t + 1 < T ? in[t + 1] : 2;
      double mx = -1e30, s = 0;
      for (int64_t v = 0; v < 5; ++v) mx = std::max<double>(mx, logits.at({0, t, v}));
      for (int64_t v = 0; v < 5; ++v) s += std::exp(logits.at({0, t, v}) - mx);
      lp += logits.at({0, t, next}) - mx - std::log(s);
    }
    return lp;
  };
  double best = -1e30;
  std::vector<int32_t> best_seq;
  std::vector<std::vector<int32_t>> frontier = {{}};
  for (int len = 0; len <= 3; ++len) {
    std::vector<std::vector<int32_t>> next;
    for (const auto& s : frontier) {
      const double lp = seq_logprob(s);
      if (lp > best) best = lp, best_seq = s;
      for (int32_t w : {0, 1, 3, 4}) {  // any non-EOS token may appear in a hypothesis
        auto e = s;
        e.push_back(w);
        next.push_back(e);
      }
    }
    frontier = next;
  }
  DecodeOptions o;
  o.beam = 64;
  o.length_penalty = 0.0f;
  o.max_len_a = 0.0f;
  o.max_len_b = 4;  // at most 3 tokens + EOS
  const auto out = translate_batch(m, {src}, o);
  ASSERT_TRUE(out[0][0].finished);
  EXPECT_EQ(out[0][0].tokens, best_seq);
  EXPECT_NEAR(out[0][0].logprob, best, 1e-4);
}

TEST(Seq2SeqDecode, OptionErrors) {
  DecodeOptions o;
  o.beam = 0;
  EXPECT_THROW(o.validate(), Error);
  o.beam = 2;
  o.n_best = 3;
  EXPECT_THROW(o.validate(), Error);
  Rng rng(4);
  Seq2Seq m(cfg(), rng);
  EXPECT_THROW(translate_batch(m, {std::vector<int32_t>(20, 4)}, DecodeOptions{}), Error);  // longer than max_len
}
