// atto/io/gguf_recipe.h: which ggml type each tensor of a GGUF file is written as, for `atto
// export --type` and `atto quantize --type`: every matrix one type, or llama.cpp's Q4_K_M or Q5_K_M
// mix (Q4_K or Q5_K, with Q6_K for the output matrix and for some attention-value and MLP-down
// matrices), as llama.cpp's llama_tensor_get_type chooses them.
//
//   io::TypePlan plan(io::QuantRecipe::k_mix(io::GgmlType::Q4_K), names);   // every tensor name, in order
//   io::GgmlType t = plan.type_of("blk.0.ffn_down.weight", {64, 256});   // Q6_K
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "io/ggml_quants.h"

namespace atto::io {

struct QuantRecipe {
  GgmlType type = GgmlType::F32;  // every matrix's (the mix: its base type, Q4_K or Q5_K)
  bool mix = false;               // llama.cpp's _M mix over `type`
  QuantRecipe(GgmlType t = GgmlType::F32) : type(t) {}  // NOLINT(google-explicit-constructor): every matrix t
  static QuantRecipe k_mix(GgmlType base);  // Q4_K_M (base Q4_K) or Q5_K_M (Q5_K)
};
// "q4_k_m", "q5_k_m", or the type's name.
std::string to_string(const QuantRecipe& r);
// llama.cpp's general.file_type (llama_ftype): ggml_file_type(r.type), or 15 (MOSTLY_Q4_K_M), 17
// (MOSTLY_Q5_K_M).
uint32_t file_type_of(const QuantRecipe& r);
// "q4_k_m", "q5_k_m" or a writable type's name as a recipe; false for anything else.
bool parse_recipe(const std::string& name, QuantRecipe& r);

class TypePlan {
 public:
  // names: every tensor of the file, in its order (the mix counts the attention-value and MLP-down
  // matrices in that order, as llama.cpp does).
  TypePlan(const QuantRecipe& r, const std::vector<std::string>& names);
  // The type of tensor `name` of row-major `shape`, now stored as `current`. 1-D tensors keep
  // `current`, as does position_embd.weight under a mix (llama.cpp never quantizes learned
  // positions). A matrix: the recipe's type for its name, then stored_type_for's rule for rows
  // that do not fill that type's blocks. Q4_K_M and Q5_K_M: output.weight (token_embd.weight when
  // there is no output.weight: a tied head) Q6_K, or q8_0 when its rows are not a multiple of 256;
  // attn_v.weight and ffn_down.weight Q6_K in the first and last eighth of their layers and every
  // third between (llama.cpp's use_more_bits), the base type in the others; attn_qkv.weight (the
  // gpt2 layout's fused projection) Q5_K under Q4_K_M, Q6_K under Q5_K_M; the rest the base type.
  GgmlType type_of(const std::string& name, const std::vector<int64_t>& shape, GgmlType current) const;

 private:
  QuantRecipe recipe_;
  bool has_output_ = false;
  std::map<std::string, bool> more_bits_;  // attn_v / ffn_down matrices: whether they get Q6_K
};

}  // namespace atto::io
