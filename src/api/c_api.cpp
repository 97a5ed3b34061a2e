// atto/api/c_api.cpp: the C API of include/atto/atto.h over the library's layers. Every entry
// point runs its body inside `guarded` (c_api_internal.h): nothing is thrown across the C boundary.
#include "atto/atto.h"

#include <atomic>
#include <cmath>
#include <cstring>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "base/json.h"
#include "base/limits.h"
#include "autograd/tape.h"
#include "base/error.h"
#include "generate/generate.h"
#include "generate/score.h"
#include "generate/seq2seq_decode.h"
#include "kernels/kernels.h"
#include "run/config_fields.h"
#include "api/c_api_internal.h"
#include "run/run_dir.h"
#include "train/trainer.h"

struct atto_strings {
  std::vector<std::string> texts;
  std::vector<double> scores;
};

namespace {

using namespace atto;
using namespace atto::capi;

const atto_model& model_of(const atto_context* c) {
  need(c, "the context");
  return *c->model;
}

const LoadedModel& need_gpt(const atto_context* c, const char* fn) {
  const atto_model* m = &model_of(c);
  if (!m->gpt)
    fail_with(ATTO_ERR_INVALID_ARGUMENT,
              fmt::format("{}: this model is an encoder-decoder (seq2seq); use atto_translate", fn));
  return *m->gpt;
}

const LoadedSeq2Seq& need_s2s(const atto_context* c, const char* fn) {
  const atto_model* m = &model_of(c);
  if (!m->s2s)
    fail_with(ATTO_ERR_INVALID_ARGUMENT, fmt::format("{}: this model is a GPT; use atto_generate or atto_score", fn));
  return *m->s2s;
}

const Tokenizer& tokenizer_of(const atto_model& m, atto_vocab vocab) {
  if (vocab != ATTO_VOCAB_SOURCE && vocab != ATTO_VOCAB_TARGET)
    fail_with(ATTO_ERR_INVALID_ARGUMENT, fmt::format("unknown vocabulary {}", static_cast<int>(vocab)));
  return vocab == ATTO_VOCAB_TARGET ? *m.s2s->tgt_tok : *m.s2s->src_tok;
}

int64_t vocab_size_of(const atto_model& m, atto_vocab vocab) {
  if (m.gpt) {
    if (vocab != ATTO_VOCAB_GPT) fail_with(ATTO_ERR_INVALID_ARGUMENT, "a GPT has one vocabulary: ATTO_VOCAB_GPT");
    return m.gpt->tokenizer->vocab_size();
  }
  return tokenizer_of(m, vocab).vocab_size();
}

void check_context_threads(int32_t n_threads) {
  try {
    check_threads(n_threads, "n_threads");
  } catch (const Error& e) {
    fail_with(ATTO_ERR_INVALID_ARGUMENT, e.what());
  }
}

std::string_view text_of(const char* text, size_t len, const char* what) {
  if (!text && len > 0) fail_with(ATTO_ERR_INVALID_ARGUMENT, fmt::format("{} is NULL", what));
  return text ? std::string_view(text, len) : std::string_view();
}

// Copies `n` items into a caller's buffer of `capacity`, or reports the size needed.
template <typename T>
void give(const T* items, size_t n, T* buffer, size_t capacity, size_t* needed, const char* what) {
  if (needed) *needed = n;
  if (n > capacity || (n > 0 && !buffer))
    fail_with(ATTO_ERR_BUFFER_TOO_SMALL,
              fmt::format("{} needs {} elements; the buffer holds {}", what, n, buffer ? capacity : 0));
  if (n > 0) std::memcpy(buffer, items, n * sizeof(T));
}

// --- generation ------------------------------------------------------------------------------

gen::GenerateOptions generate_options(const LoadedModel& lm, const atto_sample_params& p) {
  gen::GenerateOptions opt;
  const bool lines = lm.tokenizer->has_boundary();
  const int64_t block = lm.config.gpt.block_size;
  if (p.max_tokens < 0) fail_with(ATTO_ERR_INVALID_ARGUMENT, "max_tokens must be >= 0 (0 = default)");
  opt.max_new_tokens = gen::default_max_new_tokens(p.max_tokens, lines, block);
  opt.stop_token = lines ? lm.tokenizer->boundary_id() : -1;
  opt.sampler.temperature = p.temperature;
  opt.sampler.top_k = p.top_k;
  opt.sampler.top_p = p.top_p;
  opt.sampler.min_p = p.min_p;
  opt.sampler.repetition_penalty = p.repetition_penalty;
  opt.sampler.repetition_last_n = p.repetition_last_n;
  opt.sampler.greedy = p.greedy;
  opt.sampler.frequency_penalty = p.frequency_penalty;
  opt.sampler.presence_penalty = p.presence_penalty;
  if (p.n_logit_bias > 0 && (!p.logit_bias_tokens || !p.logit_bias_values))
    fail_with(ATTO_ERR_INVALID_ARGUMENT, "logit_bias_tokens or logit_bias_values is NULL but n_logit_bias > 0");
  for (size_t i = 0; i < p.n_logit_bias; ++i)
    opt.sampler.logit_bias.emplace_back(p.logit_bias_tokens[i], p.logit_bias_values[i]);
  opt.sampler.validate(gen::SamplerOptions::Names::Fields);
  opt.sampler.check_vocab(lm.tokenizer->vocab_size(), gen::SamplerOptions::Names::Fields);
  return opt;
}

void run_generate(atto_context* c, const char* prompt, int64_t n, const atto_sample_params& p, atto_token_callback cb,
                  void* user, atto_strings** out) {
  const LoadedModel& lm = need_gpt(c, "atto_generate");
  if (n < 1) fail_with(ATTO_ERR_INVALID_ARGUMENT, fmt::format("n_samples must be at least 1, got {}", n));
  // Every sample is returned at once (atto sample streams any number): a bound, not an allocation
  // failure.
  constexpr int64_t kMaxSamples = int64_t{1} << 20;
  if (n > kMaxSamples)
    fail_with(ATTO_ERR_INVALID_ARGUMENT,
              fmt::format("n_samples must be at most {} (they are returned together; call again for more), got {}",
                          kMaxSamples, n));
  if (p.n_stop > 0 && !p.stop) fail_with(ATTO_ERR_INVALID_ARGUMENT, "stop is NULL but n_stop > 0");
  std::vector<std::string> stop_list;
  for (size_t i = 0; i < p.n_stop; ++i) stop_list.emplace_back(need_str(p.stop[i], "a stop string"));
  gen::GenerateOptions opt = generate_options(lm, p);
  const gen::PromptSet ps = gen::make_prompt_set(*lm.tokenizer, prompt ? prompt : "", lm.config.gpt.block_size);
  auto result = std::make_unique<atto_strings>();
  Rng rng(p.seed);
  kernels::ThreadScope threads(c->threads);
  const auto samples = gen::generate_text(
      *lm.model, *lm.tokenizer, ps, n, opt, stop_list, rng, [&](int64_t i, const std::string& piece, int32_t t, bool) {
        return cb == nullptr || piece.empty() || cb(i, piece.data(), piece.size(), t, user);
      });
  for (const gen::TextSample& sample : samples) {
    result->texts.push_back(ps.text + sample.text);
    result->scores.push_back(static_cast<double>(sample.tokens));
  }
  *out = result.release();
}

// --- training --------------------------------------------------------------------------------
atto_metric metric_of(Metric m) { return m == Metric::Bleu ? ATTO_METRIC_BLEU : ATTO_METRIC_VAL_LOSS; }

// The keys of a JSON object, sections flattened.
std::vector<std::string> keys_of(const nlohmann::json& j) {
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) {
    if ((k == "model" || k == "train" || k == "data") && v.is_object()) {
      for (const auto& [k2, v2] : v.items()) keys.push_back(k2);
    } else {
      keys.push_back(k);
    }
  }
  return keys;
}

