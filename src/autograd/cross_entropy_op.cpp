// Cross-entropy as one fused op: log-softmax + NLL with label smoothing and ignored targets
// (kernels/cross_entropy.cpp).
#include <algorithm>
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

}  // namespace atto
