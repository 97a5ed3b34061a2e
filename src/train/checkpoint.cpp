#include "train/checkpoint.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>

#include "base/error.h"
#include "base/json.h"
#include "io/safetensors.h"

namespace atto {

namespace fs = std::filesystem;

namespace {

constexpr int64_t kMaxCount = std::numeric_limits<int64_t>::max();

// The metadata keys of train_state.safetensors, all required, no others.
constexpr const char* kFormatKey = "atto_format_version";
constexpr const char* kStateKeys[] = {kFormatKey,
                                      "step",
                                      "data_rng",
                                      "dropout_rng",
                                      "best_val_loss",
                                      "best_step",
                                      "evals_without_improvement",
                                      "skipped_steps",
                                      "elapsed_seconds"};

std::string rng_str(const std::array<uint64_t, 4>& s) { return fmt::format("{} {} {} {}", s[0], s[1], s[2], s[3]); }

// train_state's metadata, read strictly: each value parsed whole, in range, as atto writes it.
// Every failure names the file, the key and the value (bounded and escaped).
class StrictMeta {
 public:
  explicit StrictMeta(const io::SafetensorsFile& f) : f_(f) {
    for (const auto& [key, v] : f.metadata)
      if (std::find_if(std::begin(kStateKeys), std::end(kStateKeys), [&](const char* k) { return key == k; }) ==
          std::end(kStateKeys))
        fail("{}: unknown metadata key {}: not a training state this atto wrote", f.path, json_util::printable(key));
  }

  const std::string& text(const char* key) const {
    auto it = f_.metadata.find(key);
    ATTO_CHECK(it != f_.metadata.end(), "{}: metadata key '{}' is missing: not an atto training state", f_.path, key);
    return it->second;
  }

  [[noreturn]] void bad(const char* key, std::string_view why) const {
    fail("{}: metadata '{}' = {}: {}; the training state is damaged (restore it from a copy, or start the run again)",
         f_.path, key, json_util::printable(text(key)), why);
  }

  // A decimal integer in [lo, hi], written exactly as atto writes it (no '+', no leading zeros
  // or spaces, a '-' only where negatives belong).
  int64_t integer(const char* key, int64_t lo, int64_t hi) const {
    const std::string& v = text(key);
    int64_t x = 0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    if (ec == std::errc::result_out_of_range) bad(key, "out of the range of a 64-bit integer");
    if (ec != std::errc() || end != v.data() + v.size() || std::to_string(x) != v)
      bad(key, lo >= 0 ? "not a non-negative decimal integer" : "not a decimal integer");
    if (x < lo || x > hi) bad(key, fmt::format("outside [{}, {}]", lo, hi));
    return x;
  }

  // A finite decimal number (the whole string) that is at least lo.
  double real(const char* key, double lo) const {
    const std::string& v = text(key);
    double x = 0.0;
    const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
    if (ec == std::errc::result_out_of_range) bad(key, "out of the range of a double");
    if (ec != std::errc() || end != v.data() + v.size()) bad(key, "not a decimal number");
    if (!std::isfinite(x)) bad(key, "not a finite number");
    if (x < lo) bad(key, fmt::format("below {}", lo));
    return x;
  }

  // A xoshiro256 state: exactly 4 unsigned decimal words, single spaces between, nothing after,
  // not all zero (the generator would give zeros for ever).
  std::array<uint64_t, 4> rng(const char* key) const {
    const std::string& v = text(key);
    const char *p = v.data(), *end = v.data() + v.size();
    std::array<uint64_t, 4> s{};
    for (size_t i = 0; i < s.size(); ++i) {
      if (i > 0 && (p == end || *p++ != ' ')) bad(key, "expected 4 words separated by single spaces");
      const auto [next, ec] = std::from_chars(p, end, s[i]);
      if (ec != std::errc()) bad(key, fmt::format("word {} is not an unsigned 64-bit decimal integer", i + 1));
      p = next;
    }
    if (p != end) bad(key, "characters after the 4th word");
    if (s == std::array<uint64_t, 4>{}) bad(key, "all zero, which is not a state of the generator");
    return s;
  }