RunConfig train_config(const atto_train_params& p) {
  const std::string out_dir = need_str(p.out_dir, "out_dir");
  nlohmann::json j = nlohmann::json::object();
  if (p.config_json && *p.config_json) {
    try {
      j = json_util::parse(p.config_json, "config_json");
    } catch (const Error& e) {
      fail_with(ATTO_ERR_INVALID_ARGUMENT, e.what());
    }
    if (!j.is_object()) fail_with(ATTO_ERR_INVALID_ARGUMENT, "config_json must be a JSON object");
  }
  if (p.resume) {
    RunConfig cfg = load_run_config(out_dir);
    for (const std::string& key : keys_of(j))
      if (!changeable_on_resume(key)) refuse_on_resume(fmt::format("config_json key '{}'", key), false);
    apply_config_json(cfg, j, "config_json");
    return cfg;
  }
  RunConfig cfg = default_run_config(Task::Gpt);
  apply_config_json(cfg, j, "config_json");
  check_new_run_inputs(cfg, [](const std::string& key) { return fmt::format("\"{}\" in config_json", key); });
  return cfg;
}

}  // namespace

extern "C" {

#define ATTO_STRINGIFY_(x) #x
#define ATTO_STRINGIFY(x) ATTO_STRINGIFY_(x)
const char* atto_version(void) {  // atto.h's numbers, which CMakeLists.txt's project version equals
  return ATTO_STRINGIFY(ATTO_VERSION_MAJOR) "." ATTO_STRINGIFY(ATTO_VERSION_MINOR) "." ATTO_STRINGIFY(ATTO_VERSION_PATCH);
}
const char* atto_last_error(void) { return g_last_error.c_str(); }

const char* atto_status_name(atto_status s) {
  switch (s) {
    case ATTO_OK: return "ATTO_OK";
    case ATTO_ERR_INVALID_ARGUMENT: return "ATTO_ERR_INVALID_ARGUMENT";
    case ATTO_ERR_BAD_INPUT: return "ATTO_ERR_BAD_INPUT";
    case ATTO_ERR_BUFFER_TOO_SMALL: return "ATTO_ERR_BUFFER_TOO_SMALL";
    case ATTO_ERR_STOPPED: return "ATTO_ERR_STOPPED";
    case ATTO_ERR_INTERNAL: return "ATTO_ERR_INTERNAL";
  }
  return "ATTO_ERR_UNKNOWN";
}

size_t atto_strings_count(const atto_strings* s) { return s ? s->texts.size() : 0; }

const char* atto_strings_get(const atto_strings* s, size_t i, size_t* len) {
  if (!s || i >= s->texts.size()) return nullptr;
  if (len) *len = s->texts[i].size();
  return s->texts[i].c_str();
}

double atto_strings_score(const atto_strings* s, size_t i) {
  return s && i < s->scores.size() ? s->scores[i] : std::nan("");
}

void atto_strings_free(atto_strings* s) { delete s; }

atto_status atto_model_open(const char* run_dir, atto_model** out) {
  if (out) *out = nullptr;
  return guarded([&] {
    need(out, "out");
    const std::string dir = need_str(run_dir, "run_dir");
    auto m = std::make_unique<atto_model>();
    m->task = load_run_config(dir).task;
    if (m->task == Task::Seq2Seq) {
      m->s2s = load_seq2seq_run(dir);
    } else {
      m->gpt = load_run(dir, WeightStorage::Quantized);  // q8_0/q4_0/Q4_K/Q6_K GGUF weights stay quantized
    }
    *out = m.release();
  });
}

void atto_model_free(atto_model* m) { delete m; }

atto_status atto_model_info_get(const atto_model* m, atto_model_info* out) {
  return guarded([&] {
    const atto_model& model = need(m, "the model");
    atto_model_info& info = need(out, "out");
    info = {};
    if (model.gpt) {
      const GPTConfig& c = model.gpt->model->config();
      info.task = ATTO_TASK_GPT;
      info.vocab_size = info.tgt_vocab_size = static_cast<int32_t>(c.vocab_size);
      info.context = c.block_size;
      info.n_params = model.gpt->model->num_parameters();
      info.d_model = static_cast<int32_t>(c.d_model);
      info.n_heads = static_cast<int32_t>(c.n_heads);
      info.n_kv_heads = static_cast<int32_t>(c.kv_heads());
      info.rope_base = c.rope() ? c.rope_base : 0.0f;
      info.n_layers = static_cast<int32_t>(c.n_layers);
      info.lines_mode = model.gpt->tokenizer->has_boundary();
      info.eos_token = info.lines_mode ? model.gpt->tokenizer->boundary_id() : -1;
    } else {
      const Seq2SeqConfig& c = model.s2s->model->config();
      info.task = ATTO_TASK_SEQ2SEQ;
      info.vocab_size = static_cast<int32_t>(c.src_vocab);
      info.tgt_vocab_size = static_cast<int32_t>(c.tgt_vocab);
      info.context = c.max_len;
      info.n_params = model.s2s->model->num_parameters();
      info.d_model = static_cast<int32_t>(c.d_model);
      info.n_heads = info.n_kv_heads = static_cast<int32_t>(c.n_heads);
      info.n_layers = static_cast<int32_t>(c.n_enc_layers);
      info.n_dec_layers = static_cast<int32_t>(c.n_dec_layers);
      info.lines_mode = true;
      info.eos_token = kEosId;
    }
  });
}

atto_context_params atto_context_default_params(void) {
  atto_context_params p{};
  p.n_threads = 0;
  return p;
}

atto_status atto_context_new(const atto_model* m, const atto_context_params* params, atto_context** out) {
  if (out) *out = nullptr;
  return guarded([&] {
    need(out, "out");
    need(m, "the model");
    const atto_context_params p = params ? *params : atto_context_default_params();
    auto c = std::make_unique<atto_context>();
    c->model = m;
    check_context_threads(p.n_threads);
    c->threads = p.n_threads;
    *out = c.release();
  });
}

void atto_context_free(atto_context* c) { delete c; }

const atto_model* atto_context_model(const atto_context* c) { return c ? c->model : nullptr; }

atto_status atto_context_set_threads(atto_context* c, int32_t n_threads) {
  return guarded([&] {
    need(c, "the context");
    check_context_threads(n_threads);
    c->threads = n_threads;
  });
}

atto_status atto_tokenize(const atto_model* m, atto_vocab vocab, const char* text, size_t text_len, int32_t* tokens,
                          size_t capacity, size_t* n_tokens) {
  return guarded([&] {
    const atto_model& model = need(m, "the model");
    const std::string_view s = text_of(text, text_len, "text");
    vocab_size_of(model, vocab);  // checks the vocabulary
    const std::vector<int32_t> ids = model.gpt ? model.gpt->tokenizer->encode(s) : tokenizer_of(model, vocab).encode(s);
    give(ids.data(), ids.size(), tokens, capacity, n_tokens, "the tokens");
  });
}

atto_status atto_detokenize(const atto_model* m, atto_vocab vocab, const int32_t* tokens, size_t n_tokens, char* text,
                            size_t capacity, size_t* len) {
  return guarded([&] {
    const atto_model& model = need(m, "the model");
    if (!tokens && n_tokens > 0) fail_with(ATTO_ERR_INVALID_ARGUMENT, "tokens is NULL");
    const std::vector<int32_t> ids(tokens, tokens + n_tokens);
    const int64_t V = vocab_size_of(model, vocab);
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] < 0 || ids[i] >= V)
        fail_with(ATTO_ERR_INVALID_ARGUMENT, fmt::format("token {} at position {} is outside [0, {})", ids[i], i, V));
    const std::string s = model.gpt ? model.gpt->tokenizer->decode(ids) : tokenizer_of(model, vocab).decode(ids);
    if (len) *len = s.size();
    if (s.size() + 1 > capacity || !text)
      fail_with(ATTO_ERR_BUFFER_TOO_SMALL,
                fmt::format("the text needs {} bytes with its NUL; the buffer holds {}", s.size() + 1, capacity));
    std::memcpy(text, s.c_str(), s.size() + 1);
  });
}

