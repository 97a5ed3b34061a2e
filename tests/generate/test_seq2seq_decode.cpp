// Seq2seq decoding: beam 1 equals greedy, n-best lists are sorted, batched decoding equals one
// source at a time; a beam wide enough to hold every candidate returns the exhaustive n-best list;
// the early stop never changes the result (a plain reference search run to the length limit);
// broken weights (NaN, Inf) are refused.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <memory>
#include <string>
#include <utility>

#include "base/error.h"
#include "generate/seq2seq_decode.h"

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
  c.n_heads = 2;
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

// translate_chunks (atto translate, atto eval, the trainer's BLEU): batches of any size give
// translate_batch's results in order; an empty source gets no hypotheses; a source over max_len is
// cut to its first max_len tokens (translate_batch itself refuses it).
TEST(Seq2SeqDecode, TranslateChunksBatchesTruncatesAndSkipsEmpty) {
  Rng rng(3);
  Seq2Seq m(cfg(), rng);
  m.eval();
  DecodeOptions o;
  o.beam = 3;
  o.n_best = 2;
  std::vector<int32_t> long_src(20);
  for (size_t i = 0; i < long_src.size(); ++i) long_src[i] = static_cast<int32_t>(4 + i % 8);
  const std::vector<int32_t> cut(long_src.begin(), long_src.begin() + 16);
  std::vector<std::vector<int32_t>> srcs = sources();
  srcs.insert(srcs.begin() + 1, std::vector<int32_t>{});
  srcs.push_back(long_src);
  EXPECT_THROW(translate_batch(m, {long_src}, o), Error);
  std::vector<std::vector<int32_t>> expect_srcs = sources();
  expect_srcs.push_back(cut);
  const auto expect = translate_batch(m, expect_srcs, o);
  for (int64_t batch : {1, 2, 3, 100}) {
    std::vector<size_t> firsts;
    std::vector<std::vector<Hypothesis>> got;
    translate_chunks(m, srcs, o, batch, [&](size_t first, std::vector<std::vector<Hypothesis>>& r) {
      firsts.push_back(first);
      for (auto& h : r) got.push_back(std::move(h));
    });
    ASSERT_EQ(got.size(), srcs.size()) << "batch " << batch;
    EXPECT_EQ(firsts.front(), 0u);
    EXPECT_EQ(firsts.size(), (srcs.size() + batch - 1) / batch) << "batch " << batch;
    EXPECT_TRUE(got[1].empty()) << "the empty source, batch " << batch;
    for (size_t i = 0, e = 0; i < srcs.size(); ++i) {
      if (i == 1) continue;
      ASSERT_EQ(got[i].size(), 2u);
      for (size_t n = 0; n < 2; ++n) {
        EXPECT_EQ(got[i][n].tokens, expect[e][n].tokens) << "source " << i << ", batch " << batch;
        EXPECT_NEAR(got[i][n].score, expect[e][n].score, 1e-5) << "source " << i << ", batch " << batch;
      }
      ++e;
    }
    EXPECT_EQ(translate_all(m, srcs, o, batch).size(), srcs.size());
  }
  EXPECT_THROW(translate_all(m, srcs, o, 0), Error);
}

