#include "io/gguf_recipe.h"

namespace atto::io {

namespace {

// llama.cpp's use_more_bits: the first and last eighth of n, and every third between.
bool use_more_bits(int i, int n) { return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2; }

bool contains(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

}  // namespace

QuantRecipe QuantRecipe::k_mix(GgmlType base) {
  QuantRecipe r(base);
  r.mix = true;
  return r;
}

std::string to_string(const QuantRecipe& r) {
  if (!r.mix) return to_string(r.type);
  return std::string(to_string(r.type)) + "_m";
}

uint32_t file_type_of(const QuantRecipe& r) {
  if (!r.mix) return ggml_file_type(r.type);
  return r.type == GgmlType::Q5_K ? 17 : r.type == GgmlType::Q4_K ? 15 : 12;
}

bool parse_recipe(const std::string& name, QuantRecipe& r) {
  for (GgmlType t : {GgmlType::F32, GgmlType::F16, GgmlType::BF16, GgmlType::Q8_0, GgmlType::Q6_K, GgmlType::Q5_K,
                     GgmlType::Q5_1, GgmlType::Q5_0, GgmlType::Q4_K, GgmlType::Q4_1, GgmlType::Q4_0, GgmlType::Q3_K}) {
    const bool mixes = t == GgmlType::Q5_K || t == GgmlType::Q4_K || t == GgmlType::Q3_K;
    if (name == to_string(t) || (mixes && name == std::string(to_string(t)) + "_m")) {
      r = name == to_string(t) ? QuantRecipe(t) : QuantRecipe::k_mix(t);
      return true;
    }
  }
  return false;
}

TypePlan::TypePlan(const QuantRecipe& r, const std::vector<std::string>& names) : recipe_(r) {
  if (!r.mix) return;
  // llama.cpp counts attention-value matrices (attn_v, and the fused attn_qkv) over the file, and
  // takes the MLP-down count from the layers (one matrix each); both are numbered in the file's
  // order.
  int n_v = 0, n_down = 0;
  for (const std::string& n : names) {
    has_output_ = has_output_ || n == "output.weight";
    n_v += contains(n, "attn_v.weight") || contains(n, "attn_qkv.weight") ? 1 : 0;
    n_down += contains(n, "ffn_down.weight") ? 1 : 0;
  }
  int i_v = 0, i_down = 0;
  for (const std::string& n : names)
    if (contains(n, "attn_v.weight"))
      layer_of_[n] = {i_v++, n_v, true};
    else if (contains(n, "ffn_down.weight"))
      layer_of_[n] = {i_down++, n_down, false};
}

GgmlType TypePlan::type_of(const std::string& name, const std::vector<int64_t>& shape, GgmlType current) const {
  if (shape.size() < 2 || (recipe_.mix && name == "position_embd.weight")) return current;
  if (!recipe_.mix) return stored_type_for(recipe_.type, shape);
  const bool q3 = recipe_.type == GgmlType::Q3_K;
  GgmlType want = recipe_.type;
  if (name == "output.weight" || (!has_output_ && name == "token_embd.weight")) {
    want = shape.back() % 256 != 0 ? GgmlType::Q8_0 : GgmlType::Q6_K;
  } else if (contains(name, "attn_qkv.weight")) {
    want = q3 ? GgmlType::Q4_K : recipe_.type == GgmlType::Q4_K ? GgmlType::Q5_K : GgmlType::Q6_K;
  } else if (q3 && contains(name, "attn_output.weight")) {
    want = GgmlType::Q4_K;
  } else if (const auto it = layer_of_.find(name); it != layer_of_.end()) {
    const Layer& l = it->second;
    if (q3)
      want = (l.attn_v ? l.i < 2 : l.i < l.n / 16) ? GgmlType::Q5_K : GgmlType::Q4_K;
    else if (use_more_bits(l.i, l.n))
      want = GgmlType::Q6_K;
  }
  return stored_type_for(want, shape);
}

}  // namespace atto::io