atto_status atto_token_to_piece(const atto_model* m, atto_vocab vocab, int32_t token, char* text, size_t capacity,
                                size_t* len) {
  return guarded([&] {
    const atto_model& model = need(m, "the model");
    const int64_t V = vocab_size_of(model, vocab);
    if (token < 0 || token >= V)
      fail_with(ATTO_ERR_INVALID_ARGUMENT, fmt::format("token {} is outside [0, {})", token, V));
    const std::string s =
        model.gpt ? model.gpt->tokenizer->id_to_string(token) : tokenizer_of(model, vocab).id_to_string(token);
    if (len) *len = s.size();
    if (s.size() + 1 > capacity || !text)
      fail_with(ATTO_ERR_BUFFER_TOO_SMALL,
                fmt::format("the text needs {} bytes with its NUL; the buffer holds {}", s.size() + 1, capacity));
    std::memcpy(text, s.c_str(), s.size() + 1);
  });
}

bool atto_token_is_special(const atto_model* m, atto_vocab vocab, int32_t token) {
  if (!m || token < 0) return false;
  if (m->gpt) return m->gpt->tokenizer->boundary_id() == token;
  return token < kNumSpecialTokens;
}

atto_sample_params atto_sample_default_params(void) {
  const gen::SamplerOptions d;
  atto_sample_params p{};
  p.temperature = d.temperature;
  p.top_k = d.top_k;
  p.top_p = d.top_p;
  p.min_p = d.min_p;
  p.repetition_penalty = d.repetition_penalty;
  p.repetition_last_n = d.repetition_last_n;
  p.greedy = d.greedy;
  p.seed = gen::kDefaultSampleSeed;  // atto sample's default
  p.max_tokens = 0;
  p.stop = nullptr;
  p.n_stop = 0;
  p.frequency_penalty = d.frequency_penalty;
  p.presence_penalty = d.presence_penalty;
  p.logit_bias_tokens = nullptr;
  p.logit_bias_values = nullptr;
  p.n_logit_bias = 0;
  return p;
}

