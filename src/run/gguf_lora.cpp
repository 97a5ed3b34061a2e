#include "run/gguf_lora.h"

#include <utility>

#include "base/error.h"
#include "io/gguf.h"
#include "run/gguf_model.h"

namespace atto {

namespace {

using io::GgufValue;

// The base GGUF tensors (without ".weight") of one adapted layer, in row-block order:
// "transformer.h.3.attn.c_attn" -> blk.3.attn_qkv (gpt2) or blk.3.attn_q, attn_k, attn_v (llama).
std::vector<std::string> gguf_pieces(const std::string& layer, const std::string& arch) {
  const std::string prefix = "transformer.h.";
  const size_t dot = layer.find('.', prefix.size());
  ATTO_CHECK(layer.starts_with(prefix) && dot != std::string::npos, "GGUF LoRA export: {} is not a block's layer",
             layer);
  const std::string blk = "blk." + layer.substr(prefix.size(), dot - prefix.size()) + ".";
  const std::string in_block = layer.substr(dot + 1);
  const bool gpt2 = arch == "gpt2";
  std::vector<std::string> names;
  if (in_block == "attn.c_attn") {
    names = gpt2 ? std::vector<std::string>{"attn_qkv"} : std::vector<std::string>{"attn_q", "attn_k", "attn_v"};
  } else if (in_block == "attn.c_proj") {
    names = {"attn_output"};
  } else if (in_block == "mlp.c_fc") {
    names = {gpt2 ? "ffn_up" : "ffn_gate"};  // llama: silu(c_fc x) * c_fc2 x
  } else if (in_block == "mlp.c_fc2" && !gpt2) {
    names = {"ffn_up"};
  } else if (in_block == "mlp.c_proj") {
    names = {"ffn_down"};
  } else {
    fail("GGUF LoRA export: the {} layout has no GGUF tensor for {}", arch, layer);
  }
  for (std::string& n : names) n = blk + n;
  return names;
}

// The rows of each GGUF piece of an adapted layer of `out` rows: llama's q, k, v take C, KV, KV
// of c_attn's (KV < C under grouped-query attention); a layer of one piece takes them all.
std::vector<int64_t> piece_rows(const GPTConfig& base, size_t pieces, int64_t out) {
  if (pieces == 1) return {out};
  const int64_t C = base.d_model, KV = base.kv_heads() * (base.d_model / base.n_heads);
  ATTO_CHECK(pieces == 3 && out == C + 2 * KV, "GGUF LoRA export: {} rows in {} pieces for a model of width {}", out,
             pieces, C);
  return {C, KV, KV};
}

// Adds NAME.lora_a (A) and NAME.lora_b (B's rows of each piece) for one adapted layer.
void add_layer(io::GgufWriter& w, const LoraLayerAdapter& l, const std::string& arch, const GPTConfig& base,
               int64_t rank) {
  const Tensor a = l.a.contiguous(), b = l.b.contiguous();
  ATTO_CHECK(a.ndim() == 2 && b.ndim() == 2 && a.size(0) == rank && b.size(1) == rank,
             "GGUF LoRA export: {}: A is {} and B is {}, not [{}, in] and [out, {}]", l.name, shape_str(a.shape()),
             shape_str(b.shape()), rank, rank);
  const std::vector<std::string> pieces = gguf_pieces(l.name, arch);
  const std::vector<int64_t> piece = piece_rows(base, pieces.size(), b.size(0));
  int64_t row0 = 0;
  for (size_t p = 0; p < pieces.size(); row0 += piece[p], ++p) {
    const std::string& n = pieces[p];
    const int64_t rows = piece[p];
    w.add_tensor(n + ".weight.lora_a", a.shape(), io::GgmlType::F32,
                 std::span<const float>(a.data(), static_cast<size_t>(a.numel())));
    w.add_tensor(n + ".weight.lora_b", {rows, rank}, io::GgmlType::F32,
                 std::span<const float>(b.data() + row0 * rank, static_cast<size_t>(rows * rank)));
  }
}

}  // namespace

std::string write_gguf_lora(const GPTConfig& base, const GPTConfig& lora_cfg,
                            const std::vector<LoraLayerAdapter>& adapters, const std::string& path) {
  const std::string arch = gguf_arch_name(base);
  ATTO_CHECK(lora_cfg.lora(), "GGUF LoRA export: the configuration has no adapters (lora_rank 0)");
  ATTO_CHECK(!adapters.empty(), "GGUF LoRA export: no adapted layers");
  const float alpha = lora_cfg.lora_alpha > 0.0f ? lora_cfg.lora_alpha : static_cast<float>(lora_cfg.lora_rank);
  io::GgufWriter w;
  w.add("general.architecture", GgufValue::string(arch));
  w.add("general.type", GgufValue::string("adapter"));
  w.add("general.name", GgufValue::string("atto"));
  w.add("general.file_type", GgufValue::u32(0));  // f32
  w.add("general.alignment", GgufValue::u32(32));
  w.add("adapter.type", GgufValue::string("lora"));
  w.add("adapter.lora.alpha", GgufValue::f32(alpha));
  for (const LoraLayerAdapter& l : adapters) add_layer(w, l, arch, base, lora_cfg.lora_rank);
  w.write(path);
  return arch;
}

std::string export_gguf_lora(const LoadedModel& lm, const GPTConfig& lora_cfg, const std::string& path) {
  ATTO_CHECK(!lm.lora_adapter.empty() && lora_cfg.lora(),
             "GGUF LoRA export: the model is not a LoRA run (it was not trained with --lora-rank)");
  const GPT& base = *lm.model;
  return write_gguf_lora(base.config(), lora_cfg, read_lora_adapter(lm.lora_adapter, lora_cfg, base), path);
}

}  // namespace atto
