// Reductions (sum, mean) and linear algebra (matmul, linear).
#include "autograd/detail.h"
#include "autograd/ops.h"
#include "kernels/kernels.h"

namespace atto {

// ============================================================================================
// Reductions
// ============================================================================================
Tensor sum(const Tensor& x_in) {
  Tensor x = contiguous(x_in);
  double acc = 0.0;  // fixed order, double: deterministic and accurate
  const float* p = x.data();
  for (int64_t i = 0; i < x.numel(); ++i) acc += p[i];
  Tensor out = Tensor::scalar(static_cast<float>(acc));
  if (any_requires_grad({&x})) {
    detail::mark_output(out);
    tape().record("sum", out, [x, out]() mutable {
      const float* g = detail::out_grad(out);
      if (!g) return;
      float* gx = detail::grad_ptr(x);
      for (int64_t i = 0; i < x.numel(); ++i) gx[i] += g[0];
    });
  }
  return out;
}

Tensor sum(const Tensor& x_in, int dim, bool keepdim) {
  Tensor x = contiguous(x_in);
  const int d = x.wrap_dim(dim);
  // View x as [outer, D, inner]; out is [outer, inner].
  int64_t outer = 1, inner = 1;
  for (int i = 0; i < d; ++i) outer *= x.shape()[i];
  for (int i = d + 1; i < x.ndim(); ++i) inner *= x.shape()[i];
  const int64_t D = x.shape()[d];
  Shape shape = x.shape();
  if (keepdim)
    shape[d] = 1;
  else
    shape.erase(shape.begin() + d);
  Tensor out = Tensor::zeros(shape);
  const float* px = x.data();
  float* po = out.data();
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t j = 0; j < D; ++j)
      for (int64_t i = 0; i < inner; ++i) po[o * inner + i] += px[(o * D + j) * inner + i];
  if (any_requires_grad({&x})) {
    detail::mark_output(out);
    tape().record("sum_dim", out, [x, out, outer, D, inner]() mutable {
      const float* g = detail::out_grad(out);
      if (!g) return;
      float* gx = detail::grad_ptr(x);
      for (int64_t o = 0; o < outer; ++o)
        for (int64_t j = 0; j < D; ++j)
          for (int64_t i = 0; i < inner; ++i) gx[(o * D + j) * inner + i] += g[o * inner + i];
    });
  }
  return out;
}

Tensor mean(const Tensor& x) {
  ATTO_CHECK(x.numel() > 0, "mean of an empty tensor of shape {}", shape_str(x.shape()));
  return scale(sum(x), 1.0f / static_cast<float>(x.numel()));
}

Tensor mean(const Tensor& x, int dim, bool keepdim) {
  const int64_t D = x.size(dim);
  ATTO_CHECK(D > 0, "mean over an empty dimension {} of shape {}", dim, shape_str(x.shape()));
  return scale(sum(x, dim, keepdim), 1.0f / static_cast<float>(D));
}

// ============================================================================================
// matmul: a [..., M, K] @ b [..., K, N]
// ============================================================================================
Tensor matmul(const Tensor& a_in, const Tensor& b_in) {
  ATTO_CHECK(a_in.ndim() >= 2 && b_in.ndim() >= 2, "matmul: needs tensors of rank >= 2, got {} and {}",
             shape_str(a_in.shape()), shape_str(b_in.shape()));
  const int64_t M = a_in.size(-2), K = a_in.size(-1), N = b_in.size(-1);
  ATTO_CHECK(b_in.size(-2) == K, "matmul: inner dimensions differ: {} @ {} ({} vs {})", shape_str(a_in.shape()),
             shape_str(b_in.shape()), K, b_in.size(-2));
  const Shape batch_a(a_in.shape().begin(), a_in.shape().end() - 2);
  const Shape batch_b(b_in.shape().begin(), b_in.shape().end() - 2);
  const bool shared_b = b_in.ndim() == 2;
  ATTO_CHECK(shared_b || batch_a == batch_b, "matmul: batch dimensions differ: {} @ {}", shape_str(a_in.shape()),
             shape_str(b_in.shape()));
  Tensor a = contiguous(a_in), b = contiguous(b_in);
  const int64_t batch = shape_numel(batch_a);
  Shape shape = batch_a;
  shape.push_back(M);
  shape.push_back(N);
  Tensor out = Tensor::empty(shape);
  const int64_t sb = shared_b ? 0 : K * N;
  kernels::gemm_batched(batch, false, false, M, N, K, 1.0f, a.data(), K, M * K, b.data(), N, sb, 0.0f, out.data(), N,
                        M * N);
  if (any_requires_grad({&a, &b})) {
    detail::mark_output(out);
    tape().record("matmul", out, [a, b, out, batch, M, N, K, sb, shared_b]() mutable {
      const float* g = detail::out_grad(out);
      if (!g) return;
      if (float* ga = detail::grad_ptr(a))  // da += g @ b^T
        kernels::gemm_batched(batch, false, true, M, K, N, 1.0f, g, N, M * N, b.data(), N, sb, 1.0f, ga, K, M * K);
      if (float* gb = detail::grad_ptr(b)) {  // db += a^T @ g
        if (shared_b)                         // one K x N gradient for all batches: fold the batch into the rows
          kernels::gemm(true, false, K, N, batch * M, 1.0f, a.data(), K, g, N, 1.0f, gb, N);
        else
          kernels::gemm_batched(batch, true, false, K, N, M, 1.0f, a.data(), K, M * K, g, N, M * N, 1.0f, gb, N, K * N);
      }
    });
  }
  return out;
}