atto_status atto_generate(atto_context* c, const char* prompt, int64_t n_samples, const atto_sample_params* params,
                          atto_token_callback on_token, void* user, atto_strings** out) {
  if (out) *out = nullptr;
  return guarded([&] {
    need(out, "out");
    const atto_sample_params p = params ? *params : atto_sample_default_params();
    run_generate(c, prompt, n_samples, p, on_token, user, out);
  });
}

atto_status atto_score(atto_context* c, const char* text, size_t text_len, atto_scores* out) {
  if (out) *out = atto_scores{};
  return guarded([&] {
    const LoadedModel& lm = need_gpt(c, "atto_score");
    atto_scores& s = need(out, "out");
    const std::string_view t = text_of(text, text_len, "text");
    kernels::ThreadScope threads(c->threads);
    const gen::ScoreResult r = gen::score_text(*lm.model, *lm.tokenizer, t);
    const size_t n = r.targets.size();
    auto tokens = std::make_unique<int32_t[]>(n + 1);
    auto logprobs = std::make_unique<double[]>(n + 1);
    std::copy(r.targets.begin(), r.targets.end(), tokens.get());
    std::copy(r.logprobs.begin(), r.logprobs.end(), logprobs.get());
    s.n = n;
    s.total_nll = r.total_nll();
    s.mean_nll = r.mean_nll();
    s.tokens = tokens.release();
    s.logprobs = logprobs.release();
  });
}

