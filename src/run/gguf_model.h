// atto/run/gguf_model.h: a trained GPT as a GGUF file that llama.cpp runs (architecture `gpt2` for
// the GPT-2 layout, `llama` for RMSNorm + SwiGLU + RoPE without biases), and such a file read back
// as a model atto runs.
//
//   LoadedModel lm = load_run("runs/names");
//   export_gguf(lm, "names.gguf", io::GgmlType::F16);    // llama.cpp: llama-cli -m names.gguf
//   LoadedModel back = load_gguf("names.gguf");          // atto sample --model names.gguf
//
// The mapping (llama.cpp's gpt2 graph: pre-norm LayerNorm with bias, learned positions, fused
// QKV, GELU MLP, final norm, head tied to the token embedding when output.weight is absent):
//   transformer.wte.weight   -> token_embd.weight      transformer.wpe.weight -> position_embd.weight
//   h.i.ln_1 / ln_2          -> blk.i.attn_norm / ffn_norm   (weight, bias)
//   h.i.attn.c_attn / c_proj -> blk.i.attn_qkv / attn_output (weight, bias)
//   h.i.mlp.c_fc / c_proj    -> blk.i.ffn_up / ffn_down      (weight, bias)
//   transformer.ln_f         -> output_norm                 lm_head.weight -> output.weight (untied only)
// The llama layout: ln_1 / ln_2 -> attn_norm / ffn_norm, c_attn's three row blocks -> attn_q,
// attn_k, attn_v, c_proj -> attn_output, mlp.c_fc / c_fc2 / c_proj -> ffn_gate / ffn_up / ffn_down
// (out = down(silu(gate x) * up x)), ln_f -> output_norm; RoPE is llama.cpp's "norm" type (pairs
// of adjacent dimensions), atto's own, so no weight permutation is needed.
// A Linear weight [out, in] row-major is ggml's ne = {in, out}: the bytes are the same. 1-D tensors
// stay f32 (llama.cpp's quantizer does the same); f16, q8_0 and q4_0 apply to the matrices (q8_0
// and q4_0 to those whose rows are a multiple of 32 values, the others stay f16:
// io::stored_type_for).
//
// The vocabulary: atto's characters as a GPT-2 byte-level BPE vocabulary (tokenizer.ggml.model
// "gpt2", pre-tokenizer "gpt-2"): a character is the GPT-2 byte-to-unicode string of its UTF-8
// bytes, and every multi-byte character gets the merges that join its bytes (and nothing else), so
// llama.cpp cuts any text into atto's characters with atto's ids. atto's end token `<eos>`
// (lines mode) is a control token and llama.cpp's BOS, EOS and EOT. Keys llama.cpp does not know
// record what its gpt2 graph cannot express: `atto.ffn` (gelu or gelu_tanh: llama.cpp computes
// the tanh form) and `atto.lines_mode`.
#pragma once

#include <string>

#include "io/gguf.h"
#include "run/run_dir.h"

namespace atto {

// The GPT-2 and llama layouts export; anything else is an atto::Error naming the model's settings.
// Returns the architecture written ("gpt2" or "llama").
std::string export_gguf(const LoadedModel& lm, const std::string& path, const io::QuantRecipe& type);
// llama.cpp's architecture for a GPT's layout, "gpt2" or "llama" (what export_gguf writes);
// atto::Error naming the settings of any other layout.
const char* gguf_arch_name(const GPTConfig& c);

// A GGUF file of the gpt2 or llama architecture with a character vocabulary (as export_gguf writes them),
// validated like a run directory: every dimension against the tensors' shapes.
// WeightStorage::Quantized keeps q8_0, q4_0, Q4_K and Q6_K matrices of the linear layers and the token embedding
// as quantized rows (run_dir.h's load_run).
LoadedModel load_gguf(const std::string& path, WeightStorage weights = WeightStorage::Floats);
// Its configuration only (no model is built): what load_run_config gives for a GGUF file.
RunConfig gguf_run_config(const std::string& path);
// Its vocabulary only, from the header (no tensor is read): load_gguf's tokenizer.
std::shared_ptr<const GptTokenizer> gguf_tokenizer(const std::string& path);

// GPT-2's byte-to-unicode map (the printable byte itself, else U+0100 + n): the string of a
// character in a byte-level BPE vocabulary, and the way back (atto::Error for a string that is
// not one character's bytes).
std::string byte_level_string(char32_t c);
char32_t char_of_byte_level(const std::string& token);

}  // namespace atto