// ============================================================================================
// linear: x [..., C] @ weight[OC, C]^T + bias[OC]; linear_gelu: GELU (erf) of that
// ============================================================================================
namespace {

// x, weight and bias contiguous, after the shape checks (what a backward closure keeps).
struct LinearArgs {
  Tensor x, weight, bias;
  int64_t N = 0, C = 0, OC = 0;
  Shape out_shape() const {
    Shape s = x.shape();
    s.back() = OC;
    return s;
  }
};

LinearArgs linear_args(const char* op, const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  ATTO_CHECK(weight_in.ndim() == 2, "{}: weight must be [out, in], got {}", op, shape_str(weight_in.shape()));
  ATTO_CHECK(x_in.ndim() >= 1 && x_in.size(-1) == weight_in.size(1),
             "{}: input {} does not match weight {} (last input dim must equal weight.size(1))", op,
             shape_str(x_in.shape()), shape_str(weight_in.shape()));
  LinearArgs a;
  a.C = weight_in.size(1);
  a.OC = weight_in.size(0);
  ATTO_CHECK(!bias_in.defined() || bias_in.shape() == Shape{a.OC}, "{}: bias {} does not match weight {}", op,
             shape_str(bias_in.defined() ? bias_in.shape() : Shape{}), shape_str(weight_in.shape()));
  a.x = contiguous(x_in);
  a.weight = contiguous(weight_in);
  a.bias = bias_in.defined() ? contiguous(bias_in) : bias_in;
  a.N = detail::rows_of(a.x);
  return a;
}

// The linear layer's backward for the gradient g [N, OC] of its (pre-activation) output.
void linear_backward_from(const float* g, const LinearArgs& a) {
  // dx = g @ W and dW = g^T @ x are written directly (beta 0) when the buffer is new: an
  // activation's gradient usually is, a weight's after zero_grad(set_to_none).
  const int64_t N = a.N, C = a.C, OC = a.OC;
  bool fresh_x = false, fresh_w = false;
  float* gx = detail::grad_ptr_fresh(a.x, &fresh_x);
  float* gw = detail::grad_ptr_fresh(a.weight, &fresh_w);
  kernels::linear_backward_ex(gx, gw, detail::grad_ptr(a.bias), g, a.x.data(), a.weight.data(), N, C, OC, fresh_x,
                           fresh_w);
}

}  // namespace

void detail::refuse_quantized_grad(const char* op, const Tensor& weight, bool grad_wanted) {
  ATTO_CHECK(!grad_wanted,
             "{}: the weight {} holds quantized rows, which serve inference only: nothing that needs a gradient "
             "can use it (train or fine-tune from the model's floats: an f32 or f16 file, or the run directory)",
             op, shape_str(weight.shape()));
}

void detail::linear_forward_any(const char* op, float* out, const float* x, const Tensor& weight, const float* bias,
                                int64_t N, int64_t C, int64_t OC, bool grad_wanted) {
  const QuantizedData* q = weight.quantized();
  if (q == nullptr) return kernels::linear_forward(out, x, weight.data(), bias, N, C, OC);
  refuse_quantized_grad(op, weight, grad_wanted);
  kernels::linear_quant_forward(out, x, q->bytes.data(), static_cast<kernels::QuantType>(q->type),
                                static_cast<kernels::QuantLayout>(q->layout), bias, N, C, OC);
}

