#include "run/run_dir.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <filesystem>
#include <limits>

#include "base/error.h"
#include "io/file.h"
#include "io/gguf.h"
#include "io/safetensors.h"
#include "run/gguf_model.h"
#include "run/lora.h"

namespace atto {

namespace fs = std::filesystem;

std::string run_path(const std::string& dir, const char* file) { return (fs::path(dir) / file).string(); }

const char* best_weights_file(const nn::Module& model) {
  return model.state_dict(nn::Module::Which::Frozen).empty() ? "model.safetensors" : kAdapterFile;
}

void save_model_weights(const std::string& path, const nn::Module& model, nn::Module::Which which) {
  io::save_safetensors(path, model.state_dict(which),
                       {{"format", "pt"}, {"atto_format_version", std::to_string(kRunFormatVersion)}});
}

void save_best_weights(const std::string& dir, const nn::Module& model) {
  const char* file = best_weights_file(model);
  save_model_weights(run_path(dir, file), model,
                     file == std::string(kAdapterFile) ? nn::Module::Which::Trainable : nn::Module::Which::All);
}

namespace {

void load_weights_from(const io::SafetensorsFile& f, nn::Module& model,
                       nn::Module::Which which = nn::Module::Which::All) {
  std::vector<std::pair<std::string, Tensor>> tensors;
  for (const auto& name : f.names) tensors.emplace_back(name, f.get(name));
  model.load_state_dict(tensors, f.path, which);
}

}  // namespace

void load_model_weights(const std::string& path, nn::Module& model, nn::Module::Which which) {
  load_weights_from(io::load_safetensors(path), model, which);
}

void load_lora_base(const std::string& dir, nn::Module& model) {
  const std::string base = run_path(dir, "model.safetensors");
  ATTO_CHECK(fs::exists(base),
             "{} is missing: this LoRA run keeps its frozen base weights there; restore the file from a copy", base);
  const io::SafetensorsFile f = io::load_safetensors(base);
  check_finite_weights(f);
  load_weights_from(f, model, nn::Module::Which::Frozen);
}

void check_finite_tensor(const Tensor& t, const std::string& path, const std::string& name, const char* what_to_do) {
  const float* p = t.data();
  const float* bad = std::find_if(p, p + t.numel(), [](float x) { return !std::isfinite(x); });
  ATTO_CHECK(bad == p + t.numel(), "{}: tensor '{}' holds non-finite values ({} at element {} of {}): {}", path, name,
             *bad, bad - p, t.numel(), what_to_do);
}

void check_finite_weights(const io::SafetensorsFile& f) {
  for (const std::string& name : f.names)
    check_finite_tensor(f.get(name), f.path, name,
                        "the weights are damaged, and the model would produce non-finite logits; retrain, or restore "
                        "the file from a copy");
}

RunConfig load_run_config(const std::string& dir) {
  if (fs::is_regular_file(dir) && io::is_gguf_file(dir)) return gguf_run_config(dir);  // a GGUF file (gguf_model.h)
  ATTO_CHECK(fs::exists(dir), "{} is not a run directory or a GGUF file: it does not exist", dir);
  ATTO_CHECK(!fs::is_regular_file(dir),
             "{} is not a run directory or a GGUF file: it is a file that does not start with GGUF's magic "
             "bytes 'GGUF' (or cannot be read); pass a run directory (atto train --out) or a .gguf file (atto export)",
             dir);
  ATTO_CHECK(fs::is_directory(dir), "{} is not a run directory (it is not a directory)", dir);
  const std::string path = run_path(dir, "config.json");
  ATTO_CHECK(fs::exists(path), "{} has no config.json: not an atto run directory", dir);
  return run_config_from_json(io::read_json(path), path);
}

std::unique_ptr<GptTokenizer> load_tokenizer(const std::string& dir) {
  const std::string path = run_path(dir, "tokenizer.json");
  ATTO_CHECK(fs::exists(path), "{} has no tokenizer.json: not a complete atto run directory", dir);
  return load_gpt_tokenizer(io::read_json(path), path, dir);
}

namespace {

// A dimension that a config.json key fixes in a tensor of model.safetensors.
struct Dim {
  std::string key;  // as the message shows it
  int64_t value;
};
struct ExpectedTensor {
  std::string name;
  std::vector<Dim> dims;
};

// config.json's dimensions against the shapes in model.safetensors's header, checked before a
// model of that config is built: a damaged value (block_size 1000000000) must be an error naming
// both files, not a request for billions of floats.
void check_dims(const io::SafetensorsHeader& h, const std::string& cfg_path, const std::vector<ExpectedTensor>& want) {
  for (const ExpectedTensor& e : want) {
    const io::TensorInfo* t = h.find(e.name);
    ATTO_CHECK(t != nullptr,
               "{}: tensor '{}' is missing, but {} describes a model that has it: the two files do not "
               "belong to one model",
               h.path, e.name, cfg_path);
    for (size_t i = 0; i < e.dims.size(); ++i)
      ATTO_CHECK(t->shape.size() == e.dims.size() && t->shape[i] == e.dims[i].value,
                 "{}: {} is {}, but tensor '{}' in {} has shape {} (its dimension {} is {}): config.json and "
                 "model.safetensors do not belong to one model; restore the run's config.json",
                 cfg_path, e.dims[i].key, e.dims[i].value, e.name, h.path, shape_str(t->shape), i, e.dims[i].key);
  }
}

// Layers "<prefix><i>.*" in the header must be exactly 0 .. value - 1.
void check_layers(const io::SafetensorsHeader& h, const std::string& cfg_path, const std::string& prefix,
                  const char* key, int64_t value) {
  int64_t n = 0;  // one more than the highest layer index
  for (const std::string& name : h.names) {
    if (!name.starts_with(prefix)) continue;
    int64_t i = 0;  // a damaged index that does not parse or overflows counts as layer 0
    std::from_chars(name.data() + prefix.size(), name.data() + name.size(), i);
    if (i >= 0 && i < std::numeric_limits<int32_t>::max()) n = std::max(n, i + 1);
  }
  ATTO_CHECK(n == value,
             "{}: {} is {}, but {} holds {} layers (tensors {}<i>.*): config.json and model.safetensors "
             "do not belong to one model; restore the run's config.json",
             cfg_path, key, value, h.path, n, prefix);
}

// d_ff as the FFN's first weight has it: 0 means 4 x d_model (d_model is checked before this).
Dim ffn_width(int64_t d_ff, int64_t d_model) {
  return d_ff > 0 ? Dim{"d_ff", d_ff} : Dim{"d_ff (0 = 4 x d_model)", 4 * d_model};
}

// A sinusoidal table has no tensor in model.safetensors to check its length against: the length
// is bounded by kMaxPositions instead (block_size 1000000000 asked for 64e9 floats).
void check_positions(const std::string& cfg_path, PosKind pos, const char* key, int64_t value) {
  if (pos != PosKind::Sinusoidal) return;
  ATTO_CHECK(value >= 1 && value <= kMaxPositions,
             "{}: {} is {}, outside [1, {}], atto's limit on positions "
             "(sinusoidal positions have no tensor in model.safetensors to check it against): restore the run's "
             "config.json",
             cfg_path, key, value, kMaxPositions);
}

// The config's own checks, with the file named.
template <typename Config>
void validate_config(const Config& m, const std::string& cfg_path) {
  try {
    m.validate();
  } catch (const Error& e) {
    fail("{}: {}", cfg_path, e.what());
  }
}

void check_gpt_config(const GPTConfig& m, const std::string& cfg_path, const io::SafetensorsHeader& h) {
  const Dim V{"vocab_size", m.vocab_size}, C{"d_model", m.d_model};
  std::vector<ExpectedTensor> want;
  if (m.pos == PosKind::Learned) want.push_back({"transformer.wpe.weight", {{"block_size", m.block_size}, C}});
  want.push_back({"transformer.wte.weight", {V, C}});
  want.push_back({"lm_head.weight", {V, C}});
  check_dims(h, cfg_path, want);
  check_dims(h, cfg_path, {{"transformer.h.0.mlp.c_fc.weight", {ffn_width(m.d_ff, m.d_model), C}}});
  check_layers(h, cfg_path, "transformer.h.", "n_layers", m.n_layers);
  check_positions(cfg_path, m.pos, "block_size", m.block_size);
  validate_config(m, cfg_path);
}

void check_seq2seq_config(const Seq2SeqConfig& m, const std::string& cfg_path, const io::SafetensorsHeader& h) {
  const Dim C{"d_model", m.d_model}, S{"src_vocab_size", m.src_vocab}, T{"tgt_vocab_size", m.tgt_vocab};
  std::vector<ExpectedTensor> want;
  if (m.pos == PosKind::Learned)
    for (const char* side : {"encoder", "decoder"})
      want.push_back({std::string(side) + ".embed_positions.weight", {{"max_len", m.max_len}, C}});
  want.push_back({"encoder.embed_tokens.weight", {S, C}});
  want.push_back({"decoder.embed_tokens.weight", {T, C}});
  want.push_back({"lm_head.weight", {T, C}});
  check_dims(h, cfg_path, want);
  check_dims(h, cfg_path, {{"encoder.layers.0.mlp.c_fc.weight", {ffn_width(m.d_ff, m.d_model), C}}});
  check_layers(h, cfg_path, "encoder.layers.", "n_enc_layers", m.n_enc_layers);
  check_layers(h, cfg_path, "decoder.layers.", "n_dec_layers", m.n_dec_layers);
  check_positions(cfg_path, m.pos, "max_len", m.max_len);
  validate_config(m, cfg_path);
}

// model.safetensors of a run, after its header passed `check` against config.json.
template <typename Check, typename Config>
io::SafetensorsFile read_checked_weights(const std::string& dir, Check check, const Config& m) {
  const std::string weights = run_path(dir, "model.safetensors");
  ATTO_CHECK(fs::exists(weights), "{} has no model.safetensors: training has not saved a checkpoint yet", dir);
  check(m, run_path(dir, "config.json"), io::read_safetensors_header(weights));
  return io::load_safetensors(weights);
}

}  // namespace

LoadedModel load_run(const std::string& dir, WeightStorage kept) {
  if (fs::is_regular_file(dir) && io::is_gguf_file(dir)) return load_gguf(dir, kept);
  LoadedModel lm;
  lm.config = load_run_config(dir);
  ATTO_CHECK(lm.config.task == Task::Gpt, "{} holds a {} model, not a GPT: use `atto translate --model {}`", dir,
             to_string(lm.config.task), dir);
  io::remove_stale_temp_files(dir);  // leftovers of killed saves; best effort (a read-only run still loads)
  lm.tokenizer = load_tokenizer(dir);
  ATTO_CHECK(lm.tokenizer->vocab_size() == lm.config.gpt.vocab_size,
             "{}: tokenizer.json has {} tokens but config.json says vocab_size {}", dir, lm.tokenizer->vocab_size(),
             lm.config.gpt.vocab_size);
  const io::SafetensorsFile weights = read_checked_weights(dir, check_gpt_config, lm.config.gpt);
  check_finite_weights(weights);
  Rng rng(0);  // the weights are overwritten by the checkpoint
  const GPTConfig with_lora = lm.config.gpt;
  lm.config.gpt.lora_rank = 0;  // a LoRA run: model.safetensors is the base, the adapter merges in
  lm.config.gpt.lora_alpha = 0.0f;
  lm.config.gpt.lora_targets = GPTConfig{}.lora_targets;
  lm.model = std::make_unique<GPT>(lm.config.gpt, rng);
  load_weights_from(weights, *lm.model);
  if (with_lora.lora()) {
    lm.lora_adapter = run_path(dir, kAdapterFile);
    merge_lora_adapter(lm.lora_adapter, with_lora, *lm.model);
  }
  lm.model->eval();
  return lm;
}

LoadedSeq2Seq load_seq2seq_run(const std::string& dir) {
  LoadedSeq2Seq lm;
  lm.config = load_run_config(dir);
  ATTO_CHECK(lm.config.task == Task::Seq2Seq,
             "{} holds a GPT language model, not an encoder-decoder: use `atto sample "
             "--model {}`",
             dir, dir);
  io::remove_stale_temp_files(dir);  // as load_run
  lm.src_tok = load_tokenizer_file(run_path(run_path(dir, "src"), "tokenizer.json"));
  lm.tgt_tok = load_tokenizer_file(run_path(run_path(dir, "tgt"), "tokenizer.json"));
  const Seq2SeqConfig& m = lm.config.seq2seq;
  ATTO_CHECK(lm.src_tok->vocab_size() == m.src_vocab && lm.tgt_tok->vocab_size() == m.tgt_vocab,
             "{}: the tokenizers have {} / {} tokens but config.json says {} / {}", dir, lm.src_tok->vocab_size(),
             lm.tgt_tok->vocab_size(), m.src_vocab, m.tgt_vocab);
  const io::SafetensorsFile weights = read_checked_weights(dir, check_seq2seq_config, m);
  check_finite_weights(weights);  // as load_run: ReLU and masking can hide a NaN from the logits
  Rng rng(0);
  lm.model = std::make_unique<Seq2Seq>(m, rng);
  load_weights_from(weights, *lm.model);
  lm.model->eval();
  return lm;
}

bool looks_like_run(const std::string& dir) {
  for (const char* f : {"config.json", "model.safetensors", "train_state.safetensors", "metrics.jsonl"})
    if (fs::exists(run_path(dir, f))) return true;
  return false;
}

}  // namespace atto
