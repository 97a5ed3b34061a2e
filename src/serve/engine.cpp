#include "serve/engine.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "generate/generate.h"
#include "generate/stop_strings.h"
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

// Per choice while it is generated.
struct Running {
  gen::StopStrings stops;
  std::vector<double> last_lp;  // log-probabilities of the step being drawn
  Choice choice;
  bool ended = false;
};

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

std::vector<Choice> Engine::generate(const PreparedPrompt& p, const Completion& c, uint64_t seed,
                                     const OnPiece& on_piece) {
  std::lock_guard<std::mutex> lock(mu_);
  kernels::ThreadScope threads(threads_);
  const CharTokenizer& tok = lm_.tokenizer;
  const gen::PromptSet ps = gen::make_prompt_set(tok, p.text, context());
  std::vector<Running> run(static_cast<size_t>(c.n), Running{gen::StopStrings(c.stop), {}, {}, false});
  if (c.max_tokens == 0) {
    std::vector<Choice> none(static_cast<size_t>(c.n));
    return none;
  }
  gen::GenerateOptions opt;
  opt.max_new_tokens = c.max_tokens;
  opt.stop_token = tok.has_boundary() ? tok.boundary_id() : -1;
  opt.sampler = c.sampler;
  if (c.logprobs >= 0) opt.on_logits = [&](int64_t i, std::span<const float> l) { run[i].last_lp = log_softmax(l); };
  opt.on_token = [&](int64_t i, int32_t t) {
    Running& r = run[static_cast<size_t>(i)];
    const std::string piece_text = tok.decode({t});
    TokenLogprob lp;
    if (c.logprobs >= 0) {
      lp.token = piece_text;
      lp.logprob = r.last_lp[static_cast<size_t>(t)];
      lp.text_offset = static_cast<int64_t>(utf8::count(r.choice.text));
      std::vector<int32_t> order(r.last_lp.size());
      for (size_t k = 0; k < order.size(); ++k) order[k] = static_cast<int32_t>(k);
      const auto k = std::min<size_t>(static_cast<size_t>(c.logprobs), order.size());
      std::partial_sort(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(k), order.end(),
                        [&](int32_t a, int32_t b) { return r.last_lp[a] > r.last_lp[b]; });
      for (size_t j = 0; j < k; ++j) lp.top.emplace_back(tok.id_to_string(order[j]), r.last_lp[order[j]]);
    }
    bool done = false;
    const std::string piece = r.stops.push(piece_text, done);
    r.choice.text += piece;
    r.choice.tokens++;
    if (c.logprobs >= 0 && !done) r.choice.logprobs.push_back(lp);
    const bool go_on = on_piece(i, piece, c.logprobs >= 0 && !done ? &lp : nullptr);
    if (done) r.choice.stopped = true;
    r.ended = done || !go_on;
    return !r.ended;
  };
  Rng rng(seed);
  std::vector<Choice> out;
  gen::generate_chunks(*lm_.model, ps, c.n, opt, rng, [&](const gen::SampleChunk& chunk) {
    for (size_t k = 0; k < chunk.samples.size(); ++k) {
      Running& r = run[static_cast<size_t>(chunk.first) + k];
      if (chunk.samples[k].stopped && !r.choice.stopped) r.choice.stopped = true;  // the end token
      if (!r.ended) {
        const std::string rest = r.stops.finish();
        r.choice.text += rest;
        if (!rest.empty()) on_piece(chunk.first + static_cast<int64_t>(k), rest, nullptr);
      }
      out.push_back(std::move(r.choice));
    }
  });
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