namespace {
constexpr int32_t kBos = 1, kEos = 2;

// A random model with a sharpened output layer: at initialisation the next-token distributions
// are nearly flat and the best target is nearly always the empty one, so lm_head is scaled up to
// make the search non-trivial, EOS's row three times more so that ending is likely after some
// prefixes and unlikely after others (the best targets of the tests below are finished ones of
// 0 to 3 tokens and ones cut at the limit). tgt_vocab counts the specials (pad 0, bos 1, eos 2).
std::unique_ptr<Seq2Seq> sharp_model(uint64_t seed, int64_t tgt_vocab, float sharpen) {
  Seq2SeqConfig c = cfg();
  c.tgt_vocab = tgt_vocab;
  c.tie_weights = false;
  Rng rng(seed);
  auto m = std::make_unique<Seq2Seq>(c, rng);
  m->eval();
  float* w = m->lm_head.weight.data();
  const int64_t C = m->lm_head.weight.size(1);
  for (int64_t j = 0; j < m->lm_head.weight.numel(); ++j) w[j] *= sharpen * (j / C == kEos ? 3.0f : 1.0f);
  return m;
}

// ln softmax of the logits [1, T, V] at position t, in double.
std::vector<double> log_softmax_at(const Tensor& logits, int64_t t) {
  const int64_t V = logits.size(2);
  double mx = -1e300, s = 0;
  for (int64_t v = 0; v < V; ++v) mx = std::max<double>(mx, logits.at({0, t, v}));
  for (int64_t v = 0; v < V; ++v) s += std::exp(logits.at({0, t, v}) - mx);
  std::vector<double> out(V);
  for (int64_t v = 0; v < V; ++v) out[v] = logits.at({0, t, v}) - mx - std::log(s);
  return out;
}

// The full decoder (no KV cache) run on BOS + prefix: log-probabilities of each step's next token.
std::vector<std::vector<double>> teacher_forced(Seq2Seq& m, const Tensor& memory, const std::vector<int32_t>& prefix) {
  NoGradGuard ng;
  std::vector<int32_t> in = {kBos};
  in.insert(in.end(), prefix.begin(), prefix.end());
  const auto T = static_cast<int64_t>(in.size());
  const Tensor logits = m.decode(in, 1, T, memory, {}, {});
  std::vector<std::vector<double>> steps;
  for (int64_t t = 0; t < T; ++t) steps.push_back(log_softmax_at(logits, t));
  return steps;
}

struct Scored {
  std::vector<int32_t> tokens;
  bool finished = false;
  double logprob = 0, score = 0;
};

Scored scored(std::vector<int32_t> tokens, bool finished, double logprob, float alpha) {
  const auto len = static_cast<int64_t>(tokens.size()) + (finished ? 1 : 0);
  return {std::move(tokens), finished, logprob, logprob / gnmt_length_penalty(len, alpha)};
}

void sort_by_score(std::vector<Scored>& v) {
  std::stable_sort(v.begin(), v.end(), [](const Scored& a, const Scored& b) { return a.score > b.score; });
}

// Every target the decoder can return within `limit` tokens (EOS counted), by score, best first:
// 0 .. limit-1 tokens then EOS, and the unfinished ones cut at limit tokens. Any non-EOS token
// may appear (the decoder does not forbid pad or bos). Each is scored by the full decoder: the
// sum of its steps' log-softmax at its tokens, EOS included when finished.
std::vector<Scored> exhaustive(Seq2Seq& m, const Tensor& memory, int64_t limit, float alpha) {
  std::vector<Scored> all;
  std::vector<std::vector<int32_t>> frontier = {{}};
  for (int64_t len = 0; len <= limit; ++len) {
    std::vector<std::vector<int32_t>> next;
    for (const auto& seq : frontier) {
      const bool finished = len < limit;
      std::vector<int32_t> targets = seq;
      if (finished) targets.push_back(kEos);
      std::vector<int32_t> prefix(targets.begin(), targets.end() - 1);
      const auto steps = teacher_forced(m, memory, prefix);
      double lp = 0;
      for (size_t t = 0; t < targets.size(); ++t) lp += steps[t][targets[t]];
      all.push_back(scored(seq, finished, lp, alpha));
      for (int32_t w = 0; w < static_cast<int32_t>(m.config().tgt_vocab) && finished; ++w)
        if (w != kEos) {
          next.push_back(seq);
          next.back().push_back(w);
        }
    }
    frontier = std::move(next);
  }
  sort_by_score(all);
  return all;
}

// Beam search as specified, written plainly on the full decoder and never stopped before the
// length limit: each step ranks live x token by log-probability, finishes the EOS candidates
// ranked within the top K, drops those ranked lower, and keeps the best K others live; at the
// limit the live ones finish unfinished. Returns every hypothesis it finished, best first.
// *settled counts the times its K best were complete and out of reach of every live hypothesis
// before the limit (where the decoder stops early).
std::vector<Scored> reference_beam(Seq2Seq& m, const Tensor& memory, int64_t K, int64_t limit, float alpha,
                                   int* settled) {
  struct Beam {
    std::vector<int32_t> tokens;
    double logprob;
  };
  struct Cand {
    double logprob;
    size_t k;
    int32_t v;
  };
  std::vector<Beam> live = {{{}, 0.0}};
  std::vector<Scored> done;
  for (int64_t t = 0; t < limit && !live.empty(); ++t) {
    std::vector<Cand> cands;  // in beam, then token order: the decoder's order for equal log-probs
    for (size_t k = 0; k < live.size(); ++k) {
      const std::vector<double> next = teacher_forced(m, memory, live[k].tokens).back();
      for (size_t v = 0; v < next.size(); ++v) cands.push_back({live[k].logprob + next[v], k, static_cast<int32_t>(v)});
    }
    std::stable_sort(cands.begin(), cands.end(), [](const Cand& a, const Cand& b) { return a.logprob > b.logprob; });
    std::vector<Beam> next_live;
    for (size_t c = 0; c < cands.size() && static_cast<int64_t>(next_live.size()) < K; ++c) {
      const Cand& cd = cands[c];
      if (cd.v == kEos) {
        if (static_cast<int64_t>(c) < K) done.push_back(scored(live[cd.k].tokens, true, cd.logprob, alpha));
        continue;
      }
      next_live.push_back({live[cd.k].tokens, cd.logprob});
      next_live.back().tokens.push_back(cd.v);
    }
    live = std::move(next_live);
    sort_by_score(done);
    if (t + 1 == limit) {
      for (const Beam& b : live) done.push_back(scored(b.tokens, false, b.logprob, alpha));
    } else if (!live.empty() && static_cast<int64_t>(done.size()) >= K &&
               live[0].logprob / gnmt_length_penalty(limit, alpha) <= done[K - 1].score) {
      ++*settled;
    }
  }
  sort_by_score(done);
  return done;
}

// The decoder's n-best list must be the top of `truth` (all candidates, best first): as many
// hypotheses, each scored as the full decoder scores it, at rank k scoring as truth's k-th
// (equal scores may come in either order).
void expect_top_of(const std::vector<Hypothesis>& got, const std::vector<Scored>& truth, size_t n,
                   const std::string& what) {
  std::map<std::pair<std::vector<int32_t>, bool>, double> score_of;
  for (const Scored& s : truth) score_of[{s.tokens, s.finished}] = s.score;
  ASSERT_EQ(got.size(), std::min(n, truth.size())) << what;
  for (size_t k = 0; k < got.size(); ++k) {
    const auto it = score_of.find({got[k].tokens, got[k].finished});
    ASSERT_NE(it, score_of.end()) << what << " rank " << k << ": not a sequence of the reference";
    EXPECT_NEAR(got[k].score, it->second, 1e-4) << what << " rank " << k;
    EXPECT_NEAR(it->second, truth[k].score, 1e-4) << what << " rank " << k << ": not the reference's k-th best";
  }
}
}  // namespace

