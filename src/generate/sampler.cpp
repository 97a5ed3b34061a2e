#include "generate/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "base/error.h"

namespace atto::gen {

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// Token ids ordered by logit, highest first; ties by lower id.
std::vector<int32_t> order_by_logit(std::span<const float> logits) {
  std::vector<int32_t> idx(logits.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::sort(idx.begin(), idx.end(),
            [&](int32_t a, int32_t b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); });
  return idx;
}

// -inf is a token a step filtered out; NaN and +inf come from the model.
void check_no_nan(std::span<const float> logits) {
  for (float l : logits)
    if (std::isnan(l) || l == std::numeric_limits<float>::infinity()) fail_non_finite_logits("sampling");
}

}  // namespace

void fail_non_finite_logits(std::string_view doing) {
  fail("the model produced non-finite logits while {}; the weights may be damaged", doing);
}

void check_finite_logits(std::span<const float> logits, std::string_view doing) {
  if (!std::all_of(logits.begin(), logits.end(), [](float x) { return std::isfinite(x); }))
    fail_non_finite_logits(doing);
}

void SamplerOptions::validate() const {
  auto usage = [](const std::string& msg) { throw UsageError(msg); };
  if (!greedy && !(temperature > 0.0f && std::isfinite(temperature)))
    usage(fmt::format("--temperature must be > 0, got {} (use --greedy for argmax decoding)", temperature));
  if (top_k < 0) usage(fmt::format("--top-k must be >= 0 (0 = off), got {}", top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f)) usage(fmt::format("--top-p must be in (0, 1] (1 = off), got {}", top_p));
  if (!(min_p >= 0.0f && min_p < 1.0f)) usage(fmt::format("--min-p must be in [0, 1) (0 = off), got {}", min_p));
  if (!(repetition_penalty > 0.0f && std::isfinite(repetition_penalty)))
    usage(fmt::format("--repetition-penalty must be > 0 (1 = off), got {}", repetition_penalty));
  if (repetition_last_n < 0)
    usage(fmt::format("--repetition-last-n must be >= 0 (0 = the whole sample), got {}", repetition_last_n));
}

// ---- steps ----------------------------------------------------------------------------------

void RepetitionPenalty::apply(std::span<float> logits, std::span<const int32_t> history) const {
  if (last_n > 0 && history.size() > static_cast<size_t>(last_n)) history = history.last(last_n);
  std::vector<bool> seen(logits.size(), false);
  for (int32_t t : history) {
    ATTO_CHECK(t >= 0 && static_cast<size_t>(t) < logits.size(), "RepetitionPenalty: token {} outside [0, {})", t,
               logits.size());
    if (seen[t]) continue;  // each distinct token is penalised once
    seen[t] = true;
    float& l = logits[t];
    if (l == kNegInf) continue;
    l = l > 0.0f ? l / penalty : l * penalty;
  }
}

void Temperature::apply(std::span<float> logits, std::span<const int32_t>) const {
  // (l - max) / t: the same softmax as l / t, but a tiny t cannot overflow to +inf.
  const float top = *std::max_element(logits.begin(), logits.end());
  if (top == kNegInf) return;
  for (float& l : logits) l = (l - top) / temperature;
}

void TopK::apply(std::span<float> logits, std::span<const int32_t>) const {
  if (k <= 0 || static_cast<size_t>(k) >= logits.size()) return;
  const std::vector<int32_t> order = order_by_logit(logits);
  for (size_t i = static_cast<size_t>(k); i < order.size(); ++i) logits[order[i]] = kNegInf;
}

void TopP::apply(std::span<float> logits, std::span<const int32_t>) const {
  if (p >= 1.0f) return;
  const std::vector<double> probs = probabilities(logits);
  const std::vector<int32_t> order = order_by_logit(logits);
  const double target = static_cast<double>(p) * (1.0 - 1e-6);
  double cum = 0.0;
  size_t keep = 0;
  while (keep < order.size()) {
    cum += probs[order[keep++]];
    if (cum >= target) break;
  }
  for (size_t i = keep; i < order.size(); ++i) logits[order[i]] = kNegInf;
}

void MinP::apply(std::span<float> logits, std::span<const int32_t>) const {
  if (min_p <= 0.0f) return;
  const float top = *std::max_element(logits.begin(), logits.end());
  if (top == kNegInf) return;
  const double threshold = static_cast<double>(top) + std::log(static_cast<double>(min_p));
  for (float& l : logits)
    if (static_cast<double>(l) < threshold) l = kNegInf;
}

// ---- strategies -----------------------------------------------------------------------------

std::vector<double> probabilities(std::span<const float> logits) {
  check_no_nan(logits);
  ATTO_CHECK(!logits.empty(), "sampler: empty logits");
  const float top = *std::max_element(logits.begin(), logits.end());
  ATTO_CHECK(top != kNegInf, "sampler: every token was filtered out (all logits are -inf)");
  std::vector<double> p(logits.size());
  double total = 0.0;
  for (size_t i = 0; i < logits.size(); ++i) total += p[i] = std::exp(static_cast<double>(logits[i]) - top);
  for (double& v : p) v /= total;
  return p;
}

int32_t draw(std::span<const float> logits, Rng& rng) {
  const std::vector<double> p = probabilities(logits);
  const double u = rng.uniform();
  double cum = 0.0;
  int32_t last_positive = 0;
  for (size_t i = 0; i < p.size(); ++i) {
    if (p[i] <= 0.0) continue;
    last_positive = static_cast<int32_t>(i);
    cum += p[i];
    if (u < cum) return last_positive;
  }
  return last_positive;  // u within rounding of 1: the last token with mass
}

int32_t argmax(std::span<const float> logits) {
  check_no_nan(logits);
  ATTO_CHECK(!logits.empty(), "sampler: empty logits");
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());  // first max
}

SamplerChain SamplerChain::from_options(const SamplerOptions& opt) {
  opt.validate();
  SamplerChain c;
  if (opt.repetition_penalty != 1.0f) c.add(RepetitionPenalty{opt.repetition_penalty, opt.repetition_last_n});
  if (opt.greedy) {
    c.set_strategy(Strategy::Greedy);
    return c;
  }
  if (opt.temperature != 1.0f) c.add(Temperature{opt.temperature});
  if (opt.top_k > 0) c.add(TopK{opt.top_k});
  if (opt.top_p < 1.0f) c.add(TopP{opt.top_p});
  if (opt.min_p > 0.0f) c.add(MinP{opt.min_p});
  return c;
}

SamplerChain& SamplerChain::add(SamplerStep step) {
  steps_.push_back(step);
  return *this;
}

SamplerChain& SamplerChain::set_strategy(Strategy s) {
  strategy_ = s;
  return *this;
}

int32_t SamplerChain::sample(std::span<float> logits, std::span<const int32_t> history, Rng& rng) const {
  check_no_nan(logits);
  for (const SamplerStep& step : steps_) std::visit([&](const auto& s) { s.apply(logits, history); }, step);
  return strategy_ == Strategy::Greedy ? argmax(logits) : draw(logits, rng);
}

}  // namespace atto::gen
