// Transformer ops: embedding, norms, softmax, fused attention, fused cross-entropy.
#include <cmath>

#include "autograd/detail.h"
#include "autograd/ops.h"
#include "kernels/kernels.h"

namespace atto {

// ============================================================================================
// Embedding: weight [V, C], ids -> [ids_shape..., C]
// ============================================================================================
Tensor embedding(const Tensor& weight_in, const std::vector<int32_t>& ids, const Shape& ids_shape) {
  ATTO_CHECK(weight_in.ndim() == 2, "embedding: weight must be [V, C], got {}", shape_str(weight_in.shape()));
  Tensor weight = contiguous(weight_in);
  ATTO_CHECK(static_cast<int64_t>(ids.size()) == shape_numel(ids_shape),
             "embedding: {} ids do not fill the ids shape {}", ids.size(), shape_str(ids_shape));
  const int64_t V = weight.size(0), C = weight.size(1), N = static_cast<int64_t>(ids.size());
  for (int64_t i = 0; i < N; ++i)
    ATTO_CHECK(ids[i] >= 0 && ids[i] < V, "embedding: token id {} at position {} is outside the vocabulary [0, {})",
               ids[i], i, V);
  Shape shape = ids_shape;
  shape.push_back(C);
  Tensor out = Tensor::empty(shape);
  kernels::embedding_forward(out.data(), ids.data(), weight.data(), N, C, V);
  if (any_requires_grad({&weight})) {
    detail::mark_output(out);
    tape().record("embedding", out, [weight, ids, out, N, C, V]() mutable {
      const float* g = detail::out_grad(out);
      if (!g) return;
      kernels::embedding_backward(detail::grad_ptr(weight), g, ids.data(), N, C, V);
    });
  }
  return out;
}

// ============================================================================================
// Norms over the last dimension
// ============================================================================================
namespace {
void check_norm_param(const char* op, const Tensor& x, const Tensor& p, const char* what) {
  ATTO_CHECK(p.defined() && p.shape() == Shape{x.size(-1)},
             "{}: {} must be [{}] for input {}, got {}", op, what, x.size(-1), shape_str(x.shape()),
             p.defined() ? shape_str(p.shape()) : "undefined");
}
}  // namespace

Tensor layer_norm(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in, float eps) {
  ATTO_CHECK(x_in.ndim() >= 1, "layer_norm: input must have rank >= 1");
  check_norm_param("layer_norm", x_in, weight_in, "weight");
  if (bias_in.defined()) check_norm_param("layer_norm", x_in, bias_in, "bias");
  Tensor weight = contiguous(weight_in), bias = bias_in.defined() ? contiguous(bias_in) : bias_in;
  ATTO_CHECK(eps > 0.0f, "layer_norm: eps must be positive, got {}", eps);
  Tensor x = contiguous(x_in);
  const int64_t N = detail::rows_of(x), C = x.size(-1);
  Tensor out = Tensor::empty(x.shape());
  Tensor mu = Tensor::empty({N}), rstd = Tensor::empty({N});
  kernels::layernorm_forward(out.data(), mu.data(), rstd.data(), x.data(), weight.data(),
                             bias.defined() ? bias.data() : nullptr, N, C, eps);
  if (any_requires_grad({&x, &weight, &bias})) {
    detail::mark_output(out);
    tape().record("layer_norm", out, [x, weight, bias, out, mu, rstd, N, C]() mutable {
      const float* g = detail::out_grad(out);
      if (!g) return;
      kernels::layernorm_backward(detail::grad_ptr(x), detail::grad_ptr(weight), detail::grad_ptr(bias), g,
                                  x.data(), weight.data(), mu.data(), rstd.data(), N, C);
    });
  }
  return out;
}

Tensor rms_norm(const Tensor& x_in, const Tensor& weight_in, float eps) {
  ATTO_CHECK(x_in.ndim() >= 1, "rms_norm: input must have rank >= 1");
  check_norm_param("rms_norm", x_in, weight_in, "weight");
  Tensor weight = contiguous(weight_in);
  ATTO_CHECK(eps > 0.0f, "rms_norm: eps must be positive, got {}", eps);
  Tensor x = contiguous(x_in);
  const int64_t N = detail::rows_of(x), C = x.size(-1);
  Tensor out = Tensor::empty(x.shape());
  Tensor rstd = Tensor::empty({N});
  kernels::rmsnorm_forward(out.data(), rstd.data(), x.data(), weight.data(), N, C, eps);
  if (any_requires_grad({&x, &weight})) {
    detail::mark_output(out);
    tape().record("rms_norm", out, [x, weight, out, rstd, N, C]() mutable {
      const float* g = detail::out_grad(out);
      if (!g) return;
      kernels::rmsnorm_backward(detail::grad_ptr(x), detail::grad_ptr(weight), g, x.data(), weight.data(),
                                rstd.data(), N, C);
    });
  }
  return out;
}

Tensor softmax(const Tensor& x_in) {
  ATTO_CHECK(x_in.ndim() >= 1, "softmax: input must have rank >= 1");
  Tensor x = contiguous(x_in);
  const int64_t N = detail::rows_of(x), C = x.size(-1);
  Tensor out = Tensor::empty(x.shape());
  kernels::softmax_forward(out.data(), x.data(), N, C);
  if (any_requires_grad({&x})) {
    detail::mark_output(out);
    tape().record("softmax", out, [x, out, N, C]() mutable {
      const float* g = detail::out_grad(out);
      if (!g) return;
      kernels::softmax_backward(detail::grad_ptr(x), g, out.data(), N, C);
    });
  }
  return out;
}

// ============================================================================================
// Cross-entropy (fused log-softmax + NLL)
// ============================================================================================
int64_t count_targets(const std::vector<int32_t>& targets, int32_t ignore_index) {
  int64_t n = 0;
  for (int32_t t : targets) n += t != ignore_index;
  return n;
}

Tensor cross_entropy(const Tensor& logits_in, const std::vector<int32_t>& targets, const CrossEntropyOptions& opt) {
  ATTO_CHECK(logits_in.ndim() >= 1, "cross_entropy: logits must have rank >= 1");
  ATTO_CHECK(opt.label_smoothing >= 0.0f && opt.label_smoothing <= 1.0f,
             "cross_entropy: label_smoothing = {} is outside [0, 1]", opt.label_smoothing);
  Tensor logits = contiguous(logits_in);
  const int64_t N = detail::rows_of(logits), V = logits.size(-1);
  ATTO_CHECK(static_cast<int64_t>(targets.size()) == N, "cross_entropy: {} targets for logits {} ({} rows)",
             targets.size(), shape_str(logits.shape()), N);
  for (int64_t i = 0; i < N; ++i)
    ATTO_CHECK(targets[i] == opt.ignore_index || (targets[i] >= 0 && targets[i] < V),
               "cross_entropy: target {} at position {} is outside [0, {}) and is not the ignore index {}",
               targets[i], i, V, opt.ignore_index);
  Tensor losses = Tensor::empty({N}), lse = Tensor::empty({N});
  const int64_t count = kernels::cross_entropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), N,
                                                       V, opt.ignore_index, opt.label_smoothing);
  double total = 0.0;
  for (int64_t i = 0; i < N; ++i) total += losses.data()[i];
  const bool mean = opt.reduction == CrossEntropyOptions::Reduction::Mean;
  const float denom = mean ? static_cast<float>(std::max<int64_t>(count, 1)) : 1.0f;
  Tensor out = Tensor::scalar(count == 0 ? 0.0f : static_cast<float>(total / denom));
  if (any_requires_grad({&logits})) {
    detail::mark_output(out);
    tape().record("cross_entropy", out, [logits, targets, out, lse, N, V, opt, denom, count]() mutable {
      const float* g = detail::out_grad(out);
      if (!g || count == 0) return;
      std::vector<float> dloss(static_cast<size_t>(N), g[0] / denom);
      kernels::cross_entropy_backward(detail::grad_ptr(logits), dloss.data(), logits.data(), lse.data(),
                                      targets.data(), N, V, opt.ignore_index, opt.label_smoothing);
    });
  }
  return out;
}

}  // namespace atto
