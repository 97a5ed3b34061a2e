// nn modules: parameter names and kinds, finite-difference gradients of every module
// (contiguous and non-contiguous inputs), positional encodings, and configuration errors.
#include <cmath>
#include <cstring>

#include "autograd/gradcheck.h"
#include "nn/blocks.h"

using namespace atto;
using namespace atto::test;

namespace {
std::vector<std::string> names(const nn::Module& m) {
  std::vector<std::string> out;
  for (const auto& p : m.named_parameters()) out.push_back(p.name);
  return out;
}
void check_both_layouts(const std::string& name, const nn::Module& m, const std::function<Tensor(const Tensor&)>& f,
                        const Tensor& x, GradcheckOptions opt = {}) {
  EXPECT_TRUE(gradcheck_module(name, m.named_parameters(), f, x, opt));
  opt.non_contiguous = true;
  EXPECT_TRUE(gradcheck_module(name, m.named_parameters(), f, x, opt));
}
}  // namespace

TEST(Modules, ParameterNamesFollowPyTorch) {
  Rng rng(0);
  nn::BlockConfig cfg{.d_model = 8, .n_heads = 2, .d_ff = 16};
  nn::Block enc(cfg, rng);
  EXPECT_EQ(names(enc),
            (std::vector<std::string>{"ln_1.weight", "ln_1.bias", "attn.c_attn.weight", "attn.c_attn.bias",
                                      "attn.c_proj.weight", "attn.c_proj.bias", "ln_2.weight", "ln_2.bias",
                                      "mlp.c_fc.weight", "mlp.c_fc.bias", "mlp.c_proj.weight", "mlp.c_proj.bias"}));
  EXPECT_EQ(enc.attn.c_attn.weight.shape(), (Shape{24, 8}));
  cfg.activation = nn::Activation::SwiGLU;
  cfg.norm = nn::NormKind::RMSNorm;
  cfg.bias = false;
  nn::DecoderBlock dec(cfg, rng);
  EXPECT_EQ(names(dec), (std::vector<std::string>{
                            "ln_1.weight", "attn.c_attn.weight", "attn.c_proj.weight", "ln_2.weight",
                            "cross_attn.q_proj.weight", "cross_attn.kv_proj.weight", "cross_attn.c_proj.weight",
                            "ln_3.weight", "mlp.c_fc.weight", "mlp.c_fc2.weight", "mlp.c_proj.weight"}));
  EXPECT_EQ(dec.cross_attn.kv_proj.weight.shape(), (Shape{16, 8}));
  for (const auto& p : dec.named_parameters()) {
    const bool is_norm = p.name.rfind("ln_", 0) == 0;
    EXPECT_EQ(p.kind, is_norm ? ParamKind::Norm : ParamKind::Weight) << p.name;
  }
}

TEST(Modules, LinearEmbeddingNormGradients) {
  Rng rng(1);
  nn::Linear lin(5, 3, true, rng);
  check_both_layouts(
      "linear", lin, [&](const Tensor& x) { return lin.forward(x); }, randn({2, 4, 5}, 2));
  nn::Norm ln2(nn::NormKind::LayerNorm, 6, true,
               1e-5f);  // weights away from the identity init, so their gradients matter
  ln2.weight.copy_from(randn({6}, 3));
  ln2.bias.copy_from(randn({6}, 4));
  check_both_layouts(
      "layernorm", ln2, [&](const Tensor& x) { return ln2.forward(x); }, randn({3, 6}, 5));
  nn::Norm rms(nn::NormKind::RMSNorm, 6, false, 1e-5f);
  rms.weight.copy_from(randn({6}, 6));
  check_both_layouts(
      "rmsnorm", rms, [&](const Tensor& x) { return rms.forward(x); }, randn({3, 6}, 7));
  nn::Embedding emb(7, 4, rng);
  EXPECT_TRUE(gradcheck_module(
      "embedding", emb.named_parameters(),
      [&](const Tensor& x) {
        return add(emb.forward({1, 6, 1, 0}, {2, 2}), x);
      },
      randn({2, 2, 4}, 8)));
}

