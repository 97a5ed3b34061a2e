// atto/generate/score.h: per-token log-probabilities of a text under a GPT.
//
//   gen::ScoreResult r = gen::score_text(model, tok, "emma");
//   for (size_t i = 0; i < r.targets.size(); ++i)
//     fmt::print("{} {:.3f}\n", tok.id_to_string(r.targets[i]), r.logprobs[i]);   // ln p
//   r.total_nll();   // -sum of the log-probabilities (nats)
//   r.mean_nll();    // per scored token: the cross-entropy loss of this text
//
// Framing, in the tokenizer's mode (the same as training, so the numbers match the loss):
// - lines (tokenizer with <eos>): inputs [<eos>, c1, ..., cn], targets [c1, ..., cn, <eos>].
//   Every character and the end token are scored; n + 1 must fit the block size.
// - stream: token i (i >= 1) is scored given tokens max(0, i - block_size) .. i - 1, i.e. on
//   up to block_size previous tokens; the first token has no context and is not scored.
// Log-probabilities are natural logs of softmax(logits) in double, from the model in eval mode.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "models/gpt.h"
#include "tokenize/char_tokenizer.h"

namespace atto::gen {

struct ScoreResult {
  std::vector<int32_t> targets;  // the scored tokens, in order
  std::vector<double> logprobs;  // ln p(targets[i] | its context)

  double total_nll() const;  // -sum(logprobs)
  double mean_nll() const;   // total_nll() / number of targets (0 when there is none)
};

// Lines framing of token ids (no <eos> in them): [boundary] + ids -> ids + [boundary].
// Throws atto::Error when ids.size() + 1 exceeds the block size.
ScoreResult score_lines(GPT& model, const std::vector<int32_t>& ids, int32_t boundary);
// Stream scoring of ids[1..]; needs at least 2 tokens.
ScoreResult score_stream(GPT& model, const std::vector<int32_t>& ids);
// Encodes the text and scores it in the tokenizer's mode; errors name the text (unknown
// characters with their positions; too long for the block size with the length).
ScoreResult score_text(GPT& model, const GptTokenizer& tok, std::string_view text);

}  // namespace atto::gen
