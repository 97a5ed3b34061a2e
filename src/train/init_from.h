// atto/train/init_from.h: fine-tuning, a new GPT run that starts from a model (--init-from).
//
//   RunConfig cfg = default_run_config(Task::Gpt);
//   cfg.train.init_from = "runs/gpt2";                 // a run, a Hugging Face GPT-2 dir, a GGUF file
//   LoadedModel src = adopt_init_from(cfg);            // cfg.gpt and the tokenizer kind: SOURCE's
//   GPT model(cfg.gpt, rng);
//   copy_source_weights(*src.model, model, cfg.train.init_from);   // exact copy, checked
//
// The architecture (every GPTConfig field but dropout) and the tokenizer come from SOURCE; a model
// key, --size, --tokenizer or --vocab-size the user set to a different value is an
// atto::UsageError naming the flag and both values (docs/finetune.md).
#pragma once

#include <string>

#include "run/run_dir.h"

namespace atto {

// Reads cfg.train.init_from (run/hf_model.h: load_model_source), checks cfg against it and
// takes its architecture: cfg.gpt (dropout stays cfg's) and cfg.data.tokenizer.
LoadedModel adopt_init_from(RunConfig& cfg);

// Copies every tensor of `source` into `model` (the same architecture) and checks that the copy
// is bit-exact; atto::Error naming `path` otherwise.
void copy_source_weights(const GPT& source, GPT& model, const std::string& path);

}  // namespace atto
