// Every fused op against the same computation composed from primitives: values and gradients.
#include <cmath>

#include "autograd/gradcheck.h"
#include "base/error.h"
#include "kernels/kernels.h"

using namespace atto;
using namespace atto::test;

namespace {

// Runs f on fresh leaf copies of the inputs; returns the output and every input's gradient
// of sum(y * r) for a fixed r.
struct Result {
  Tensor y;
  std::vector<Tensor> grads;
};
Result run(const Fn& f, const Inputs& values) {
  Inputs leaves;
  for (const Tensor& v : values) leaves.push_back(v.clone().set_requires_grad(true));
  Tensor y = f(leaves);
  Rng rng(7);
  Tensor r = Tensor::randn(y.shape(), rng);
  backward(sum(mul(y, r)));
  Result res{y.detach(), {}};
  for (const Tensor& l : leaves) res.grads.push_back(l.grad().defined() ? l.grad() : Tensor::zeros(l.shape()));
  return res;
}

void expect_twins(const std::string& name, const Fn& fused, const Fn& composed, const Inputs& inputs,
                  float tol = 1e-5f) {
  const Result a = run(fused, inputs), b = run(composed, inputs);
  EXPECT_LE(max_abs_diff(a.y, b.y), tol) << name << ": values";
  for (size_t i = 0; i < a.grads.size(); ++i)
    EXPECT_LE(max_abs_diff(a.grads[i], b.grads[i]), tol) << name << ": gradient of input " << i;
}

// Composed attention: softmax(q k^T * scale + mask) v per head, from matmul/add/softmax.
Tensor composed_attention(const Tensor& q, const Tensor& k, const Tensor& v, int64_t NH, bool causal,
                          const std::vector<uint8_t>& key_mask) {
  const int64_t B = q.size(0), Tq = q.size(1), Tk = k.size(1), C = q.size(2), HS = C / NH;
  auto heads = [&](const Tensor& x, int64_t T) { return transpose(reshape(x, {B, T, NH, HS}), 1, 2); };  // [B,NH,T,HS]
  Tensor s = scale(matmul(heads(q, Tq), transpose(heads(k, Tk), -1, -2)), 1.0f / std::sqrt(float(HS)));
  std::vector<float> bias(static_cast<size_t>(B * Tq * Tk), 0.0f);
  for (int64_t b = 0; b < B; ++b)
    for (int64_t i = 0; i < Tq; ++i)
      for (int64_t j = 0; j < Tk; ++j) {
        const bool masked = (causal && j > i + (Tk - Tq)) || (!key_mask.empty() && key_mask[b * Tk + j] == 0);
        if (masked) bias[(b * Tq + i) * Tk + j] = -1e9f;
      }
  Tensor mask = Tensor::from_vector({B, 1, Tq, Tk}, bias);
  Tensor p = softmax(add(s, mask));
  Tensor o = matmul(p, heads(v, Tk));  // [B, NH, Tq, HS]
  return reshape(transpose(o, 1, 2), {B, Tq, C});
}

}  // namespace

TEST(FusedTwins, AttentionMatchesComposed) {
  for (bool causal : {false, true})
    for (bool pad : {false, true}) {
      std::vector<uint8_t> km;
      if (pad) km = {1, 1, 1, 1, 0, 1, 1, 1, 0, 0};  // B=2, Tk=5
      auto fused = [&](const Inputs& x) {
        AttentionOptions o;
        o.n_heads = 2;
        o.causal = causal;
        o.key_mask = km;
        return scaled_dot_product_attention(x[0], x[1], x[2], o);
      };
      auto composed = [&](const Inputs& x) { return composed_attention(x[0], x[1], x[2], 2, causal, km); };
      expect_twins(fmt::format("attention causal={} pad={}", causal, pad), fused, composed,
                   {randn({2, 5, 8}, 1), randn({2, 5, 8}, 2), randn({2, 5, 8}, 3)});
      // Cross-attention shapes (Tq != Tk).
      expect_twins(fmt::format("cross attention causal={} pad={}", causal, pad), fused, composed,
                   {randn({2, 3, 8}, 4), randn({2, 5, 8}, 5), randn({2, 5, 8}, 6)});
    }
}

TEST(FusedTwins, FusedQkvMatchesSeparate) {
  auto fused = [](const Inputs& x) {
    AttentionOptions o;
    o.n_heads = 2;
    o.causal = true;
    return attention_qkv(x[0], o);
  };
  auto separate = [](const Inputs& x) {
    AttentionOptions o;
    o.n_heads = 2;
    o.causal = true;
    return scaled_dot_product_attention(slice(x[0], 2, 0, 8), slice(x[0], 2, 8, 16), slice(x[0], 2, 16, 24), o);
  };
  expect_twins("attention_qkv", fused, separate, {randn({2, 6, 24}, 9)});
}