TEST(Modules, AttentionGradients) {
  Rng rng(2);
  nn::SelfAttention self({.d_model = 6, .n_heads = 2}, rng);
  const nn::AttentionMask causal_pad{.causal = true, .key_mask = {1, 1, 1, 0, 1, 1, 1, 1}};
  check_both_layouts(
      "self_attention", self, [&](const Tensor& x) { return self.forward(x, causal_pad); }, randn({2, 4, 6}, 9));
  nn::CrossAttention cross({.d_model = 6, .n_heads = 3}, rng);
  Tensor memory = randn({2, 5, 6}, 10);
  const nn::AttentionMask mem_pad{.key_mask = {1, 1, 1, 1, 1, 1, 1, 0, 0, 0}};
  check_both_layouts(
      "cross_attention", cross, [&](const Tensor& x) { return cross.forward(x, memory, mem_pad); },
      randn({2, 3, 6}, 11));
}

TEST(Modules, FeedForwardGradientsAllActivations) {
  for (auto act : {nn::Activation::ReLU, nn::Activation::GELU, nn::Activation::GELUTanh, nn::Activation::SwiGLU}) {
    Rng rng(3);
    nn::FeedForward ffn({.d_model = 4, .d_ff = 6, .activation = act}, rng);
    check_both_layouts(
        "ffn", ffn, [&](const Tensor& x) { return ffn.forward(x); }, randn({2, 3, 4}, 12));
  }
}

TEST(Modules, BlockGradientsPreAndPostNorm) {
  for (bool pre : {true, false}) {
    Rng rng(4);
    nn::BlockConfig cfg{.d_model = 4, .n_heads = 2, .d_ff = 8, .pre_norm = pre};
    nn::Block enc(cfg, rng);
    const nn::AttentionMask pad{.key_mask = {1, 1, 1, 0, 1, 1}};
    check_both_layouts(
        pre ? "encoder_pre" : "encoder_post", enc, [&](const Tensor& x) { return enc.forward(x, pad); },
        randn({2, 3, 4}, 13));
    cfg.norm = nn::NormKind::RMSNorm;
    nn::DecoderBlock dec(cfg, rng);
    Tensor memory = randn({2, 4, 4}, 14);
    const nn::AttentionMask self_mask{.causal = true, .key_mask = {1, 1, 1, 1, 1, 0}};
    const nn::AttentionMask mem_mask{.key_mask = {1, 1, 1, 1, 1, 1, 0, 0}};
    check_both_layouts(
        pre ? "decoder_pre" : "decoder_post", dec,
        [&](const Tensor& x) { return dec.forward(x, memory, self_mask, mem_mask); }, randn({2, 3, 4}, 15));
  }
}

// Untraced, a block adds each residual inside its sublayer's output projection (linear_residual);
// traced, it keeps each sublayer's output and adds it separately. Both give the same bits.
TEST(Modules, TracingABlockDoesNotChangeItsOutput) {
  auto same_bits = [](const Tensor& a, const Tensor& b) {
    const auto va = a.to_vector(), vb = b.to_vector();
    return va.size() == vb.size() && std::memcmp(va.data(), vb.data(), va.size() * sizeof(float)) == 0;
  };
  for (bool pre : {true, false}) {
    Rng rng(16);
    nn::BlockConfig cfg{.d_model = 32, .n_heads = 4, .d_ff = 64, .pre_norm = pre};
    nn::Block enc(cfg, rng);
    nn::DecoderBlock dec(cfg, rng);
    const Tensor x = randn({3, 20, 32}, 17), memory = randn({3, 9, 32}, 18);
    const nn::AttentionMask causal{.causal = true, .key_mask = {}};
    std::vector<nn::BlockTrace> te, td;
    nn::BlockRecorder enc_recorder(te), dec_recorder(td);
    const Tensor ye = enc.forward(x, causal, {}, &enc_recorder);
    EXPECT_TRUE(same_bits(ye, enc.forward(x, causal))) << "encoder, pre_norm " << pre;
    EXPECT_TRUE(
        same_bits(dec.forward(x, memory, causal, {}, nullptr, &dec_recorder), dec.forward(x, memory, causal, {})))
        << "decoder, pre_norm " << pre;
    ASSERT_EQ(te.size(), 1u);
    ASSERT_EQ(td.size(), 1u);
    EXPECT_EQ(te[0].attn_weights.shape(), (Shape{3, 4, 20, 20}));
    EXPECT_EQ(td[0].cross_weights.shape(), (Shape{3, 4, 20, 9}));
    EXPECT_FALSE(te[0].cross_update.defined());
    if (pre) {  // the trace's updates add up to the output
      EXPECT_TRUE(same_bits(ye, add(add(te[0].input, te[0].attn_update), te[0].ffn_update)));
      const nn::BlockTrace& d = td[0];
      EXPECT_TRUE(same_bits(dec.forward(x, memory, causal, {}),
                            add(add(add(d.input, d.attn_update), d.cross_update), d.ffn_update)));
    }
  }
}

