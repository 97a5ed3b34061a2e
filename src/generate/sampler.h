// atto/generate/sampler.h: turning one row of logits into the next token.
//
//   gen::SamplerOptions o;
//   o.temperature = 0.8f;
//   o.top_p = 0.9f;
//   o.validate();                                        // atto::UsageError naming the flag
//   gen::SamplerChain chain = gen::SamplerChain::from_options(o);
//   Rng rng(1337);
//   int32_t next = chain.sample(logits, history, rng);  // logits [V], rewritten in place
//
// Conventions
// - A chain is a list of small steps run in llama.cpp's order, then one final strategy:
//     logit bias -> penalties -> temperature -> top-k -> top-p -> min-p -> draw (or argmax)
//   Steps that would change nothing (no bias, penalties 1 / 0 / 0, temperature 1, top-k 0,
//   top-p 1, min-p 0) are left out of the chain.
// - Steps rewrite the logits in place; a token a step removes gets -inf, so later steps and
//   the draw never see it. Every filter keeps at least one token (the most likely one).
// - Ties are broken by the lower token id (top-k, top-p, argmax), so results never depend on
//   the sort algorithm.
// - Randomness comes only from the Rng passed to sample(): the draw takes exactly one
//   rng.uniform() per token, greedy takes none. Same seed, same tokens.
// - Probabilities are computed in double from the (float) logits.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "tensor/rng.h"

namespace atto::gen {

struct SamplerOptions {
  float temperature = 1.0f;         // logits / temperature; > 0 (ignored by greedy)
  int top_k = 0;                    // keep the k most likely tokens; 0 = off
  float top_p = 1.0f;               // nucleus: smallest set with probability >= top_p; 1 = off
  float min_p = 0.0f;               // keep tokens with p >= min_p * p_max; 0 = off
  float repetition_penalty = 1.0f;  // CTRL-style penalty on tokens seen recently; 1 = off
  int repetition_last_n = 64;       // how many recent tokens the penalty looks at; 0 = all
  float frequency_penalty = 0.0f;   // OpenAI: logit -= count * this, over the same recent tokens; 0 = off
  float presence_penalty = 0.0f;    // OpenAI: logit -= this for each token among them; 0 = off
  bool greedy = false;              // argmax instead of a random draw
  // Added to the logits of these token ids before any other step (OpenAI's logit_bias: -100
  // all but bans a token, +100 all but forces it). Each bias in [-100, 100].
  std::vector<std::pair<int32_t, float>> logit_bias;

  // How validate() names the options in its errors: the CLI's flags (--top-p, --logit-bias) or
  // the field names of the C API, Python and the server (top_p, logit_bias).
  enum class Names { Flags, Fields };
  // Throws atto::UsageError naming the option and the value.
  void validate(Names names = Names::Flags) const;
  // Throws atto::UsageError when a logit_bias token id is outside [0, vocab_size).
  void check_vocab(int64_t vocab_size, Names names = Names::Flags) const;
};

// ---- broken weights -----------------------------------------------------------------------
// Every command that computes logits refuses NaN and infinite ones with one message:
//   "the model produced non-finite logits while <doing>; the weights may be damaged"
// (<doing>: sampling, scoring, evaluating, inspecting; seq2seq decoding words it the same).
// Diverged or damaged weights give such logits; sampling from them would print noise.
[[noreturn]] void fail_non_finite_logits(std::string_view doing);
// Throws that error when any value is NaN or +-inf.
void check_finite_logits(std::span<const float> logits, std::string_view doing);

// ---- steps ------------------------------------------------------------------------------
// Each step: apply(logits [V], history) rewrites logits in place. history holds the tokens
// generated so far (prompt included); only RepetitionPenalty reads it.

// logits[id] += bias for each (id, bias); a token already at -inf stays there.
struct LogitBias {
  std::vector<std::pair<int32_t, float>> bias;
  void apply(std::span<float> logits, std::span<const int32_t> history) const;
};

// llama.cpp's penalties: for each distinct token among the last `last_n` of history (0 = all),
// seen c times: first CTRL's repetition penalty (a positive logit divided by `penalty`, a
// negative one multiplied by it), then OpenAI's logit -= c * frequency + presence.
struct RepetitionPenalty {
  float penalty = 1.0f;
  int last_n = 64;
  float frequency = 0.0f;
  float presence = 0.0f;
  void apply(std::span<float> logits, std::span<const int32_t> history) const;
};

// logits = (logits - max) / temperature: softmax(logits / temperature), shifted so that the
// highest logit is 0 (a tiny temperature cannot overflow to +inf).
struct Temperature {
  float temperature = 1.0f;
  void apply(std::span<float> logits, std::span<const int32_t> history) const;
};

// Keeps the k highest logits (exactly k when at least k are finite).
struct TopK {
  int k = 0;
  void apply(std::span<float> logits, std::span<const int32_t> history) const;
};

// Nucleus sampling: sorts by probability and keeps the shortest prefix whose cumulative
// probability reaches p (a prefix within a relative 1e-6 of p counts as reaching it, so that
// rounding in the softmax cannot add a token to an exact boundary).
struct TopP {
  float p = 1.0f;
  void apply(std::span<float> logits, std::span<const int32_t> history) const;
};

// Keeps tokens with p >= min_p * p_max, i.e. logit >= max_logit + log(min_p).
struct MinP {
  float min_p = 0.0f;
  void apply(std::span<float> logits, std::span<const int32_t> history) const;
};

using SamplerStep = std::variant<LogitBias, RepetitionPenalty, Temperature, TopK, TopP, MinP>;

// ---- strategies ---------------------------------------------------------------------------

// Softmax of the logits (-inf -> 0), in double. Throws atto::Error on a NaN or +inf logit (the
// non-finite-logits message) or when every logit is -inf.
std::vector<double> probabilities(std::span<const float> logits);
// One token drawn from softmax(logits) by inverse CDF with a single rng.uniform().
int32_t draw(std::span<const float> logits, Rng& rng);
// The highest logit; ties -> lowest id. Throws atto::Error on NaN.
int32_t argmax(std::span<const float> logits);

enum class Strategy { Draw, Greedy };

class SamplerChain {
 public:
  SamplerChain() = default;  // no steps, Draw: plain sampling from softmax(logits)
  // The chain for validated options (see the order above). Greedy keeps the bias and penalties.
  static SamplerChain from_options(const SamplerOptions& opt);

  SamplerChain& add(SamplerStep step);
  SamplerChain& set_strategy(Strategy s);

  // Runs the steps on logits [V] (in place), then the strategy. history: see the steps.
  int32_t sample(std::span<float> logits, std::span<const int32_t> history, Rng& rng) const;

  const std::vector<SamplerStep>& steps() const { return steps_; }
  Strategy strategy() const { return strategy_; }

 private:
  std::vector<SamplerStep> steps_;
  Strategy strategy_ = Strategy::Draw;
};

}  // namespace atto::gen
