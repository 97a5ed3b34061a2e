#include "run/lora.h"

#include <filesystem>
#include <set>

#include "base/error.h"
#include "base/json.h"
#include "io/safetensors.h"
#include "run/run_dir.h"

namespace atto {

void merge_lora_adapter(const std::string& path, const GPTConfig& lora_cfg, GPT& base) {
  ATTO_CHECK(std::filesystem::exists(path),
             "{} is missing: this LoRA run has not saved its adapters yet (a run saves them at each evaluation)",
             path);
  const io::SafetensorsFile f = io::load_safetensors(path);
  const int64_t r = lora_cfg.lora_rank;
  std::set<std::string> expected;
  for (auto& [name, layer] : base.block_layers(lora_cfg.lora_layer_names())) {
    const int64_t out = layer->weight.size(0), in = layer->weight.size(1);
    const std::string a_name = name + ".lora_A.weight", b_name = name + ".lora_B.weight";
    for (const auto& [n, shape] : {std::pair{a_name, Shape{r, in}}, std::pair{b_name, Shape{out, r}}}) {
      ATTO_CHECK(f.contains(n), "{}: tensor '{}' is missing (config.json's lora_rank {} and lora_targets \"{}\" ask for it)",
                 path, n, r, lora_cfg.lora_targets);
      ATTO_CHECK(f.get(n).shape() == shape, "{}: tensor '{}' has shape {}, but lora_rank {} over a {} x {} weight is {}",
                 path, n, shape_str(f.get(n).shape()), r, out, in, shape_str(shape));
      check_finite_tensor(f.get(n), path, n, "the adapter is damaged; retrain, or restore the file from a copy");
      expected.insert(n);
    }
    nn::merge_lora(layer->weight, f.get(a_name), f.get(b_name), lora_cfg.lora_scale());
  }
  for (const std::string& n : f.names)
    ATTO_CHECK(expected.count(n) != 0, "{}: unexpected tensor {}: not an adapter of this run's layers ({})", path,
               json_util::printable(n), lora_cfg.lora_targets);
}

}  // namespace atto
