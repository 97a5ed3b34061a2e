// atto/atto.hpp: the C++ API of atto, RAII classes over the C API of atto/atto.h.
//
//   atto::Model m("runs/names");                       // throws atto::Exception with the message
//   atto::SampleParams p;
//   p.seed = 1337;
//   for (const std::string& s : m.generate("", 5, p)) std::cout << s << "\n";
//   atto::Scores sc = m.score("emma");                 // per-token log-probabilities
//   atto::Context c = m.new_context(2);                // another thread's own context, 2 threads
//
//   atto::TrainParams t;                               // train a run, then load it
//   t.config_json = R"({"data": "names.txt", "steps": 200})";
//   t.out_dir = "runs/tiny";
//   atto::train(t, [](const atto_train_progress& p) { return true; });
//
// Header-only over the C functions (link atto::atto); every failing call throws atto::Exception
// (status() and what(): the C API's message). Model and Context are movable, not copyable; a
// Model's own calls (generate, score, ...) go through its one Context, used by one thread at a
// time; more threads each take a Context of their own on the same Model (docs/api.md).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "atto/atto.h"

namespace atto {

class Exception : public std::runtime_error {
 public:
  Exception(atto_status s, const std::string& msg) : std::runtime_error(msg), status_(s) {}
  atto_status status() const { return status_; }

 private:
  atto_status status_;
};

namespace api_detail {
inline void check(atto_status s) {
  if (s != ATTO_OK) throw Exception(s, atto_last_error());
}
// Takes ownership of a C list of strings.
inline std::vector<std::string> take(atto_strings* list, std::vector<double>* scores = nullptr) {
  std::vector<std::string> out;
  for (size_t i = 0; i < atto_strings_count(list); ++i) {
    size_t len = 0;
    const char* s = atto_strings_get(list, i, &len);
    out.emplace_back(s, len);
    if (scores) scores->push_back(atto_strings_score(list, i));
  }
  atto_strings_free(list);
  return out;
}
// The C API's defaults, read once: the C++ parameter structs start from them, so the two APIs
// cannot disagree.
inline const atto_sample_params& sample_defaults() {
  static const atto_sample_params d = atto_sample_default_params();
  return d;
}
inline const atto_translate_params& translate_defaults() {
  static const atto_translate_params d = atto_translate_default_params();
  return d;
}
inline const atto_train_params& train_defaults() {
  static const atto_train_params d = atto_train_default_params();
  return d;
}
}  // namespace api_detail

inline std::string version() { return atto_version(); }

// The sampler of `atto sample`; defaults are atto_sample_default_params()'s.
struct SampleParams {
  float temperature = api_detail::sample_defaults().temperature;
  int32_t top_k = api_detail::sample_defaults().top_k;
  float top_p = api_detail::sample_defaults().top_p;
  float min_p = api_detail::sample_defaults().min_p;
  float repetition_penalty = api_detail::sample_defaults().repetition_penalty;
  int32_t repetition_last_n = api_detail::sample_defaults().repetition_last_n;
  bool greedy = api_detail::sample_defaults().greedy;
  uint64_t seed = api_detail::sample_defaults().seed;
  int64_t max_tokens = api_detail::sample_defaults().max_tokens;
  std::vector<std::string> stop;
  float frequency_penalty = api_detail::sample_defaults().frequency_penalty;
  float presence_penalty = api_detail::sample_defaults().presence_penalty;
  std::vector<std::pair<int32_t, float>> logit_bias;  // (token id, bias in [-100, 100])
};

// Beam search; defaults are atto_translate_default_params()'s.
struct TranslateParams {
  int32_t beam = api_detail::translate_defaults().beam;
  int32_t n_best = api_detail::translate_defaults().n_best;
  float length_penalty = api_detail::translate_defaults().length_penalty;
  float max_len_a = api_detail::translate_defaults().max_len_a;
  int32_t max_len_b = api_detail::translate_defaults().max_len_b;
};

struct Scores {
  std::vector<int32_t> tokens;
  std::vector<double> logprobs;
  double total_nll = 0.0;
  double mean_nll = 0.0;
};

struct Translation {
  std::string text;
  double score = 0.0;
};

// Streams new text of sample `index`; return false to end that sample.
using TokenCallback = std::function<bool(int64_t index, std::string_view piece, int32_t token)>;

// Runs a model (atto_context): generate, score, logits, translate, with one user's state (the
// kernels' thread count). Any number of Contexts may share one Model, each used by its own thread
// at the same time; a Context is used by one thread at a time and its Model must outlive it.
class Context {
 public:
  explicit Context(const atto_model* m, int32_t n_threads = 0) {
    atto_context_params p = atto_context_default_params();
    p.n_threads = n_threads;
    api_detail::check(atto_context_new(m, &p, &c_));
  }
  ~Context() { atto_context_free(c_); }
  Context(Context&& o) noexcept : c_(std::exchange(o.c_, nullptr)) {}
  Context& operator=(Context&& o) noexcept {
    if (this != &o) {
      atto_context_free(c_);
      c_ = std::exchange(o.c_, nullptr);
    }
    return *this;
  }
  Context(const Context&) = delete;
  Context& operator=(const Context&) = delete;

