// atto/run/lora.h: a LoRA run's adapter file (adapter.safetensors) merged into its base model.
//
//   GPTConfig cfg = run.config.gpt;            // lora_rank 8, lora_targets "qkv"
//   GPT base(cfg_without_lora, rng);           // model.safetensors loaded into it
//   merge_lora_adapter("runs/ft/adapter.safetensors", cfg, base);
//   // base now computes what the adapted model computes: W += (alpha / rank) * B A
//
// The file holds, for every layer the config's lora_targets name in every block,
// "<layer>.lora_A.weight" [rank, in] and "<layer>.lora_B.weight" [out, rank] (PEFT's names under
// atto's layer names), nothing else, every value finite. Anything else is an atto::Error naming
// the file and the tensor.
#pragma once

#include <string>

#include "models/gpt.h"

namespace atto {

void merge_lora_adapter(const std::string& path, const GPTConfig& lora_cfg, GPT& base);

// One adapted layer: its name in state_dict() ("transformer.h.0.attn.c_attn"), A [rank, in] and
// B [out, rank] as the file holds them.
struct LoraLayerAdapter {
  std::string name;
  Tensor a, b;
};
// The adapter file read and checked as merge_lora_adapter checks it (every tensor lora_cfg asks
// for, of the shape `base`'s layer gives it, finite; nothing else), not merged: the adapters in
// the order of base.block_layers (block by block). `base` is any GPT of the run's architecture.
std::vector<LoraLayerAdapter> read_lora_adapter(const std::string& path, const GPTConfig& lora_cfg, const GPT& base);

}  // namespace atto
