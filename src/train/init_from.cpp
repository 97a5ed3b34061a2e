#include "train/init_from.h"

#include <fmt/format.h>

#include <cstring>

#include "base/error.h"
#include "run/config_fields.h"
#include "run/hf_model.h"
#include "train/auto_config.h"

namespace atto {

namespace {

std::string shown(const nlohmann::json& v) { return v.is_string() ? v.get<std::string>() : v.dump(); }

[[noreturn]] void conflict(const std::string& flag, const std::string& mine, const std::string& path,
                           const std::string& key, const std::string& theirs) {
  throw UsageError(
      fmt::format("{} {} conflicts with --init-from {} ({} {}): leave it out", flag, mine, path, key, theirs));
}

// Which keys the user gave: a value that differs from default_run_config's. The trainer sees a
// RunConfig, not the flags: apply_flags records nothing, the origin map covers only train keys
// read from a file, and the C API passes JSON. Comparing with the default serves every caller
// (flags, --config files, the C API) alike; a key set to its default value is taken as not given
// (SOURCE's value is used then, which is what leaving it out does).
void check_model_keys(const RunConfig& cfg, const RunConfig& src, const std::string& path) {
  const RunConfig def = default_run_config(Task::Gpt);
  for (const ConfigField& f : config_fields()) {
    // dropout and the LoRA keys are the fine-tuning's own, not the architecture's.
    if (f.section != Section::Model || (f.task && *f.task != Task::Gpt) || std::string(f.key) == "dropout" ||
        std::string(f.key).starts_with("lora_"))
      continue;
    const nlohmann::json mine = f.get(cfg), theirs = f.get(src);
    if (mine == f.get(def) || mine == theirs) continue;
    conflict(f.flag ? flag_name(f.flag) : f.key, shown(mine), path, f.key, shown(theirs));
  }
}

void check_other_keys(const RunConfig& cfg, const LoadedModel& src, const std::string& path) {
  const RunConfig def = default_run_config(Task::Gpt);
  const GPTConfig& m = src.config.gpt;
  if (cfg.train.size != def.train.size && cfg.train.size != gpt_size_of(m))
    conflict("--size", cfg.train.size, path, "d_model, n_layers, n_heads",
             fmt::format("{}, {}, {}", m.d_model, m.n_layers, m.n_heads));
  if (cfg.data.tokenizer != def.data.tokenizer && cfg.data.tokenizer != src.config.data.tokenizer)
    conflict("--tokenizer", to_string(cfg.data.tokenizer), path, "tokenizer", src.tokenizer->kind());
  const int64_t v = src.tokenizer->vocab_size();
  if (cfg.data.tokenizer_vocab_size != def.data.tokenizer_vocab_size && cfg.data.tokenizer_vocab_size != v)
    conflict("--vocab-size", std::to_string(cfg.data.tokenizer_vocab_size), path, "vocabulary", std::to_string(v));
}

}  // namespace

LoadedModel adopt_init_from(RunConfig& cfg) {
  const std::string& path = cfg.train.init_from;
  LoadedModel src = load_model_source(path, "--init-from");
  ATTO_CHECK(src.model != nullptr, "--init-from {}: no model", path);
  src.config.data.tokenizer = parse_tokenizer_kind(src.tokenizer->kind());
  check_model_keys(cfg, src.config, path);
  check_other_keys(cfg, src, path);
  const GPTConfig mine = cfg.gpt;
  cfg.gpt = src.config.gpt;
  cfg.gpt.dropout = mine.dropout;  // auto: 0 for fine-tuning (auto_config.h)
  cfg.gpt.lora_rank = mine.lora_rank;
  cfg.gpt.lora_alpha = mine.lora_alpha;
  cfg.gpt.lora_targets = mine.lora_targets;
  cfg.data.tokenizer = src.config.data.tokenizer;
  return src;
}

void copy_source_weights(const GPT& source, GPT& model, const std::string& path) {
  // Under LoRA the source's weights are the frozen base; the adapters keep their initial values.
  const auto which = model.config().lora() ? nn::Module::Which::Frozen : nn::Module::Which::All;
  const auto from = source.state_dict();
  model.load_state_dict(from, path, which);
  const auto to = model.state_dict(which);
  ATTO_CHECK(from.size() == to.size(), "--init-from {}: {} tensors, the model has {}", path, from.size(), to.size());
  for (size_t i = 0; i < from.size(); ++i) {
    const Tensor& a = from[i].second;
    const Tensor& b = to[i].second;
    ATTO_CHECK(from[i].first == to[i].first && a.numel() == b.numel() &&
                   std::memcmp(a.data(), b.data(), static_cast<size_t>(a.numel()) * sizeof(float)) == 0,
               "--init-from {}: tensor {} was not copied exactly", path, from[i].first);
  }
}

}  // namespace atto