void atto_scores_free(atto_scores* s) {
  if (!s) return;
  delete[] s->tokens;
  delete[] s->logprobs;
  *s = atto_scores{};
}

atto_status atto_logits(atto_context* ctx, const int32_t* tokens, size_t n_tokens, float* logits, size_t capacity) {
  return guarded([&] {
    const LoadedModel& lm = need_gpt(ctx, "atto_logits");
    const GPTConfig& c = lm.model->config();
    if (n_tokens == 0 || !tokens) fail_with(ATTO_ERR_INVALID_ARGUMENT, "atto_logits needs at least one token");
    if (static_cast<int64_t>(n_tokens) > c.block_size)
      fail_with(ATTO_ERR_INVALID_ARGUMENT,
                fmt::format("{} tokens exceed the model's context of {}", n_tokens, c.block_size));
    const std::vector<int32_t> ids(tokens, tokens + n_tokens);
    for (size_t i = 0; i < ids.size(); ++i)
      if (ids[i] < 0 || ids[i] >= c.vocab_size)
        fail_with(ATTO_ERR_INVALID_ARGUMENT,
                  fmt::format("token {} at position {} is outside [0, {})", ids[i], i, c.vocab_size));
    kernels::ThreadScope threads(ctx->threads);
    NoGradGuard no_grad;
    const Tensor out = lm.model->forward(ids, 1, static_cast<int64_t>(n_tokens)).contiguous();
    const float* last = out.data() + (static_cast<int64_t>(n_tokens) - 1) * c.vocab_size;
    give(last, static_cast<size_t>(c.vocab_size), logits, capacity, nullptr, "the logits");
  });
}

