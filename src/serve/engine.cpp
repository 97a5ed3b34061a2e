#include "serve/engine.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <optional>

#include "autograd/tape.h"
#include "generate/decoder.h"
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

namespace {

// The options, once the CPU is known to run their precision: the scheduler thread must not be
// the one to find out.
EngineOptions checked(EngineOptions o) {
  if (o.precision == kernels::Precision::BF16) kernels::require_bf16("--precision bf16");
  return o;
}

}  // namespace

Engine::Engine(LoadedModel lm, std::string id, EngineOptions opt)
    : lm_(std::move(lm)), id_(std::move(id)), opt_(checked(opt)), scheduler_([this] { schedule(); }) {}

Engine::~Engine() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  scheduler_.join();
}

PreparedPrompt Engine::prepare(const std::string& prompt, const char* param) const {
  gen::PromptSet ps;
  try {
    ps = gen::make_prompt_set(*lm_.tokenizer, prompt, context());
  } catch (const Error& e) {
    throw RequestError(400, fmt::format("'{}': {}", param, e.what()), param, "invalid_prompt");
  }
  if (ps.cropped > 0)
    throw RequestError(400,
                       fmt::format("'{}': the prompt takes {} tokens; this model's context is {}", param,
                                   static_cast<int64_t>(ps.base.size()) + ps.cropped, context()),
                       param, "context_length_exceeded");
  return {prompt, static_cast<int64_t>(lm_.tokenizer->encode(prompt).size()), {}};
}

PreparedPrompt Engine::prepare_ids(const std::vector<int32_t>& ids) const {
  const GptTokenizer& tok = *lm_.tokenizer;
  const int64_t V = tok.vocab_size();
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= V)
      throw RequestError(400,
                         fmt::format("'prompt': token id {} (at position {}) is outside this model's vocabulary "
                                     "[0, {})",
                                     ids[i], i, V),
                         "prompt", "invalid_prompt");
  const int64_t n = static_cast<int64_t>(ids.size()) + (tok.has_boundary() ? 1 : 0);
  if (n > context())
    throw RequestError(400,
                       fmt::format("'prompt': the prompt takes {} tokens; this model's context is {}", n, context()),
                       "prompt", "context_length_exceeded");
  std::string text;
  try {
    text = tok.decode(ids);
  } catch (const Error& e) {
    throw RequestError(400, fmt::format("'prompt': {}", e.what()), "prompt", "invalid_prompt");
  }
  return {std::move(text), static_cast<int64_t>(ids.size()), ids};
}

nlohmann::json Engine::tokenize(const TokenizeRequest& r) const {
  const GptTokenizer& tok = *lm_.tokenizer;
  std::vector<int32_t> ids;
  if (r.add_special && tok.has_boundary()) ids.push_back(tok.boundary_id());
  try {
    const std::vector<int32_t> text_ids = tok.encode(r.content);
    ids.insert(ids.end(), text_ids.begin(), text_ids.end());
  } catch (const Error& e) {
    throw RequestError(400, fmt::format("'content': {}", e.what()), "content", "invalid_value");
  }
  const size_t cap = r.with_pieces ? kMaxTokenizePieces : kMaxTokenizeIds;
  if (ids.size() > cap)
    throw RequestError(400,
                       fmt::format("'content': the text takes {} tokens; /tokenize answers at most {}{} (send it "
                                   "in parts)",
                                   ids.size(), cap, r.with_pieces ? " with pieces" : ""),
                       "content", "invalid_value");
  if (!r.with_pieces) return {{"tokens", ids}};
  nlohmann::json out = nlohmann::json::array();
  for (int32_t t : ids) {
    const std::string piece = tok.decode({t});
    nlohmann::json p = utf8::find_invalid(piece) ? nlohmann::json(std::vector<uint8_t>(piece.begin(), piece.end()))
                                                 : nlohmann::json(piece);
    out.push_back({{"id", t}, {"piece", std::move(p)}});
  }
  return {{"tokens", std::move(out)}};
}

std::string Engine::detokenize(const std::vector<int32_t>& ids) const {
  const int64_t V = lm_.tokenizer->vocab_size();
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] >= V)
      throw RequestError(400,
                         fmt::format("'tokens': token id {} (at position {}) is outside this model's vocabulary [0, {})",
                                     ids[i], i, V),
                         "tokens", "invalid_value");
  return lm_.tokenizer->decode(ids);
}

