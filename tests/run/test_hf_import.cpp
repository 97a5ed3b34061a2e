// run/hf_model: GPT-2 checkpoints in the Hugging Face layout (model.safetensors with Conv1D
// weights [in, out], config.json, vocab.json, merges.txt) read as atto models, and import_run.
// Each test writes a tiny checkpoint itself with random weights.
#include "run/hf_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include <nlohmann/json.hpp>

#include "io/file.h"
#include "support.h"
#include "tokenize/bpe.h"
#include "tokenize/utf8.h"

namespace atto {
namespace {

using test::error_of;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

constexpr int64_t kC = 8, kF = 16, kP = 6, kL = 2, kV = 260;  // 256 bytes + 3 merges + <|endoftext|>

struct Options {
  bool prefix = true;     // names with "transformer."
  bool buffers = true;    // h.<i>.attn.bias and masked_bias
  int head = 0;           // 0: no lm_head.weight, 1: equal to wte, 2: different
  bool n_head = true;     // config.json has n_head
  std::string extra;      // one more tensor of this name
  std::string nan_in;     // this tensor gets a NaN
  std::string bad_shape;  // this tensor gets its atto (transposed) shape
};

// The HF tensors written: name (without prefix) -> tensor, in the file's layout.
using Tensors = std::vector<std::pair<std::string, Tensor>>;

Tensor random(const Shape& s, Rng& rng) {
  Tensor t = Tensor::empty(s);
  for (int64_t i = 0; i < t.numel(); ++i) t.data()[i] = rng.normal() * 0.5f;
  return t;
}

Tensors hf_tensors(const Options& o) {
  Rng rng(42);
  Tensors t = {{"wte.weight", random({kV, kC}, rng)}, {"wpe.weight", random({kP, kC}, rng)}};
  for (int64_t i = 0; i < kL; ++i) {
    const std::string h = "h." + std::to_string(i) + ".";
    const std::vector<std::pair<std::string, Shape>> shapes = {{"ln_1.weight", {kC}},
                                                               {"ln_1.bias", {kC}},
                                                               {"attn.c_attn.weight", {kC, 3 * kC}},
                                                               {"attn.c_attn.bias", {3 * kC}},
                                                               {"attn.c_proj.weight", {kC, kC}},
                                                               {"attn.c_proj.bias", {kC}},
                                                               {"ln_2.weight", {kC}},
                                                               {"ln_2.bias", {kC}},
                                                               {"mlp.c_fc.weight", {kC, kF}},
                                                               {"mlp.c_fc.bias", {kF}},
                                                               {"mlp.c_proj.weight", {kF, kC}},
                                                               {"mlp.c_proj.bias", {kC}}};
    for (const auto& [n, s] : shapes) t.emplace_back(h + n, random(s, rng));
    if (o.buffers) {
      t.emplace_back(h + "attn.bias", Tensor::zeros({1, 1, kP, kP}));
      t.emplace_back(h + "attn.masked_bias", Tensor::zeros({}));
    }
  }
  t.emplace_back("ln_f.weight", random({kC}, rng));
  t.emplace_back("ln_f.bias", random({kC}, rng));
  if (o.head == 1) t.emplace_back("lm_head.weight", t[0].second.contiguous().clone());
  if (o.head == 2) t.emplace_back("lm_head.weight", random({kV, kC}, rng));
  if (!o.extra.empty()) t.emplace_back(o.extra, random({kC}, rng));
  for (auto& [n, x] : t) {
    if (n == o.nan_in) x.data()[1] = NAN;
    if (n == o.bad_shape) x = random({x.size(1), x.size(0)}, rng);
  }
  return t;
}

// vocab.json and merges.txt: every byte (id = the byte), three merges, <|endoftext|>.
void write_tokenizer(const test::TempDir& dir, int64_t drop_merges = 0) {
  nlohmann::json vocab = nlohmann::json::object();
  for (int b = 0; b < 256; ++b) vocab[utf8::encode(gpt2_byte_to_char(static_cast<uint8_t>(b)))] = b;
  const std::vector<std::pair<std::string, std::string>> merges = {{"\xC4\xA0", "t"}, {"h", "e"}, {"\xC4\xA0t", "he"}};
  std::string lines = "#version: 0.2\n";
  for (size_t i = 0; i + drop_merges < merges.size(); ++i) {
    vocab[merges[i].first + merges[i].second] = 256 + static_cast<int>(i);
    lines += merges[i].first + " " + merges[i].second + "\n";
  }
  vocab[BpeTokenizer::kEndOfText] = static_cast<int64_t>(vocab.size());
  dir.write("vocab.json", vocab.dump());
  dir.write("merges.txt", lines);
}

// A checkpoint directory; returns the tensors written (without the prefix).
Tensors write_checkpoint(const test::TempDir& dir, const Options& o = {}) {
  Tensors t = hf_tensors(o);
  Tensors named;
  for (const auto& [n, x] : t) named.emplace_back(o.prefix && n != "lm_head.weight" ? "transformer." + n : n, x);
  io::save_safetensors(dir / "model.safetensors", named, {{"format", "pt"}});
  nlohmann::json cfg = {{"model_type", "gpt2"},
                        {"n_embd", kC},
                        {"n_layer", kL},
                        {"n_positions", kP},
                        {"n_ctx", kP},
                        {"vocab_size", kV},
                        {"n_inner", kF},
                        {"layer_norm_epsilon", 1e-5},
                        {"activation_function", "gelu_new"}};
  if (o.n_head) cfg["n_head"] = 2;
  dir.write("config.json", cfg.dump());
  write_tokenizer(dir);
  return t;
}

const Tensor& find(const Tensors& t, const std::string& name) {
  for (const auto& [n, x] : t)
    if (n == name) return x;
  throw Error("no tensor " + name);
}

std::vector<float> values(const Tensor& t) {
  const Tensor c = t.contiguous();
  return std::vector<float>(c.data(), c.data() + c.numel());
}

// The file's [in, out] Conv1D weight as atto's [out, in].
std::vector<float> transposed(const Tensor& t) {
  std::vector<float> out(static_cast<size_t>(t.numel()));
  const int64_t rows = t.size(0), cols = t.size(1);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) out[c * rows + r] = t.data()[r * cols + c];
  return out;
}

void expect_weights(const LoadedModel& lm, const Tensors& in) {
  std::map<std::string, Tensor> state;
  for (const auto& [n, x] : lm.model->state_dict()) state.emplace(n, x);
  for (const auto& [n, x] : in) {
    if (n.ends_with(".attn.bias") || n.ends_with(".attn.masked_bias")) continue;
    const bool conv1d = n.ends_with(".weight") && (n.find(".c_") != std::string::npos);
    const std::string atto = n == "lm_head.weight" ? n : "transformer." + n;
    ASSERT_TRUE(state.count(atto)) << atto;
    EXPECT_EQ(values(state.at(atto)), conv1d ? transposed(x) : values(x)) << n;
    if (conv1d) {
      EXPECT_EQ(state.at(atto).shape(), (Shape{x.size(1), x.size(0)})) << n;
    }
  }
}

TEST(HfImport, WeightsAreTheTransposedConv1DInputs) {
  for (bool prefix : {true, false}) {
    test::TempDir dir;
    Options o;
    o.prefix = prefix;
    const Tensors in = write_checkpoint(dir, o);
    const LoadedModel lm = load_hf_gpt2(dir.str());
    const GPTConfig& c = lm.config.gpt;
    EXPECT_EQ(c.vocab_size, kV);
    EXPECT_EQ(c.d_model, kC);
    EXPECT_EQ(c.d_ff, kF);
    EXPECT_EQ(c.block_size, kP);
    EXPECT_EQ(c.n_layers, kL);
    EXPECT_EQ(c.n_heads, 2);
    EXPECT_EQ(c.activation, nn::Activation::GELUTanh);
    EXPECT_TRUE(c.tie_weights);
    EXPECT_EQ(lm.config.data.mode, DataMode::Stream);
    expect_weights(lm, in);
    std::map<std::string, Tensor> state;
    for (const auto& [n, x] : lm.model->state_dict()) state.emplace(n, x);
    EXPECT_EQ(values(state.at("lm_head.weight")), values(find(in, "wte.weight")));  // tied
    EXPECT_EQ(lm.tokenizer->encode(" the"), std::vector<int32_t>{258});
    EXPECT_EQ(lm.tokenizer->boundary_id(), 259);
  }
}

TEST(HfImport, LmHeadEqualToWteIsTiedADifferentOneUntied) {
  test::TempDir a, b;
  Options o;
  o.head = 1;
  write_checkpoint(a, o);
  EXPECT_TRUE(load_hf_gpt2(a.str()).config.gpt.tie_weights);
  o.prefix = false;
  o.head = 2;
  const Tensors in = write_checkpoint(b, o);
  const LoadedModel lm = load_hf_gpt2(b.str());
  EXPECT_FALSE(lm.config.gpt.tie_weights);
  expect_weights(lm, in);  // lm_head.weight its own values
}

TEST(HfImport, ErrorsNameTheFileAndTheTensorOrKey) {
  auto msg = [](auto set) {
    Options o;
    set(o);
    test::TempDir dir;
    write_checkpoint(dir, o);
    return error_of([&] { load_hf_gpt2(dir.str()); });
  };
  std::string m = msg([](Options& o) { o.n_head = false; });
  EXPECT_THAT(m, HasSubstr("config.json"));
  EXPECT_THAT(m, HasSubstr("\"n_head\" is missing"));
  m = msg([](Options& o) { o.extra = "h.0.attn.q_proj.weight"; });
  EXPECT_THAT(m, HasSubstr("model.safetensors: tensor 'transformer.h.0.attn.q_proj.weight' is not part of"));
  m = msg([](Options& o) { o.bad_shape = "h.1.mlp.c_fc.weight"; });
  EXPECT_THAT(m, HasSubstr("model.safetensors: tensor 'transformer.h.1.mlp.c_fc.weight' has shape [16, 8]"));
  EXPECT_THAT(m, HasSubstr("needs [8, 16] (Hugging Face's Conv1D layout [in, out])"));
  m = msg([](Options& o) { o.nan_in = "h.1.mlp.c_proj.bias"; });
  EXPECT_THAT(m, HasSubstr("model.safetensors: tensor 'transformer.h.1.mlp.c_proj.bias' holds non-finite values"));
}

TEST(HfImport, ConfigAndTokenizerMismatchesAreErrors) {
  test::TempDir dir;
  write_checkpoint(dir);
  write_tokenizer(dir, /*drop_merges=*/1);  // 259 tokens for 260 embeddings
  std::string m = error_of([&] { load_hf_gpt2(dir.str()); });
  EXPECT_THAT(m, HasSubstr("vocab.json and "));
  EXPECT_THAT(m, HasSubstr("merges.txt make 259 tokens, but "));
  EXPECT_THAT(m, HasSubstr("model.safetensors has 260 token embeddings"));
  write_tokenizer(dir);
  fs::remove(dir / "merges.txt");
  dir.write("tokenizer.json", "{}");
  EXPECT_THAT(error_of([&] { load_hf_gpt2(dir.str()); }), HasSubstr("has no merges.txt"));
  write_tokenizer(dir);
  nlohmann::json cfg = io::read_json(dir / "config.json");
  for (auto [key, value] : {std::pair<const char*, nlohmann::json>{"n_layer", 3},
                            {"layer_norm_epsilon", 1e-6},
                            {"activation_function", "relu"},
                            {"n_inner", nullptr}}) {
    nlohmann::json bad = cfg;
    bad[key] = value;
    dir.write("config.json", bad.dump());
    m = error_of([&] { load_hf_gpt2(dir.str()); });
    EXPECT_THAT(m, HasSubstr(dir / "config.json")) << key;
    EXPECT_THAT(m, HasSubstr(std::string("\"") + (value.is_null() ? "n_inner" : key) + "\"")) << key << ": " << m;
  }
}

TEST(HfImport, ImportRunWritesARunThatLoadRunReadsAndNeedsForce) {
  test::TempDir dir, out;
  Options untied;
  untied.head = 2;
  write_checkpoint(dir, untied);
  const std::string run = out / "run";
  const ImportSummary s = import_run(dir.str(), run, false);
  EXPECT_FALSE(s.tied);
  const LoadedModel a = load_hf_gpt2(dir.str());
  const LoadedModel b = load_run(run);
  EXPECT_EQ(b.config.data.mode, DataMode::Stream);
  EXPECT_EQ(b.tokenizer->to_json(), a.tokenizer->to_json());
  auto state = [](const LoadedModel& lm) {
    std::map<std::string, std::vector<float>> m;
    for (const auto& [n, x] : lm.model->state_dict()) m[n] = values(x);
    return m;
  };
  EXPECT_EQ(state(b), state(a));
  EXPECT_THAT(error_of([&] { import_run(dir.str(), run, false); }), HasSubstr("pass --force"));
  EXPECT_NO_THROW(import_run(dir.str(), run, true));
  // A bad checkpoint writes nothing.
  Options bad;
  bad.nan_in = "wpe.weight";
  write_checkpoint(dir, bad);
  EXPECT_THAT(error_of([&] { import_run(dir.str(), out / "new", false); }), HasSubstr("non-finite"));
  EXPECT_FALSE(fs::exists(out / "new"));
}

}  // namespace
}  // namespace atto