namespace {
// The quantized forms of the fused linear ops: the product on the integer kernels, then the
// epilogue (nothing records a backward: a quantized weight refuses a gradient).
Tensor quantized_linear(const char* op, const LinearArgs& a) {
  Tensor out = Tensor::empty(a.out_shape());
  detail::linear_forward_any(op, out.data(), a.x.data(), a.weight, a.bias.defined() ? a.bias.data() : nullptr, a.N,
                             a.C, a.OC, any_requires_grad({&a.x, &a.weight, &a.bias}));
  return out;
}
}  // namespace

Tensor linear(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  LinearArgs a = linear_args("linear", x_in, weight_in, bias_in);
  if (a.weight.quantized()) return quantized_linear("linear", a);
  Tensor out = Tensor::empty(a.out_shape());
  kernels::linear_forward(out.data(), a.x.data(), a.weight.data(), a.bias.defined() ? a.bias.data() : nullptr, a.N, a.C,
                          a.OC);
  if (any_requires_grad({&a.x, &a.weight, &a.bias})) {
    detail::mark_output(out);
    tape().record("linear", out, [a, out]() {
      if (const float* g = detail::out_grad(out)) linear_backward_from(g, a);
    });
  }
  return out;
}

// The pre-activation is never stored: the forward keeps GELU's slope at it instead, and the
// backward multiplies the output's gradient by it (in place in the slope's buffer in fp32; as
// the operands are rounded in bf16) and runs the linear layer's backward on that.
Tensor linear_gelu(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in) {
  LinearArgs a = linear_args("linear_gelu", x_in, weight_in, bias_in);
  if (a.weight.quantized()) {
    Tensor out = quantized_linear("linear_gelu", a);
    kernels::gelu_erf_forward(out.data(), out.data(), out.numel());
    return out;
  }
  Tensor out = Tensor::empty(a.out_shape());
  const bool grad = any_requires_grad({&a.x, &a.weight, &a.bias});
  Tensor slope = grad ? Tensor::empty(a.out_shape()) : Tensor();
  kernels::linear_gelu_forward(out.data(), grad ? slope.data() : nullptr, a.x.data(), a.weight.data(),
                               a.bias.defined() ? a.bias.data() : nullptr, a.N, a.C, a.OC);
  if (grad) {
    detail::mark_output(out);
    tape().record("linear_gelu", out, [a, out, slope]() mutable {
      const float* g = detail::out_grad(out);
      if (!g) return;
      // The tape runs a node once: the slope is not needed again, and may become dpre.
      bool fresh_x = false, fresh_w = false;
      float* gx = detail::grad_ptr_fresh(a.x, &fresh_x);
      float* gw = detail::grad_ptr_fresh(a.weight, &fresh_w);
      kernels::linear_gelu_backward(gx, gw, detail::grad_ptr(a.bias), g, slope.data(), a.x.data(), a.weight.data(), a.N,
                                    a.C, a.OC, fresh_x, fresh_w);
    });
  }
  return out;
}

Tensor linear_residual(const Tensor& x_in, const Tensor& weight_in, const Tensor& bias_in, const Tensor& residual_in) {
  LinearArgs a = linear_args("linear_residual", x_in, weight_in, bias_in);
  ATTO_CHECK(residual_in.shape() == a.out_shape(), "linear_residual: residual {} does not match the output {}",
             shape_str(residual_in.shape()), shape_str(a.out_shape()));
  const Tensor residual = contiguous(residual_in);
  if (a.weight.quantized()) {
    detail::refuse_quantized_grad("linear_residual", a.weight, any_requires_grad({&residual}));
    Tensor out = quantized_linear("linear_residual", a);
    kernels::add_forward(out.data(), out.data(), residual.data(), out.numel());
    return out;
  }
  Tensor out = Tensor::empty(a.out_shape());
  kernels::linear_residual_forward(out.data(), residual.data(), a.x.data(), a.weight.data(),
                                   a.bias.defined() ? a.bias.data() : nullptr, a.N, a.C, a.OC);
  if (any_requires_grad({&a.x, &a.weight, &a.bias, &residual})) {
    detail::mark_output(out);
    tape().record("linear_residual", out, [a, residual, out]() {
      const float* g = detail::out_grad(out);
      if (!g) return;
      linear_backward_from(g, a);  // reads g: before the residual may take g's buffer
      detail::pass_gradient(residual, out, g, out.numel(), /*may_take=*/true);
    });
  }
  return out;
}

}  // namespace atto
