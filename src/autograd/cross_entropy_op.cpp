// Cross-entropy as one fused op: log-softmax + NLL with label smoothing and ignored targets
// (kernels/cross_entropy.cpp).
#include <algorithm>
#include <cstring>
#include <vector>

#include "autograd/detail.h"
#include "autograd/ops.h"
#include "kernels/kernels.h"

namespace atto {

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
               "cross_entropy: target {} at position {} is outside [0, {}) and is not the ignore index {}", targets[i],
               i, V, opt.ignore_index);
  Tensor losses = Tensor::empty({N}), lse = Tensor::empty({N});
  const int64_t count = kernels::cross_entropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), N, V,
                                                       opt.ignore_index, opt.label_smoothing);
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
      kernels::cross_entropy_backward(detail::grad_ptr(logits), dloss.data(), logits.data(), lse.data(), targets.data(),
                                      N, V, opt.ignore_index, opt.label_smoothing);
    });
  }
  return out;
}

// ============================================================================================
// linear_cross_entropy: the head and the loss in row chunks
// ============================================================================================
namespace {

// The operands of linear_cross_entropy after the shape checks, contiguous.
struct HeadLoss {
  Tensor x, weight, bias;
  int64_t N = 0, C = 0, V = 0, rows = 0;  // rows: one chunk's
};

HeadLoss head_loss_args(const Tensor& x, const Tensor& weight, const Tensor& bias,
                        const std::vector<int32_t>& targets, const CrossEntropyOptions& opt, int64_t chunk_elems) {
  ATTO_CHECK(weight.ndim() == 2, "linear_cross_entropy: weight must be [V, C], got {}", shape_str(weight.shape()));
  ATTO_CHECK(x.ndim() >= 1 && x.size(-1) == weight.size(1), "linear_cross_entropy: input {} does not match weight {}",
             shape_str(x.shape()), shape_str(weight.shape()));
  ATTO_CHECK(!bias.defined() || bias.shape() == Shape{weight.size(0)},
             "linear_cross_entropy: bias {} does not match weight {}", shape_str(bias.defined() ? bias.shape() : Shape{}),
             shape_str(weight.shape()));
  ATTO_CHECK(opt.label_smoothing >= 0.0f && opt.label_smoothing <= 1.0f,
             "linear_cross_entropy: label_smoothing = {} is outside [0, 1]", opt.label_smoothing);
  HeadLoss h{contiguous(x), contiguous(weight), bias.defined() ? contiguous(bias) : bias};
  h.N = detail::rows_of(h.x);
  h.C = weight.size(1);
  h.V = weight.size(0);
  ATTO_CHECK(static_cast<int64_t>(targets.size()) == h.N, "linear_cross_entropy: {} targets for input {} ({} rows)",
             targets.size(), shape_str(x.shape()), h.N);
  for (int64_t i = 0; i < h.N; ++i)
    ATTO_CHECK(targets[i] == opt.ignore_index || (targets[i] >= 0 && targets[i] < h.V),
               "linear_cross_entropy: target {} at position {} is outside [0, {}) and is not the ignore index {}",
               targets[i], i, h.V, opt.ignore_index);
  const int64_t budget = chunk_elems > 0 ? chunk_elems : kHeadChunkElems;
  h.rows = std::clamp<int64_t>(budget / std::max<int64_t>(h.V, 1), 1, std::max<int64_t>(h.N, 1));
  return h;
}

// g * buf becomes t's gradient: buf itself when t has none yet, else added into it.
void give_gradient(const Tensor& t, Tensor buf, float g) {
  if (!buf.defined() || !t.requires_grad()) return;
  if (g != 1.0f) kernels::scale_inplace(buf.data(), buf.numel(), g);
  Tensor h = t;
  if (!h.grad().defined()) {
    h.set_grad(buf);
  } else {
    kernels::add_forward(h.grad().data(), h.grad().data(), buf.data(), buf.numel());
  }
}

}  // namespace

// Each chunk's logits, loss and (when a gradient is wanted) its gradient at a seed of 1, pushed
// through the head's backward at once: the input's and the weight's gradients are complete when
// the forward ends, and the backward only scales them by the seed. Nothing of size N x V lives.
Tensor linear_cross_entropy(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in,
                            const std::vector<int32_t>& targets, const CrossEntropyOptions& opt, int64_t chunk_elems) {
  HeadLoss h = head_loss_args(x_in, weight_in, bias_in, targets, opt, chunk_elems);
  const int64_t N = h.N, C = h.C, V = h.V, R = h.rows;
  const int64_t count = count_targets(targets, opt.ignore_index);
  const bool mean = opt.reduction == CrossEntropyOptions::Reduction::Mean;
  const float denom = mean ? static_cast<float>(std::max<int64_t>(count, 1)) : 1.0f;
  const bool want_grad = any_requires_grad({&h.x, &h.weight, &h.bias});
  const bool grad = want_grad && count > 0;  // with no counted target the gradients are zero
  Tensor logits = Tensor::empty({R, V}), dlogits = grad ? Tensor::empty({R, V}) : Tensor();
  Tensor dx = grad && h.x.requires_grad() ? Tensor::empty(h.x.shape()) : Tensor();
  Tensor dw = grad && h.weight.requires_grad() ? Tensor::empty(h.weight.shape()) : Tensor();
  Tensor db = grad && h.bias.defined() && h.bias.requires_grad() ? Tensor::zeros(h.bias.shape()) : Tensor();
  std::vector<float> losses(static_cast<size_t>(N)), lse(static_cast<size_t>(R));
  const std::vector<float> dloss(static_cast<size_t>(R), 1.0f / denom);
  auto ptr = [](Tensor& t, int64_t off) { return t.defined() ? t.data() + off : nullptr; };
  for (int64_t r0 = 0; r0 < N; r0 += R) {
    const int64_t n = std::min(R, N - r0);
    const float* xr = h.x.data() + r0 * C;
    detail::linear_forward_any("linear_cross_entropy", logits.data(), xr, h.weight,
                               h.bias.defined() ? h.bias.data() : nullptr, n, C, V, want_grad);
    kernels::cross_entropy_forward(losses.data() + r0, lse.data(), logits.data(), targets.data() + r0, n, V,
                                   opt.ignore_index, opt.label_smoothing);
    if (!grad) continue;
    std::memset(dlogits.data(), 0, sizeof(float) * static_cast<size_t>(n * V));
    kernels::cross_entropy_backward(dlogits.data(), dloss.data(), logits.data(), lse.data(), targets.data() + r0, n, V,
                                    opt.ignore_index, opt.label_smoothing);
    kernels::linear_backward_ex(ptr(dx, r0 * C), ptr(dw, 0), ptr(db, 0), dlogits.data(), xr, h.weight.data(), n, C, V,
                                /*overwrite_dinp=*/true, /*overwrite_dweight=*/r0 == 0);
  }
  double total = 0.0;
  for (float l : losses) total += l;
  Tensor out = Tensor::scalar(count == 0 ? 0.0f : static_cast<float>(total / denom));
  if (want_grad) {
    detail::mark_output(out);
    tape().record("linear_cross_entropy", out, [h, out, dx, dw, db]() {
      const float* g = detail::out_grad(out);
      if (!g) return;
      give_gradient(h.x, dx, g[0]);
      give_gradient(h.weight, dw, g[0]);
      give_gradient(h.bias, db, g[0]);
    });
  }
  return out;
}

}  // namespace atto