TEST(Modules, SinusoidalPositionsFollowThePaper) {
  nn::SinusoidalPositions pe(50, 8);
  for (int64_t pos : {0, 1, 7, 49})
    for (int64_t i = 0; i < 8; i += 2) {
      const double angle = pos / std::pow(10000.0, double(i) / 8);
      EXPECT_NEAR(pe.table().at({pos, i}), std::sin(angle), 1e-6);
      EXPECT_NEAR(pe.table().at({pos, i + 1}), std::cos(angle), 1e-6);
    }
  Tensor rows = pe.forward(3, 5);
  EXPECT_EQ(rows.shape(), (Shape{3, 8}));
  EXPECT_EQ(rows.at({0, 0}), pe.table().at({5, 0}));
  EXPECT_THROW(pe.forward(10, 45), Error);
}

TEST(Modules, DropoutTrainingAndEval) {
  Rng rng(5);
  nn::Dropout d(0.5f);
  Tensor x = Tensor::ones({1000});
  EXPECT_THROW(d.forward(x), Error);  // training without an Rng
  d.set_rng(&rng);
  const auto y = d.forward(x).to_vector();
  int zeros = 0;
  for (float v : y) {
    EXPECT_TRUE(v == 0.0f || v == 2.0f);
    zeros += v == 0.0f;
  }
  EXPECT_NEAR(zeros, 500, 80);
  d.eval();
  EXPECT_EQ(d.forward(x).to_vector(), x.to_vector());
  EXPECT_THROW(nn::Dropout(1.0f), Error);
}

TEST(Modules, ConfigurationErrorsNameTheValues) {
  Rng rng(6);
  try {
    nn::SelfAttention bad({.d_model = 10, .n_heads = 4}, rng);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("d_model (10) must be a positive multiple of n_heads (4)"), std::string::npos)
        << e.what();
  }
  EXPECT_THROW(nn::Linear(0, 3, true, rng), Error);
}

TEST(Modules, StateDictRoundTripAndErrors) {
  Rng rng(7);
  nn::BlockConfig cfg{.d_model = 4, .n_heads = 2, .d_ff = 8};
  nn::Block a(cfg, rng), b(cfg, rng);
  b.load_state_dict(a.state_dict(), "test");
  for (size_t i = 0; i < a.state_dict().size(); ++i)
    EXPECT_EQ(a.state_dict()[i].second.to_vector(), b.state_dict()[i].second.to_vector());
  auto sd = a.state_dict();
  sd[0].second = Tensor::zeros({5});
  EXPECT_THROW(b.load_state_dict(sd, "test"), Error);
  sd = a.state_dict();
  sd.pop_back();
  EXPECT_THROW(b.load_state_dict(sd, "test"), Error);
  sd = a.state_dict();
  sd.emplace_back("extra.weight", Tensor::zeros({1}));
  EXPECT_THROW(b.load_state_dict(sd, "test"), Error);
}