TEST(FusedTwins, CrossEntropyMatchesComposed) {
  const std::vector<int32_t> targets = {3, -1, 0, 2, 4, -1};
  for (float ls : {0.0f, 0.1f}) {
    auto fused = [&](const Inputs& x) {
      CrossEntropyOptions o;
      o.label_smoothing = ls;
      return reshape(cross_entropy(x[0], targets, o), {1});
    };
    auto composed = [&](const Inputs& x) {
      // -log_softmax = logsumexp - x; target distribution q = (1-ls) onehot + ls/V.
      const int64_t N = 6, V = 5;
      Tensor lsm = sub(x[0], log(sum(exp(x[0]), -1, true)));
      std::vector<float> q(N * V, 0.0f);
      int64_t count = 0;
      for (int64_t n = 0; n < N; ++n) {
        if (targets[n] < 0) continue;
        ++count;
        for (int64_t j = 0; j < V; ++j) q[n * V + j] = ls / V + (j == targets[n] ? 1.0f - ls : 0.0f);
      }
      Tensor nll = scale(sum(mul(lsm, Tensor::from_vector({N, V}, q))), -1.0f / count);
      return reshape(nll, {1});
    };
    expect_twins(fmt::format("cross_entropy ls={}", ls), fused, composed, {randn({6, 5}, 10)});
  }
}

TEST(FusedTwins, LayerNormMatchesComposed) {
  auto fused = [](const Inputs& x) { return layer_norm(x[0], x[1], x[2], 1e-5f); };
  auto composed = [](const Inputs& x) {
    Tensor xc = sub(x[0], mean(x[0], -1, true));
    Tensor var = mean(mul(xc, xc), -1, true);
    return add(mul(div(xc, sqrt(add_scalar(var, 1e-5f))), x[1]), x[2]);
  };
  expect_twins("layer_norm", fused, composed, {randn({4, 3, 7}, 11), randn({7}, 12), randn({7}, 13)});
}

TEST(FusedTwins, RmsNormMatchesComposed) {
  auto fused = [](const Inputs& x) { return rms_norm(x[0], x[1], 1e-6f); };
  auto composed = [](const Inputs& x) {
    Tensor ms = mean(mul(x[0], x[0]), -1, true);
    return mul(div(x[0], sqrt(add_scalar(ms, 1e-6f))), x[1]);
  };
  expect_twins("rms_norm", fused, composed, {randn({5, 9}, 14), randn({9}, 15)});
}

TEST(FusedTwins, LinearMatchesMatmulPlusBias) {
  auto fused = [](const Inputs& x) { return linear(x[0], x[1], x[2]); };
  auto composed = [](const Inputs& x) { return add(matmul(x[0], transpose(x[1], 0, 1)), x[2]); };
  expect_twins("linear", fused, composed, {randn({2, 3, 4}, 16), randn({5, 4}, 17), randn({5}, 18)});
}

// linear_gelu keeps GELU's slope instead of the pre-activation: the same bits as the two ops.
TEST(FusedTwins, LinearGeluMatchesLinearThenGelu) {
  auto fused = [](const Inputs& x) { return linear_gelu(x[0], x[1], x[2]); };
  auto composed = [](const Inputs& x) { return gelu(linear(x[0], x[1], x[2]), GeluApprox::Erf); };
  expect_twins("linear_gelu", fused, composed, {randn({2, 3, 4}, 23), randn({5, 4}, 24), randn({5}, 25)}, 0.0f);
  // A feed-forward's shape on the blocked GEMM path (GELU in its epilogue).
  expect_twins("linear_gelu 64 -> 256", fused, composed,
               {randn({4, 32, 64}, 26), randn({256, 64}, 27), randn({256}, 28)}, 0.0f);
}

// linear_residual adds the residual in the GEMM's epilogue and hands the output's gradient to
// the residual: the same bits as add(residual, linear(...)), also when the residual is the
// layer's own input (its gradient then gets both terms).
TEST(FusedTwins, LinearResidualMatchesAddOfLinear) {
  auto fused = [](const Inputs& x) { return linear_residual(x[0], x[1], x[2], x[3]); };
  auto composed = [](const Inputs& x) { return add(x[3], linear(x[0], x[1], x[2])); };
  expect_twins("linear_residual", fused, composed,
               {randn({2, 3, 4}, 29), randn({5, 4}, 30), randn({5}, 31), randn({2, 3, 5}, 32)}, 0.0f);
  // A projection's shape on the blocked GEMM path.
  expect_twins("linear_residual 256 -> 64", fused, composed,
               {randn({4, 32, 256}, 33), randn({64, 256}, 34), randn({64}, 35), randn({4, 32, 64}, 36)}, 0.0f);
  expect_twins(
      "linear_residual onto its own input", [](const Inputs& x) { return linear_residual(x[0], x[1], x[2], x[0]); },
      [](const Inputs& x) { return add(x[0], linear(x[0], x[1], x[2])); },
      {randn({4, 16, 64}, 37), randn({64, 64}, 38), randn({64}, 39)}, 0.0f);
}

