// atto/generate/generate.h: batched text generation from a GPT with the KV cache.
//
//   gen::GenerateOptions opt;
//   opt.max_new_tokens = model.config().block_size;
//   opt.stop_token = tok.boundary_id();              // lines mode: stop at <eos>; stream: -1
//   opt.sampler.temperature = 0.8f;
//   Rng rng(1337);
//   gen::PromptSet ps = gen::make_prompts(tok, "ma", 20, model.config().block_size, rng);
//   std::vector<gen::Sample> out = gen::generate_batch(model, ps.prompts, opt, rng);
//   std::string text = ps.text + tok.decode(out[0].tokens);        // "mabel"
//
// How it runs
// - The sequences are decoded together as one batch (chunks of at most opt.max_batch): the
//   prompts are encoded in one forward_cached call of Tn = prompt length, then every step
//   feeds each live sequence's newest token (Tn = 1): each new token costs one position.
// - Draws happen sequence by sequence in batch order, each from the one Rng; so the tokens
//   depend on the seed, the prompts and opt, never on the thread count.
// - Logits that are NaN or infinite are an error (the non-finite-logits message of sampler.h).
// - A sequence ends when it samples opt.stop_token (not included in Sample::tokens) or after
//   opt.max_new_tokens sampled tokens (the stop token counts). Finished sequences are dropped
//   from the batch and the KV cache, so they cost nothing afterwards.
// - The model runs in eval mode (no dropout) under NoGradGuard; its training flag is restored.
//
// Block-size policy (a KV cache cannot slide)
//   A model sees at most block_size positions. When a sequence's cache is full and one more
//   token must be fed, the cache is rebuilt from the last reencode_length(block_size) =
//   max(1, block_size / 2) tokens (the new token included), re-encoded in one call at
//   positions 0..K-1, and decoding continues from there. So every token is predicted from
//   between K and block_size previous tokens, and the cost stays one position per token plus
//   one re-encode of K positions per block_size - K tokens. This is exactly the full forward
//   over the window [start, L) where start jumps to L - K whenever L - start would exceed
//   block_size (tests/generate checks that equality).
//
// Repetition penalty history: the sequence so far (prompt + generated), without a leading
// stop token (the <eos> that starts a lines-mode sample is not a repetition).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "generate/sampler.h"
#include "generate/stop_strings.h"
#include "models/gpt.h"
#include "tokenize/char_tokenizer.h"

namespace atto::gen {

// The most tokens one sample may ask for (atto sample's --max-tokens, the C API's max_tokens):
// a sample's tokens and text are kept until it ends, so this bounds their memory (~8 MB).
inline constexpr int64_t kMaxNewTokens = 1'000'000;

// atto sample's defaults, which the C API's atto_sample_default_params() and atto.hpp share:
// the sampling seed, and the tokens a sample may take when none are asked for (max_tokens 0):
// a lines-mode sample (names, words) runs to its end token or the block size, a stream-mode one
// (prose) takes kStreamSampleTokens.
inline constexpr uint64_t kDefaultSampleSeed = 1337;
inline constexpr int64_t kStreamSampleTokens = 500;
inline constexpr int64_t default_max_new_tokens(int64_t asked, bool lines, int64_t block_size) {
  return asked > 0 ? asked : (lines ? block_size : kStreamSampleTokens);
}

struct GenerateOptions {
  int64_t max_new_tokens = 100;  // sampled tokens per sequence at most (a stop token counts)
  int32_t stop_token = -1;       // ends a sequence when sampled; -1 = none
  SamplerOptions sampler;
  int64_t max_batch = 256;  // sequences decoded together (bounds the KV cache memory)
  // Called with each sampled token (not the stop token) as soon as it is drawn: the index of its
  // sequence among the prompts (generate_chunks: among all n samples) and the token. Returning
  // false ends that sequence after this token (Sample::stopped), as a stop string does.
  std::function<bool(int64_t sample, int32_t token)> on_token;
  // Called before each draw with the model's raw next-token logits for that sequence (log-probabilities
  // for a server's `logprobs`); numbered as on_token.
  std::function<void(int64_t sample, std::span<const float> logits)> on_logits;
};

struct Sample {
  std::vector<int32_t> tokens;  // the generated tokens, without the prompt and the stop token
  bool stopped = false;         // true when the sequence ended at the stop token (or on_token ended it)
};

// max(1, block_size / 2): tokens kept when a full KV cache is rebuilt (see the policy above).
int64_t reencode_length(int64_t block_size);

// One sample per prompt. The prompts must be non-empty, all of one length, at most block_size
// tokens, with ids in [0, vocab_size). Throws atto::Error otherwise, or on invalid options.
std::vector<Sample> generate_batch(GPT& model, const std::vector<std::vector<int32_t>>& prompts,
                                   const GenerateOptions& opt, Rng& rng);
// n samples continuing one prompt: generate_batch with n copies of it.
std::vector<Sample> generate(GPT& model, const std::vector<int32_t>& prompt, int64_t n, const GenerateOptions& opt,
                             Rng& rng);

// ---- prompts from text --------------------------------------------------------------------

struct PromptSet {
  std::vector<std::vector<int32_t>> prompts;  // n prompts of one length (make_prompts fills it)
  std::string text;                           // the prompt text to print before each sample
  int64_t cropped = 0;                        // tokens dropped from the front (0: none)
  std::vector<int32_t> base;                  // the prompt all samples share (empty: random starts)
  int64_t random_start_vocab = 0;             // > 0: each prompt is one token drawn from [0, this)

