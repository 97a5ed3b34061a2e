// Finite-difference gradient checks: every differentiable op, contiguous and non-contiguous, one
// parameterised test per op (EveryOp/Gradcheck.Contiguous/<op>).
#include <cmath>

#include "autograd/gradcheck.h"
#include "base/error.h"

using namespace atto;
using namespace atto::test;

namespace {

Tensor rand_pos(const Shape& s, uint64_t seed) {  // values in [0.5, 2): safe for log, sqrt, div
  Rng rng(seed);
  return Tensor::rand(s, rng, 0.5f, 2.0f);
}

struct Case {
  std::string name;
  Fn f;
  Inputs inputs;
  GradcheckOptions opt;
};

std::vector<Case> cases() {
  std::vector<Case> c;
  // Views and copies
  c.push_back({"reshape", [](const Inputs& x) { return reshape(x[0], {6, -1}); }, {randn({4, 3, 2}, 1)}, {}});
  c.push_back({"transpose", [](const Inputs& x) { return transpose(x[0], 0, 2); }, {randn({2, 3, 4}, 2)}, {}});
  c.push_back({"permute", [](const Inputs& x) { return permute(x[0], {1, 2, 0}); }, {randn({2, 3, 4}, 3)}, {}});
  c.push_back({"slice", [](const Inputs& x) { return slice(x[0], 1, 1, 3); }, {randn({3, 4}, 4)}, {}});
  c.push_back(
      {"contiguous", [](const Inputs& x) { return contiguous(transpose(x[0], 0, 1)); }, {randn({3, 4}, 5)}, {}});
  c.push_back({"concat",
               [](const Inputs& x) {
                 return concat({x[0], x[1]}, 1);
               },
               {randn({2, 3}, 6), randn({2, 2}, 7)},
               {}});
  // Elementwise, with broadcasting
  c.push_back({"add", [](const Inputs& x) { return add(x[0], x[1]); }, {randn({2, 3, 4}, 8), randn({3, 1}, 9)}, {}});
  c.push_back({"sub", [](const Inputs& x) { return sub(x[0], x[1]); }, {randn({2, 3}, 10), randn({3}, 11)}, {}});
  // b over a's leading dimension (positions over a batch): the vectorised row path.
  c.push_back(
      {"add_rows", [](const Inputs& x) { return add(x[0], x[1]); }, {randn({3, 2, 5}, 65), randn({2, 5}, 66)}, {}});
  c.push_back({"mul", [](const Inputs& x) { return mul(x[0], x[1]); }, {randn({2, 1, 4}, 12), randn({3, 4}, 13)}, {}});
  c.push_back({"div", [](const Inputs& x) { return div(x[0], x[1]); }, {randn({2, 3}, 14), rand_pos({2, 3}, 15)}, {}});
  c.push_back({"scale", [](const Inputs& x) { return scale(x[0], -1.5f); }, {randn({3, 4}, 16)}, {}});
  c.push_back({"add_scalar", [](const Inputs& x) { return add_scalar(x[0], 0.7f); }, {randn({3, 4}, 17)}, {}});
  c.push_back({"exp", [](const Inputs& x) { return exp(x[0]); }, {randn({3, 4}, 18)}, {}});
  c.push_back({"log", [](const Inputs& x) { return log(x[0]); }, {rand_pos({3, 4}, 19)}, {}});
  c.push_back({"sqrt", [](const Inputs& x) { return sqrt(x[0]); }, {rand_pos({3, 4}, 20)}, {}});
  c.push_back({"tanh", [](const Inputs& x) { return tanh(x[0]); }, {randn({3, 4}, 21)}, {}});
  c.push_back({"relu", [](const Inputs& x) { return relu(x[0]); }, {randn({4, 5}, 22)}, {}});
  c.push_back({"gelu_tanh", [](const Inputs& x) { return gelu(x[0], GeluApprox::Tanh); }, {randn({4, 5}, 23)}, {}});
  c.push_back({"gelu_erf", [](const Inputs& x) { return gelu(x[0], GeluApprox::Erf); }, {randn({4, 5}, 24)}, {}});
  c.push_back({"silu", [](const Inputs& x) { return silu(x[0]); }, {randn({4, 5}, 25)}, {}});
  c.push_back(
      {"swiglu", [](const Inputs& x) { return swiglu(x[0], x[1]); }, {randn({3, 4}, 26), randn({3, 4}, 27)}, {}});
  // qkv [B=2, T=3, 3C] with C = 8, two heads of 4: Q and K rotated from position 5, V passed.
  c.push_back({"rope", [](const Inputs& x) { return rope_qkv(x[0], 2, 5, 100.0f); }, {randn({2, 3, 24}, 28)}, {}});
  // qkv [B=2, T=3, C + 2 KV] with C = 8 in four heads of 2 and two key/value heads: [2, 3, 16].
  c.push_back(
      {"expand_kv_heads", [](const Inputs& x) { return expand_kv_heads(x[0], 4, 2); }, {randn({2, 3, 16}, 91)}, {}});
  c.push_back({"dropout",
               [](const Inputs& x) {
                 Rng r(99);
                 return dropout(x[0], 0.3f, true, r);
               },
               {randn({6, 7}, 28)},
               {}});
  // Reductions
  c.push_back({"sum", [](const Inputs& x) { return sum(x[0]); }, {randn({3, 4}, 29)}, {}});
  c.push_back({"sum_dim", [](const Inputs& x) { return sum(x[0], 1, true); }, {randn({2, 3, 4}, 30)}, {}});
  c.push_back({"mean_dim", [](const Inputs& x) { return mean(x[0], -1); }, {randn({3, 5}, 31)}, {}});
  // Linear algebra
  c.push_back(
      {"matmul", [](const Inputs& x) { return matmul(x[0], x[1]); }, {randn({3, 4}, 32), randn({4, 5}, 33)}, {}});
  c.push_back({"matmul_batched",
               [](const Inputs& x) { return matmul(x[0], x[1]); },
               {randn({2, 3, 4}, 34), randn({2, 4, 2}, 35)},
               {}});
  c.push_back({"matmul_shared_b",
               [](const Inputs& x) { return matmul(x[0], x[1]); },
               {randn({2, 3, 4}, 36), randn({4, 5}, 37)},
               {}});
  c.push_back({"linear",
               [](const Inputs& x) { return linear(x[0], x[1], x[2]); },
               {randn({2, 3, 4}, 38), randn({5, 4}, 39), randn({5}, 40)},
               {}});
  c.push_back({"linear_nobias",
               [](const Inputs& x) { return linear(x[0], x[1]); },
               {randn({3, 4}, 41), randn({2, 4}, 42)},
               {}});
  c.push_back({"linear_gelu",
               [](const Inputs& x) { return linear_gelu(x[0], x[1], x[2]); },
               {randn({2, 3, 4}, 53), randn({5, 4}, 54), randn({5}, 55)},
               {}});
  c.push_back({"linear_gelu_nobias",
               [](const Inputs& x) { return linear_gelu(x[0], x[1]); },
               {randn({3, 4}, 56), randn({2, 4}, 57)},
               {}});
  c.push_back({"linear_residual",
               [](const Inputs& x) { return linear_residual(x[0], x[1], x[2], x[3]); },
               {randn({2, 3, 4}, 58), randn({5, 4}, 59), randn({5}, 60), randn({2, 3, 5}, 61)},
               {}});
  c.push_back({"linear_residual_nobias",
               [](const Inputs& x) { return linear_residual(x[0], x[1], Tensor(), x[2]); },
               {randn({3, 4}, 62), randn({2, 4}, 63), randn({3, 2}, 64)},
               {}});
  // Transformer ops
  c.push_back({"embedding",
               [](const Inputs& x) {
                 return embedding(x[0], {1, 3, 1, 0, 4, 3}, {2, 3});
               },
               {randn({5, 4}, 43)},
               {}});
  c.push_back({"layer_norm",
               [](const Inputs& x) { return layer_norm(x[0], x[1], x[2]); },
               {randn({2, 3, 6}, 44), randn({6}, 45), randn({6}, 46)},
               {}});
  c.push_back({"layer_norm_nobias",
               [](const Inputs& x) { return layer_norm(x[0], x[1], Tensor()); },
               {randn({4, 7}, 47), randn({7}, 48)},
               {}});
  c.push_back(
      {"rms_norm", [](const Inputs& x) { return rms_norm(x[0], x[1]); }, {randn({4, 6}, 49), randn({6}, 50)}, {}});
  c.push_back({"softmax", [](const Inputs& x) { return softmax(x[0]); }, {randn({3, 5}, 51)}, {}});
  c.push_back({"cross_entropy",
               [](const Inputs& x) {
                 return cross_entropy(x[0], {2, -1, 0, 4});
               },
               {randn({4, 5}, 52)},
               {}});
  c.push_back({"cross_entropy_smooth",
               [](const Inputs& x) {
                 CrossEntropyOptions o;
                 o.label_smoothing = 0.1f;
                 o.ignore_index = 3;
                 return cross_entropy(x[0], {2, 3, 0, 4, 1, 3}, o);
               },
               {randn({2, 3, 5}, 53)},
               {}});
  // Attention: causal, padded, both, cross (Tq != Tk), fused QKV and fused KV.
  auto attn = [](bool causal, bool pad) {
    return [causal, pad](const Inputs& x) {
      AttentionOptions o;
      o.n_heads = 2;
      o.causal = causal;
      if (pad) o.key_mask = {1, 1, 1, 0, 1, 1, 0, 0};  // B=2, Tk=4
      return scaled_dot_product_attention(x[0], x[1], x[2], o);
    };
  };
  c.push_back(
      {"attention", attn(false, false), {randn({2, 4, 6}, 54), randn({2, 4, 6}, 55), randn({2, 4, 6}, 56)}, {}});
  c.push_back(
      {"attention_causal", attn(true, false), {randn({2, 4, 6}, 57), randn({2, 4, 6}, 58), randn({2, 4, 6}, 59)}, {}});
  c.push_back(
      {"attention_padded", attn(false, true), {randn({2, 4, 6}, 60), randn({2, 4, 6}, 61), randn({2, 4, 6}, 62)}, {}});
  c.push_back({"attention_causal_padded",
               attn(true, true),
               {randn({2, 4, 6}, 63), randn({2, 4, 6}, 64), randn({2, 4, 6}, 65)},
               {}});
  c.push_back(
      {"attention_cross", attn(false, true), {randn({2, 3, 6}, 66), randn({2, 4, 6}, 67), randn({2, 4, 6}, 68)}, {}});
  c.push_back({"attention_qkv",
               [](const Inputs& x) {
                 AttentionOptions o;
                 o.n_heads = 2;
                 o.causal = true;
                 return attention_qkv(x[0], o);
               },
               {randn({2, 5, 12}, 69)},
               {}});
  c.push_back({"attention_q_kv",
               [](const Inputs& x) {
                 AttentionOptions o;
                 o.n_heads = 3;
                 o.key_mask = {1, 1, 0, 1, 1, 1};  // B=2, Tk=3
                 return attention_q_kv(x[0], x[1], o);
               },
               {randn({2, 2, 6}, 70), randn({2, 3, 12}, 71)},
               {}});
  return c;
}

}  // namespace