atto_translate_params atto_translate_default_params(void) {
  const gen::DecodeOptions d;
  atto_translate_params p{};
  p.beam = static_cast<int32_t>(d.beam);
  p.n_best = static_cast<int32_t>(d.n_best);
  p.length_penalty = d.length_penalty;
  p.max_len_a = d.max_len_a;
  p.max_len_b = static_cast<int32_t>(d.max_len_b);
  return p;
}

atto_status atto_translate(atto_context* c, const char* const* sources, size_t n_sources,
                           const atto_translate_params* params, atto_strings** out) {
  if (out) *out = nullptr;
  return guarded([&] {
    const LoadedSeq2Seq& lm = need_s2s(c, "atto_translate");
    need(out, "out");
    if (!sources && n_sources > 0) fail_with(ATTO_ERR_INVALID_ARGUMENT, "sources is NULL");
    const atto_translate_params p = params ? *params : atto_translate_default_params();
    gen::DecodeOptions opt;
    opt.beam = p.beam;
    opt.n_best = p.n_best;
    opt.length_penalty = p.length_penalty;
    opt.max_len_a = p.max_len_a;
    opt.max_len_b = p.max_len_b;
    opt.validate();
    std::vector<std::vector<int32_t>> ids;
    for (size_t i = 0; i < n_sources; ++i) ids.push_back(lm.src_tok->encode(need_str(sources[i], "a source")));
    kernels::ThreadScope threads(c->threads);
    const auto results = gen::translate_all(*lm.model, ids, opt, 32);  // atto translate's --batch-size
    auto r = std::make_unique<atto_strings>();
    for (const auto& hyps : results) {
      for (int64_t j = 0; j < opt.n_best; ++j) {  // an empty source has no hypotheses: empty strings
        const bool has = j < static_cast<int64_t>(hyps.size());
        r->texts.push_back(has ? lm.tgt_tok->decode(hyps[j].tokens) : std::string());
        r->scores.push_back(has ? hyps[j].score : 0.0);
      }
    }
    *out = r.release();
  });
}