  // `count` prompts: copies of base, or one random start token each drawn with rng in order.
  std::vector<std::vector<int32_t>> draw(int64_t count, Rng& rng) const;
};

// The prompts for n samples, in the tokenizer's mode:
// - lines (the tokenizer has <eos>): [<eos>] + encode(text), as in training.
// - stream, text given: encode(text).
// - stream, no text: "\n" if the vocabulary has it (a sample starts like a new line), else one
//   token drawn uniformly with rng for each sample. That start token is not part of `text`.
// Unknown characters throw atto::Error naming them and their positions (the tokenizer's check).
// A prompt longer than block_size keeps its last block_size tokens (`cropped` says how many
// were dropped; the caller warns).
PromptSet make_prompts(const GptTokenizer& tok, std::string_view text, int64_t n, int64_t block_size, Rng& rng);
// The same without drawing any prompt (ps.prompts stays empty; ps.draw makes them).
PromptSet make_prompt_set(const GptTokenizer& tok, std::string_view text, int64_t block_size);

// ---- many samples, chunk by chunk ---------------------------------------------------------

struct SampleChunk {
  int64_t first = 0;                          // index of the chunk's first sample among all n
  std::vector<std::vector<int32_t>> prompts;  // the chunk's prompts, one per sample
  std::vector<Sample> samples;
};

// n samples from ps, opt.max_batch at a time: each chunk's prompts are drawn (ps.draw), decoded
// with generate_batch and handed to `emit` before the next chunk starts, so memory does not grow
// with n and the first samples come out at once (atto sample streams them). The chunks are
// generate_batch's own chunks, so with a shared prompt the samples equal generate_batch(n
// copies of it); random start tokens are drawn per chunk, just before it is decoded. The chunk
// size is opt.max_batch, never the thread count: same seed, same samples on any machine.
void generate_chunks(GPT& model, const PromptSet& ps, int64_t n, const GenerateOptions& opt, Rng& rng,
                     const std::function<void(const SampleChunk&)>& emit);

// ---- samples as text, streamed, cut at stop strings ------------------------------------
struct TextSample {
  std::string text;      // the generated text (without the prompt), up to the first stop string
  int64_t tokens = 0;    // generated tokens (a stop token not counted)
  bool stopped = false;  // ended by the stop token or a stop string (else max_new_tokens or on_piece)
};
// Called for every sampled token of sample i with the text it releases (empty while it could be the
// start of a stop string; gen::StopStrings), and once with token -1 for the text held back when a
// sample ends without a stop string. `ends`: a stop string completed at this token. Returning
// false ends the sample.
using OnPiece = std::function<bool(int64_t sample, const std::string& piece, int32_t token, bool ends)>;
// The text of n samples as their tokens arrive (GenerateOptions::on_token -> on_token): stop
// strings cut, pieces streamed to on_piece. generate_text's and atto serve's one text path.
// A byte-level BPE token may hold part of a character: a piece never ends inside a UTF-8
// sequence that later bytes may complete (they are held back until they come, or the sample ends).
class TextStream {
 public:
  TextStream(const GptTokenizer& tok, int64_t n, const std::vector<std::string>& stops, OnPiece on_piece);
  bool on_token(int64_t i, int32_t t);      // false: sample i ends here (a stop string, or on_piece said so)
  void finish(int64_t i, const Sample& s);  // sample i's decoding ended: release the held-back text
  bool started(int64_t i) const { return out_[static_cast<size_t>(i)].tokens > 0 || ended_[static_cast<size_t>(i)]; }
  std::vector<TextSample> take() { return std::move(out_); }

 private:
  const GptTokenizer& tok_;
  std::vector<StopStrings> cut_;
  std::vector<std::string> tail_;  // per sample: the start of a UTF-8 character whose other bytes are to come
  std::vector<TextSample> out_;
  std::vector<char> ended_;
  OnPiece on_piece_;
};
// generate_chunks of n samples of ps, as text: the one streaming path of the C API and atto serve.
// opt.on_token is taken over; opt.on_logits is kept.
std::vector<TextSample> generate_text(GPT& model, const GptTokenizer& tok, const PromptSet& ps, int64_t n,
                                      GenerateOptions opt, const std::vector<std::string>& stops, Rng& rng,
                                      const OnPiece& on_piece);

}  // namespace atto::gen
