// A LoRA run's adapter.safetensors (run/lora.h: merge_lora_adapter) merged into a fixed tiny base
// (vocabulary 5, d_model 4, one layer, two heads; lora_rank 2 on qkv and fc2: adapters for
// transformer.h.0.attn.c_attn [12, 4] and transformer.h.0.mlp.c_proj [4, 16]). An adapter that
// merges runs one forward pass.
#include <fstream>

#include "autograd/tape.h"
#include "common.h"
#include "run/lora.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = atto::fuzz::temp_file("", "lora-probe") + ".safetensors";
  {
    std::ofstream out(path, std::ios::binary | std::ios::trunc);
    out.write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    if (!out) __builtin_trap();
  }
  atto::GPTConfig cfg;
  cfg.vocab_size = 5;
  cfg.block_size = 4;
  cfg.n_layers = 1;
  cfg.n_heads = 2;
  cfg.d_model = 4;
  atto::Rng rng(1);
  atto::GPT base(cfg, rng);
  cfg.lora_rank = 2;
  cfg.lora_targets = "qkv,fc2";
  atto::fuzz::expect_errors([&] {
    atto::merge_lora_adapter(path, cfg, base);
    atto::NoGradGuard ng;
    (void)base.forward({1, 2, 3}, 1, 3);
  });
  return 0;
}