atto_status atto_translate_logits(atto_context* ctx, const char* source, const int32_t* prefix, size_t n_prefix,
                                  float* logits, size_t capacity) {
  return guarded([&] {
    const LoadedSeq2Seq& lm = need_s2s(ctx, "atto_translate_logits");
    const Seq2SeqConfig& c = lm.model->config();
    std::vector<int32_t> src = lm.src_tok->encode(need_str(source, "source"));
    if (src.empty()) fail_with(ATTO_ERR_INVALID_ARGUMENT, "the source is empty");
    if (static_cast<int64_t>(src.size()) > c.max_len) src.resize(static_cast<size_t>(c.max_len));
    if (!prefix && n_prefix > 0) fail_with(ATTO_ERR_INVALID_ARGUMENT, "prefix is NULL");
    std::vector<int32_t> tgt = {kBosId};
    for (size_t i = 0; i < n_prefix; ++i) {
      if (prefix[i] < 0 || prefix[i] >= c.tgt_vocab)
        fail_with(ATTO_ERR_INVALID_ARGUMENT,
                  fmt::format("prefix token {} at position {} is outside [0, {})", prefix[i], i, c.tgt_vocab));
      tgt.push_back(prefix[i]);
    }
    const auto T = static_cast<int64_t>(tgt.size());
    if (T > c.max_len)
      fail_with(ATTO_ERR_INVALID_ARGUMENT, fmt::format("the prefix exceeds the model's max_len {}", c.max_len));
    kernels::ThreadScope threads(ctx->threads);
    NoGradGuard no_grad;
    const auto S = static_cast<int64_t>(src.size());
    const std::vector<uint8_t> mask(src.size(), 1);
    Seq2Seq::Cache cache = lm.model->make_cache(lm.model->encode(src, 1, S, mask), mask, T);
    const Tensor out = lm.model->decode_cached(tgt, 1, T, cache).contiguous();
    give(out.data() + (T - 1) * c.tgt_vocab, static_cast<size_t>(c.tgt_vocab), logits, capacity, nullptr, "the logits");
  });
}

atto_train_params atto_train_default_params(void) { return atto_train_params{}; }

atto_status atto_train(const atto_train_params* params, atto_train_result* result) {
  if (result) *result = atto_train_result{};
  return guarded([&] {
    const atto_train_params& p = need(params, "params");
    RunConfig cfg = train_config(p);
    std::atomic<bool> stop{false};
    TrainerOptions o;
    o.out_dir = p.out_dir;
    o.resume = p.resume;
    o.force = p.force;
    o.progress = nullptr;
    o.stop = &stop;
    if (p.on_progress) {
      o.on_progress = [&](const TrainProgress& t) {
        const atto_train_progress c{t.step,       t.total_steps,     t.train_loss,   t.val_loss,
                                    t.best_score, metric_of(t.metric), t.elapsed_s, t.tokens_per_s};
        if (!p.on_progress(&c, p.user)) stop = true;
      };
    }
    if (p.n_threads < 0)
      fail_with(ATTO_ERR_INVALID_ARGUMENT,
                fmt::format("n_threads must be >= 0 (0 = the config's \"threads\"), got {}", p.n_threads));
    if (p.n_threads > 0) {  // config.json records it, as --threads does
      cfg.train.threads = p.n_threads;
      cfg.train.origin["threads"] = "n_threads";  // validation names it
    }
    cfg.train.validate();  // before the threads are made
    kernels::ThreadScope threads(cfg.train.threads);
    const TrainResult r = train_run(cfg, o);
    if (result) {
      result->steps = r.steps;
      result->best_score = r.best_score;
      result->metric = metric_of(r.metric);
      result->best_step = r.best_step;
      result->last_train_loss = r.last_train_loss;
      result->seconds = r.seconds;
      result->n_params = r.num_parameters;
      result->interrupted = r.interrupted;
    }
    if (r.interrupted)
      fail_with(ATTO_ERR_STOPPED, fmt::format("training stopped by the progress callback at step {}; its state is "
                                              "saved in {}: continue with resume = true",
                                              r.steps, p.out_dir));
  });
}

}  // extern "C"