// The property beam search exists for: if the beam holds every candidate of every step but the
// last, nothing is pruned and the result must be the exhaustive n-best list. With W non-EOS tokens
// (pad, bos and two words: W = 4) and a length limit L = 4, step t has W^t (W + 1) candidates, at
// most 80 before the last step; at the last step a dropped candidate is beaten by K kept ones of
// the same length. K = 85 is the number of prefixes that can still grow (lengths 0 to 3), and
// also the number of targets that end with EOS: the old rule (stop once K hypotheses have ended;
// at the limit add cut ones only while fewer than K have ended) returned wrong n-best lists here.
// Three sources of limits 2, 3 and 4 decode as one batch; sharpened 2x (odd seeds) or 6x.
TEST(Seq2SeqDecode, WideBeamReturnsTheExhaustiveNBest) {
  const std::vector<std::vector<int32_t>> srcs = {{4, 5, 6}, {7}, {5, 9}};
  DecodeOptions o;
  o.beam = 85;
  o.n_best = 85;
  o.max_len_a = 1.0f;  // limits: source length + 1
  o.max_len_b = 1;
  for (uint64_t seed : {1, 2, 3, 4, 5, 6, 7, 8}) {
    auto m = sharp_model(seed, 5, seed % 2 ? 2.0f : 6.0f);
    for (float alpha : {0.0f, 0.6f, 1.0f}) {
      o.length_penalty = alpha;
      const auto out = translate_batch(*m, srcs, o);
      for (size_t i = 0; i < srcs.size(); ++i) {
        NoGradGuard ng;
        const auto S = static_cast<int64_t>(srcs[i].size());
        const auto truth = exhaustive(*m, m->encode(srcs[i], 1, S, {}), S + 1, alpha);
        const std::string what = fmt::format("seed {} alpha {} source {}", seed, alpha, i);
        EXPECT_EQ(out[i][0].tokens, truth[0].tokens) << what;
        EXPECT_EQ(out[i][0].finished, truth[0].finished) << what;
        expect_top_of(out[i], truth, 85, what);
      }
    }
  }
}

