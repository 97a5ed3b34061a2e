// atto/serve/engine.h: one model behind a lock, generating the choices of one request the way
// `atto sample` does (same prompt framing, same seed, same samples), with per-token streaming,
// stop strings and log-probabilities.
#pragma once

#include <cstdint>
#include <functional>
#include <mutex>
#include <string>
#include <vector>

#include "generate/seq2seq_decode.h"
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
  std::string text;
  int64_t tokens = 0;
};

class Engine {
 public:
  Engine(LoadedModel lm, std::string id, int threads);
  const std::string& id() const { return id_; }
  int64_t context() const { return lm_.config.model.block_size; }
  // RequestError 400 naming `param` for characters the vocabulary lacks or a prompt longer than
  // the context.
  PreparedPrompt prepare(const std::string& prompt, const char* param) const;
  // The n choices of one prompt. on_piece(choice, text, logprob or nullptr) streams new text;
  // returning false ends the request (the client went away).
  using OnPiece = std::function<bool(int64_t choice, const std::string& piece, const TokenLogprob* lp)>;
  std::vector<Choice> generate(const PreparedPrompt& p, const Completion& c, uint64_t seed, const OnPiece& on_piece);

 private:
  LoadedModel lm_;
  int threads_;
  std::string id_;
  std::mutex mu_;  // one generation at a time on the model
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
