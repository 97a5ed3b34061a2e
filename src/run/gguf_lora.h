// atto/run/gguf_lora.h: a LoRA run's adapters (unmerged) as a llama.cpp LoRA adapter GGUF, for
// the base model's GGUF that export_gguf writes (run/gguf_model.h).
//
//   LoadedModel lm = load_run("runs/lora");                 // lm.lora_adapter names the adapter file
//   export_gguf_lora(lm, load_run_config("runs/lora").gpt, "adapter.gguf");
//   // llama.cpp: llama-cli -m base.gguf --lora adapter.gguf    (base.gguf: atto export of the base)
//
// llama.cpp's adapter format (convert_lora_to_gguf.py, src/llama-adapter.cpp): metadata
// general.architecture (the base's: gpt2 or llama), general.type = "adapter", adapter.type =
// "lora", adapter.lora.alpha (f32); for each adapted weight NAME of the base GGUF
// ("blk.0.attn_qkv.weight") the tensors NAME.lora_a (A, row-major [rank, in]: ggml ne = {in, rank})
// and NAME.lora_b (B, [out, rank]: ne = {rank, out}). llama.cpp computes W x + (alpha / rank)
// B (A x), which is what atto's merged layer computes; alpha is lora_alpha, or the rank when
// lora_alpha is 0. Where export_gguf splits a weight (the llama layout's attn_q, attn_k, attn_v:
// the three row blocks of c_attn), A is shared by the pieces and B's rows are split the same way;
// no layout permutes rows (atto's RoPE is llama.cpp's "norm" RoPE). Tensors are f32.
#pragma once

#include <string>
#include <vector>

#include "run/lora.h"
#include "run/run_dir.h"

namespace atto {

// The adapters of read_lora_adapter as an adapter GGUF at `path`. `base` is the GPT config of the
// base (its layout picks gpt2 or llama: anything else is an atto::Error, as export_gguf's),
// `lora_cfg` the run's (lora_rank, lora_alpha, lora_targets). Returns the architecture written.
std::string write_gguf_lora(const GPTConfig& base, const GPTConfig& lora_cfg,
                            const std::vector<LoraLayerAdapter>& adapters, const std::string& path);

// A loaded LoRA run (load_run: lm.lora_adapter non-empty, else an atto::Error) and its config's
// GPT section with the lora_* settings: its adapter file, checked as load_run checks it, as an
// adapter GGUF. Returns the architecture written.
std::string export_gguf_lora(const LoadedModel& lm, const GPTConfig& lora_cfg, const std::string& path);

}  // namespace atto
