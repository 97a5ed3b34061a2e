// atto/run/hf_export.h: `atto export --format hf`: a trained GPT of GPT-2's architecture written as a
// Hugging Face GPT-2 checkpoint directory, the inverse of load_hf_gpt2 (run/hf_model.h).
//
//   LoadedModel lm = load_run("runs/names");
//   HfExportSummary s = export_hf(lm, "hf/names", /*force=*/false, "runs/names");
//   LoadedModel back = load_hf_gpt2("hf/names");     // the same tensors, config and token ids
//   // Python: GPT2LMHeadModel.from_pretrained("hf/names")
//
// What it writes (docs/import.md, "Export to Hugging Face"):
//   model.safetensors  F32, metadata {"format": "pt"}, the names GPT2LMHeadModel saves:
//                      transformer.wte.weight, transformer.wpe.weight, transformer.h.<i>.ln_1.*,
//                      attn.c_attn.*, attn.c_proj.*, ln_2.*, mlp.c_fc.*, mlp.c_proj.*,
//                      transformer.ln_f.*; lm_head.weight only when the head is not tied. The four
//                      linear weights are Hugging Face's Conv1D [in, out]: atto's [out, in]
//                      transposed. atto's names are already these, so nothing else changes.
//   config.json        GPT2Config's keys (model_type gpt2, GPT2LMHeadModel, n_embd, n_layer,
//                      n_head, n_positions = n_ctx, vocab_size, n_inner (null for 4 x n_embd),
//                      activation_function gelu_new for atto's gelu_tanh and gelu for gelu,
//                      layer_norm_epsilon 1e-5, tie_word_embeddings, bos/eos_token_id = the
//                      tokenizer's boundary token or null, ...)
//   vocab.json, merges.txt, tokenizer_config.json
//                      for a byte-level BPE tokenizer whose only special token is <|endoftext|>:
//                      GPT-2's own files, ids unchanged (import reads them back to the same
//                      tokenizer). Any other tokenizer (char, spm) has no such files: atto's
//                      tokenizer.json is written as atto_tokenizer.json (SentencePiece: with
//                      spm.model) and the summary says so.
// A model that is not GPT-2's architecture (learned positions, pre-norm LayerNorm, gelu or
// gelu_tanh, biases) is an atto::UsageError naming config.json's keys and values (and --format
// gguf where llama.cpp's llama layout fits). Everything is checked before anything is written;
// every file is written atomically, config.json last.
#pragma once

#include <string>
#include <vector>

#include "run/run_dir.h"

namespace atto {

struct HfExportSummary {
  int64_t parameters = 0;
  bool tied = true;
  bool tokenizer_files = false;    // vocab.json + merges.txt written (byte-level BPE)
  std::string tokenizer_note;      // when not: one line saying why, for the CLI to print
  std::vector<std::string> files;  // the files written, in order
};

// Throws atto::UsageError naming every setting of `c` Hugging Face's GPT-2 cannot express.
void check_hf_gpt2_architecture(const GPTConfig& c);

// Writes `lm` into the directory `out`. An `out` that exists and is not empty needs `force`
// (export's own files left from an earlier export are then replaced or removed); `out` must not
// be `source` (the run directory `lm` came from), force or not.
HfExportSummary export_hf(const LoadedModel& lm, const std::string& out, bool force, const std::string& source = {});

}  // namespace atto