// One test per op and layout, runnable alone: --gtest_filter='EveryOp/Gradcheck.*/layer_norm*'.
class Gradcheck : public ::testing::TestWithParam<std::string> {
 protected:
  static Case find(const std::string& name) {
    for (Case& c : cases())
      if (c.name == name) return c;
    throw Error("no gradcheck case " + name);
  }
};

TEST_P(Gradcheck, Contiguous) {
  const Case c = find(GetParam());
  EXPECT_TRUE(gradcheck(c.name, c.f, c.inputs, c.opt));
}

TEST_P(Gradcheck, NonContiguous) {
  Case c = find(GetParam());
  c.opt.non_contiguous = true;
  EXPECT_TRUE(gradcheck(c.name, c.f, c.inputs, c.opt));
}

std::vector<std::string> case_names() {
  std::vector<std::string> names;
  for (const Case& c : cases()) names.push_back(c.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(EveryOp, Gradcheck, ::testing::ValuesIn(case_names()),
                         [](const ::testing::TestParamInfo<std::string>& info) { return info.param; });

// The harness itself must catch a wrong gradient: a deliberately broken op fails it.
TEST(GradcheckHarness, CatchesAWrongGradient) {
  // A correct op with the wrong expected function: compare d/dx of exp with numeric of 2*exp.
  auto f = [](const Inputs& x) {
    Tensor a = exp(x[0]);
    Tensor b = a.detach();  // detached half: numeric sees 2*exp(x), analytic only exp(x)
    return add(a, b);
  };
  EXPECT_FALSE(gradcheck("detached", f, {randn({3}, 1)}));
}
