// atto/kernels/optim_kernels.cpp: the optimizer update kernels of kernels.h.
//
// Every kernel here is elementwise (adam_update, sgd_update, scale_inplace) or a reduction over
// fixed chunks combined in a fixed order (sum_squares), so results are bit-identical for any
// OpenMP thread count.
//
// The scalar arithmetic (bias corrections, step size, decay factor) is done in double and
// rounded to float once, then the per-element arithmetic runs in float in the same order as
// PyTorch's single-tensor Adam/AdamW/SGD (torch 1.13, foreach=False), so a parity test can use
// tight tolerances.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/kernels.h"

namespace atto::kernels {

namespace {

// Below this many elements the fork/join of a parallel region costs more than it saves.
constexpr int64_t kParallelMin = 1 << 15;
// Elementwise loops are split into chunks of this many elements (a multiple of the vector width)
// dealt out to threads: every chunk runs the same code whichever thread gets it, so the results do
// not depend on the thread count even if the compiler vectorises or contracts to FMA.
constexpr int64_t kElemChunk = 1 << 12;
// sum_squares chunk: each chunk is summed on its own, chunk sums are added in index order.
constexpr int64_t kSumChunk = 1 << 14;

// Sum of squares of x[0, n) in double with 8 partial sums (a fixed order, vectorisable).
double chunk_sum_squares(const float* x, int64_t n) {
  double acc[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    for (int k = 0; k < 8; ++k) {
      const double xi = static_cast<double>(x[i + k]);
      acc[k] += xi * xi;
    }
  }
  for (int k = 0; i < n; ++i, ++k) {
    const double xi = static_cast<double>(x[i]);
    acc[k] += xi * xi;
  }
  return ((acc[0] + acc[1]) + (acc[2] + acc[3])) + ((acc[4] + acc[5]) + (acc[6] + acc[7]));
}

}  // namespace

// Per element, in PyTorch's order (param, m, v, g are float; scalars rounded to float once):
//   g' = g + wd * param                                  (L2, decoupled == false)
//   param = param * (1 - lr*wd)                          (decoupled == true)
//   m = m*b1 + (1-b1)*g';  v = v*b2 + (1-b2)*g'*g'
//   param = param + (-lr/bc1) * (m / (sqrt(v)/sqrt(bc2) + eps))
void adam_update(float* param, float* m, float* v, const float* grad, int64_t n, float lr,
                 float beta1, float beta2, float eps, float weight_decay, bool decoupled,
                 int64_t step) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(step));
  const float neg_step_size = static_cast<float>(-static_cast<double>(lr) / bc1);
  const float bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  const float one_minus_b1 = static_cast<float>(1.0 - static_cast<double>(beta1));
  const float one_minus_b2 = static_cast<float>(1.0 - static_cast<double>(beta2));
  const float l2 = decoupled ? 0.0f : weight_decay;
  const float decay = decoupled ? static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay)
                                : 1.0f;
#pragma omp parallel for schedule(static, kElemChunk) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    float p = param[i];
    const float g = l2 != 0.0f ? grad[i] + l2 * p : grad[i];
    if (decoupled) p = p * decay;
    const float mi = m[i] * beta1 + one_minus_b1 * g;
    const float vi = v[i] * beta2 + one_minus_b2 * (g * g);
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) / bc2_sqrt + eps;
    param[i] = p + neg_step_size * (mi / denom);
  }
}

// Per element, as torch.optim.SGD (dampening 0):
//   g' = g + wd*param;  buf = first_step ? g' : buf*momentum + g'
//   d = nesterov ? g' + momentum*buf : buf;   param = param + (-lr) * d
// momentum_buf may be nullptr when momentum == 0 (plain SGD: d = g').
void sgd_update(float* param, float* momentum_buf, const float* grad, int64_t n, float lr,
                float momentum, float weight_decay, bool nesterov, bool first_step) {
  const float neg_lr = -lr;
  const bool use_buf = momentum_buf != nullptr;
#pragma omp parallel for schedule(static, kElemChunk) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) {
    const float p = param[i];
    const float g = weight_decay != 0.0f ? grad[i] + weight_decay * p : grad[i];
    float d = g;
    if (use_buf) {
      const float buf = first_step ? g : momentum_buf[i] * momentum + g;
      momentum_buf[i] = buf;
      d = nesterov ? g + momentum * buf : buf;
    }
    param[i] = p + neg_lr * d;
  }
}

double sum_squares(const float* x, int64_t n) {
  if (n <= 0) return 0.0;
  const int64_t nchunks = (n + kSumChunk - 1) / kSumChunk;
  if (nchunks == 1) return chunk_sum_squares(x, n);
  std::vector<double> partial(static_cast<size_t>(nchunks));
#pragma omp parallel for schedule(static) if (n >= kParallelMin)
  for (int64_t c = 0; c < nchunks; ++c) {
    const int64_t begin = c * kSumChunk;
    const int64_t len = std::min(kSumChunk, n - begin);
    partial[static_cast<size_t>(c)] = chunk_sum_squares(x + begin, len);
  }
  double total = 0.0;
  for (double p : partial) total += p;  // fixed order: chunk 0, 1, 2, ...
  return total;
}

void scale_inplace(float* x, int64_t n, float s) {
#pragma omp parallel for schedule(static, kElemChunk) if (n >= kParallelMin)
  for (int64_t i = 0; i < n; ++i) x[i] *= s;
}

}  // namespace atto::kernels
