#include "run/lora.h"

#include <filesystem>
#include <set>

#include "base/error.h"
#include "base/json.h"
#include "io/safetensors.h"
#include "run/run_dir.h"

namespace atto {

std::vector<LoraLayerAdapter> read_lora_adapter(const std::string& path, const GPTConfig& lora_cfg, const GPT& base) {
  ATTO_CHECK(std::filesystem::exists(path),
             "{} is missing: this LoRA run has not saved its adapters yet (a run saves them at each evaluation)",
             path);
  const io::SafetensorsFile f = io::load_safetensors(path);
  const int64_t r = lora_cfg.lora_rank;
  std::set<std::string> expected;
  std::vector<LoraLayerAdapter> out;
  for (auto& [name, layer] : base.block_layers(lora_cfg.lora_layer_names())) {
    const int64_t rows = layer->weight.size(0), in = layer->weight.size(1);
    const std::string a_name = name + ".lora_A.weight", b_name = name + ".lora_B.weight";
    for (const auto& [n, shape] : {std::pair{a_name, Shape{r, in}}, std::pair{b_name, Shape{rows, r}}}) {
      ATTO_CHECK(f.contains(n), "{}: tensor '{}' is missing (config.json's lora_rank {} and lora_targets \"{}\" ask for it)",
                 path, n, r, lora_cfg.lora_targets);
      ATTO_CHECK(f.get(n).shape() == shape, "{}: tensor '{}' has shape {}, but lora_rank {} over a {} x {} weight is {}",
                 path, n, shape_str(f.get(n).shape()), r, rows, in, shape_str(shape));
      check_finite_tensor(f.get(n), path, n, "the adapter is damaged; retrain, or restore the file from a copy");
      expected.insert(n);
    }
    out.push_back({name, f.get(a_name), f.get(b_name)});
  }
  for (const std::string& n : f.names)
    ATTO_CHECK(expected.count(n) != 0, "{}: unexpected tensor {}: not an adapter of this run's layers ({})", path,
               json_util::printable(n), lora_cfg.lora_targets);
  return out;
}

void merge_lora_adapter(const std::string& path, const GPTConfig& lora_cfg, GPT& base) {
  const std::vector<LoraLayerAdapter> adapters = read_lora_adapter(path, lora_cfg, base);
  const auto layers = base.block_layers(lora_cfg.lora_layer_names());
  for (size_t i = 0; i < layers.size(); ++i)
    nn::merge_lora(layers[i].second->weight, adapters[i].a, adapters[i].b, lora_cfg.lora_scale());
}

}  // namespace atto
