// atto/train/auto_config.h: the settings a run takes from its data when the user leaves them out.
//
//   RunConfig cfg = default_run_config(Task::Gpt);     // model size, batch, steps, lr ... = auto
//   GptDataFacts facts{.mode = DataMode::Lines, .train_tokens = 228145, ...};
//   std::vector<std::string> why = resolve_gpt_auto(cfg, facts);   // fills every auto field
//
// A field is auto when it holds its "auto" value (0 for sizes, steps and lr; -1 for dropout,
// warmup and batch_tokens; "auto" for size). Every flag, and every key of a --config file,
// overrides its field; the rest follow from the data by the rules below (docs/defaults.md has
// the rules with the measurements behind them). The chosen values are written to config.json,
// so a resumed run never re-plans.
//
// GPT. The model size ("rung") follows the training tokens N (characters, the end token of each
// line included):
//   tiny    N < 20k      d_model 32,  2 layers, 4 heads   budget  2M tokens   dropout 0
//   small   N < 3M       d_model 128, 6 layers, 4 heads   budget 12M tokens (stream 8M)   (names, tinyshakespeare)
//   medium  N < 30M      d_model 256, 6 layers, 8 heads   budget  4M tokens
//   large   otherwise    d_model 384, 6 layers, 6 heads   budget  2M tokens
// Lines mode: block = longest line + 1, batch 64 (tiny 32); stream mode: block 32/64/128/256 by
// rung (at most what the data allows), batch 2048 tokens / block. steps = budget / (batch x
// block), rounded to 100 (>= 500): a default run takes a few minutes on a 2-core machine.
// lr 2e-3 at d_model <= 64 (lines mode: <= 128), 1e-3 at 128, 6e-4 above; warmup min(100, steps / 10).
// Fine-tuning (--init-from): a tenth of that lr (GPT-2 124M, d_model 768: 6e-5), and dropout 0.
// Dropout: 0 for tiny corpora (they should be learned by heart), 0.2 in lines mode (many epochs
// over short samples overfit), 0.1 in stream mode.
//
// seq2seq. By the training tokens N (source + target, after tokenisation):
//   small   N < 500k, or a target vocabulary of at most 64 types (a symbolic task)
//                        d_model 64,  2+2 layers, 4 heads, d_ff 256,  batches of 2048 tokens,
//                        lr 2e-3, warmup 100, 1500 steps            (synthetic tasks, toy sets)
//   base    otherwise    d_model 256, 3+3 layers, 4 heads, d_ff 1024, batches of 4096 tokens,
//                        lr 1e-3, warmup 800, 2500 steps            (Multi30k, docs/seq2seq.md)
// Dropout 0.1 (the paper), or 0 when the target vocabulary has at most 64 types (a symbolic
// task such as digit reversal, where dropout only slows learning an exact mapping).
#pragma once

#include <string>
#include <vector>

#include "run/run_config.h"

namespace atto {

struct GptDataFacts {
  DataMode mode = DataMode::Lines;  // resolved
  int64_t train_tokens = 0;         // characters in the training split (+ one end token per line)
  int64_t min_block = 1;            // smallest usable block (lines: longest line + 1)
  int64_t max_block = 0;            // largest usable block (stream: shortest split - 1)
  bool fine_tune = false;           // --init-from: lr a tenth of the rule below, dropout 0
};

struct Seq2SeqDataFacts {
  int64_t train_tokens = 0;  // source + target tokens of the training pairs
  int64_t tgt_vocab = 0;     // target vocabulary, specials included
};

// The rung names, smallest first, and the rung a corpus of n tokens gets.
const std::vector<std::string>& gpt_sizes();
const std::vector<std::string>& seq2seq_sizes();
std::string gpt_size_for(int64_t train_tokens);
std::string gpt_size_of(const GPTConfig& m);  // the rung with m's d_model, layers and heads; "" if none
std::string seq2seq_size_for(int64_t train_tokens);

// Fill every auto field of cfg (its task's fields) from the facts; returns one line per choice
// saying what was chosen and why. Fields already set are left alone (and not mentioned).
std::vector<std::string> resolve_gpt_auto(RunConfig& cfg, const GptDataFacts& facts);
std::vector<std::string> resolve_seq2seq_auto(RunConfig& cfg, const Seq2SeqDataFacts& facts);

}  // namespace atto
