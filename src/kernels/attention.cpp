// atto/kernels/attention.cpp: fused attention (placeholder: the reference loops).
#include "kernels/kernels.h"

namespace atto::kernels {

void attention_forward(float* out, float* lse, const float* q, const float* k, const float* v,
                       const uint8_t* key_mask, const AttentionDims& dims) {
  attention_forward_naive(out, lse, q, k, v, key_mask, dims);
}

void attention_backward(float* dq, float* dk, float* dv, const float* dout, const float* out,
                        const float* lse, const float* q, const float* k, const float* v,
                        const uint8_t* key_mask, const AttentionDims& dims) {
  attention_backward_naive(dq, dk, dv, dout, out, lse, q, k, v, key_mask, dims);
}

}  // namespace atto::kernels
