#include "run/hf_model.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <set>
#include <span>

#include "base/error.h"
#include "base/json.h"
#include "io/file.h"
#include "io/gguf.h"
#include "run/gguf_model.h"
#include "tokenize/bpe.h"

namespace atto {

namespace {

namespace fs = std::filesystem;

constexpr float kHfNormEps = 1e-5f;       // nn::BlockConfig::norm_eps: atto's LayerNorm
constexpr int64_t kMaxLayers = 100000;  // a damaged index must not ask for that many blocks
constexpr const char* kPrefix = "transformer.";

const char* const kLayerTensors[] = {"ln_1.weight",        "ln_1.bias",        "attn.c_attn.weight", "attn.c_attn.bias",
                                     "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight",        "ln_2.bias",
                                     "mlp.c_fc.weight",    "mlp.c_fc.bias",    "mlp.c_proj.weight",  "mlp.c_proj.bias"};
const char* const kTopTensors[] = {"wte.weight", "wpe.weight", "ln_f.weight", "ln_f.bias", "lm_head.weight"};
const char* const kBuffers[] = {"attn.bias", "attn.masked_bias"};  // the causal mask: not weights

bool is_one_of(const std::string& s, std::span<const char* const> list) {
  return std::any_of(list.begin(), list.end(), [&](const char* x) { return s == x; });
}

// The tensors of a checkpoint by their names without the "transformer." prefix.
struct Layout {
  std::string path;                          // model.safetensors (for messages)
  std::map<std::string, std::string> names;  // canonical name -> the name in the file
  int64_t n_layer = 0;                       // one more than the highest h.<i>
};

// The layer index of "h.<i>.<rest>" (and rest), or -1 for a name of another form.
int64_t layer_of(const std::string& name, std::string& rest) {
  if (!name.starts_with("h.")) return -1;
  const size_t dot = name.find('.', 2);
  if (dot == std::string::npos || dot == 2 || (name[2] == '0' && dot > 3)) return -1;
  int64_t i = -1;
  const auto [p, ec] = std::from_chars(name.data() + 2, name.data() + dot, i);
  if (ec != std::errc() || p != name.data() + dot || i < 0 || i >= kMaxLayers) return -1;
  rest = name.substr(dot + 1);
  return i;
}

Layout scan_names(const io::SafetensorsHeader& h) {
  Layout l;
  l.path = h.path;
  for (const std::string& name : h.names) {
    const std::string c = name.starts_with(kPrefix) ? name.substr(std::strlen(kPrefix)) : name;
    std::string rest;
    const int64_t layer = layer_of(c, rest);
    if (layer >= 0 && is_one_of(rest, kBuffers)) continue;
    ATTO_CHECK(is_one_of(c, kTopTensors) || (layer >= 0 && is_one_of(rest, kLayerTensors)),
               "{}: tensor '{}' is not part of a GPT-2 checkpoint (atto imports wte, wpe, h.<i>.{{ln_1, attn.c_attn, "
               "attn.c_proj, ln_2, mlp.c_fc, mlp.c_proj}}, ln_f and lm_head, with or without the 'transformer.' "
               "prefix): other architectures are not supported yet (docs/import.md)",
               h.path, name);
    const auto [it, added] = l.names.emplace(c, name);
    ATTO_CHECK(added,
               "{}: tensors '{}' and '{}' are the same GPT-2 tensor (with and without the 'transformer.' prefix)",
               h.path, it->second, name);
    if (layer >= 0) l.n_layer = std::max(l.n_layer, layer + 1);
  }
  ATTO_CHECK(l.n_layer > 0, "{}: no tensor h.<i>.*: this is not a GPT-2 checkpoint", h.path);
  return l;
}

const io::TensorInfo& info(const io::SafetensorsHeader& h, const Layout& l, const std::string& c) {
  const auto it = l.names.find(c);
  ATTO_CHECK(it != l.names.end(), "{}: tensor '{}' (or '{}{}') is missing: the checkpoint is incomplete", h.path, c,
             kPrefix, c);
  return *h.find(it->second);
}

// One GPT-2 tensor: its canonical name, the shape the file must have, whether it is a Conv1D
// weight ([in, out] in the file, [out, in] in atto).
struct Expected {
  std::string name;
  Shape shape;
  bool conv1d = false;
};

// The dimensions the tensors give (d_model from wte, positions from wpe, d_ff from c_fc).
struct Dims {
  int64_t V = 0, C = 0, P = 0, F = 0, L = 0;
};

Dims dims_of(const io::SafetensorsHeader& h, const Layout& l) {
  auto shape2 = [&](const char* c) {
    const Shape& s = info(h, l, c).shape;
    ATTO_CHECK(s.size() == 2 && s[0] > 0 && s[1] > 0, "{}: tensor '{}' has shape {}; a GPT-2 checkpoint's is 2-D",
               h.path, l.names.at(c), shape_str(s));
    return s;
  };
  const Shape wte = shape2("wte.weight"), wpe = shape2("wpe.weight"), fc = shape2("h.0.mlp.c_fc.weight");
  return {.V = wte[0], .C = wte[1], .P = wpe[0], .F = fc[1], .L = l.n_layer};
}

std::vector<Expected> expected_tensors(const Dims& d) {
  const int64_t C = d.C, F = d.F;
  std::vector<Expected> e = {{"wte.weight", {d.V, C}}, {"wpe.weight", {d.P, C}}};
  for (int64_t i = 0; i < d.L; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    for (const char* n : {"ln_1", "ln_2"}) {
      e.push_back({h + n + ".weight", {C}});
      e.push_back({h + n + ".bias", {C}});
    }
    e.push_back({h + "attn.c_attn.weight", {C, 3 * C}, true});
    e.push_back({h + "attn.c_attn.bias", {3 * C}});
    e.push_back({h + "attn.c_proj.weight", {C, C}, true});
    e.push_back({h + "attn.c_proj.bias", {C}});
    e.push_back({h + "mlp.c_fc.weight", {C, F}, true});
    e.push_back({h + "mlp.c_fc.bias", {F}});
    e.push_back({h + "mlp.c_proj.weight", {F, C}, true});
    e.push_back({h + "mlp.c_proj.bias", {C}});
  }
  e.push_back({"ln_f.weight", {C}});
  e.push_back({"ln_f.bias", {C}});
  return e;
}

void check_shapes(const io::SafetensorsHeader& h, const Layout& l, const std::vector<Expected>& want, const Dims& d) {
  for (const Expected& e : want) {
    const io::TensorInfo& t = info(h, l, e.name);
    ATTO_CHECK(t.shape == e.shape,
               "{}: tensor '{}' has shape {}, but GPT-2 with d_model {} (wte), d_ff {} (h.0.mlp.c_fc) and {} positions "
               "(wpe) needs {}{}",
               h.path, l.names.at(e.name), shape_str(t.shape), d.C, d.F, d.P, shape_str(e.shape),
               e.conv1d ? " (Hugging Face's Conv1D layout [in, out])" : "");
  }
  if (const auto it = l.names.find("lm_head.weight"); it != l.names.end())
    ATTO_CHECK(h.find(it->second)->shape == (Shape{d.V, d.C}), "{}: tensor '{}' has shape {}, but wte's is [{}, {}]",
               h.path, it->second, shape_str(h.find(it->second)->shape), d.V, d.C);
}

// ---- config.json ------------------------------------------------------------------------------
struct HfConfig {
  std::string path;
  nlohmann::json j;
};

// An integer key of config.json, or -1 when absent (or null).
int64_t int_key(const HfConfig& c, const char* key) {
  if (!c.j.contains(key) || c.j[key].is_null()) return -1;
  ATTO_CHECK(c.j[key].is_number_integer() && c.j[key].get<int64_t>() > 0, "{}: \"{}\" is {}, not a positive integer",
             c.path, key, json_util::excerpt(c.j[key]));
  return c.j[key].get<int64_t>();
}

void cross_check(const HfConfig& c, const char* key, int64_t from_tensors, const std::string& tensor) {
  const int64_t v = int_key(c, key);
  ATTO_CHECK(v < 0 || v == from_tensors,
             "{}: \"{}\" is {}, but the checkpoint's {} says {}: config.json does not belong to this model.safetensors",
             c.path, key, v, tensor, from_tensors);
}

nn::Activation activation_of(const HfConfig& c) {
  const std::string a = c.j.contains("activation_function") && c.j["activation_function"].is_string()
                            ? c.j["activation_function"].get<std::string>()
                        : c.j.contains("activation_function") ? "(not a string)"
                                                              : "gelu_new";
  if (a == "gelu_new" || a == "gelu_pytorch_tanh") return nn::Activation::GELUTanh;
  if (a == "gelu") return nn::Activation::GELU;
  fail("{}: \"activation_function\" is {}; atto imports gelu_new (GPT-2's tanh GELU) and gelu", c.path,
       json_util::printable(a));
}

void check_options(const HfConfig& c) {
  const nlohmann::json& j = c.j;
  ATTO_CHECK(!j.contains("model_type") || j["model_type"] == "gpt2",
             "{}: \"model_type\" is {}; atto imports GPT-2 checkpoints (model_type gpt2) only (docs/import.md)", c.path,
             json_util::excerpt(j["model_type"]));
  if (j.contains("layer_norm_epsilon")) {
    const nlohmann::json& e = j["layer_norm_epsilon"];
    ATTO_CHECK(e.is_number() && std::fabs(e.get<double>() - kHfNormEps) <= 1e-9,
               "{}: \"layer_norm_epsilon\" is {}; atto's LayerNorm uses {} (GPT-2's), so this model cannot be imported",
               c.path, json_util::excerpt(e), kHfNormEps);
  }
  ATTO_CHECK(!j.contains("scale_attn_weights") || j["scale_attn_weights"] == true,
             "{}: \"scale_attn_weights\" is not true; atto's attention scales by 1/sqrt(head size)", c.path);
  ATTO_CHECK(!j.contains("scale_attn_by_inverse_layer_idx") || j["scale_attn_by_inverse_layer_idx"] == false,
             "{}: \"scale_attn_by_inverse_layer_idx\" is set; atto's attention does not scale by layer", c.path);
}

GPTConfig read_config(const std::string& dir, const Dims& d) {
  HfConfig c{run_path(dir, "config.json"), {}};
  ATTO_CHECK(fs::exists(c.path),
             "{} has no config.json: a Hugging Face GPT-2 checkpoint needs it (at least \"n_head\", which the tensors "
             "do not give)",
             dir);
  c.j = io::read_json(c.path);
  ATTO_CHECK(c.j.is_object(), "{}: not a JSON object", c.path);
  check_options(c);
  cross_check(c, "n_embd", d.C, "wte.weight");
  cross_check(c, "n_layer", d.L, "h.<i> tensors");
  cross_check(c, "n_positions", d.P, "wpe.weight");
  cross_check(c, "n_ctx", d.P, "wpe.weight");
  cross_check(c, "vocab_size", d.V, "wte.weight");
  cross_check(c, "n_inner", d.F, "h.0.mlp.c_fc.weight");
  ATTO_CHECK(int_key(c, "n_inner") > 0 || d.F == 4 * d.C,
             "{}: \"n_inner\" is absent or null (Hugging Face then uses 4 x n_embd = {}), but the checkpoint's "
             "h.0.mlp.c_fc.weight says {}: set \"n_inner\": {}",
             c.path, 4 * d.C, d.F, d.F);
  GPTConfig g;
  g.n_heads = int_key(c, "n_head");
  ATTO_CHECK(g.n_heads > 0, "{}: \"n_head\" is missing; the number of attention heads must be given there", c.path);
  ATTO_CHECK(d.C % g.n_heads == 0, "{}: \"n_head\" {} does not divide d_model {} (wte.weight)", c.path, g.n_heads, d.C);
  g.vocab_size = d.V;
  g.block_size = d.P;
  g.n_layers = d.L;
  g.d_model = d.C;
  g.d_ff = d.F;
  g.activation = activation_of(c);
  g.dropout = 0.0f;
  try {
    g.validate();
  } catch (const Error& e) {
    fail("{}: {}", c.path, e.what());
  }
  return g;
}

// ---- tokenizer and weights --------------------------------------------------------------------
std::shared_ptr<BpeTokenizer> read_tokenizer(const std::string& dir, int64_t V, const std::string& weights) {
  const std::string vocab = run_path(dir, "vocab.json"), merges = run_path(dir, "merges.txt");
  for (const std::string& f : {vocab, merges})
    ATTO_CHECK(
        fs::exists(f),
        "{} has no {}: atto imports GPT-2's tokenizer from vocab.json + merges.txt{} (copy both from the "
        "model's repository)",
        dir, fs::path(f).filename().string(),
        fs::exists(run_path(dir, "tokenizer.json")) ? " (tokenizer.json, the fast-tokenizer file, is not read)" : "");
  std::shared_ptr<BpeTokenizer> tok;
  try {
    tok = std::make_shared<BpeTokenizer>(BpeTokenizer::import_gpt2(vocab, merges));
  } catch (const Error& e) {
    fail("{}: the tokenizer (vocab.json + merges.txt): {}", dir, e.what());
  }
  ATTO_CHECK(tok->vocab_size() == V,
             "{} and {} make {} tokens, but {} has {} token embeddings (wte.weight): the tokenizer files do not belong "
             "to this model",
             vocab, merges, tok->vocab_size(), weights, V);
  return tok;
}

Tensor read_finite(const io::SafetensorsHeader& h, const std::string& name) {
  Tensor t = io::read_safetensors_tensor(h, name);
  check_finite_tensor(t, h.path, name, "the checkpoint is damaged; download it again");
  return t;
}

// Copies `src` into `dst` ([out, in]); a Conv1D weight `src` is [in, out] and is transposed.
void copy_into(Tensor& dst, const Tensor& src, bool conv1d) {
  float* out = dst.data();
  const float* in = src.data();
  if (!conv1d) {
    std::copy(in, in + src.numel(), out);
    return;
  }
  const int64_t rows = src.size(0), cols = src.size(1);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = in[r * cols + c];
}

// The lm_head tensor when it differs from wte (an untied head); undefined when absent or equal.
Tensor untied_head(const io::SafetensorsHeader& h, const Layout& l) {
  const auto it = l.names.find("lm_head.weight");
  if (it == l.names.end()) return Tensor();
  Tensor head = read_finite(h, it->second);
  const Tensor wte = io::read_safetensors_tensor(h, l.names.at("wte.weight"));
  const bool same = std::equal(head.data(), head.data() + head.numel(), wte.data());
  return same ? Tensor() : head;
}

void load_weights(GPT& model, const io::SafetensorsHeader& h, const Layout& l, const std::vector<Expected>& want,
                  const Tensor& head) {
  std::map<std::string, Tensor> state;
  for (auto& [name, t] : model.state_dict()) state.emplace(name, t);
  for (const Expected& e : want) {
    const Tensor src = read_finite(h, l.names.at(e.name));
    copy_into(state.at(kPrefix + e.name), src, e.conv1d);
  }
  if (head.defined()) copy_into(state.at("lm_head.weight"), head, false);
}

}  // namespace

LoadedModel load_hf_gpt2(const std::string& dir) {
  ATTO_CHECK(fs::is_directory(dir), "{} is not a directory (a Hugging Face GPT-2 checkpoint is a directory)", dir);
  const std::string weights = run_path(dir, "model.safetensors");
  ATTO_CHECK(fs::exists(weights),
             "{} has no model.safetensors: atto imports the safetensors weights (pytorch_model.bin is not read; save "
             "the model with safe_serialization=True)",
             dir);
  const io::SafetensorsHeader h = io::read_safetensors_header(weights);
  const Layout l = scan_names(h);
  const Dims d = dims_of(h, l);
  const std::vector<Expected> want = expected_tensors(d);
  check_shapes(h, l, want, d);
  LoadedModel lm;
  lm.config = default_run_config(Task::Gpt);
  lm.config.gpt = read_config(dir, d);
  lm.config.data.path = dir;
  lm.config.data.mode = DataMode::Stream;
  lm.config.data.tokenizer = TokenizerKind::Bpe;
  lm.tokenizer = read_tokenizer(dir, d.V, weights);
  const Tensor head = untied_head(h, l);
  lm.config.gpt.tie_weights = !head.defined();
  Rng rng(0);  // every weight is overwritten below
  lm.model = std::make_unique<GPT>(lm.config.gpt, rng);
  load_weights(*lm.model, h, l, want, head);
  lm.model->eval();
  return lm;
}

namespace {

void check_import_out(const std::string& from, const std::string& out, bool force) {
  if (!fs::exists(out)) return;
  ATTO_CHECK(fs::is_directory(out), "--out {} exists and is not a directory", out);
  std::error_code ec;
  ATTO_CHECK(!fs::equivalent(from, out, ec), "--out {} is the checkpoint itself (--from {}): choose another --out", out,
             from);
  ATTO_CHECK(force || !looks_like_run(out),
             "--out {} already holds a run: choose another --out, or pass --force to overwrite it", out);
}

void write_run(const LoadedModel& lm, const std::string& out) {
  fs::create_directories(out);
  io::remove_stale_temp_files(out);
  for (const char* f : {"train_state.safetensors", "metrics.jsonl"}) fs::remove(run_path(out, f));
  save_model_weights(run_path(out, "model.safetensors"), *lm.model);
  lm.tokenizer->write_files(out);
  io::write_json_atomic(run_path(out, "tokenizer.json"), lm.tokenizer->to_json());
  io::write_json_atomic(run_path(out, "config.json"), to_json(lm.config));  // last: the run is complete
}

}  // namespace

namespace {

// An atto run directory: config.json with a format_version beside tokenizer.json (a Hugging Face
// checkpoint's config.json has none; it may have a tokenizer.json too).
bool is_atto_run(const std::string& dir) {
  const std::string cfg = run_path(dir, "config.json");
  if (!fs::is_regular_file(cfg) || !fs::exists(run_path(dir, "tokenizer.json"))) return false;
  try {  // through the JSON reader's size and depth limits; a config.json it refuses is not a run's
    const nlohmann::json j = io::read_json(cfg);
    return j.is_object() && j.contains("format_version");
  } catch (const Error&) {
    return false;
  }
}

}  // namespace

LoadedModel load_model_source(const std::string& source, const std::string& flag, std::string* kind) {
  ATTO_CHECK(!source.empty(), "{} needs a path", flag);
  ATTO_CHECK(fs::exists(source), "{} {}: no such file or directory", flag, source);
  auto says = [&](const char* k) {
    if (kind) *kind = k;
  };
  if (fs::is_regular_file(source) && io::is_gguf_file(source)) {
    says("GGUF");
    return load_gguf(source);  // its tokenizer kind and data mode from its vocabulary
  }
  ATTO_CHECK(fs::is_directory(source),
             "{} {} is neither a directory (an atto run or a Hugging Face GPT-2 checkpoint) nor a GGUF file: not a "
             "model",
             flag, source);
  if (is_atto_run(source)) {
    says("atto run");
    return load_run(source);
  }
  says("Hugging Face GPT-2");
  return load_hf_gpt2(source);
}

ImportSummary import_run(const std::string& from, const std::string& out, bool force) {
  ATTO_CHECK(!out.empty(), "no output directory: pass --out DIR");
  check_import_out(from, out, force);
  ImportSummary s;
  const LoadedModel lm = load_model_source(from, "--from", &s.source);
  s.parameters = lm.model->num_parameters();
  s.tied = lm.config.gpt.tie_weights;
  write_run(lm, out);
  return s;
}

}  // namespace atto
