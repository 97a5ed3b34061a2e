// run/hf_export: `atto export --format hf`, the inverse of load_hf_gpt2. Small GPTs with random
// weights (learned positions, pre-norm LayerNorm, biases; gelu_tanh and gelu; tied and untied; d_ff
// 4 x d_model and not) are exported, and
//   - load_hf_gpt2 of the export gives the same tensors bit for bit, the same configuration and a
//     tokenizer with the same vocabulary, merges and ids (the files are GPT-2's own);
//   - HfExportParity: the PyTorch reference (tests/parity/ref_hf_gpt2.py --case export) LOADS the
//     directory as Hugging Face does (config.json, Conv1D weights, vocab.json + merges.txt) and its
//     float64 log-probabilities match atto's within 1e-4 (the tokenizer gives the same ids);
//   - other architectures are usage errors naming config.json's keys, and write nothing;
//   - a non-empty --out needs force, and is never the run itself.
#include "run/hf_export.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "autograd/tape.h"
#include "io/file.h"
#include "run/hf_model.h"
#include "support.h"
#include "tokenize/bpe.h"

namespace atto {
namespace {

using test::error_of;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

constexpr const char* kText = "the hat in the hut!";  // ref_hf_gpt2.py's TEXT

struct Arch {
  nn::Activation act = nn::Activation::GELUTanh;
  bool tied = true;
  int64_t d_ff = 0;  // 0: 4 x d_model
};

std::shared_ptr<GptTokenizer> bpe_tokenizer() {
  static const std::string text = "the hat in the hut! that hat, this hut; the thin cat sat in the hat.\n";
  const std::vector<std::string_view> texts(8, text);
  return std::make_shared<BpeTokenizer>(BpeTokenizer::train(texts, {.vocab_size = 290, .min_frequency = 2}));
}

// A GPT of GPT-2's architecture (d_model 32, 4 heads, 2 layers, 16 positions) with every weight
// drawn from N(0, 0.3) (norm weights around 1), so that nothing is left at its initial value.
LoadedModel gpt(const Arch& a, std::shared_ptr<GptTokenizer> tok = bpe_tokenizer(), uint64_t seed = 5) {
  LoadedModel lm;
  lm.config = default_run_config(Task::Gpt);
  GPTConfig& c = lm.config.gpt;
  c.vocab_size = tok->vocab_size();
  c.block_size = 16;
  c.n_layers = 2;
  c.n_heads = 4;
  c.d_model = 32;
  c.d_ff = a.d_ff;
  c.activation = a.act;
  c.tie_weights = a.tied;
  c.dropout = 0.1f;
  Rng rng(seed);
  lm.model = std::make_unique<GPT>(c, rng);
  for (auto& [name, t] : lm.model->state_dict()) {
    const bool norm = name.find("ln_") != std::string::npos && name.ends_with(".weight");
    for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = (norm ? 1.0f : 0.0f) + 0.3f * rng.normal();
  }
  lm.model->eval();
  lm.tokenizer = std::move(tok);
  return lm;
}

std::map<std::string, std::vector<float>> state(const LoadedModel& lm) {
  std::map<std::string, std::vector<float>> m;
  for (const auto& [n, x] : lm.model->state_dict()) m[n] = x.to_vector();
  return m;
}

void expect_same_config(const GPTConfig& a, const GPTConfig& b) {
  EXPECT_EQ(a.vocab_size, b.vocab_size);
  EXPECT_EQ(a.block_size, b.block_size);
  EXPECT_EQ(a.n_layers, b.n_layers);
  EXPECT_EQ(a.n_heads, b.n_heads);
  EXPECT_EQ(a.d_model, b.d_model);
  EXPECT_EQ(a.d_ff > 0 ? a.d_ff : 4 * a.d_model, b.d_ff);
  EXPECT_EQ(a.activation, b.activation);
  EXPECT_EQ(a.tie_weights, b.tie_weights);
  EXPECT_EQ(a.pos, b.pos);
  EXPECT_EQ(a.norm, b.norm);
  EXPECT_EQ(a.pre_norm, b.pre_norm);
  EXPECT_EQ(a.bias, b.bias);
}

TEST(HfExport, LoadHfGpt2OfTheExportGivesTheSameModel) {
  for (const Arch& a : {Arch{}, Arch{nn::Activation::GELU, false, 48}, Arch{nn::Activation::GELUTanh, false, 0}}) {
    SCOPED_TRACE(fmt::format("{} tied {} d_ff {}", to_string(a.act), a.tied, a.d_ff));
    test::TempDir dir;
    const LoadedModel lm = gpt(a);
    const HfExportSummary s = export_hf(lm, dir / "hf", false);
    EXPECT_TRUE(s.tokenizer_files);
    EXPECT_EQ(s.tokenizer_note, "");
    EXPECT_EQ(s.tied, a.tied);
    const LoadedModel back = load_hf_gpt2(dir / "hf");
    expect_same_config(lm.model->config(), back.config.gpt);
    EXPECT_EQ(state(back), state(lm));  // bit for bit
    EXPECT_EQ(back.tokenizer->to_json(), lm.tokenizer->to_json());
    EXPECT_EQ(back.tokenizer->encode(kText), lm.tokenizer->encode(kText));
  }
}

TEST(HfExport, FilesAreHuggingFacesGpt2Layout) {
  test::TempDir dir;
  const LoadedModel lm = gpt({nn::Activation::GELU, false, 48});
  const HfExportSummary s = export_hf(lm, dir.str(), false);
  EXPECT_EQ(s.files, (std::vector<std::string>{"model.safetensors", "vocab.json", "merges.txt", "tokenizer_config.json",
                                               "config.json"}));
  const io::SafetensorsFile f = io::load_safetensors(dir / "model.safetensors");
  EXPECT_EQ(f.metadata, (std::map<std::string, std::string>{{"format", "pt"}}));
  EXPECT_EQ(f.names.front(), "transformer.wte.weight");
  EXPECT_EQ(f.names.back(), "lm_head.weight");
  EXPECT_EQ(f.names.size(), 2u + 12u * 2u + 2u + 1u);
  EXPECT_EQ(f.get("transformer.h.1.attn.c_attn.weight").shape(), (Shape{32, 96}));  // Conv1D [in, out]
  EXPECT_EQ(f.get("transformer.h.0.mlp.c_fc.weight").shape(), (Shape{32, 48}));
  EXPECT_EQ(f.get("transformer.h.0.mlp.c_proj.weight").shape(), (Shape{48, 32}));
  const auto atto = state(lm);
  EXPECT_EQ(f.get("transformer.h.0.mlp.c_fc.weight").at({3, 7}),
            atto.at("transformer.h.0.mlp.c_fc.weight")[7 * 32 + 3]);
  const nlohmann::json c = io::read_json(dir / "config.json");
  EXPECT_EQ(c["model_type"], "gpt2");
  EXPECT_EQ(c["architectures"], nlohmann::json::array({"GPT2LMHeadModel"}));
  EXPECT_EQ(c["activation_function"], "gelu");
  EXPECT_EQ(c["n_inner"], 48);
  EXPECT_EQ(c["n_positions"], 16);
  EXPECT_EQ(c["n_ctx"], 16);
  EXPECT_EQ(c["layer_norm_epsilon"], 1e-5);
  EXPECT_EQ(c["tie_word_embeddings"], false);
  EXPECT_EQ(c["resid_pdrop"], 0.1);
  EXPECT_EQ(c["eos_token_id"], lm.tokenizer->boundary_id());
  EXPECT_EQ(c["bos_token_id"], lm.tokenizer->boundary_id());
  const std::string merges = io::read_file(dir / "merges.txt");
  EXPECT_TRUE(merges.starts_with("#version: 0.2\n")) << merges.substr(0, 40);
  EXPECT_EQ(std::count(merges.begin(), merges.end(), '\n'),
            1 + dynamic_cast<const BpeTokenizer&>(*lm.tokenizer).merge_count());
  const auto vocab = nlohmann::ordered_json::parse(io::read_file(dir / "vocab.json"));  // {token: id}, by id
  int64_t next = 0;
  for (const auto& [token, id] : vocab.items()) EXPECT_EQ(id, next++) << token;
  EXPECT_EQ(next, lm.tokenizer->vocab_size());
  // The tied, 4 x d_model, gelu_tanh model: no lm_head.weight, n_inner null, gelu_new.
  test::TempDir tied;
  export_hf(gpt({}), tied.str(), false);
  EXPECT_FALSE(io::load_safetensors(tied / "model.safetensors").contains("lm_head.weight"));
  const nlohmann::json t = io::read_json(tied / "config.json");
  EXPECT_TRUE(t["n_inner"].is_null());
  EXPECT_EQ(t["activation_function"], "gelu_new");
  EXPECT_EQ(t["tie_word_embeddings"], true);
}

TEST(HfExport, ACharTokenizerIsWrittenAsAttoTokenizerJsonWithANote) {
  test::TempDir dir;
  auto chars = std::make_shared<CharTokenizer>(CharTokenizer::build("the hat in the hut!", {.boundary = true}));
  const LoadedModel lm = gpt({}, chars);
  const HfExportSummary s = export_hf(lm, dir.str(), false);
  EXPECT_FALSE(s.tokenizer_files);
  EXPECT_THAT(s.tokenizer_note, HasSubstr("written only for byte-level BPE runs"));
  EXPECT_THAT(s.tokenizer_note, HasSubstr("char"));
  EXPECT_FALSE(fs::exists(dir / "vocab.json"));
  EXPECT_FALSE(fs::exists(dir / "merges.txt"));
  EXPECT_EQ(io::read_json(dir / "atto_tokenizer.json"), chars->to_json());
  EXPECT_EQ(io::read_json(dir / "config.json")["eos_token_id"], 0);  // <eos>
  EXPECT_EQ(io::load_safetensors(dir / "model.safetensors").get("transformer.wte.weight").size(0), chars->vocab_size());
}

TEST(HfExport, OtherArchitecturesAreUsageErrorsThatWriteNothing) {
  test::TempDir dir;
  auto refused = [&](auto set) {
    LoadedModel lm = gpt({});
    GPTConfig c = lm.model->config();
    set(c);
    Rng rng(1);
    lm.model = std::make_unique<GPT>(c, rng);
    try {
      export_hf(lm, dir / "out", false);
    } catch (const UsageError& e) {
      EXPECT_FALSE(fs::exists(dir / "out"));
      return std::string(e.what());
    }
    ADD_FAILURE() << "expected an atto::UsageError";
    return std::string();
  };
  const std::string llama = refused([](GPTConfig& c) {
    c.pos = PosKind::Rope, c.norm = nn::NormKind::RMSNorm, c.activation = nn::Activation::SwiGLU, c.bias = false;
  });
  EXPECT_THAT(llama, HasSubstr("\"model.pos\" is \"rope\" (GPT-2: learned)"));
  EXPECT_THAT(llama, HasSubstr("\"model.norm\" is \"rmsnorm\""));
  EXPECT_THAT(llama, HasSubstr("\"model.ffn\" is \"swiglu\""));
  EXPECT_THAT(llama, HasSubstr("\"model.bias\" is false"));
  EXPECT_THAT(llama, HasSubstr("export it with --format gguf instead"));
  EXPECT_THAT(refused([](GPTConfig& c) { c.pos = PosKind::Sinusoidal; }), HasSubstr("\"model.pos\" is \"sinusoidal\""));
  const std::string relu = refused([](GPTConfig& c) { c.activation = nn::Activation::ReLU; });
  EXPECT_THAT(relu, HasSubstr("\"model.ffn\" is \"relu\" (GPT-2: gelu_tanh or gelu)"));
  EXPECT_THAT(relu, HasSubstr("cannot express this model"));
  EXPECT_THAT(refused([](GPTConfig& c) { c.pre_norm = false; }), HasSubstr("\"model.norm_placement\" is \"post\""));
  EXPECT_THAT(refused([](GPTConfig& c) { c.bias = false; }), HasSubstr("\"model.bias\" is false"));
}

TEST(HfExport, ANonEmptyOutNeedsForceAndIsNeverTheRunItself) {
  test::TempDir dir;
  const LoadedModel lm = gpt({});
  export_hf(lm, dir / "hf", false);
  EXPECT_THAT(error_of([&] { export_hf(lm, dir / "hf", false); }), HasSubstr("pass --force"));
  // --force over an export of another tokenizer kind: its files go.
  auto chars = std::make_shared<CharTokenizer>(CharTokenizer::build("the hat", {.boundary = false}));
  export_hf(gpt({}, chars), dir / "hf", true);
  EXPECT_FALSE(fs::exists(dir / "hf/vocab.json"));
  EXPECT_FALSE(fs::exists(dir / "hf/merges.txt"));
  EXPECT_TRUE(fs::exists(dir / "hf/atto_tokenizer.json"));
  EXPECT_TRUE(io::read_json(dir / "hf/config.json")["eos_token_id"].is_null());  // no boundary token
  EXPECT_THAT(error_of([&] { export_hf(lm, dir / "hf", true, dir / "hf"); }), HasSubstr("is the run itself"));
  dir.write("file", "x");
  EXPECT_THAT(error_of([&] { export_hf(lm, dir / "file", true); }), HasSubstr("is not a directory"));
  EXPECT_THAT(error_of([&] { export_hf(lm, "", true); }), HasSubstr("pass --out DIR"));
  fs::create_directories(dir / "empty");
  EXPECT_NO_THROW(export_hf(lm, dir / "empty", false));  // an empty directory needs no --force
}

// ---- PyTorch parity (tests/parity/ref_hf_gpt2.py --case export) ---------------------------------

std::string env_or(const char* name, const std::string& fallback) {
  const char* v = std::getenv(name);
  return v && *v ? std::string(v) : fallback;
}

std::string python() { return env_or("ATTO_PYTHON", "/usr/bin/python3"); }

// The repository root: $ATTO_SOURCE_DIR (ctest sets it), else the folder this file was compiled from.
std::string source_dir() {
  const std::string self = __FILE__, suffix = "/tests/run/test_hf_export.cpp";
  return env_or("ATTO_SOURCE_DIR", self.ends_with(suffix) ? self.substr(0, self.size() - suffix.size()) : ".");
}

std::string quoted(const std::string& s) {
  std::string out = "'";
  for (char c : s) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

bool torch_available() {
  const std::string cmd = quoted(python()) +
                          " -c 'import importlib.util, sys; sys.exit(0 if importlib.util.find_spec(\"torch\") else 1)'"
                          " >/dev/null 2>&1";
  return std::system(cmd.c_str()) == 0;
}

// Runs the reference on the export directories; the file it writes.
io::SafetensorsFile run_reference(const test::TempDir& tmp, const std::vector<std::string>& dirs) {
  std::string cmd = quoted(python()) + " " + quoted(source_dir() + "/tests/parity/ref_hf_gpt2.py") +
                    " --case export --out " + quoted(tmp / "ref.safetensors");
  for (const std::string& d : dirs) cmd += " --dir " + quoted(d);
  cmd += " >" + quoted(tmp / "log.txt") + " 2>&1";
  const int status = std::system(cmd.c_str());
  if (status != 0 || !fs::exists(tmp / "ref.safetensors"))
    fail("{} failed (status {}):\n{}", cmd, status, fs::exists(tmp / "log.txt") ? io::read_file(tmp / "log.txt") : "");
  return io::load_safetensors(tmp / "ref.safetensors");
}

// atto's log-probabilities of every next token, [T * V] in double.
std::vector<double> log_probs(GPT& m, const std::vector<int32_t>& ids) {
  NoGradGuard ng;
  const Tensor logits = m.forward(ids, 1, static_cast<int64_t>(ids.size())).contiguous();
  const int64_t V = logits.size(2);
  std::vector<double> out(static_cast<size_t>(logits.numel()));
  for (size_t t = 0; t < ids.size(); ++t) {
    const float* row = logits.data() + t * V;
    double mx = row[0], sum = 0.0;
    for (int64_t v = 0; v < V; ++v) mx = std::max(mx, static_cast<double>(row[v]));
    for (int64_t v = 0; v < V; ++v) sum += std::exp(row[v] - mx);
    for (int64_t v = 0; v < V; ++v) out[t * V + v] = row[v] - mx - std::log(sum);
  }
  return out;
}

TEST(HfExportParity, PyTorchLoadsTheExportAndReproducesAttosLogProbabilities) {
  if (!torch_available()) {
    if (env_or("ATTO_ALLOW_NO_TORCH", "") == "1") GTEST_SKIP() << "no torch for " << python() << " (ATTO_PYTHON)";
    FAIL() << "PyTorch is not available to '" << python() << "' (ATTO_PYTHON): install Debian's python3-torch, "
           << "point ATTO_PYTHON at a python3 with torch and numpy, or set ATTO_ALLOW_NO_TORCH=1 to skip";
  }
  test::TempDir tmp;
  std::vector<LoadedModel> models;
  models.push_back(gpt({nn::Activation::GELUTanh, true, 0}, bpe_tokenizer(), 7));  // gelu_new, tied
  models.push_back(gpt({nn::Activation::GELU, false, 48}, bpe_tokenizer(), 8));    // gelu, untied, n_inner
  std::vector<std::string> dirs;
  for (size_t k = 0; k < models.size(); ++k) {
    dirs.push_back(tmp / fmt::format("hf{}", k));
    export_hf(models[k], dirs.back(), false);
  }
  const io::SafetensorsFile ref = run_reference(tmp, dirs);
  for (size_t k = 0; k < models.size(); ++k) {
    const std::vector<int32_t> ids = models[k].tokenizer->encode(kText);
    std::vector<int32_t> ref_ids;
    for (float x : ref.get(fmt::format("ids_{}", k)).to_vector()) ref_ids.push_back(static_cast<int32_t>(x));
    EXPECT_EQ(ids, ref_ids) << "the reference's merges of the exported merges.txt";
    const std::vector<double> got = log_probs(*models[k].model, ids);
    const std::vector<float> want = ref.get(fmt::format("logprobs_{}", k)).to_vector();
    ASSERT_EQ(got.size(), want.size());
    double worst = 0.0;
    for (size_t i = 0; i < got.size(); ++i) worst = std::max(worst, std::fabs(got[i] - want[i]));
    EXPECT_LT(worst, 1e-4) << "model " << k;
    std::printf("[ hf export ] model %zu: max |log p - reference| = %.3g over %zu tokens\n", k, worst, ids.size());
  }
}

}  // namespace
}  // namespace atto