  void set_threads(int32_t n) { api_detail::check(atto_context_set_threads(c_, n)); }

  // n samples continuing prompt: exactly `atto sample --prompt PROMPT -n N` with the same params.
  std::vector<std::string> generate(std::string_view prompt, int64_t n, const SampleParams& p = {},
                                    const TokenCallback& on_token = nullptr) {
    atto_sample_params c = atto_sample_default_params();
    c.temperature = p.temperature;
    c.top_k = p.top_k;
    c.top_p = p.top_p;
    c.min_p = p.min_p;
    c.repetition_penalty = p.repetition_penalty;
    c.repetition_last_n = p.repetition_last_n;
    c.greedy = p.greedy;
    c.seed = p.seed;
    c.max_tokens = p.max_tokens;
    std::vector<const char*> stops;
    for (const std::string& s : p.stop) stops.push_back(s.c_str());
    c.stop = stops.data();
    c.n_stop = stops.size();
    c.frequency_penalty = p.frequency_penalty;
    c.presence_penalty = p.presence_penalty;
    std::vector<int32_t> bias_ids;
    std::vector<float> bias_values;
    for (const auto& [id, b] : p.logit_bias) bias_ids.push_back(id), bias_values.push_back(b);
    c.logit_bias_tokens = bias_ids.data();
    c.logit_bias_values = bias_values.data();
    c.n_logit_bias = bias_ids.size();
    const std::string prompt_text(prompt);
    atto_strings* out = nullptr;
    auto trampoline = [](int64_t i, const char* piece, size_t len, int32_t token, void* user) {
      return (*static_cast<const TokenCallback*>(user))(i, std::string_view(piece, len), token);
    };
    api_detail::check(atto_generate(c_, prompt_text.c_str(), n, &c, on_token ? +trampoline : nullptr,
                                    const_cast<TokenCallback*>(&on_token), &out));
    return api_detail::take(out);
  }

  Scores score(std::string_view text) {
    atto_scores s{};
    api_detail::check(atto_score(c_, text.data(), text.size(), &s));
    Scores r{std::vector<int32_t>(s.tokens, s.tokens + s.n), std::vector<double>(s.logprobs, s.logprobs + s.n),
             s.total_nll, s.mean_nll};
    atto_scores_free(&s);
    return r;
  }

  std::vector<float> logits(std::span<const int32_t> tokens) {
    atto_model_info i{};
    api_detail::check(atto_model_info_get(atto_context_model(c_), &i));
    std::vector<float> out(static_cast<size_t>(i.vocab_size));
    api_detail::check(atto_logits(c_, tokens.data(), tokens.size(), out.data(), out.size()));
    return out;
  }

  // Per source, n_best translations, best first.
  std::vector<std::vector<Translation>> translate(std::span<const std::string> sources, const TranslateParams& p = {}) {
    std::vector<const char*> src;
    for (const std::string& s : sources) src.push_back(s.c_str());
    const atto_translate_params c{p.beam, p.n_best, p.length_penalty, p.max_len_a, p.max_len_b};
    atto_strings* out = nullptr;
    api_detail::check(atto_translate(c_, src.data(), src.size(), &c, &out));
    std::vector<double> scores;
    const std::vector<std::string> texts = api_detail::take(out, &scores);
    std::vector<std::vector<Translation>> r(sources.size());
    for (size_t i = 0; i < texts.size(); ++i) r[i / static_cast<size_t>(p.n_best)].push_back({texts[i], scores[i]});
    return r;
  }

  atto_context* handle() { return c_; }

 private:
  atto_context* c_ = nullptr;
};

// A trained run directory, opened read-only (atto_model), with a Context of its own for the
// one-thread case: m.generate(...) is m.context().generate(...). For several threads, give each
// its own m.new_context().
class Model {
 public:
  explicit Model(const std::string& run_dir) : m_(open(run_dir)), ctx_(m_.get()) {}

  atto_model_info info() const {
    atto_model_info i{};
    api_detail::check(atto_model_info_get(m_.get(), &i));
    return i;
  }

  std::vector<int32_t> tokenize(std::string_view text, atto_vocab vocab = ATTO_VOCAB_SOURCE) const {
    size_t n = 0;
    atto_status s = atto_tokenize(m_.get(), vocab, text.data(), text.size(), nullptr, 0, &n);
    if (s != ATTO_ERR_BUFFER_TOO_SMALL) api_detail::check(s);
    std::vector<int32_t> ids(n);
    api_detail::check(atto_tokenize(m_.get(), vocab, text.data(), text.size(), ids.data(), ids.size(), &n));
    return ids;
  }
  std::string detokenize(std::span<const int32_t> ids, atto_vocab vocab = ATTO_VOCAB_SOURCE) const {
    size_t len = 0;
    atto_status s = atto_detokenize(m_.get(), vocab, ids.data(), ids.size(), nullptr, 0, &len);
    if (s != ATTO_ERR_BUFFER_TOO_SMALL) api_detail::check(s);
    std::string text(len + 1, '\0');
    api_detail::check(atto_detokenize(m_.get(), vocab, ids.data(), ids.size(), text.data(), text.size(), &len));
    text.resize(len);
    return text;
  }

