// atto/generate/decoder.h: one batch of sequences decoded with the KV cache, and one step that
// feeds many such batches through a single forward (continuous batching).
//
//   gen::Decoder dec(model, opt);           // opt: max_new_tokens, stop_token, sampler, callbacks
//   dec.start(prompts);                      // one forward over the prompts (all of one length)
//   for (;;) {
//     dec.step(rng);                         // one token for every live sequence, drawn in order
//     if (dec.done()) break;
//     gen::Decoder* all[] = {&dec};
//     gen::feed(model, all);                 // a server passes every running request's decoder
//   }
//   std::vector<gen::Sample> out = dec.take_samples();
//
// generate_batch is exactly this loop; atto serve runs it over many requests at once, each with
// its own Rng and prompt length, joining and leaving between steps. A sequence's tokens do not
// depend on which decoders share its feed: feed's forward (GPT::forward_step) computes every row
// in an order independent of the number of rows, and each decoder draws from its own Rng. So a
// server's request gives the samples of `atto sample` with the same seed (generate.h has the
// draw order, the stop rules and the block-size policy).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "generate/generate.h"

namespace atto::gen {

class Decoder {
 public:
  // opt is copied (with its callbacks); its sampler settings are checked here.
  Decoder(GPT& model, GenerateOptions opt);
  // Encodes the prompts in one forward_cached call (Tn = prompt length). They must be non-empty,
  // of one length, at most block_size tokens, with ids in [0, vocab_size): atto::Error otherwise.
  void start(const std::vector<std::vector<int32_t>>& prompts);
  // Draws one token for every live sequence, in order, from rng (opt.on_logits and on_token are
  // called as it goes). Sequences that drew the stop token, or whose on_token said stop, end.
  void step(Rng& rng);
  // No live sequence left, or max_new_tokens steps taken: nothing more to feed.
  bool done() const { return keep_.empty() || steps_ >= opt_.max_new_tokens; }
  int64_t live() const { return static_cast<int64_t>(keep_.size()); }
  const std::vector<Sample>& samples() const { return out_; }
  std::vector<Sample> take_samples() { return std::move(out_); }

 private:
  friend void feed(GPT& model, std::span<Decoder* const> decoders);
  // Drops the rows that ended at the last step; false when the cache is full (then it re-encodes
  // the last reencode_length tokens of each sequence itself, as generate.h describes).
  bool prepare_feed();
  void set_logits(const Tensor& logits, int64_t Tn);

  GPT& model_;
  GenerateOptions opt_;
  SamplerChain chain_;
  int64_t V_, block_, steps_ = 0;
  std::vector<std::vector<int32_t>> seq_;  // per sequence: prompt + generated tokens
  std::vector<size_t> hist_start_;         // where the repetition-penalty history starts
  std::vector<int64_t> live_;              // the sequence of each cache row
  std::vector<int64_t> keep_;              // cache rows that go on after the last step
  std::vector<Sample> out_;
  GPT::Cache cache_;
  Tensor logits_;  // [rows, Tn, V]
  int64_t Tn_ = 0;
};

// Feeds the newest token of every live sequence of each decoder (none of them done()): the
// decoders whose caches have room in one GPT::forward_step, a full cache by its own re-encode.
// Afterwards every decoder holds its next-token logits. Call under NoGradGuard, model in eval().
void feed(GPT& model, std::span<Decoder* const> decoders);

// The checks Decoder::start makes, for a whole set of prompts before any is decoded.
void check_prompts(const GPT& model, const std::vector<std::vector<int32_t>>& prompts, const GenerateOptions& opt);

}  // namespace atto::gen
