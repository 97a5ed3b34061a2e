// The embedding op: a row gather forward, a scatter-add backward (kernels/embedding.cpp).
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
  if (const QuantizedData* q = weight.quantized()) {  // rows decoded as they are looked up (inference)
    detail::refuse_quantized_grad("embedding", weight, any_requires_grad({&weight}));
    kernels::dequantize_rows(out.data(), q->bytes.data(), static_cast<kernels::QuantType>(q->type),
                             static_cast<kernels::QuantLayout>(q->layout), V, C, ids.data(), N);
    return out;
  }
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

}  // namespace atto
