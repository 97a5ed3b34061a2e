#include "train/checkpoint.h"

#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>

#include "base/error.h"
#include "io/safetensors.h"

namespace atto {

namespace fs = std::filesystem;

namespace {

std::string rng_str(const std::array<uint64_t, 4>& s) { return fmt::format("{} {} {} {}", s[0], s[1], s[2], s[3]); }

std::array<uint64_t, 4> parse_rng(const std::string& v, const std::string& what) {
  std::array<uint64_t, 4> s{};
  size_t pos = 0;
  for (auto& w : s) {
    try {
      size_t used = 0;
      w = std::stoull(v.substr(pos), &used);
      pos += used;
    } catch (const std::exception&) {
      fail("{}: malformed RNG state '{}'", what, v);
    }
  }
  return s;
}

const std::string& meta(const io::SafetensorsFile& f, const char* key) {
  auto it = f.metadata.find(key);
  ATTO_CHECK(it != f.metadata.end(), "{}: metadata key '{}' is missing: not an atto training state", f.path, key);
  return it->second;
}

template <typename T>
T parse_num(const io::SafetensorsFile& f, const char* key) {
  const std::string& v = meta(f, key);
  try {
    if constexpr (std::is_floating_point_v<T>)
      return static_cast<T>(std::stod(v));
    else
      return static_cast<T>(std::stoll(v));
  } catch (const std::exception&) {
    fail("{}: metadata '{}' = '{}' is not a number", f.path, key, v);
  }
}

}  // namespace

void save_train_state(const std::string& path, const nn::Module& model, const optim::Optimizer& opt,
                      const TrainState& st) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& [name, t] : model.state_dict()) tensors.emplace_back("model." + name, t);
  for (const auto& [name, t] : opt.state_dict()) tensors.emplace_back("optim." + name, t);
  std::map<std::string, std::string> md{
      {"atto_format_version", std::to_string(kRunFormatVersion)},
      {"step", std::to_string(st.step)},
      {"data_rng", rng_str(st.data_rng)},
      {"dropout_rng", rng_str(st.dropout_rng)},
      {"best_val_loss", fmt::format("{:.17g}", st.best_val_loss)},
      {"best_step", std::to_string(st.best_step)},
      {"evals_without_improvement", std::to_string(st.evals_without_improvement)},
      {"skipped_steps", std::to_string(st.skipped_steps)},
      {"elapsed_seconds", fmt::format("{:.17g}", st.elapsed_seconds)},
  };
  io::save_safetensors(path, tensors, md);
}

TrainState load_train_state(const std::string& path, nn::Module& model, optim::Optimizer& opt) {
  ATTO_CHECK(fs::exists(path), "{} does not exist: this run directory has no training state to resume from", path);
  const io::SafetensorsFile f = io::load_safetensors(path);
  TrainState st;
  st.step = parse_num<int64_t>(f, "step");
  st.data_rng = parse_rng(meta(f, "data_rng"), path);
  st.dropout_rng = parse_rng(meta(f, "dropout_rng"), path);
  st.best_val_loss = parse_num<double>(f, "best_val_loss");
  st.best_step = parse_num<int64_t>(f, "best_step");
  st.evals_without_improvement = parse_num<int64_t>(f, "evals_without_improvement");
  st.skipped_steps = parse_num<int64_t>(f, "skipped_steps");
  st.elapsed_seconds = parse_num<double>(f, "elapsed_seconds");
  std::vector<std::pair<std::string, Tensor>> weights;
  optim::StateDict moments;
  for (const auto& name : f.names) {
    if (name.rfind("model.", 0) == 0)
      weights.emplace_back(name.substr(6), f.get(name));
    else if (name.rfind("optim.", 0) == 0)
      moments.emplace_back(name.substr(6), f.get(name));
    else
      fail("{}: unexpected tensor '{}' (expected model.* or optim.*)", path, name);
  }
  model.load_state_dict(weights, path);
  opt.load_state_dict(moments);
  return st;
}

}  // namespace atto
