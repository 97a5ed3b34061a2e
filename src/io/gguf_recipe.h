// atto/io/gguf_recipe.h: which ggml type each tensor of a GGUF file is written as, for `atto
// export --type` and `atto quantize --type`: every matrix one type, or llama.cpp's Q3_K_M, Q4_K_M or
// Q5_K_M mix (Q3_K, Q4_K or Q5_K, with Q6_K for the output matrix and more bits for some
// attention and MLP-down matrices), as llama.cpp's llama_tensor_get_type chooses them.
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
  GgmlType type = GgmlType::F32;  // every matrix's (the mix: its base type, Q3_K, Q4_K or Q5_K)
  bool mix = false;               // llama.cpp's _M mix over `type`
  QuantRecipe(GgmlType t = GgmlType::F32) : type(t) {}  // NOLINT(google-explicit-constructor): every matrix t
  static QuantRecipe k_mix(GgmlType base);  // Q3_K_M (base Q3_K), Q4_K_M (Q4_K) or Q5_K_M (Q5_K)
};
// "q3_k_m", "q4_k_m", "q5_k_m", or the type's name.
std::string to_string(const QuantRecipe& r);
// llama.cpp's general.file_type (llama_ftype): ggml_file_type(r.type), or 12 (MOSTLY_Q3_K_M), 15
// (MOSTLY_Q4_K_M), 17 (MOSTLY_Q5_K_M).
uint32_t file_type_of(const QuantRecipe& r);
// "q3_k_m", "q4_k_m", "q5_k_m" or a writable type's name as a recipe; false for anything else.
bool parse_recipe(const std::string& name, QuantRecipe& r);

class TypePlan {
 public:
  // names: every tensor of the file, in its order (the mix counts the attention-value and MLP-down
  // matrices in that order, as llama.cpp does).
  TypePlan(const QuantRecipe& r, const std::vector<std::string>& names);
  // The type of tensor `name` of row-major `shape`, now stored as `current`. 1-D tensors keep
  // `current`, as does position_embd.weight under a mix (llama.cpp never quantizes learned
  // positions). A matrix: the recipe's type for its name, then stored_type_for's rule for rows
  // that do not fill that type's blocks. Every mix: output.weight (token_embd.weight when there is
  // no output.weight: a tied head) Q6_K, or q8_0 when its rows are not a multiple of 256. Q4_K_M and
  // Q5_K_M: attn_v.weight and ffn_down.weight Q6_K in the first and last eighth of their layers and
  // every third between (llama.cpp's use_more_bits), the base type in the others; attn_qkv.weight
  // (the gpt2 layout's fused projection) Q5_K under Q4_K_M, Q6_K under Q5_K_M. Q3_K_M: attn_v.weight
  // Q5_K in the first two layers, Q4_K after; ffn_down.weight Q5_K in the first sixteenth of the
  // layers, Q4_K after; attn_qkv.weight and attn_output.weight Q4_K. The rest the base type.
  GgmlType type_of(const std::string& name, const std::vector<int64_t>& shape, GgmlType current) const;

 private:
  QuantRecipe recipe_;
  bool has_output_ = false;
  struct Layer {
    int i, n;     // the matrix's place among the file's attn_v (or ffn_down) matrices, and their count
    bool attn_v;  // attn_v (else ffn_down)
  };
  std::map<std::string, Layer> layer_of_;
};

}  // namespace atto::io