// Narrow beams stop early (K finished, none live can beat the worst): the result must be that of
// the same search run to the length limit, here the plain reference search. Limits 10, 9 and 12,
// decoded as one batch; four words besides the specials. Long limits matter for the bound: a
// bound taken at the current length instead of the limit (a live hypothesis that continues
// cheaply gains from lp growing) fails here at alpha 0.6 and 1.
TEST(Seq2SeqDecode, EarlyStopNeverChangesTheResult) {
  const std::vector<std::vector<int32_t>> srcs = {{4, 5}, {7}, {5, 9, 4, 8}};
  DecodeOptions o;
  o.max_len_a = 1.0f;
  o.max_len_b = 8;
  int settled = 0;
  for (uint64_t seed : {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12}) {
    auto m = sharp_model(seed, 7, seed % 2 ? 2.0f : 6.0f);
    for (int64_t K : {2, 3, 5})
      for (float alpha : {0.0f, 0.6f, 1.0f}) {
        o.beam = o.n_best = K;
        o.length_penalty = alpha;
        const auto out = translate_batch(*m, srcs, o);
        for (size_t i = 0; i < srcs.size(); ++i) {
          NoGradGuard ng;
          const auto S = static_cast<int64_t>(srcs[i].size());
          const auto ref = reference_beam(*m, m->encode(srcs[i], 1, S, {}), K, S + 8, alpha, &settled);
          const std::string what = fmt::format("seed {} beam {} alpha {} source {}", seed, K, alpha, i);
          EXPECT_EQ(out[i][0].tokens, ref[0].tokens) << what;
          expect_top_of(out[i], ref, static_cast<size_t>(K), what);
        }
      }
  }
  EXPECT_GT(settled, 0) << "no case where the decoder may stop before the length limit";
}

// Broken weights give NaN or infinite logits: greedy and beam decoding refuse them (ranking NaNs
// would pick arbitrary tokens), with the message atto score gives.
TEST(Seq2SeqDecode, NonFiniteLogitsAreAnError) {
  for (float bad : {std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity()})
    for (int64_t beam : {1, 4}) {
      Rng rng(5);
      Seq2Seq m(cfg(), rng);
      m.eval();
      m.lm_head.weight.data()[0] = bad;  // the output weight of token 0
      DecodeOptions o;
      o.beam = beam;
      try {
        translate_batch(m, sources(), o);
        ADD_FAILURE() << "no error for " << bad << " with beam " << beam;
      } catch (const Error& e) {
        EXPECT_EQ(std::string(e.what()).rfind("the model produced non-finite logits", 0), 0u) << e.what();
        EXPECT_NE(std::string(e.what()).find("weights"), std::string::npos) << e.what();
      }
    }
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
