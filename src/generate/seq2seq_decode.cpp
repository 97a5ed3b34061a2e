#include "generate/seq2seq_decode.h"

#include <algorithm>
#include <cmath>

#include "base/error.h"

namespace atto::gen {

namespace {

constexpr int32_t kPad = 0, kBos = 1, kEos = 2;

struct PaddedSources {
  std::vector<int32_t> ids;   // [N, S]
  std::vector<uint8_t> mask;  // [N, S]
  int64_t N = 0, S = 0;
};

PaddedSources pad_sources(const std::vector<std::vector<int32_t>>& sources, int64_t max_len) {
  PaddedSources p;
  p.N = static_cast<int64_t>(sources.size());
  for (size_t i = 0; i < sources.size(); ++i) {
    ATTO_CHECK(static_cast<int64_t>(sources[i].size()) <= max_len,
               "source {} has {} tokens, more than the model's max_len {}", i, sources[i].size(), max_len);
    p.S = std::max<int64_t>(p.S, static_cast<int64_t>(sources[i].size()));
  }
  p.S = std::max<int64_t>(p.S, 1);  // an empty source still gets one (masked) position
  p.ids.assign(p.N * p.S, kPad);
  p.mask.assign(p.N * p.S, 0);
  for (int64_t i = 0; i < p.N; ++i)
    for (size_t t = 0; t < sources[i].size(); ++t) {
      p.ids[i * p.S + t] = sources[i][t];
      p.mask[i * p.S + t] = 1;
    }
  return p;
}

// Target tokens allowed for source i, EOS included, within the model's positions (BOS takes one).
int64_t length_limit(size_t src_len, const DecodeOptions& opt, int64_t model_max) {
  const auto l = static_cast<int64_t>(std::floor(opt.max_len_a * static_cast<float>(src_len))) + opt.max_len_b;
  return std::clamp<int64_t>(l, 1, model_max - 1);
}

// Log-softmax of each row of logits [R, 1, V] into double. A NaN or infinite logit means broken
// weights (a diverged or damaged checkpoint): refused here, before it reaches any ranking, where
// NaN comparisons would quietly pick arbitrary tokens.
std::vector<double> log_softmax_rows(const Tensor& logits, int64_t R, int64_t V) {
  std::vector<double> out(R * V);
  const float* p = logits.data();
  ATTO_CHECK(std::all_of(p, p + R * V, [](float x) { return std::isfinite(x); }),
             "the model produced non-finite logits while decoding; the weights may be damaged");
  for (int64_t r = 0; r < R; ++r) {
    const float* row = p + r * V;
    const double mx = *std::max_element(row, row + V);
    double s = 0.0;
    for (int64_t v = 0; v < V; ++v) s += std::exp(row[v] - mx);
    const double lse = mx + std::log(s);
    for (int64_t v = 0; v < V; ++v) out[r * V + v] = row[v] - lse;
  }
  return out;
}

void finish(Hypothesis& h, bool eos, float alpha) {
  h.finished = eos;
  const auto len = static_cast<int64_t>(h.tokens.size()) + (eos ? 1 : 0);
  h.score = h.logprob / gnmt_length_penalty(std::max<int64_t>(len, 1), alpha);
}

// Re-runs the full decoder on the hypothesis and keeps its cross-attention weights.
void attach_cross_attention(Seq2Seq& model, const std::vector<int32_t>& src, Hypothesis& h) {
  NoGradGuard ng;
  const PaddedSources p = pad_sources({src}, model.config().max_len);
  std::vector<int32_t> tgt = {kBos};
  tgt.insert(tgt.end(), h.tokens.begin(), h.tokens.end());
  const auto T = static_cast<int64_t>(tgt.size());
  if (T > model.config().max_len) return;
  struct CrossWeights : nn::BlockObserver {  // each decoder block's cross-attention weights
    std::vector<Tensor> layers;
    void input(const Tensor&) override {}
    void update(Sublayer s, const Tensor&, const Tensor& weights) override {
      if (s == Sublayer::CrossAttention) layers.push_back(weights);
    }
  } cross;
  model.decode(tgt, 1, T, model.encode(p.ids, 1, p.S, p.mask), p.mask, {}, &cross);
  h.cross_attention.clear();
  for (const Tensor& w : cross.layers) {  // [1, NH, T, S]
    std::vector<std::vector<std::vector<float>>> heads(w.size(1));
    for (int64_t hd = 0; hd < w.size(1); ++hd)
      for (int64_t t = 0; t < T; ++t) {
        std::vector<float> row(static_cast<size_t>(src.size()));
        for (size_t s = 0; s < src.size(); ++s) row[s] = w.at({0, hd, t, static_cast<int64_t>(s)});
        heads[hd].push_back(std::move(row));
      }
    h.cross_attention.push_back(std::move(heads));
  }
}

struct Live {
  Hypothesis h;
  int64_t row = 0;  // cache row holding this hypothesis
};

// One source's search: its live hypotheses (best log-probability first) and the K best finished
// ones by score (unordered).
struct SourceBeam {
  std::vector<Live> live;
  std::vector<Hypothesis> done;
  int64_t limit = 0;  // target tokens allowed, EOS included
  bool over = false;
};

struct Candidate {
  double logprob;
  int64_t k;  // index of the live beam it extends
  int32_t v;  // the token
};

bool higher_score(const Hypothesis& a, const Hypothesis& b) { return a.score > b.score; }

std::vector<Hypothesis>::iterator worst_of(std::vector<Hypothesis>& done) {
  return std::min_element(done.begin(), done.end(), [](auto& a, auto& b) { return higher_score(b, a); });
}

// Adds a finished hypothesis to the K best: it enters while fewer than K are held, else it
// replaces the worst one if it scores higher.
void keep_best(std::vector<Hypothesis>& done, Hypothesis h, int64_t K) {
  if (static_cast<int64_t>(done.size()) < K) {
    done.push_back(std::move(h));
    return;
  }
  const auto worst = worst_of(done);
  if (higher_score(h, *worst)) *worst = std::move(h);
}

// One source's step. The step's candidates (live beam x token) are ranked by log-probability; an
// EOS candidate among the top K finishes, one ranked lower is dropped (taking it would let
// improbable short endings crowd out hypotheses that are still growing); the best K non-EOS
// candidates are the next live set.
void step_source(SourceBeam& b, const std::vector<double>& lp, int64_t V, int64_t K, float alpha) {
  std::vector<Candidate> cands;
  cands.reserve(b.live.size() * V);
  for (size_t k = 0; k < b.live.size(); ++k)
    for (int64_t v = 0; v < V; ++v)
      cands.push_back(
          {b.live[k].h.logprob + lp[b.live[k].row * V + v], static_cast<int64_t>(k), static_cast<int32_t>(v)});
  // Each live beam has one EOS candidate, so the top 2K hold at least K others.
  const auto take = std::min<size_t>(cands.size(), static_cast<size_t>(2 * K));
  std::partial_sort(cands.begin(), cands.begin() + take, cands.end(), [](const Candidate& a, const Candidate& b) {
    if (a.logprob != b.logprob) return a.logprob > b.logprob;
    return a.k != b.k ? a.k < b.k : a.v < b.v;  // ties: earlier beam, lower id (as greedy argmax)
  });
  std::vector<Live> next;
  for (size_t c = 0; c < take && static_cast<int64_t>(next.size()) < K; ++c) {
    const Candidate& cd = cands[c];
    if (cd.v == kEos && static_cast<int64_t>(c) >= K) continue;
    const Live& from = b.live[cd.k];
    Hypothesis h = from.h;
    h.logprob = cd.logprob;
    h.token_logprobs.push_back(static_cast<float>(lp[from.row * V + cd.v]));
    if (cd.v == kEos) {
      finish(h, true, alpha);
      keep_best(b.done, std::move(h), K);
      continue;
    }
    h.tokens.push_back(cd.v);
    next.push_back({std::move(h), from.row});
  }
  b.live = std::move(next);
}

// After step t: at the length limit the live hypotheses finish as they are; otherwise the source
// is over once it holds K finished hypotheses and the best live one cannot beat the worst of them.
// Log-probabilities only fall as tokens are added and lp() grows with length, so a live
// hypothesis with log-probability L <= 0 can score at most L / lp(limit) (exact, as
// early_stopping="never" in Hugging Face's BeamSearchScorer); with alpha 0 that is L itself.
void settle_source(SourceBeam& b, int64_t t, int64_t K, float alpha) {
  if (t + 1 >= b.limit) {
    for (Live& l : b.live) {
      finish(l.h, false, alpha);
      keep_best(b.done, std::move(l.h), K);
    }
    b.live.clear();
  }
  if (b.live.empty()) {
    b.over = true;
  } else if (static_cast<int64_t>(b.done.size()) >= K) {
    b.over = b.live.front().h.logprob / gnmt_length_penalty(b.limit, alpha) <= worst_of(b.done)->score;
  }
}

std::vector<std::vector<Hypothesis>> beam_search(Seq2Seq& model, const std::vector<std::vector<int32_t>>& sources,
                                                 const DecodeOptions& opt) {
  NoGradGuard ng;
  const int64_t K = opt.beam, model_max = model.config().max_len, V = model.config().tgt_vocab;
  const PaddedSources p = pad_sources(sources, model_max);
  const int64_t N = p.N;
  std::vector<SourceBeam> beams(N);
  int64_t steps = 1;
  for (int64_t i = 0; i < N; ++i) {
    beams[i].limit = length_limit(sources[i].size(), opt, model_max);
    beams[i].live.push_back({Hypothesis{}, i * K});
    steps = std::max(steps, beams[i].limit);
  }
  Seq2Seq::Cache cache = model.make_cache(model.encode(p.ids, N, p.S, p.mask), p.mask, steps);
  std::vector<int64_t> rows(N * K);
  for (int64_t r = 0; r < N * K; ++r) rows[r] = r / K;
  cache.reorder(rows);  // K rows per source
  std::vector<int32_t> input(N * K, kBos);
  for (int64_t t = 0; t < steps; ++t) {
    const std::vector<double> lp = log_softmax_rows(model.decode_cached(input, N * K, 1, cache), N * K, V);
    for (SourceBeam& b : beams) {
      if (b.over) continue;
      step_source(b, lp, V, K, opt.length_penalty);
      settle_source(b, t, K, opt.length_penalty);
    }
    if (std::all_of(beams.begin(), beams.end(), [](const SourceBeam& b) { return b.over; })) break;
    // Rows for the next step: each live hypothesis's cache row, moved to its source's slots.
    for (int64_t i = 0; i < N; ++i)
      for (int64_t k = 0; k < K; ++k) {
        const bool has = k < static_cast<int64_t>(beams[i].live.size());
        rows[i * K + k] = has ? beams[i].live[k].row : i * K;
        input[i * K + k] = has ? beams[i].live[k].h.tokens.back() : kPad;
      }
    cache.reorder(rows);
    for (int64_t i = 0; i < N; ++i)
      for (size_t k = 0; k < beams[i].live.size(); ++k) beams[i].live[k].row = i * K + static_cast<int64_t>(k);
  }
  std::vector<std::vector<Hypothesis>> out(N);
  for (int64_t i = 0; i < N; ++i) {
    std::vector<Hypothesis>& done = beams[i].done;
    std::stable_sort(done.begin(), done.end(), higher_score);
    done.resize(std::min<size_t>(done.size(), static_cast<size_t>(opt.n_best)));
    out[i] = std::move(done);
  }
  return out;
}

}  // namespace

double gnmt_length_penalty(int64_t length, float alpha) {
  return std::pow((5.0 + static_cast<double>(length)) / 6.0, static_cast<double>(alpha));
}

void DecodeOptions::validate() const {
  ATTO_CHECK(beam >= 1, "--beam must be at least 1, got {}", beam);
  ATTO_CHECK(n_best >= 1 && n_best <= beam, "--n-best must be in [1, --beam = {}], got {}", beam, n_best);
  ATTO_CHECK(std::isfinite(length_penalty) && length_penalty >= 0.0f, "--length-penalty must be >= 0, got {}",
             length_penalty);
  ATTO_CHECK(std::isfinite(max_len_a) && max_len_a >= 0.0f && max_len_b >= 0 && (max_len_a > 0 || max_len_b > 0),
             "--max-len-a ({}) and --max-len-b ({}) must be >= 0 and allow at least one token", max_len_a, max_len_b);
}

std::vector<Hypothesis> greedy_decode(Seq2Seq& model, const std::vector<std::vector<int32_t>>& sources,
                                      const DecodeOptions& opt) {
  NoGradGuard ng;
  const int64_t model_max = model.config().max_len, V = model.config().tgt_vocab;
  const PaddedSources p = pad_sources(sources, model_max);
  const int64_t N = p.N;
  std::vector<int64_t> limit(N);
  int64_t steps = 1;
  for (int64_t i = 0; i < N; ++i) steps = std::max(steps, limit[i] = length_limit(sources[i].size(), opt, model_max));
  Seq2Seq::Cache cache = model.make_cache(model.encode(p.ids, N, p.S, p.mask), p.mask, steps);
  std::vector<Hypothesis> out(N);
  std::vector<bool> done(N, false);
  std::vector<int32_t> input(N, kBos);
  for (int64_t t = 0; t < steps; ++t) {
    const std::vector<double> lp = log_softmax_rows(model.decode_cached(input, N, 1, cache), N, V);
    for (int64_t i = 0; i < N; ++i) {
      if (done[i]) continue;
      const auto best =
          static_cast<int32_t>(std::max_element(lp.begin() + i * V, lp.begin() + (i + 1) * V) - (lp.begin() + i * V));
      out[i].logprob += lp[i * V + best];
      out[i].token_logprobs.push_back(static_cast<float>(lp[i * V + best]));
      if (best == kEos) {
        finish(out[i], true, opt.length_penalty);
        done[i] = true;
        continue;
      }
      out[i].tokens.push_back(best);
      input[i] = best;
      if (t + 1 >= limit[i]) {
        finish(out[i], false, opt.length_penalty);
        done[i] = true;
      }
    }
    if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
  }
  return out;
}

std::vector<std::vector<Hypothesis>> translate_batch(Seq2Seq& model, const std::vector<std::vector<int32_t>>& sources,
                                                     const DecodeOptions& opt) {
  opt.validate();
  std::vector<std::vector<Hypothesis>> out;
  if (sources.empty()) return out;
  if (opt.beam == 1) {
    for (auto& h : greedy_decode(model, sources, opt)) out.push_back({std::move(h)});
  } else {
    out = beam_search(model, sources, opt);
  }
  if (opt.keep_attention)
    for (size_t i = 0; i < out.size(); ++i)
      for (auto& h : out[i]) attach_cross_attention(model, sources[i], h);
  return out;
}

void translate_chunks(
    Seq2Seq& model, const std::vector<std::vector<int32_t>>& sources, const DecodeOptions& opt, int64_t batch_size,
    const std::function<void(size_t first, std::vector<std::vector<Hypothesis>>& results)>& on_batch) {
  ATTO_CHECK(batch_size >= 1, "translate: the batch size must be at least 1, got {}", batch_size);
  opt.validate();
  const auto max_len = static_cast<size_t>(model.config().max_len);
  for (size_t first = 0; first < sources.size(); first += static_cast<size_t>(batch_size)) {
    const size_t end = std::min(sources.size(), first + static_cast<size_t>(batch_size));
    std::vector<size_t> decoded;  // the non-empty sources of the batch
    std::vector<std::vector<int32_t>> batch;
    for (size_t i = first; i < end; ++i) {
      if (sources[i].empty()) continue;
      decoded.push_back(i);
      batch.emplace_back(sources[i].begin(),
                         sources[i].begin() + static_cast<std::ptrdiff_t>(std::min(sources[i].size(), max_len)));
    }
    std::vector<std::vector<Hypothesis>> out = translate_batch(model, batch, opt);
    std::vector<std::vector<Hypothesis>> results(end - first);
    for (size_t k = 0; k < decoded.size(); ++k) results[decoded[k] - first] = std::move(out[k]);
    on_batch(first, results);
  }
}

std::vector<std::vector<Hypothesis>> translate_all(Seq2Seq& model, const std::vector<std::vector<int32_t>>& sources,
                                                   const DecodeOptions& opt, int64_t batch_size) {
  std::vector<std::vector<Hypothesis>> all;
  all.reserve(sources.size());
  translate_chunks(model, sources, opt, batch_size, [&](size_t, std::vector<std::vector<Hypothesis>>& results) {
    for (auto& r : results) all.push_back(std::move(r));
  });
  return all;
}

}  // namespace atto::gen
