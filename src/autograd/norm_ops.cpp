// LayerNorm, RMSNorm and softmax over the last dimension (kernels/norm.cpp); gradient checks in
// tests/autograd/test_gradcheck.cpp, PyTorch parity in tests/parity/test_parity_modules.cpp.
#include "autograd/detail.h"
#include "autograd/ops.h"
#include "kernels/kernels.h"

namespace atto {

// ============================================================================================
// Norms over the last dimension
// ============================================================================================
namespace {
void check_norm_param(const char* op, const Tensor& x, const Tensor& p, const char* what) {
  ATTO_CHECK(p.defined() && p.shape() == Shape{x.size(-1)}, "{}: {} must be [{}] for input {}, got {}", op, what,
             x.size(-1), shape_str(x.shape()), p.defined() ? shape_str(p.shape()) : "undefined");
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
      kernels::layernorm_backward(detail::grad_ptr(x), detail::grad_ptr(weight), detail::grad_ptr(bias), g, x.data(),
                                  weight.data(), mu.data(), rstd.data(), N, C);
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
      kernels::rmsnorm_backward(detail::grad_ptr(x), detail::grad_ptr(weight), g, x.data(), weight.data(), rstd.data(),
                                N, C);
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

}  // namespace atto