void Engine::check_sampler(const gen::SamplerOptions& s) const {
  const int64_t V = lm_.tokenizer->vocab_size();
  for (const auto& [id, bias] : s.logit_bias)
    if (id >= V)
      throw RequestError(400, fmt::format("'logit_bias': token id {} is outside this model's vocabulary [0, {})", id, V),
                         "logit_bias", "invalid_value");
}

namespace {

// The prompt set of a prepared prompt: its text's (make_prompt_set), or its ids as given.
gen::PromptSet prompt_set(const GptTokenizer& tok, const PreparedPrompt& p, int64_t context) {
  if (p.ids.empty()) return gen::make_prompt_set(tok, p.text, context);
  gen::PromptSet ps;
  ps.text = p.text;
  if (tok.has_boundary()) ps.base.push_back(tok.boundary_id());
  ps.base.insert(ps.base.end(), p.ids.begin(), p.ids.end());
  return ps;
}

// The top k alternatives and the chosen token's log-probability, from a step's log-softmax.
TokenLogprob token_logprob(const GptTokenizer& tok, const std::vector<double>& lp, int32_t t, int64_t k,
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

// A request in the scheduler: its decoder and text state (the scheduler's alone), and the pieces
// it has made for the waiting HTTP thread (under mu).
struct Engine::Job {
  Job(const GptTokenizer& tok, const PreparedPrompt& p, const Completion& c, uint64_t seed, int64_t context)
      : c(c), ps(prompt_set(tok, p, context)), rng(seed), out(static_cast<size_t>(c.n)) {}
  struct Event {
    int64_t choice;
    std::string piece;
    std::optional<TokenLogprob> lp;
  };
  const Completion c;
  const gen::PromptSet ps;
  Rng rng;
  std::unique_ptr<gen::Decoder> dec;
  std::unique_ptr<gen::TextStream> text;
  std::vector<std::vector<double>> last_lp;  // the step being drawn, per choice
  std::vector<int64_t> chars;                // characters of text so far, per choice
  std::vector<Choice> out;
  std::atomic<bool> cancelled{false};
  std::mutex mu;
  std::condition_variable cv;
  std::deque<Event> events;
  bool finished = false;
  std::exception_ptr error;

  void push(Event e) {
    std::lock_guard<std::mutex> lock(mu);
    events.push_back(std::move(e));
    cv.notify_one();
  }
};

int64_t Engine::waiting() const {
  std::lock_guard<std::mutex> lock(mu_);
  return static_cast<int64_t>(pending_.size());
}

int64_t Engine::running() const {
  std::lock_guard<std::mutex> lock(mu_);
  return running_;
}

std::vector<Choice> Engine::generate(const PreparedPrompt& p, const Completion& c, uint64_t seed,
                                     const OnPiece& on_piece) {
  if (c.max_tokens == 0) return std::vector<Choice>(static_cast<size_t>(c.n));
  auto job = std::make_shared<Job>(*lm_.tokenizer, p, c, seed, context());
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (static_cast<int64_t>(pending_.size()) >= opt_.queue_max)
      throw RequestError(503, "the server is busy: too many requests are waiting; retry later", "", "server_busy");
    pending_.push_back(job);
  }
  cv_.notify_all();
  for (bool finished = false; !finished;) {
    std::deque<Job::Event> events;
    {
      std::unique_lock<std::mutex> lock(job->mu);
      job->cv.wait(lock, [&] { return !job->events.empty() || job->finished; });
      events.swap(job->events);
      finished = job->finished;
    }
    for (const Job::Event& e : events)
      if (!job->cancelled && !on_piece(e.choice, e.piece, e.lp ? &*e.lp : nullptr)) job->cancelled = true;
  }
  if (job->error) std::rethrow_exception(job->error);
  return std::move(job->out);
}

// A request joins the batch: its prompts drawn and encoded as `atto sample` does (generate_text
// of n samples: one chunk, since n <= 16 < max_batch).
void Engine::admit(Job& job) {
  const GptTokenizer& tok = *lm_.tokenizer;
  const Completion& c = job.c;
  gen::GenerateOptions opt;
  opt.max_new_tokens = c.max_tokens;
  opt.stop_token = tok.has_boundary() ? tok.boundary_id() : -1;
  opt.sampler = c.sampler;
  job.last_lp.resize(static_cast<size_t>(c.n));
  job.chars.assign(static_cast<size_t>(c.n), 0);
  if (c.logprobs >= 0)
    opt.on_logits = [&job](int64_t i, std::span<const float> l) {
      job.last_lp[static_cast<size_t>(i)] = log_softmax(l);
    };
  job.text = std::make_unique<gen::TextStream>(
      tok, c.n, c.stop, [&job, &tok](int64_t i, const std::string& piece, int32_t t, bool ends) {
        const auto k = static_cast<size_t>(i);
        std::optional<TokenLogprob> lp;
        if (job.c.logprobs >= 0 && t >= 0 && !ends) {
          lp = token_logprob(tok, job.last_lp[k], t, job.c.logprobs, job.chars[k]);
          job.out[k].logprobs.push_back(*lp);
        }
        job.chars[k] += static_cast<int64_t>(utf8::count(piece));
        if (!piece.empty() || lp) job.push({i, piece, std::move(lp)});
        return !job.cancelled;
      });
  opt.on_token = [this, &job](int64_t i, int32_t t) {
    generated_++;
    return job.text->on_token(i, t);
  };
  job.dec = std::make_unique<gen::Decoder>(*lm_.model, std::move(opt));
  job.dec->start(job.ps.draw(c.n, job.rng));
}

// A request leaves the batch: its choices (the text held back released) or its error.
void Engine::retire(Job& job, std::exception_ptr error) {
  if (!error && job.dec) {
    const std::vector<gen::Sample> samples = job.dec->take_samples();
    for (size_t k = 0; k < samples.size(); ++k) job.text->finish(static_cast<int64_t>(k), samples[k]);
    std::vector<gen::TextSample> texts = job.text->take();
    for (size_t k = 0; k < texts.size(); ++k) {
      job.out[k].text = std::move(texts[k].text);
      job.out[k].tokens = texts[k].tokens;
      job.out[k].stopped = texts[k].stopped;
    }
  }
  job.dec.reset();  // the KV cache goes now, not when the HTTP thread lets go of the job
  std::lock_guard<std::mutex> lock(job.mu);
  job.error = error;
  job.finished = true;
  job.cv.notify_one();
}

void Engine::schedule() {
  kernels::ThreadScope threads(opt_.threads);
  const kernels::PrecisionScope precision(opt_.precision, &bf16_);
  NoGradGuard no_grad;
  lm_.model->eval();
  std::vector<std::shared_ptr<Job>> batch;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !pending_.empty() || !batch.empty(); });
      if (stop_ && pending_.empty() && batch.empty()) return;
      while (!pending_.empty() && static_cast<int64_t>(batch.size()) < opt_.slots) {
        std::shared_ptr<Job> job = std::move(pending_.front());
        pending_.pop_front();
        lock.unlock();
        try {
          admit(*job);
          batch.push_back(std::move(job));
        } catch (...) {
          retire(*job, std::current_exception());
        }
        lock.lock();
      }
      running_ = static_cast<int64_t>(batch.size());
    }
    std::vector<std::shared_ptr<Job>> go_on;
    std::vector<gen::Decoder*> decoders;
    for (std::shared_ptr<Job>& job : batch) {
      std::exception_ptr error;
      if (!job->cancelled) try {
          job->dec->step(job->rng);
        } catch (...) {
          error = std::current_exception();
        }
      if (job->cancelled) cancelled_++;
      if (job->cancelled || error || job->dec->done()) {
        retire(*job, error);
        continue;
      }
      decoders.push_back(job->dec.get());
      decode_rows_ += job->dec->live();
      go_on.push_back(std::move(job));
    }
    batch = std::move(go_on);
    {
      std::lock_guard<std::mutex> lock(mu_);
      running_ = static_cast<int64_t>(batch.size());
    }
    if (batch.empty()) continue;
    decode_steps_++;
    try {
      gen::feed(*lm_.model, decoders);
    } catch (...) {  // a broken model (non-finite logits): every request in the batch fails
      for (std::shared_ptr<Job>& job : batch) retire(*job, std::current_exception());
      batch.clear();
      std::lock_guard<std::mutex> lock(mu_);
      running_ = 0;
    }
  }
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