TEST(FusedTwins, SwigluAndActivationsMatchComposed) {
  expect_twins(
      "swiglu", [](const Inputs& x) { return swiglu(x[0], x[1]); },
      [](const Inputs& x) { return mul(mul(x[0], div(exp(x[0]), add_scalar(exp(x[0]), 1.0f))), x[1]); },
      {randn({3, 6}, 19), randn({3, 6}, 20)});
  expect_twins(
      "gelu_tanh", [](const Inputs& x) { return gelu(x[0], GeluApprox::Tanh); },
      [](const Inputs& x) {
        const float k = std::sqrt(2.0f / float(M_PI));
        Tensor inner = scale(add(x[0], scale(mul(x[0], mul(x[0], x[0])), 0.044715f)), k);
        return mul(scale(x[0], 0.5f), add_scalar(tanh(inner), 1.0f));
      },
      {randn({4, 5}, 21)});
  expect_twins(
      "softmax", [](const Inputs& x) { return softmax(x[0]); },
      [](const Inputs& x) { return div(exp(x[0]), sum(exp(x[0]), -1, true)); }, {randn({3, 7}, 22)});
}

// The head and the loss in row chunks against linear then cross_entropy: one chunk, chunks that
// divide the rows, a short last chunk, one row per chunk; ignored targets, label smoothing, a
// bias; the output's gradient seeded with a random scalar (the backward scales what the forward
// computed at a seed of 1). The loss value is the same bits whenever the chunks' logits are.
TEST(FusedTwins, LinearCrossEntropyMatchesLinearThenCrossEntropy) {
  const std::vector<int32_t> targets = {3, -1, 0, 6, 6, 2, -1, 1, 5, 4, 0, 3};  // [2, 6]
  for (float ls : {0.0f, 0.1f})
    for (int64_t chunk : {int64_t{0}, int64_t{7 * 6}, int64_t{7 * 5}, int64_t{7}}) {
      CrossEntropyOptions ce;
      ce.label_smoothing = ls;
      auto fused = [&](const Inputs& x) { return linear_cross_entropy(x[0], x[1], x[2], targets, ce, chunk); };
      auto composed = [&](const Inputs& x) { return cross_entropy(linear(x[0], x[1], x[2]), targets, ce); };
      expect_twins(fmt::format("linear_cross_entropy ls={} chunk={}", ls, chunk), fused, composed,
                   {randn({2, 6, 16}, 40), randn({7, 16}, 41), randn({7}, 42)}, 2e-6f);
    }
  // The blocked GEMM's shapes, no bias (a GPT's tied head), 64 rows in chunks of 24.
  std::vector<int32_t> t2(64);
  for (size_t i = 0; i < t2.size(); ++i) t2[i] = static_cast<int32_t>((i * 37) % 300);
  auto fused = [&](const Inputs& x) { return linear_cross_entropy(x[0], x[1], Tensor(), t2, {}, 300 * 24); };
  auto composed = [&](const Inputs& x) { return cross_entropy(linear(x[0], x[1], Tensor()), t2); };
  expect_twins("linear_cross_entropy 64 x 96 -> 300", fused, composed, {randn({64, 96}, 43), randn({300, 96}, 44)},
               2e-6f);
}

// No counted target: loss 0 and no gradient, as cross_entropy; a bad target is refused by name.
TEST(FusedTwins, LinearCrossEntropyEdges) {
  Tensor x = randn({3, 4}, 45).set_requires_grad(true), w = randn({5, 4}, 46).set_requires_grad(true);
  Tensor l = linear_cross_entropy(x, w, Tensor(), {-1, -1, -1});
  EXPECT_EQ(l.item(), 0.0f);
  backward(l);
  EXPECT_FALSE(x.grad().defined());
  try {
    linear_cross_entropy(x, w, Tensor(), {0, 5, 1});
    FAIL() << "target 5 of 5 classes accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("target 5 at position 1"), std::string::npos) << e.what();
  }
}

// 1 and 2 threads: the same bits of loss and gradients (GPT-2's head shape, scaled down).
TEST(FusedTwins, LinearCrossEntropySameBitsOnOneAndTwoThreads) {
  std::vector<int32_t> t(96);
  for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<int32_t>((i * 53) % 1000);
  auto once = [&](int threads) {
    atto::kernels::set_num_threads(threads);
    Tensor x = randn({96, 64}, 47).set_requires_grad(true), w = randn({1000, 64}, 48).set_requires_grad(true);
    Tensor l = linear_cross_entropy(x, w, Tensor(), t, {}, 1000 * 40);
    backward(l, Tensor::scalar(0.5f));
    return std::vector<Tensor>{l.detach(), x.grad(), w.grad()};
  };
  const std::vector<Tensor> one = once(1), two = once(2);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_EQ(max_abs_diff(one[i], two[i]), 0.0f) << "output " << i;
}
