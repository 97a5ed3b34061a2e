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
#include "kernels/parallel.h"

namespace ATTO_KERNELS_NS {

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
namespace {

// adam_update's scalars, computed once per tensor.
struct AdamScalars {
  float beta1, beta2, eps, neg_step_size, bc2_sqrt, one_minus_b1, one_minus_b2, l2, decay;
  bool decoupled;
};

AdamScalars adam_scalars(float lr, float beta1, float beta2, float eps, float weight_decay, bool decoupled,
                         int64_t step) {
  const double bc1 = 1.0 - std::pow(static_cast<double>(beta1), static_cast<double>(step));
  const double bc2 = 1.0 - std::pow(static_cast<double>(beta2), static_cast<double>(step));
  AdamScalars k;
  k.beta1 = beta1;
  k.beta2 = beta2;
  k.eps = eps;
  k.neg_step_size = static_cast<float>(-static_cast<double>(lr) / bc1);
  k.bc2_sqrt = static_cast<float>(std::sqrt(bc2));
  k.one_minus_b1 = static_cast<float>(1.0 - static_cast<double>(beta1));
  k.one_minus_b2 = static_cast<float>(1.0 - static_cast<double>(beta2));
  k.l2 = decoupled ? 0.0f : weight_decay;
  k.decay = decoupled ? static_cast<float>(1.0 - static_cast<double>(lr) * weight_decay) : 1.0f;
  k.decoupled = decoupled;
  return k;
}

// Elements [begin, end). This file compiles without FP contraction, so every operation rounds
// on its own and vector and scalar code (a loop's tail) give the same bits. The scalars are
// locals, the arrays restrict and the two choices template arguments: with the scalars read
// through a reference that a store might alias, and the choices tested per element, GCC left
// the AVX2 build's loop scalar (3x the AVX-512 build's optimizer step on (c)).
template <bool kL2, bool kDecoupled>
void adam_loop(const AdamScalars& k, float* __restrict param, float* __restrict m, float* __restrict v,
               const float* __restrict grad, int64_t begin, int64_t end) {
  const float beta1 = k.beta1, beta2 = k.beta2, eps = k.eps, neg_step = k.neg_step_size, bc2_sqrt = k.bc2_sqrt;
  const float omb1 = k.one_minus_b1, omb2 = k.one_minus_b2, l2 = k.l2, decay = k.decay;
  for (int64_t i = begin; i < end; ++i) {
    float p = param[i];
    const float g = kL2 ? grad[i] + l2 * p : grad[i];
    if (kDecoupled) p = p * decay;
    const float mi = m[i] * beta1 + omb1 * g;
    const float vi = v[i] * beta2 + omb2 * (g * g);
    m[i] = mi;
    v[i] = vi;
    const float denom = std::sqrt(vi) / bc2_sqrt + eps;
    param[i] = p + neg_step * (mi / denom);
  }
}

void adam_range(const AdamScalars& k, float* param, float* m, float* v, const float* grad, int64_t begin, int64_t end) {
  const bool l2 = k.l2 != 0.0f;
  if (l2 && k.decoupled)
    adam_loop<true, true>(k, param, m, v, grad, begin, end);
  else if (l2)
    adam_loop<true, false>(k, param, m, v, grad, begin, end);
  else if (k.decoupled)
    adam_loop<false, true>(k, param, m, v, grad, begin, end);
  else
    adam_loop<false, false>(k, param, m, v, grad, begin, end);
}

}  // namespace

// Per element, in PyTorch's order (param, m, v, g are float; scalars rounded to float once):
//   g' = g + wd * param                                  (L2, decoupled == false)
//   param = param * (1 - lr*wd)                          (decoupled == true)
//   m = m*b1 + (1-b1)*g';  v = v*b2 + (1-b2)*g'*g'
//   param = param + (-lr/bc1) * (m / (sqrt(v)/sqrt(bc2) + eps))
void adam_update(float* param, float* m, float* v, const float* grad, int64_t n, float lr, float beta1, float beta2,
                 float eps, float weight_decay, bool decoupled, int64_t step) {
  const AdamTensor t{param, m, v, grad, n, lr, weight_decay, step};
  adam_update_many(&t, 1, beta1, beta2, eps, decoupled);
}

void adam_update_many(const AdamTensor* t, size_t count, float beta1, float beta2, float eps, bool decoupled) {
  std::vector<AdamScalars> k(count);
  std::vector<int64_t> n(count);
  for (size_t i = 0; i < count; ++i) {
    k[i] = adam_scalars(t[i].lr, beta1, beta2, eps, t[i].weight_decay, decoupled, t[i].step);
    n[i] = t[i].n;
  }
  for_each_chunk(n.data(), count, kElemChunk, kParallelMin, [&](size_t i, int64_t b, int64_t e) {
    adam_range(k[i], t[i].param, t[i].m, t[i].v, t[i].grad, b, e);
  });
}

// Per element, as torch.optim.SGD (dampening 0):
//   g' = g + wd*param;  buf = first_step ? g' : buf*momentum + g'
//   d = nesterov ? g' + momentum*buf : buf;   param = param + (-lr) * d
// momentum_buf may be nullptr when momentum == 0 (plain SGD: d = g').
void sgd_update(float* param, float* momentum_buf, const float* grad, int64_t n, float lr, float momentum,
                float weight_decay, bool nesterov, bool first_step) {
  const float neg_lr = -lr;
  const bool use_buf = momentum_buf != nullptr;
  parallel_for(n, n >= kParallelMin, [&](int64_t i) {
    const float p = param[i];
    const float g = weight_decay != 0.0f ? grad[i] + weight_decay * p : grad[i];
    float d = g;
    if (use_buf) {
      const float buf = first_step ? g : momentum_buf[i] * momentum + g;
      momentum_buf[i] = buf;
      d = nesterov ? g + momentum * buf : buf;
    }
    param[i] = p + neg_lr * d;
  });
}

double sum_squares(const float* x, int64_t n) {
  double out = 0.0;
  sum_squares_many(&out, &x, &n, 1);
  return out;
}

// Chunk sums of kSumChunk elements in parallel, then each tensor's added in chunk order.
void sum_squares_many(double* out, const float* const* x, const int64_t* n, size_t count) {
  std::vector<size_t> first(count + 1, 0);  // tensor i's chunk sums: partial[first[i], first[i+1])
  std::vector<int64_t> len(count);
  for (size_t i = 0; i < count; ++i) {
    len[i] = std::max<int64_t>(n[i], 0);
    first[i + 1] = first[i] + static_cast<size_t>((len[i] + kSumChunk - 1) / kSumChunk);
  }
  std::vector<double> partial(first[count], 0.0);
  for_each_chunk(len.data(), count, kSumChunk, kParallelMin, [&](size_t i, int64_t b, int64_t e) {
    partial[first[i] + static_cast<size_t>(b / kSumChunk)] = chunk_sum_squares(x[i] + b, e - b);
  });
  for (size_t i = 0; i < count; ++i) {
    double total = 0.0;
    for (size_t c = first[i]; c < first[i + 1]; ++c) total += partial[c];  // chunk 0, 1, 2, ...
    out[i] = total;
  }
}

void scale_inplace(float* x, int64_t n, float s) { scale_inplace_many(&x, &n, 1, s); }

void scale_inplace_many(float* const* x, const int64_t* n, size_t count, float s) {
  for_each_chunk(n, count, kElemChunk, kParallelMin, [&](size_t i, int64_t b, int64_t e) {
    for (int64_t j = b; j < e; ++j) x[i][j] *= s;
  });
}

}  // namespace atto::kernels
