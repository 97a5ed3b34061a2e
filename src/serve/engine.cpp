#include "serve/engine.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include "generate/generate.h"
#include "kernels/kernels.h"
#include "tokenize/utf8.h"

namespace atto::serve {

namespace {

// log-softmax of one row, in double.
std::vector<double> log_softmax(std::span<const float> logits) {
  const float m = *std::max_element(logits.begin(), logits.end());
  double z = 0.0;
  for (float v : logits) z += std::exp(static_cast<double>(v - m));
  const double lz = std::log(z) + m;
  std::vector<double> out(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) out[i] = static_cast<double>(logits[i]) - lz;
  return out;
}

}  // namespace

Engine::Engine(LoadedModel lm, std::string id, int threads)
    : lm_(std::move(lm)), threads_(threads), id_(std::move(id)) {}

PreparedPrompt Engine::prepare(const std::string& prompt, const char* param) const {
  gen::PromptSet ps;
  try {
    ps = gen::make_prompt_set(lm_.tokenizer, prompt, context());
  } catch (const Error& e) {
    throw RequestError(400, fmt::format("'{}': {}", param, e.what()), param, "invalid_prompt");
  }
  if (ps.cropped > 0)
    throw RequestError(400,
                       fmt::format("'{}': the prompt takes {} tokens; this model's context is {}", param,
                                   static_cast<int64_t>(ps.base.size()) + ps.cropped, context()),
                       param, "context_length_exceeded");
  return {prompt, static_cast<int64_t>(lm_.tokenizer.encode(prompt).size())};
}

namespace {

// The top k alternatives and the chosen token's log-probability, from a step's log-softmax.
TokenLogprob token_logprob(const CharTokenizer& tok, const std::vector<double>& lp, int32_t t, int64_t k,
                           int64_t offset) {
  TokenLogprob out{tok.decode({t}), lp[static_cast<size_t>(t)], {}, offset};
  std::vector<int32_t> order(lp.size());
  for (size_t j = 0; j < order.size(); ++j) order[j] = static_cast<int32_t>(j);
  const auto top = std::min<size_t>(static_cast<size_t>(k), order.size());
  std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(top), order.end(),
                    [&](int32_t a, int32_t b) { return lp[static_cast<size_t>(a)] > lp[static_cast<size_t>(b)]; });
  for (size_t j = 0; j < top; ++j) out.top.emplace_back(tok.id_to_string(order[j]), lp[static_cast<size_t>(order[j])]);
  return out;
}

}  // namespace

std::vector<Choice> Engine::generate(const PreparedPrompt& p, const Completion& c, uint64_t seed,
                                     const OnPiece& on_piece) {
  std::lock_guard<std::mutex> lock(mu_);
  kernels::ThreadScope threads(threads_);
  const CharTokenizer& tok = lm_.tokenizer;
  std::vector<Choice> out(static_cast<size_t>(c.n));
  if (c.max_tokens == 0) return out;
  gen::GenerateOptions opt;
  opt.max_new_tokens = c.max_tokens;
  opt.stop_token = tok.has_boundary() ? tok.boundary_id() : -1;
  opt.sampler = c.sampler;
  std::vector<std::vector<double>> last_lp(static_cast<size_t>(c.n));  // the step being drawn, per choice
  std::vector<int64_t> chars(static_cast<size_t>(c.n), 0);             // characters of text so far
  if (c.logprobs >= 0) opt.on_logits = [&](int64_t i, std::span<const float> l) { last_lp[i] = log_softmax(l); };
  Rng rng(seed);
  const auto samples = gen::generate_text(*lm_.model, tok, gen::make_prompt_set(tok, p.text, context()), c.n, opt,
                                          c.stop, rng, [&](int64_t i, const std::string& piece, int32_t t, bool ends) {
                                            const auto k = static_cast<size_t>(i);
                                            std::optional<TokenLogprob> lp;
                                            if (c.logprobs >= 0 && t >= 0 && !ends) {
                                              lp = token_logprob(tok, last_lp[k], t, c.logprobs, chars[k]);
                                              out[k].logprobs.push_back(*lp);
                                            }
                                            chars[k] += static_cast<int64_t>(utf8::count(piece));
                                            return on_piece(i, piece, lp ? &*lp : nullptr);
                                          });
  for (size_t k = 0; k < out.size(); ++k) {
    out[k].text = samples[k].text;
    out[k].tokens = samples[k].tokens;
    out[k].stopped = samples[k].stopped;
  }
  return out;
}

Translator::Translator(LoadedSeq2Seq lm, std::string id, int threads)
    : lm_(std::move(lm)), threads_(threads), id_(std::move(id)) {}

std::vector<std::vector<std::pair<std::string, double>>> Translator::translate(const std::vector<std::string>& sources,
                                                                               const gen::DecodeOptions& opt) {
  std::lock_guard<std::mutex> lock(mu_);
  kernels::ThreadScope threads(threads_);
  std::vector<std::vector<int32_t>> ids;
  for (const std::string& s : sources) ids.push_back(lm_.src_tok->encode(s));
  const auto results = gen::translate_all(*lm_.model, ids, opt, 32);  // atto translate's --batch-size
  std::vector<std::vector<std::pair<std::string, double>>> out;
  for (const auto& hyps : results) {
    out.emplace_back();
    for (int64_t j = 0; j < opt.n_best; ++j) {
      const bool has = j < static_cast<int64_t>(hyps.size());
      out.back().emplace_back(has ? lm_.tgt_tok->decode(hyps[j].tokens) : std::string(), has ? hyps[j].score : 0.0);
    }
  }
  return out;
}

}  // namespace atto::serve
