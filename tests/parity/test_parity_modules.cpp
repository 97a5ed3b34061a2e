// PyTorch parity of atto's nn modules and transformer ops (reference: tests/parity/ref_modules.py,
// torch 1.13, modules written from primitives with nanoGPT's parameter names).
//
// For each case the reference builds the module with random unit-scale weights, random inputs
// and a random upstream gradient dy; atto loads the same weights through load_state_dict (so
// the state_dict names are checked too), runs forward and backward(y, dy), and must match the
// output and the gradient of every input and every parameter within kTol. The reference runs
// in float64, so the differences are atto's float32 rounding.
//
// The module configuration comes from the file's metadata; norms use atto's default eps, which
// the test checks against the eps the reference used.
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "nn/blocks.h"
#include "parity/modules_common.h"

namespace atto {
namespace {
namespace modules_parity {

using test::Inputs;
using test::ModuleRef;

constexpr float kTol = 1e-4f;

// Every case ref_modules.py defines (the SelfCheck test fails if the script has others).
const char* const kCases[] = {
    "linear",
    "linear_nobias",
    "layernorm",
    "layernorm_nobias",
    "rmsnorm",
    "attention_causal",
    "attention_padded",
    "attention_causal_padded",
    "attention_cross_padded",
    "attention_causal_short_q",
    "attention_causal_long_q",
    "attention_all_masked_row",
    "mha_self",
    "mha_self_padded",
    "mha_cross",
    "ffn_relu",
    "ffn_gelu",
    "ffn_gelu_tanh",
    "ffn_swiglu",
    "ffn_swiglu_nobias",
    "encoder_block_pre",
    "encoder_block_post",
    "encoder_block_rms_swiglu",
    "decoder_block_pre",
    "decoder_block_post",
    "gpt_block",
    "cross_entropy",
    "cross_entropy_3d",
};

nn::Activation activation_of(const ModuleRef& ref) {
  const std::string& a = ref.meta("activation");
  if (a == "relu") return nn::Activation::ReLU;
  if (a == "gelu") return nn::Activation::GELU;
  if (a == "gelu_tanh") return nn::Activation::GELUTanh;
  if (a == "swiglu") return nn::Activation::SwiGLU;
  fail("{}: unknown activation '{}'", ref.source(), a);
}

nn::BlockConfig block_config(const ModuleRef& ref) {
  nn::BlockConfig c;
  c.d_model = ref.meta_int("C");
  c.n_heads = ref.meta_int("n_heads");
  c.d_ff = ref.meta_int("d_ff");
  c.activation = activation_of(ref);
  c.norm = ref.meta("norm") == "rmsnorm" ? nn::NormKind::RMSNorm : nn::NormKind::LayerNorm;
  c.pre_norm = ref.meta_bool("pre_norm");
  c.bias = ref.meta_bool("bias");
  EXPECT_EQ(c.norm_eps, ref.meta_float("eps")) << "BlockConfig's default norm_eps differs from the reference's";
  return c;
}

// The key padding mask "in.<name>", or none when the case has no mask.
std::vector<uint8_t> optional_mask(const ModuleRef& ref, const std::string& name) {
  return ref.has_input(name) ? ref.mask(name) : std::vector<uint8_t>{};
}

// Loads the reference weights, runs `forward`, backward with dy, compares everything.
template <class Forward>
void run_module(const ModuleRef& ref, nn::Module& m, const Inputs& in, Forward forward) {
  m.eval();
  m.load_state_dict(ref.params(), ref.source());
  Tensor y = forward();
  backward(y, ref.get("in.dy"));
  test::check_parity(ref, y, in, &m, kTol);
}

void run_linear(const ModuleRef& ref) {
  Rng rng(1);
  nn::Linear m(ref.meta_int("in"), ref.meta_int("out"), ref.meta_bool("bias"), rng);
  Inputs in{{"x", ref.input("x")}};
  run_module(ref, m, in, [&] { return m.forward(in[0].second); });
}

void run_norm(const ModuleRef& ref) {
  const int64_t C = ref.meta_int("C");
  Inputs in{{"x", ref.input("x")}};
  if (ref.meta("kind") == "rmsnorm") {
    nn::Norm m(nn::NormKind::RMSNorm, C, false, nn::BlockConfig{}.norm_eps);
    EXPECT_EQ(m.eps(), ref.meta_float("eps")) << "RMSNorm's default eps differs from the reference's";
    run_module(ref, m, in, [&] { return m.forward(in[0].second); });
  } else {
    nn::Norm m(nn::NormKind::LayerNorm, C, ref.meta_bool("bias"), nn::BlockConfig{}.norm_eps);
    EXPECT_EQ(m.eps(), ref.meta_float("eps")) << "LayerNorm's default eps differs from the reference's";
    run_module(ref, m, in, [&] { return m.forward(in[0].second); });
  }
}

void run_attention(const ModuleRef& ref) {
  Inputs in{{"q", ref.input("q")}, {"k", ref.input("k")}, {"v", ref.input("v")}};
  AttentionOptions o;
  o.n_heads = ref.meta_int("n_heads");
  o.causal = ref.meta_bool("causal");
  o.key_mask = optional_mask(ref, "key_mask");
  Tensor y = scaled_dot_product_attention(in[0].second, in[1].second, in[2].second, o);
  backward(y, ref.get("in.dy"));
  test::check_parity(ref, y, in, nullptr, kTol);
}

void run_mha_self(const ModuleRef& ref) {
  Rng rng(1);
  nn::SelfAttention m({.d_model = ref.meta_int("C"), .n_heads = ref.meta_int("n_heads"), .bias = ref.meta_bool("bias")},
                      rng);
  Inputs in{{"x", ref.input("x")}};
  const nn::AttentionMask mask{.causal = ref.meta_bool("causal"), .key_mask = ref.mask("key_mask")};
  run_module(ref, m, in, [&] { return m.forward(in[0].second, mask); });
}

void run_mha_cross(const ModuleRef& ref) {
  Rng rng(1);
  nn::CrossAttention m(
      {.d_model = ref.meta_int("C"), .n_heads = ref.meta_int("n_heads"), .bias = ref.meta_bool("bias")}, rng);
  Inputs in{{"x", ref.input("x")}, {"memory", ref.input("memory")}};
  const nn::AttentionMask mask{.key_mask = ref.mask("memory_mask")};
  run_module(ref, m, in, [&] { return m.forward(in[0].second, in[1].second, mask); });
}

void run_ffn(const ModuleRef& ref) {
  Rng rng(1);
  nn::FeedForward m({.d_model = ref.meta_int("C"),
                     .d_ff = ref.meta_int("d_ff"),
                     .activation = activation_of(ref),
                     .bias = ref.meta_bool("bias")},
                    rng);
  Inputs in{{"x", ref.input("x")}};
  run_module(ref, m, in, [&] { return m.forward(in[0].second); });
}

void run_encoder(const ModuleRef& ref) {
  Rng rng(1);
  nn::Block m(block_config(ref), rng);
  Inputs in{{"x", ref.input("x")}};
  const nn::AttentionMask mask{.causal = ref.meta_bool("causal"), .key_mask = optional_mask(ref, "key_mask")};
  run_module(ref, m, in, [&] { return m.forward(in[0].second, mask); });
}

void run_decoder(const ModuleRef& ref) {
  Rng rng(1);
  nn::DecoderBlock m(block_config(ref), rng);
  Inputs in{{"x", ref.input("x")}, {"memory", ref.input("memory")}};
  const nn::AttentionMask self_mask{.causal = ref.meta_bool("causal"), .key_mask = ref.mask("tgt_mask")};
  const nn::AttentionMask memory_mask{.key_mask = ref.mask("src_mask")};
  run_module(ref, m, in, [&] { return m.forward(in[0].second, in[1].second, self_mask, memory_mask); });
}

void run_cross_entropy(const ModuleRef& ref) {
  Inputs in{{"logits", ref.input("logits")}};
  CrossEntropyOptions o;
  o.ignore_index = static_cast<int32_t>(ref.meta_int("ignore_index"));
  o.label_smoothing = ref.meta_float("label_smoothing");
  Tensor y = cross_entropy(in[0].second, ref.targets("targets"), o);
  backward(y, ref.get("in.dy"));
  test::check_parity(ref, y, in, nullptr, kTol);
}

void run_case(const std::string& name) {
  const ModuleRef ref = test::module_ref(name);
  const std::string& kind = ref.meta("kind");
  if (kind == "linear") return run_linear(ref);
  if (kind == "layernorm" || kind == "rmsnorm") return run_norm(ref);
  if (kind == "attention") return run_attention(ref);
  if (kind == "mha_self") return run_mha_self(ref);
  if (kind == "mha_cross") return run_mha_cross(ref);
  if (kind == "ffn") return run_ffn(ref);
  if (kind == "encoder_block" || kind == "gpt_block") return run_encoder(ref);
  if (kind == "decoder_block") return run_decoder(ref);
  if (kind == "cross_entropy") return run_cross_entropy(ref);
  FAIL() << name << ": unknown kind '" << kind << "'";
}

class ModuleParity : public ::testing::TestWithParam<const char*> {};

TEST_P(ModuleParity, OutputAndAllGradients) {
  ATTO_REQUIRE_TORCH();
  run_case(GetParam());
}

INSTANTIATE_TEST_SUITE_P(Cases, ModuleParity, ::testing::ValuesIn(kCases),
                         [](const ::testing::TestParamInfo<const char*>& info) { return std::string(info.param); });

// The reference's primitives agree with torch's own LayerNorm and MultiheadAttention (the script
// exits non-zero otherwise), and every case the script defines is run above.
TEST(ModuleParityReference, MatchesTorchBuiltinsAndCaseListIsComplete) {
  ATTO_REQUIRE_TORCH();
  const ModuleRef ref = test::module_ref("selfcheck");
  for (float d : ref.get("out.max_diff").to_vector()) EXPECT_LT(d, 1e-9f);
  const std::set<std::string> ours(std::begin(kCases), std::end(kCases));
  std::set<std::string> theirs;
  std::stringstream list(ref.meta("cases"));
  for (std::string c; std::getline(list, c, ',');) theirs.insert(c);
  EXPECT_EQ(ours, theirs) << "kCases and ref_modules.py's CASES differ";
}

}  // namespace modules_parity
}  // namespace
}  // namespace atto
