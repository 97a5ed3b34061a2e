// atto/serve/engine.h: a GPT serving many requests at once by continuous batching, each
// request's choices generated the way `atto sample` does (same prompt framing, same seed, same
// samples), with per-token streaming, stop strings and log-probabilities.
//
// One scheduler thread owns the model. Each step it admits waiting requests into free slots
// (their prompts encoded, one forward each), draws one token for every live sequence of every
// running request (each request from its own Rng), retires the requests that ended or whose
// client went away, and feeds the rest through one batched forward (gen::feed). A request's
// tokens are the bits it gets alone (gen/decoder.h), whatever else is running. The HTTP threads
// only wait for their request's pieces and write them out, so a slow client never holds the batch.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "generate/seq2seq_decode.h"
#include "kernels/kernels.h"
#include "run/run_dir.h"
#include "serve/openai.h"

namespace atto::serve {

struct TokenLogprob {
  std::string token;
  double logprob = 0.0;
  std::vector<std::pair<std::string, double>> top;  // the most likely alternatives
  int64_t text_offset = 0;                          // characters before it in the choice's text
};

struct Choice {
  std::string text;      // the generated text, up to the first stop string
  int64_t tokens = 0;    // generated tokens (the end token not counted)
  bool stopped = false;  // ended by the end token or a stop string ("stop"), else "length"
  std::vector<TokenLogprob> logprobs;
};

// A prompt checked against the model: its token count (usage) and the framing of atto sample.
struct PreparedPrompt {
  std::string text;  // given, or decoded from the ids (what echo returns)
  int64_t tokens = 0;
  std::vector<int32_t> ids;  // a prompt given as token ids: these, as given (else empty)
};

struct EngineOptions {
  int threads = 0;                                         // kernel threads of the scheduler (0 = all cores)
  kernels::Precision precision = kernels::Precision::F32;  // bf16: weights packed once, kept
  int slots = 8;                                           // requests decoded together
  int64_t queue_max = 64;                                  // requests waiting for a slot; beyond: 503
};

class Engine {
 public:
  Engine(LoadedModel lm, std::string id, EngineOptions opt);
  ~Engine();  // finishes the running and waiting requests, then stops the scheduler
  Engine(const Engine&) = delete;
  Engine& operator=(const Engine&) = delete;
  const std::string& id() const { return id_; }
  int64_t context() const { return lm_.config.gpt.block_size; }
  // RequestError 400 naming `param` for characters the vocabulary lacks or a prompt longer than
  // the context.
  PreparedPrompt prepare(const std::string& prompt, const char* param) const;
  // A prompt given as token ids (non-empty): each must be below the vocabulary size, and the
  // prompt must fit the context; RequestError 400 naming "prompt" otherwise. It starts a sequence
  // as the text they decode to would ([<eos>] first when the tokenizer has one), so ids that
  // encode a text give that text's completions.
  PreparedPrompt prepare_ids(const std::vector<int32_t>& ids) const;
  // POST /tokenize: the ids of r.content (the boundary token first with add_special, when the
  // tokenizer has one), as {"tokens": [...]}; with_pieces: [{"id", "piece"}], a piece that is
  // not valid UTF-8 (part of a character) as its bytes. RequestError 400 'content' for text the
  // vocabulary cannot encode.
  nlohmann::json tokenize(const TokenizeRequest& r) const;
  // POST /detokenize: the text of ids (RequestError 400 'tokens' for an id past the vocabulary).
  std::string detokenize(const std::vector<int32_t>& ids) const;
  // RequestError (400, 'logit_bias') when a biased token id is outside this model's vocabulary.
  void check_sampler(const gen::SamplerOptions& s) const;
  // The n choices of one prompt, computed in the shared batch; blocks the calling thread until
  // they are done. on_piece(choice, text, logprob or nullptr) streams new text on the calling
  // thread; returning false cancels the request (the client went away): its sequences leave
  // the batch at the next step. RequestError 503 when queue_max requests already wait.
  using OnPiece = std::function<bool(int64_t choice, const std::string& piece, const TokenLogprob* lp)>;
  std::vector<Choice> generate(const PreparedPrompt& p, const Completion& c, uint64_t seed, const OnPiece& on_piece);

  int64_t waiting() const;                          // requests queued for a slot
  int64_t running() const;                          // requests in the batch
  int64_t cancelled() const { return cancelled_; }  // requests ended early by their client
  int64_t generated() const { return generated_; }  // tokens drawn, for every request
  // Batched decode forwards, and the sequences they fed: rows / steps is the mean batch width.
  int64_t decode_steps() const { return decode_steps_; }
  int64_t decode_rows() const { return decode_rows_; }

  struct Job;

 private:
  kernels::Bf16WeightCache bf16_;  // --precision bf16: the weights, packed once (they never change)
  void schedule();  // the scheduler thread's loop
  void admit(Job& job);
  void retire(Job& job, std::exception_ptr error);

  LoadedModel lm_;
  std::string id_;
  EngineOptions opt_;
  mutable std::mutex mu_;  // guards pending_, running_, stop_
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> pending_;
  int64_t running_ = 0;
  bool stop_ = false;
  std::atomic<int64_t> cancelled_{0}, generated_{0}, decode_steps_{0}, decode_rows_{0};
  std::thread scheduler_;
};

// A seq2seq model behind a lock: `atto translate`'s decoding (greedy or beam, n-best).
class Translator {
 public:
  Translator(LoadedSeq2Seq lm, std::string id, int threads);
  const std::string& id() const { return id_; }
  int64_t context() const { return lm_.config.seq2seq.max_len; }
  // Per source, n_best (text, score) pairs, best first; an empty source gets empty ones.
  std::vector<std::vector<std::pair<std::string, double>>> translate(const std::vector<std::string>& sources,
                                                                     const gen::DecodeOptions& opt);

 private:
  LoadedSeq2Seq lm_;
  int threads_;
  std::string id_;
  std::mutex mu_;
};

}  // namespace atto::serve
