#include "generate/score.h"

#include <algorithm>
#include <cmath>

#include "autograd/tape.h"
#include "base/error.h"
#include "generate/sampler.h"

namespace atto::gen {

namespace {

constexpr int64_t kWindowsPerBatch = 32;  // stream scoring: windows per forward call

// ln softmax(row)[target], in double.
double log_prob(const float* row, int64_t V, int32_t target) {
  double top = row[0];
  for (int64_t v = 1; v < V; ++v) top = std::max(top, static_cast<double>(row[v]));
  double sum = 0.0;
  for (int64_t v = 0; v < V; ++v) sum += std::exp(static_cast<double>(row[v]) - top);
  return static_cast<double>(row[target]) - top - std::log(sum);
}

// Logits [B, T, V] of the model in eval mode, no tape; all of them finite.
Tensor run_forward(GPT& model, const std::vector<int32_t>& idx, int64_t B, int64_t T) {
  NoGradGuard no_grad;
  const bool was_training = model.training();
  model.eval();
  Tensor logits = model.forward(idx, B, T).contiguous();
  model.train(was_training);
  check_finite_logits(std::span<const float>(logits.data(), logits.numel()), "scoring");
  return logits;
}

void check_ids(const GPT& model, const std::vector<int32_t>& ids) {
  for (int32_t t : ids)
    ATTO_CHECK(t >= 0 && t < model.config().vocab_size, "score: token {} outside [0, {})", t,
               model.config().vocab_size);
}

// The text for an error message, shortened when long.
std::string shown(std::string_view text) {
  constexpr size_t kMax = 60;
  if (text.size() <= kMax) return fmt::format("\"{}\"", text);
  size_t cut = kMax;
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;  // a code point boundary
  return fmt::format("\"{}...\"", text.substr(0, cut));
}

}  // namespace

double ScoreResult::total_nll() const {
  double s = 0.0;
  for (double lp : logprobs) s -= lp;
  return s;
}

double ScoreResult::mean_nll() const { return logprobs.empty() ? 0.0 : total_nll() / logprobs.size(); }

ScoreResult score_lines(GPT& model, const std::vector<int32_t>& ids, int32_t boundary) {
  check_ids(model, ids);
  const int64_t V = model.config().vocab_size, T = static_cast<int64_t>(ids.size()) + 1;
  ATTO_CHECK(boundary >= 0 && boundary < V, "score: boundary token {} outside [0, {})", boundary, V);
  ATTO_CHECK(T <= model.config().block_size,
             "score: {} tokens + <eos> exceed the block size {} (lines mode scores [<eos>] + text)", ids.size(),
             model.config().block_size);
  std::vector<int32_t> x{boundary};  // [<eos>, c1, ..., cn]
  x.insert(x.end(), ids.begin(), ids.end());
  ScoreResult r;
  r.targets = ids;  // [c1, ..., cn, <eos>]
  r.targets.push_back(boundary);
  const Tensor logits = run_forward(model, x, 1, T);  // [1, T, V]
  for (int64_t t = 0; t < T; ++t) r.logprobs.push_back(log_prob(logits.data() + t * V, V, r.targets[t]));
  return r;
}

ScoreResult score_stream(GPT& model, const std::vector<int32_t>& ids) {
  check_ids(model, ids);
  const auto n = static_cast<int64_t>(ids.size());
  ATTO_CHECK(n >= 2, "score: stream mode needs at least 2 tokens (the first one is only context), got {}", n);
  const int64_t V = model.config().vocab_size, BS = model.config().block_size;
  ScoreResult r;
  r.targets.assign(ids.begin() + 1, ids.end());
  // One window over the first min(n, BS) tokens scores targets 1 .. min(n - 1, BS).
  const int64_t w = std::min(n, BS);
  const Tensor first = run_forward(model, std::vector<int32_t>(ids.begin(), ids.begin() + w), 1, w);
  for (int64_t t = 0; t < std::min(w, n - 1); ++t) r.logprobs.push_back(log_prob(first.data() + t * V, V, ids[t + 1]));
  // Every later target i gets its own full window ids[i - BS, i), batched.
  for (int64_t i0 = w + 1; i0 < n; i0 += kWindowsPerBatch) {
    const int64_t B = std::min(kWindowsPerBatch, n - i0);
    std::vector<int32_t> idx;
    for (int64_t i = i0; i < i0 + B; ++i) idx.insert(idx.end(), ids.begin() + (i - BS), ids.begin() + i);
    const Tensor logits = run_forward(model, idx, B, BS);  // [B, BS, V]
    for (int64_t b = 0; b < B; ++b)
      r.logprobs.push_back(log_prob(logits.data() + (b * BS + BS - 1) * V, V, ids[i0 + b]));
  }
  return r;
}

ScoreResult score_text(GPT& model, const GptTokenizer& tok, std::string_view text) {
  ATTO_CHECK(tok.vocab_size() == model.config().vocab_size,
             "score: the tokenizer has {} tokens but the model's vocabulary is {}", tok.vocab_size(),
             model.config().vocab_size);
  const std::vector<int32_t> ids = tok.encode(text);  // names unknown characters and positions
  const auto n = static_cast<int64_t>(ids.size());
  if (tok.has_boundary()) {
    const int64_t limit = model.config().block_size - 1;
    ATTO_CHECK(n <= limit,
               "text {} has {} characters; this model scores at most {} (lines mode frames the text as [<eos>] + "
               "text, which must fit the block size {})",
               shown(text), n, limit, model.config().block_size);
    return score_lines(model, ids, tok.boundary_id());
  }
  ATTO_CHECK(n >= 2, "text {} has {} character(s); stream mode needs at least 2 (the first one is only context)",
             shown(text), n);
  return score_stream(model, ids);
}

}  // namespace atto::gen
