// atto/kernels/cross_entropy.cpp: fused log-softmax + NLL with label smoothing (PyTorch
// semantics) and ignore_index.
//
// With lse = logsumexp(x) and -log p_j = lse - x_j:
//   loss = (1 - ls) (lse - x_t) + ls (lse - mean_j x_j)
//   dloss/dx_j = p_j - q_j,  q = (1 - ls) onehot(t) + ls / V
#include <omp.h>

#include <cmath>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/parallel.h"

namespace ATTO_KERNELS_NS {

namespace {
bool worth_threads(int64_t N, int64_t V) { return N > 1 && N * V >= (1 << 15); }
}  // namespace

int64_t cross_entropy_forward(float* losses, float* lse, const float* logits, const int32_t* targets, int64_t N,
                              int64_t V, int32_t ignore_index, float label_smoothing) {
  const float ls = label_smoothing;
  int64_t count = 0;
  const bool par = worth_threads(N, V);
  for (int64_t n = 0; n < N; n++) count += targets[n] != ignore_index ? 1 : 0;
  parallel_for(N, par, [&](int64_t n) {
    const float* x = logits + n * V;
    const float m = max_of(x, V);
    const float l = m + std::log(exp_shift_sum(nullptr, x, V, m));
    lse[n] = l;
    const int32_t t = targets[n];
    if (t == ignore_index) {
      losses[n] = 0.0f;
      return;
    }
    float loss = (1.0f - ls) * (l - x[t]);
    if (ls != 0.0f) loss += ls * (l - sum_of(x, V) / static_cast<float>(V));
    losses[n] = loss;
  });
  return count;
}

void cross_entropy_backward(float* dlogits, const float* dloss, const float* logits, const float* lse,
                            const int32_t* targets, int64_t N, int64_t V, int32_t ignore_index, float label_smoothing) {
  const float ls = label_smoothing;
  const float q_other = ls / static_cast<float>(V);
  const bool par = worth_threads(N, V);
  parallel_region(par, [&](int64_t th, int64_t nth) {
    std::vector<float> p(static_cast<size_t>(V));  // this thread's row of probabilities
    const auto [n0, n1] = static_range(N, th, nth);
    for (int64_t n = n0; n < n1; n++) {
      const int32_t t = targets[n];
      if (t == ignore_index) continue;
      const float g = dloss[n];
      exp_shift_sum(p.data(), logits + n * V, V, lse[n]);
      p[t] -= 1.0f - ls;
      float* d = dlogits + n * V;
      for (int64_t j = 0; j < V; j++) d[j] += g * (p[j] - q_other);
    }
  });
}

int64_t cross_entropy_forward_naive(float* losses, float* lse, const float* logits, const int32_t* targets, int64_t N,
                                    int64_t V, int32_t ignore_index, float label_smoothing) {
  int64_t count = 0;
  for (int64_t n = 0; n < N; n++) {
    const float* x = logits + n * V;
    float m = x[0];
    for (int64_t j = 1; j < V; j++) m = std::max(m, x[j]);
    float s = 0.0f;
    for (int64_t j = 0; j < V; j++) s += std::exp(x[j] - m);
    lse[n] = m + std::log(s);
    const int32_t t = targets[n];
    if (t == ignore_index) {
      losses[n] = 0.0f;
      continue;
    }
    count++;
    float smooth = 0.0f;  // mean_j -log p_j
    for (int64_t j = 0; j < V; j++) smooth += lse[n] - x[j];
    smooth /= static_cast<float>(V);
    losses[n] = (1.0f - label_smoothing) * (lse[n] - x[t]) + label_smoothing * smooth;
  }
  return count;
}

void cross_entropy_backward_naive(float* dlogits, const float* dloss, const float* logits, const float* lse,
                                  const int32_t* targets, int64_t N, int64_t V, int32_t ignore_index,
                                  float label_smoothing) {
  for (int64_t n = 0; n < N; n++) {
    const int32_t t = targets[n];
    if (t == ignore_index) continue;
    for (int64_t j = 0; j < V; j++) {
      const float p = std::exp(logits[n * V + j] - lse[n]);
      const float q = (j == t ? 1.0f - label_smoothing : 0.0f) + label_smoothing / static_cast<float>(V);
      dlogits[n * V + j] += dloss[n] * (p - q);
    }
  }
}

}  // namespace atto::kernels
