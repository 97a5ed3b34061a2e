// run/gguf_lora: a LoRA run's adapters as llama.cpp's adapter GGUF, checked against the merged
// model: for every adapted GGUF weight W of the base's export, W + (alpha / rank) B A (llama.cpp's
// computation) is the merged export's W; every other tensor is the base's.
#include "run/gguf_lora.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <set>

#include <fmt/format.h>

#include "io/file.h"
#include "io/safetensors.h"
#include "run/gguf_model.h"
#include "support.h"

namespace atto {
namespace {

using test::error_of;
using ::testing::HasSubstr;

constexpr int64_t kRank = 4;

// DIR/base (a random GPT, gpt2 or llama layout) and DIR/lora: a LoRA run over it with adapters on
// every target and B far from zero, as `atto train --init-from base --lora-rank 4` leaves it.
void make_runs(const test::TempDir& dir, bool llama, float alpha) {
  RunConfig cfg = default_run_config(Task::Gpt);
  const CharTokenizer tok = CharTokenizer::build("emma\nolivia\nzoë\n", {.boundary = true});
  GPTConfig& c = cfg.gpt;
  c.vocab_size = tok.vocab_size();
  c.block_size = 12;
  c.d_model = 32;
  c.n_heads = 4;
  c.n_layers = 2;
  c.dropout = 0.0f;
  if (llama) {
    c.norm = nn::NormKind::RMSNorm;
    c.activation = nn::Activation::SwiGLU;
    c.pos = PosKind::Rope;
    c.bias = false;
  }
  Rng rng(5);
  const GPT base(c, rng);
  for (const char* name : {"base", "lora"}) {
    const std::string d = dir / name;
    std::filesystem::create_directories(d);
    save_model_weights(run_path(d, "model.safetensors"), base);
    io::write_json_atomic(run_path(d, "tokenizer.json"), tok.to_json());
  }
  io::write_json_atomic(run_path(dir / "base", "config.json"), to_json(cfg));
  c.lora_rank = kRank;
  c.lora_alpha = alpha;
  c.lora_targets = "qkv,proj,fc,fc2";
  GPT adapted(c, rng);
  int k = 0;
  for (auto& [name, layer] : adapted.lora_layers()) {
    float* b = layer->lora_B.data();
    for (int64_t i = 0; i < layer->lora_B.numel(); ++i) b[i] = 0.05f * std::sin(0.37f * static_cast<float>(i) + ++k);
  }
  save_model_weights(dir / "lora/adapter.safetensors", adapted, nn::Module::Which::Trainable);
  io::write_json_atomic(dir / "lora/config.json", to_json(cfg));
}

// C [rows, in] = scale * B A, B rows [row0, row0 + rows) of the adapter.
std::vector<double> delta(const Tensor& a, const Tensor& b, int64_t row0, int64_t rows, double scale) {
  const int64_t r = a.size(0), in = a.size(1);
  std::vector<double> c(static_cast<size_t>(rows * in), 0.0);
  for (int64_t i = 0; i < rows; ++i)
    for (int64_t k = 0; k < r; ++k)
      for (int64_t j = 0; j < in; ++j) c[i * in + j] += scale * b.at({row0 + i, k}) * a.at({k, j});
  return c;
}

// Writes base.gguf, merged.gguf (the LoRA run merged) and adapter.gguf; checks the adapter's
// metadata, and that base + (alpha / rank) B A is the merged model, tensor by tensor.
io::GgufFile check_adapter(const test::TempDir& dir, bool llama, float alpha) {
  make_runs(dir, llama, alpha);
  const std::string arch = llama ? "llama" : "gpt2";
  EXPECT_EQ(export_gguf(load_run(dir / "base"), dir / "base.gguf", io::GgmlType::F32), arch);
  const LoadedModel merged = load_run(dir / "lora");
  export_gguf(merged, dir / "merged.gguf", io::GgmlType::F32);
  EXPECT_EQ(export_gguf_lora(merged, load_run_config(dir / "lora").gpt, dir / "adapter.gguf"), arch);
  const io::GgufFile base = io::read_gguf(dir / "base.gguf"), full = io::read_gguf(dir / "merged.gguf");
  io::GgufFile ad = io::read_gguf(dir / "adapter.gguf");
  EXPECT_EQ(ad.get("general.architecture").as_string("arch"), arch);
  EXPECT_EQ(ad.get("general.type").as_string("type"), "adapter");
  EXPECT_EQ(ad.get("adapter.type").as_string("adapter.type"), "lora");
  EXPECT_EQ(ad.get("adapter.lora.alpha").type, io::GgufType::F32);
  const double a = alpha > 0.0f ? alpha : static_cast<double>(kRank);
  EXPECT_EQ(ad.get("adapter.lora.alpha").as_number("alpha"), a);
  std::set<std::string> adapted;
  for (const io::GgufTensorInfo& t : ad.tensors) {
    EXPECT_EQ(t.type, io::GgmlType::F32) << t.name;
    if (!t.name.ends_with(".lora_a")) continue;
    const std::string w = t.name.substr(0, t.name.size() - 7);
    const io::GgufTensorInfo* bt = ad.find(w + ".lora_b");
    const io::GgufTensorInfo* wt = base.find(w);
    if (!bt || !wt) {
      ADD_FAILURE() << t.name << ": no lora_b, or no such base tensor";
      continue;
    }
    adapted.insert(w);
    EXPECT_EQ(t.shape, (std::vector<int64_t>{kRank, wt->shape[1]})) << t.name;  // ne = {in, r}
    EXPECT_EQ(bt->shape, (std::vector<int64_t>{wt->shape[0], kRank})) << w;     // ne = {r, out}
    const Tensor ta = Tensor::from_vector(t.shape, ad.tensor_f32(t.name));
    const Tensor tb = Tensor::from_vector(bt->shape, ad.tensor_f32(bt->name));
    const std::vector<double> d = delta(ta, tb, 0, wt->shape[0], a / kRank);
    const std::vector<float> b0 = base.tensor_f32(w), m = full.tensor_f32(w);
    double worst = 0.0, moved = 0.0;
    for (size_t i = 0; i < m.size(); ++i) {
      worst = std::max(worst, std::abs(b0[i] + d[i] - m[i]));
      moved = std::max(moved, std::abs(static_cast<double>(m[i]) - b0[i]));
    }
    EXPECT_LT(worst, 1e-6) << w;
    EXPECT_GT(moved, 1e-3) << w << ": the adapter should change the weight";
  }
  for (const io::GgufTensorInfo& t : base.tensors) {  // what is not adapted is the base's
    if (!adapted.count(t.name)) {
      EXPECT_EQ(base.tensor_f32(t.name), full.tensor_f32(t.name)) << t.name;
    }
  }
  EXPECT_EQ(ad.tensors.size(), 2 * adapted.size());
  return ad;
}

TEST(GgufLora, Gpt2AdapterIsTheMergedModel) {
  test::TempDir dir;
  const io::GgufFile ad = check_adapter(dir, false, 8.0f);
  EXPECT_EQ(ad.tensors.size(), 2u * 4u * 2u);  // 2 blocks x 4 layers x (a, b)
  for (const char* w : {"attn_qkv", "attn_output", "ffn_up", "ffn_down"})
    for (const char* ab : {"lora_a", "lora_b"})
      EXPECT_NE(ad.find(fmt::format("blk.1.{}.weight.{}", w, ab)), nullptr) << w << "." << ab;
  EXPECT_EQ(ad.find("blk.0.attn_qkv.weight.lora_b")->shape, (std::vector<int64_t>{96, kRank}));
  EXPECT_EQ(ad.find("blk.0.ffn_down.weight.lora_a")->shape, (std::vector<int64_t>{kRank, 128}));
  // The tensors are the adapter file's, unmerged.
  const io::SafetensorsFile f = io::load_safetensors(dir / "lora/adapter.safetensors");
  EXPECT_EQ(ad.tensor_f32("blk.1.attn_output.weight.lora_a"),
            f.get("transformer.h.1.attn.c_proj.lora_A.weight").to_vector());
  EXPECT_EQ(ad.tensor_f32("blk.1.ffn_up.weight.lora_b"), f.get("transformer.h.1.mlp.c_fc.lora_B.weight").to_vector());
}

TEST(GgufLora, LlamaAdapterSplitsQkvLikeTheWeights) {
  test::TempDir dir;
  const io::GgufFile ad = check_adapter(dir, true, 0.0f);  // alpha 0: the rank
  EXPECT_EQ(ad.tensors.size(), 2u * 7u * 2u);              // q, k, v, output, gate, up, down
  const io::SafetensorsFile f = io::load_safetensors(dir / "lora/adapter.safetensors");
  const std::vector<float> a = f.get("transformer.h.0.attn.c_attn.lora_A.weight").to_vector();
  const std::vector<float> b = f.get("transformer.h.0.attn.c_attn.lora_B.weight").to_vector();
  const auto piece = static_cast<std::ptrdiff_t>(32 * kRank);  // 32 rows of B per piece
  for (int p = 0; p < 3; ++p) {
    const std::string n = fmt::format("blk.0.attn_{}.weight", "qkv"[p]);
    EXPECT_EQ(ad.tensor_f32(n + ".lora_a"), a) << n;  // A is shared by the pieces
    EXPECT_EQ(ad.tensor_f32(n + ".lora_b"), std::vector<float>(b.begin() + p * piece, b.begin() + (p + 1) * piece))
        << n;
    EXPECT_EQ(ad.find(n + ".lora_b")->shape, (std::vector<int64_t>{32, kRank}));
  }
  EXPECT_EQ(ad.tensor_f32("blk.1.ffn_gate.weight.lora_b"), f.get("transformer.h.1.mlp.c_fc.lora_B.weight").to_vector());
  EXPECT_EQ(ad.tensor_f32("blk.1.ffn_up.weight.lora_b"), f.get("transformer.h.1.mlp.c_fc2.lora_B.weight").to_vector());
  EXPECT_EQ(ad.find("blk.1.attn_qkv.weight.lora_a"), nullptr);
}

TEST(GgufLora, RefusesWhatIsNotAnExportableLoraRun) {
  test::TempDir dir;
  make_runs(dir, false, 0.0f);
  const LoadedModel base = load_run(dir / "base");
  EXPECT_THAT(error_of([&] { export_gguf_lora(base, load_run_config(dir / "base").gpt, dir / "x.gguf"); }),
              HasSubstr("not a LoRA run"));
  const GPTConfig lora_cfg = load_run_config(dir / "lora").gpt;
  const LoadedModel merged = load_run(dir / "lora");
  const auto adapters = read_lora_adapter(merged.lora_adapter, lora_cfg, *merged.model);
  EXPECT_EQ(adapters.size(), 8u);
  GPTConfig post = merged.model->config();
  post.pre_norm = false;
  EXPECT_THAT(error_of([&] { write_gguf_lora(post, lora_cfg, adapters, dir / "x.gguf"); }),
              HasSubstr("neither llama.cpp's gpt2 layout"));
  EXPECT_THAT(error_of([&] { write_gguf_lora(merged.model->config(), lora_cfg, {}, dir / "x.gguf"); }),
              HasSubstr("no adapted layers"));
  EXPECT_FALSE(std::filesystem::exists(dir / "x.gguf"));
  // A damaged adapter file is refused as load_run refuses it.
  const io::SafetensorsFile f = io::load_safetensors(merged.lora_adapter);
  std::vector<std::pair<std::string, Tensor>> kept;
  for (const auto& n : f.names)
    if (n != "transformer.h.0.mlp.c_proj.lora_A.weight") kept.emplace_back(n, f.get(n));
  io::save_safetensors(merged.lora_adapter, kept, {});
  EXPECT_THAT(error_of([&] { export_gguf_lora(merged, lora_cfg, dir / "x.gguf"); }),
              HasSubstr("tensor 'transformer.h.0.mlp.c_proj.lora_A.weight' is missing"));
  EXPECT_FALSE(std::filesystem::exists(dir / "x.gguf"));
}

}  // namespace
}  // namespace atto