 private:
  const io::SafetensorsFile& f_;
};

// Every tensor finite (a NaN moment would make every step non-finite), Adam's second moments
// non-negative (their square root is taken).
void check_state_tensors(const io::SafetensorsFile& f) {
  for (const std::string& name : f.names) {
    const Tensor& t = f.get(name);
    const float* p = t.data();
    const bool second_moment = name.ends_with(".exp_avg_sq");
    const float* bad =
        std::find_if(p, p + t.numel(), [&](float x) { return !std::isfinite(x) || (second_moment && x < 0.0f); });
    ATTO_CHECK(bad == p + t.numel(),
               "{}: tensor '{}' holds {} ({} at element {} of {}): the training state is damaged (restore it from "
               "a copy, or start the run again)",
               f.path, name, std::isfinite(*bad) ? "a negative second moment" : "non-finite values", *bad, bad - p,
               t.numel());
  }
}

}  // namespace

void save_train_state(const std::string& path, const nn::Module& model, const optim::Optimizer& opt,
                      const TrainState& st) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  // The weights that train (all of them; under LoRA the adapters: the frozen base is in
  // model.safetensors and never changes).
  for (const auto& [name, t] : model.state_dict(nn::Module::Which::Trainable)) tensors.emplace_back("model." + name, t);
  for (const auto& [name, t] : opt.state_dict()) tensors.emplace_back("optim." + name, t);
  std::map<std::string, std::string> md{
      {kFormatKey, std::to_string(kRunFormatVersion)},
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

TrainState parse_train_state(const io::SafetensorsFile& f) {
  const StrictMeta m(f);
  const int64_t version = m.integer(kFormatKey, 0, kMaxCount);
  ATTO_CHECK(version >= 1 && version <= kRunFormatVersion,
             "{}: metadata '{}' = {}: this atto reads training states of format version 1 to {} (a newer atto "
             "wrote this one?)",
             f.path, kFormatKey, version, kRunFormatVersion);
  TrainState st;
  st.step = m.integer("step", 0, kMaxCount);
  st.data_rng = m.rng("data_rng");
  st.dropout_rng = m.rng("dropout_rng");
  st.best_val_loss = m.real("best_val_loss", -std::numeric_limits<double>::max());
  st.best_step = m.integer("best_step", -1, st.step);  // -1: no evaluation has saved a model yet
  st.evals_without_improvement = m.integer("evals_without_improvement", 0, st.step);
  st.skipped_steps = m.integer("skipped_steps", 0, kMaxCount);
  st.elapsed_seconds = m.real("elapsed_seconds", 0.0);
  return st;
}

TrainState load_train_state(const std::string& path, nn::Module& model, optim::Optimizer& opt) {
  ATTO_CHECK(fs::exists(path),
             "{} does not exist: this run directory has no training state to resume from (the run never saved a "
             "step: it saves at each evaluation); start it again (`atto train ... --out {} --force`, or remove the "
             "folder first)",
             path, fs::path(path).parent_path().string());
  const io::SafetensorsFile f = io::load_safetensors(path);
  const TrainState st = parse_train_state(f);
  check_state_tensors(f);
  std::vector<std::pair<std::string, Tensor>> weights;
  optim::StateDict moments;
  for (const auto& name : f.names) {
    if (name.rfind("model.", 0) == 0)
      weights.emplace_back(name.substr(6), f.get(name));
    else if (name.rfind("optim.", 0) == 0)
      moments.emplace_back(name.substr(6), f.get(name));
    else
      fail("{}: unexpected tensor {} (expected model.* or optim.*)", path, json_util::printable(name));
  }
  model.load_state_dict(weights, path, nn::Module::Which::Trainable);
  try {
    opt.load_state_dict(moments);
  } catch (const Error& e) {
    fail("{}: {}", path, e.what());
  }
  ATTO_CHECK(opt.steps_taken() == st.step,
             "{}: metadata 'step' = {} disagrees with the optimizer state, which has taken {} steps: the training "
             "state is damaged (restore it from a copy, or start the run again)",
             path, st.step, opt.steps_taken());
  return st;
}

namespace {

// path holds exactly these tensors of the model, with their shapes, every value finite.
void check_weights_file(const std::string& path, const std::vector<std::pair<std::string, Tensor>>& want) {
  const io::SafetensorsHeader h = io::read_safetensors_header(path);
  for (const auto& [name, t] : want) {
    const io::TensorInfo* info = h.find(name);
    ATTO_CHECK(info != nullptr, "{}: tensor '{}' of this run's model is missing: restore the file from a copy", path,
               name);
    ATTO_CHECK(info->shape == t.shape(),
               "{}: tensor '{}' has shape {}, but this run's model has {}: restore the file "
               "from a copy",
               path, name, shape_str(info->shape), shape_str(t.shape()));
  }
  ATTO_CHECK(h.names.size() == want.size(), "{}: {} tensors, but this run's model has {}: restore the file from a copy",
             path, h.names.size(), want.size());
  check_finite_weights(io::load_safetensors(path));
}

}  // namespace

void check_best_weights(const std::string& dir, const TrainState& st, const nn::Module& model) {
  using Which = nn::Module::Which;
  // LoRA: the frozen base (model.safetensors) was read and checked when the task was built
  // (load_lora_base); the best weights here are the adapters.
  const bool frozen = !model.state_dict(Which::Frozen).empty();
  const std::string path = run_path(dir, best_weights_file(model));
  if (!fs::exists(path)) {
    ATTO_CHECK(st.best_step < 0,
               "{} is missing, but the training state says that the best model was saved at step {}: restore the "
               "file from a copy",
               path, st.best_step);
    return;
  }
  check_weights_file(path, model.state_dict(frozen ? Which::Trainable : Which::All));
}

void check_state_fits_run(const TrainState& st, const std::string& state_path, int64_t planned_steps,
                          const std::string& config_path) {
  ATTO_CHECK(st.step <= planned_steps,
             "{}: metadata 'step' = {} is beyond the {} steps that {} plans for this run: the two files do not "
             "belong to one run (restore them from a copy)",
             state_path, st.step, planned_steps, config_path);
}

}  // namespace atto
