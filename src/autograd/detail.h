// Internal helpers shared by the op implementations (not part of the public API).
#pragma once

#include <array>
#include <cstring>
#include <vector>

#include "autograd/tape.h"
#include "base/error.h"
#include "kernels/kernels.h"
#include "tensor/tensor.h"

namespace atto::detail {

// Pointer to x's gradient buffer, allocating a zero one; nullptr when x does not require grad.
inline float* grad_ptr(const Tensor& x) {
  if (!x.defined() || !x.requires_grad()) return nullptr;
  Tensor handle = x;  // a handle: ensure_grad acts on the same tensor
  handle.ensure_grad();
  return handle.grad().data();
}

// Like grad_ptr, for a backward that can either overwrite or accumulate: when x had no gradient
// yet, the new buffer is left uninitialised and *fresh is set, and the caller must write every
// element (a GEMM with beta 0, a copy). Saves the zero fill and one read of the buffer.
inline float* grad_ptr_fresh(const Tensor& x, bool* fresh) {
  *fresh = false;
  if (!x.defined() || !x.requires_grad()) return nullptr;
  Tensor handle = x;
  if (!handle.grad().defined()) {
    handle.set_grad(Tensor::empty(x.shape()));
    *fresh = true;
  }
  return handle.grad().data();
}

// Adds g (out's gradient, n floats) into x's gradient. When x has none yet and may_take is set,
// x takes out's gradient buffer itself (out's is released once its node has run, so nothing
// else writes it) and this returns true; otherwise x gets a copy or a sum. An op whose output's
// gradient goes unchanged to an input (a residual connection) passes it on this way.
inline bool pass_gradient(const Tensor& x, const Tensor& out, const float* g, int64_t n, bool may_take) {
  if (!x.defined() || !x.requires_grad()) return false;
  Tensor gout = out.grad();
  if (may_take && !x.grad().defined() && gout.is_contiguous() && gout.shape() == x.shape()) {
    Tensor h = x;
    h.set_grad(gout);
    return true;
  }
  bool fresh = false;
  float* gx = grad_ptr_fresh(x, &fresh);
  if (fresh) {
    std::memcpy(gx, g, sizeof(float) * static_cast<size_t>(n));
  } else {
    kernels::add_forward(gx, gx, g, n);
  }
  return false;
}

// Pointer to the gradient flowing into an op's output, or nullptr when none arrived (the
// output did not contribute to the loss): the node then has nothing to do.
inline const float* out_grad(const Tensor& out) {
  Tensor g = out.grad();
  return g.defined() ? g.data() : nullptr;
}

// Marks the output of an op that records a node.
inline Tensor& mark_output(Tensor& out) {
  out.set_requires_grad(true);
  return out;
}

// Visit every index of `shape` in row-major order, calling f(k, offs) where k is the linear
// index and offs[j] the element offset of operand j given its strides.
template <size_t NOps, typename F>
void for_each_strided(const Shape& shape, const std::array<const Shape*, NOps>& strides, F&& f) {
  const int n = static_cast<int>(shape.size());
  const int64_t total = shape_numel(shape);
  if (total == 0) return;
  std::vector<int64_t> idx(n, 0);
  std::array<int64_t, NOps> off{};
  for (int64_t k = 0; k < total; ++k) {
    f(k, off);
    for (int d = n - 1; d >= 0; --d) {
      if (++idx[d] < shape[d]) {
        for (size_t j = 0; j < NOps; ++j) off[j] += (*strides[j])[d];
        break;
      }
      for (size_t j = 0; j < NOps; ++j) off[j] -= (*strides[j])[d] * (shape[d] - 1);
      idx[d] = 0;
    }
  }
}

// Product of all dimensions but the last.
inline int64_t rows_of(const Tensor& x) { return x.ndim() == 0 ? 1 : x.numel() / x.size(-1); }

// out[N, OC] = x[N, C] weight^T (+ bias): the f32 GEMM, or the integer kernels when weight holds
// quantized rows (kernels/quant.h). A quantized weight is for inference: `op` refuses it while a
// gradient is wanted (grad_wanted), naming the op and what to do.
void linear_forward_any(const char* op, float* out, const float* x, const Tensor& weight, const float* bias, int64_t N,
                        int64_t C, int64_t OC, bool grad_wanted);
// The one refusal of a gradient through quantized rows: throws when grad_wanted, naming `op`,
// the quantized weight's shape and what to do.
void refuse_quantized_grad(const char* op, const Tensor& weight, bool grad_wanted);

}  // namespace atto::detail
