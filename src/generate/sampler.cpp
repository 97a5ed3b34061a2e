#include "generate/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>

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

namespace {

// "--top-p" as a flag, "top_p" as a field.
std::string option_name(std::string_view flag, SamplerOptions::Names names) {
  if (names == SamplerOptions::Names::Flags) return std::string(flag);
  std::string f(flag.substr(2));
  std::replace(f.begin(), f.end(), '-', '_');
  return f;
}

}  // namespace

void SamplerOptions::validate(Names names) const {
  auto usage = [&](std::string_view flag, const std::string& rest) {
    throw UsageError(option_name(flag, names) + rest);
  };
  if (!greedy && !(temperature > 0.0f && std::isfinite(temperature)))
    usage("--temperature",
          fmt::format(" must be > 0, got {} ({} for argmax decoding)", temperature,
                      names == Names::Flags ? "use --greedy" : "set greedy"));
  if (top_k < 0) usage("--top-k", fmt::format(" must be >= 0 (0 = off), got {}", top_k));
  if (!(top_p > 0.0f && top_p <= 1.0f)) usage("--top-p", fmt::format(" must be in (0, 1] (1 = off), got {}", top_p));
  if (!(min_p >= 0.0f && min_p < 1.0f)) usage("--min-p", fmt::format(" must be in [0, 1) (0 = off), got {}", min_p));
  if (!(repetition_penalty > 0.0f && std::isfinite(repetition_penalty)))
    usage("--repetition-penalty", fmt::format(" must be > 0 (1 = off), got {}", repetition_penalty));
  if (repetition_last_n < 0)
    usage("--repetition-last-n", fmt::format(" must be >= 0 (0 = the whole sample), got {}", repetition_last_n));
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    usage("--frequency-penalty", fmt::format(" must be in [-2, 2] (0 = off), got {}", frequency_penalty));
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    usage("--presence-penalty", fmt::format(" must be in [-2, 2] (0 = off), got {}", presence_penalty));
  for (const auto& [id, b] : logit_bias) {
    if (id < 0) usage("--logit-bias", fmt::format(": token id {} is negative", id));
    if (!(b >= -100.0f && b <= 100.0f))
      usage("--logit-bias", fmt::format(": the bias of token {} must be in [-100, 100], got {}", id, b));
  }
}

void SamplerOptions::check_vocab(int64_t vocab_size, Names names) const {
  for (const auto& [id, b] : logit_bias)
    if (id < 0 || id >= vocab_size)
      throw UsageError(fmt::format("{}: token id {} is outside this model's vocabulary [0, {}) (`atto tokenize` "
                                   "gives a text's ids)",
                                   option_name("--logit-bias", names), id, vocab_size));
}

// ---- steps ----------------------------------------------------------------------------------

void LogitBias::apply(std::span<float> logits, std::span<const int32_t>) const {
  for (const auto& [t, b] : bias) {
    ATTO_CHECK(t >= 0 && static_cast<size_t>(t) < logits.size(), "LogitBias: token {} outside [0, {})", t,
               logits.size());
    if (logits[t] != kNegInf) logits[t] += b;
  }
}

void RepetitionPenalty::apply(std::span<float> logits, std::span<const int32_t> history) const {
  if (last_n > 0 && history.size() > static_cast<size_t>(last_n)) history = history.last(last_n);
  std::vector<int32_t> seen(history.begin(), history.end());
  std::sort(seen.begin(), seen.end());
  for (size_t i = 0; i < seen.size();) {  // each distinct token once, with its count
    const int32_t t = seen[i];
    const size_t first = i;
    while (i < seen.size() && seen[i] == t) ++i;
    ATTO_CHECK(t >= 0 && static_cast<size_t>(t) < logits.size(), "RepetitionPenalty: token {} outside [0, {})", t,
               logits.size());
    float& l = logits[t];
    if (l == kNegInf) continue;
    if (penalty != 1.0f) l = l > 0.0f ? l / penalty : l * penalty;
    if (frequency != 0.0f || presence != 0.0f) l -= static_cast<float>(i - first) * frequency + presence;
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
  if (!opt.logit_bias.empty()) c.add(LogitBias{opt.logit_bias});
  if (opt.repetition_penalty != 1.0f || opt.frequency_penalty != 0.0f || opt.presence_penalty != 0.0f)
    c.add(RepetitionPenalty{opt.repetition_penalty, opt.repetition_last_n, opt.frequency_penalty,
                            opt.presence_penalty});
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
