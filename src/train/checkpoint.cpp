#include "train/checkpoint.h"

#include <filesystem>

#include "io/file.h"
#include "io/safetensors.h"
#include "tensor/error.h"

namespace atto {

namespace fs = std::filesystem;

std::string run_path(const std::string& dir, const char* file) { return (fs::path(dir) / file).string(); }

void save_model_weights(const std::string& path, const nn::Module& model) {
  io::save_safetensors(path, model.state_dict(),
                       {{"format", "pt"}, {"atto_format_version", std::to_string(kRunFormatVersion)}});
}

void load_model_weights(const std::string& path, nn::Module& model) {
  const io::SafetensorsFile f = io::load_safetensors(path);
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& name : f.names) tensors.emplace_back(name, f.get(name));
  model.load_state_dict(tensors, path);
}

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
    if constexpr (std::is_floating_point_v<T>) return static_cast<T>(std::stod(v));
    else return static_cast<T>(std::stoll(v));
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
    if (name.rfind("model.", 0) == 0) weights.emplace_back(name.substr(6), f.get(name));
    else if (name.rfind("optim.", 0) == 0) moments.emplace_back(name.substr(6), f.get(name));
    else fail("{}: unexpected tensor '{}' (expected model.* or optim.*)", path, name);
  }
  model.load_state_dict(weights, path);
  opt.load_state_dict(moments);
  return st;
}

RunConfig load_run_config(const std::string& dir) {
  ATTO_CHECK(fs::is_directory(dir), "{} is not a run directory (it does not exist or is not a directory)", dir);
  const std::string path = run_path(dir, "config.json");
  ATTO_CHECK(fs::exists(path), "{} has no config.json: not an atto run directory", dir);
  return run_config_from_json(io::read_json(path), path);
}

CharTokenizer load_tokenizer(const std::string& dir) {
  const std::string path = run_path(dir, "tokenizer.json");
  ATTO_CHECK(fs::exists(path), "{} has no tokenizer.json: not a complete atto run directory", dir);
  return CharTokenizer::from_json(io::read_json(path), path);
}

LoadedModel load_run(const std::string& dir) {
  LoadedModel lm;
  lm.config = load_run_config(dir);
  ATTO_CHECK(lm.config.task == "gpt", "{} holds a {} model, not a GPT: use `atto translate --model {}`", dir,
             lm.config.task, dir);
  lm.tokenizer = load_tokenizer(dir);
  ATTO_CHECK(lm.tokenizer.vocab_size() == lm.config.model.vocab_size,
             "{}: tokenizer.json has {} tokens but config.json says vocab_size {}", dir, lm.tokenizer.vocab_size(),
             lm.config.model.vocab_size);
  const std::string weights = run_path(dir, "model.safetensors");
  ATTO_CHECK(fs::exists(weights), "{} has no model.safetensors: training has not saved a checkpoint yet", dir);
  Rng rng(0);  // the weights are overwritten by the checkpoint
  lm.model = std::make_unique<GPT>(lm.config.model, rng);
  load_model_weights(weights, *lm.model);
  lm.model->eval();
  return lm;
}

LoadedSeq2Seq load_seq2seq_run(const std::string& dir) {
  LoadedSeq2Seq lm;
  lm.config = load_run_config(dir);
  ATTO_CHECK(lm.config.task == "seq2seq", "{} holds a GPT language model, not an encoder-decoder: use `atto sample "
             "--model {}`", dir, dir);
  lm.src_tok = load_tokenizer_file(run_path(run_path(dir, "src"), "tokenizer.json"));
  lm.tgt_tok = load_tokenizer_file(run_path(run_path(dir, "tgt"), "tokenizer.json"));
  const Seq2SeqConfig& m = lm.config.seq2seq;
  ATTO_CHECK(lm.src_tok->vocab_size() == m.src_vocab && lm.tgt_tok->vocab_size() == m.tgt_vocab,
             "{}: the tokenizers have {} / {} tokens but config.json says {} / {}", dir, lm.src_tok->vocab_size(),
             lm.tgt_tok->vocab_size(), m.src_vocab, m.tgt_vocab);
  const std::string weights = run_path(dir, "model.safetensors");
  ATTO_CHECK(fs::exists(weights), "{} has no model.safetensors: training has not saved a checkpoint yet", dir);
  Rng rng(0);
  lm.model = std::make_unique<Seq2Seq>(m, rng);
  load_model_weights(weights, *lm.model);
  lm.model->eval();
  return lm;
}

bool looks_like_run(const std::string& dir) {
  for (const char* f : {"config.json", "model.safetensors", "train_state.safetensors", "metrics.jsonl"})
    if (fs::exists(run_path(dir, f))) return true;
  return false;
}

}  // namespace atto