  // One token's text; special tokens by name ("<eos>").
  std::string token_text(int32_t token, atto_vocab vocab = ATTO_VOCAB_SOURCE) const {
    size_t len = 0;
    atto_status s = atto_token_to_piece(m_.get(), vocab, token, nullptr, 0, &len);
    if (s != ATTO_ERR_BUFFER_TOO_SMALL) api_detail::check(s);
    std::string text(len + 1, '\0');
    api_detail::check(atto_token_to_piece(m_.get(), vocab, token, text.data(), text.size(), &len));
    text.resize(len);
    return text;
  }
  bool is_special(int32_t token, atto_vocab vocab = ATTO_VOCAB_SOURCE) const {
    return atto_token_is_special(m_.get(), vocab, token);
  }

  // A new context on this model (this Model must outlive it).
  Context new_context(int32_t n_threads = 0) const { return Context(m_.get(), n_threads); }
  Context& context() { return ctx_; }

  // The model's own context's calls.
  void set_threads(int32_t n) { ctx_.set_threads(n); }
  std::vector<std::string> generate(std::string_view prompt, int64_t n, const SampleParams& p = {},
                                    const TokenCallback& on_token = nullptr) {
    return ctx_.generate(prompt, n, p, on_token);
  }
  Scores score(std::string_view text) { return ctx_.score(text); }
  std::vector<float> logits(std::span<const int32_t> tokens) { return ctx_.logits(tokens); }
  std::vector<std::vector<Translation>> translate(std::span<const std::string> sources, const TranslateParams& p = {}) {
    return ctx_.translate(sources, p);
  }

  const atto_model* handle() const { return m_.get(); }

 private:
  struct Free {
    void operator()(atto_model* m) const { atto_model_free(m); }
  };
  static atto_model* open(const std::string& run_dir) {
    atto_model* m = nullptr;
    api_detail::check(atto_model_open(run_dir.c_str(), &m));
    return m;
  }
  std::unique_ptr<atto_model, Free> m_;  // declared first: destroyed after the context
  Context ctx_;
};

// Defaults are atto_train_default_params()'s.
struct TrainParams {
  std::string config_json;  // the keys of config.json
  std::string out_dir;
  bool resume = api_detail::train_defaults().resume;
  bool force = api_detail::train_defaults().force;
  int32_t n_threads = api_detail::train_defaults().n_threads;
};

// Trains (or resumes) a run. on_progress returns false to stop: the run saves its state and
// train throws atto::Exception with status ATTO_ERR_STOPPED.
inline atto_train_result train(const TrainParams& p,
                               const std::function<bool(const atto_train_progress&)>& on_progress = nullptr) {
  atto_train_params c = atto_train_default_params();
  c.config_json = p.config_json.c_str();
  c.out_dir = p.out_dir.c_str();
  c.resume = p.resume;
  c.force = p.force;
  c.n_threads = p.n_threads;
  if (on_progress) {
    c.on_progress = [](const atto_train_progress* pr, void* user) {
      return (*static_cast<const std::function<bool(const atto_train_progress&)>*>(user))(*pr);
    };
    c.user = const_cast<std::function<bool(const atto_train_progress&)>*>(&on_progress);
  }
  atto_train_result r{};
  api_detail::check(atto_train(&c, &r));
  return r;
}

// ---- Weights (atto_model_weights) ----------------------------------------------------------
// A model's tensors by name, without a copy; the list keeps them alive (also after the Model):
//   atto::Weights w(model.handle());
//   for (size_t i = 0; i < w.size(); ++i) std::printf("%s %zu\n", w[i].name, w[i].n_elements);
class Weights {
 public:
  explicit Weights(const atto_model* m) { api_detail::check(atto_model_weights(m, &w_)); }
  ~Weights() { atto_weights_free(w_); }
  Weights(Weights&& o) noexcept : w_(std::exchange(o.w_, nullptr)) {}
  Weights& operator=(Weights&& o) noexcept {
    if (this != &o) {
      atto_weights_free(w_);
      w_ = std::exchange(o.w_, nullptr);
    }
    return *this;
  }
  Weights(const Weights&) = delete;
  Weights& operator=(const Weights&) = delete;

  size_t size() const { return atto_weights_count(w_); }
  // The i-th tensor (name, data, shape); throws std::out_of_range past the end.
  atto_weight operator[](size_t i) const {
    atto_weight w{};
    if (!atto_weights_get(w_, i, &w)) throw std::out_of_range("atto::Weights: index out of range");
    return w;
  }
  atto_weights* handle() { return w_; }
  // Hands the list over to the caller (who frees it with atto_weights_free).
  atto_weights* release() { return std::exchange(w_, nullptr); }

 private:
  atto_weights* w_ = nullptr;
};

}  // namespace atto
