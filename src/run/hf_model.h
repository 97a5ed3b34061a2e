// atto/run/hf_model.h: a GPT-2 checkpoint in the Hugging Face layout read as a model atto runs,
// and `atto import`: such a checkpoint (or a GGUF file) written as an atto run directory.
//
//   LoadedModel gpt2 = load_hf_gpt2("gpt2/");          // model.safetensors, config.json,
//                                                      // vocab.json, merges.txt
//   ImportSummary s = import_run("gpt2/", "runs/gpt2", /*force=*/false);
//   LoadedModel back = load_run("runs/gpt2");          // what atto sample|score|eval|serve load
//
// The mapping (docs/import.md): every name with or without the "transformer." prefix;
//   wte, wpe, ln_f, h.i.ln_1, h.i.ln_2        -> transformer.<same>        (as they are)
//   h.i.attn.c_attn, attn.c_proj, mlp.c_fc, mlp.c_proj .weight [in, out]
//                                             -> transformer.h.i.<same>.weight [out, in]
//                                                (Hugging Face's Conv1D: transposed)
//   their .bias                               -> the same name
//   lm_head.weight (optional)                 -> lm_head.weight: tied when absent or equal to wte
//   h.i.attn.bias, h.i.attn.masked_bias       -> ignored (the causal mask buffers)
// Dimensions come from the tensors (n_layer from the h.<i> indices, d_model from wte, positions
// from wpe, d_ff from c_fc) and are checked against config.json's keys where present; n_head must
// be in config.json. activation_function gelu_new is atto's gelu_tanh, gelu its gelu;
// layer_norm_epsilon must be atto's 1e-5. The tokenizer is GPT-2's byte-level BPE
// (BpeTokenizer::import_gpt2 on vocab.json and merges.txt); the run's data mode is stream.
// Every problem is an atto::Error naming the file (and the tensor or key) before anything is
// built. Tensors are read one at a time (io::read_safetensors_tensor) into the model.
#pragma once

#include <string>

#include "run/run_dir.h"

namespace atto {

// The checkpoint directory `dir`, validated (see above).
LoadedModel load_hf_gpt2(const std::string& dir);

// What `atto import --from` and `atto train --init-from` read: an atto run directory (load_run), a
// GGUF file (load_gguf; its tokenizer kind and data mode set from its vocabulary) or a Hugging
// Face GPT-2 directory (load_hf_gpt2). Errors name `flag` and the path. `kind` (when given)
// receives "atto run", "GGUF" or "Hugging Face GPT-2".
LoadedModel load_model_source(const std::string& source, const std::string& flag, std::string* kind = nullptr);

struct ImportSummary {
  std::string source;  // "Hugging Face GPT-2", "GGUF" or "atto run"
  int64_t parameters = 0;
  bool tied = true;
};

// Reads `from` (load_model_source: a Hugging Face GPT-2 directory, a GGUF file or an atto run) and writes the run
// directory `out` (config.json, tokenizer.json, model.safetensors). An `out` that already holds a
// run needs `force` (the old run's train_state.safetensors and metrics.jsonl are removed then);
// nothing is written before `from` has been read and validated whole.
ImportSummary import_run(const std::string& from, const std::string& out, bool force);

}  // namespace atto
