// Rotary position embeddings as a differentiable op (kernels/rope.cpp holds the rotation).
#include "autograd/detail.h"
#include "autograd/ops.h"
#include "kernels/kernels.h"

namespace atto {

Tensor rope_qkv(const Tensor& qkv_in, int64_t n_heads, int64_t offset, float base) {
  ATTO_CHECK(qkv_in.ndim() == 3 && qkv_in.size(2) % 3 == 0, "rope: qkv must be [B, T, 3C], got {}",
             shape_str(qkv_in.shape()));
  const int64_t B = qkv_in.size(0), T = qkv_in.size(1), C = qkv_in.size(2) / 3;
  ATTO_CHECK(n_heads > 0 && C % n_heads == 0 && (C / n_heads) % 2 == 0,
             "rope: the head size C / n_heads = {} / {} must be an even integer", C, n_heads);
  ATTO_CHECK(offset >= 0 && base > 0.0f, "rope: offset {} and base {} must be >= 0 and > 0", offset, base);
  Tensor qkv = contiguous(qkv_in);
  Tensor out = Tensor::empty(qkv.shape());
  kernels::rope_forward(out.data(), qkv.data(), B, T, C, n_heads, offset, base);
  if (any_requires_grad({&qkv})) {
    detail::mark_output(out);
    tape().record("rope", out, [qkv, out, B, T, C, n_heads, offset, base]() mutable {
      const float* g = detail::out_grad(out);
      if (!g) return;
      bool fresh = false;
      float* gx = detail::grad_ptr_fresh(qkv, &fresh);
      kernels::rope_backward(gx, g, B, T, C, n_heads, offset, base, !fresh);
    });
  }
  return out;
}

}  // namespace atto
