// atto/kernels/elementwise.cpp: pointwise ops (add, bias, activations, dropout) and the
// vectorised exp they share with softmax, cross-entropy and attention.
//
// Every element goes through the same vector code at the build's native width (simd::vn; the
// tail is a partial vector, never a scalar epilogue), so an element's value does not depend on
// how the range was split over threads, nor on the width: each lane sees the same operations.

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "kernels/kernels.h"
#include "kernels/parallel.h"
#include "kernels/simd.h"
#include "tensor/rng.h"

namespace ATTO_KERNELS_NS {

namespace {

using namespace simd;

VINLINE vn vsigmoid(vn x) { return 1.0f / (1.0f + vexp(-x)); }

// erf(x) as a rational function, odd degree 13 over even degree 8 in x, on x clamped to [-4, 4]
// (erf(4) = 1 - 1.5e-8 is 1 in float): the minimax fit Eigen and XLA use for float erf, absolute
// error < 4e-7 over the whole line (measured against std::erf in steps of 1e-4 on [-10, 10]).
// One division and 12 multiply-adds: 2.4x faster than the erfc-with-exp form this replaced,
// which made GELU an eighth of a small model's training step. The result is clamped to
// [-1, 1], so Phi below is never negative.
VINLINE vn verf(vn x) {
  x = vmin(vmax(x, vsplat<vn>(-4.0f)), vsplat<vn>(4.0f));
  const vn x2 = x * x;
  vn p = vsplat<vn>(-2.72614225801306e-10f);
  p = p * x2 + 2.77068142495902e-08f;
  p = p * x2 - 2.10102402082508e-06f;
  p = p * x2 - 5.69250639462346e-05f;
  p = p * x2 - 7.34990630326855e-04f;
  p = p * x2 - 2.95459980854025e-03f;
  p = p * x2 - 1.60960333262415e-02f;
  vn q = vsplat<vn>(-1.45660718464996e-05f);
  q = q * x2 - 2.13374055278905e-04f;
  q = q * x2 - 1.68282697438203e-03f;
  q = q * x2 - 7.37332916720468e-03f;
  q = q * x2 - 1.42647390514189e-02f;
  return vmin(vmax(x * p / q, vsplat<vn>(-1.0f)), vsplat<vn>(1.0f));
}

// Phi(x) = 0.5 (1 + erf(x / sqrt 2)), the standard normal CDF, to an absolute 2e-7. Like
// PyTorch's own vectorised GELU, it keeps no relative accuracy deep in the lower tail (Phi(-5) =
// 2.9e-7): GELU's value and slope there are below 2e-6 in absolute terms.
VINLINE vn vnormal_cdf(vn x) { return 0.5f + 0.5f * verf(x * 0.70710678118654752f); }

// f(i0, i1) over [0, n) in one contiguous range per thread; serial when n < min_parallel.
template <class F>
void parallel_ranges(int64_t n, int64_t min_parallel, F f) {
  parallel_region(n >= min_parallel, [&](int64_t t, int64_t nt) { f(n * t / nt, n * (t + 1) / nt); });
}

constexpr int64_t kCheap = 1 << 14;  // memory-bound ops: threads from 16K elements
constexpr int64_t kMath = 1 << 13;   // ops with an exp per element

// Applies a 16-lane op g(offset, count) over [0, n): full vectors, then one padded tail.
template <class G>
void map_vectors(int64_t n, int64_t min_parallel, G g) {
  parallel_ranges(n, min_parallel, [&](int64_t i0, int64_t i1) {
    int64_t i = i0;
    for (; i + WN <= i1; i += WN) g(i, WN);
    if (i < i1) g(i, i1 - i);
  });
}

VINLINE vn ld(const float* p, int64_t i, int64_t cnt) { return loadn_upto(p + i, cnt); }
VINLINE void st(float* p, int64_t i, int64_t cnt, vn v) { storen_upto(p + i, v, cnt); }

constexpr float kSqrt2OverPi = 0.7978845608028654f;
constexpr float kGeluCoef = 0.044715f;

}  // namespace

// ============================================================================================
// Shared helpers
// ============================================================================================

// The three reductions below hold their 16-lane accumulator as kParts native vectors (simd.h):
// the same lanes, the same sums in the same order, the same bits as one vn.
float exp_shift_sum(float* out, const float* x, int64_t n, float shift) {
  vn acc[kParts];
  for (vn& a : acc) a = vsplat<vn>(0.0f);
  const vn s = vsplat<vn>(shift);
  const float ninf = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < n; i += W) {
    for (int k = 0; k < kParts; k++) {
      const int64_t j = i + k * WN, cnt = n - j;
      if (cnt <= 0) break;  // the lanes past n would add exp(-inf) = 0
      const vn e = vexp(loadn_upto(x + j, cnt, ninf) - s);
      if (out != nullptr) storen_upto(out + j, e, cnt);
      acc[k] += e;
    }
  }
  return hsum_parts(acc);
}

float sum_of(const float* x, int64_t n) {
  vn acc[kParts];
  for (vn& a : acc) a = vsplat<vn>(0.0f);
  for (int64_t i = 0; i < n; i += W)
    for (int k = 0; k < kParts; k++) {
      const int64_t j = i + k * WN, cnt = n - j;
      if (cnt <= 0) break;
      acc[k] += loadn_upto(x + j, cnt);
    }
  return hsum_parts(acc);
}

float max_of(const float* x, int64_t n) {
  const float ninf = -std::numeric_limits<float>::infinity();
  vn m[kParts];
  for (vn& a : m) a = vsplat<vn>(ninf);
  for (int64_t i = 0; i < n; i += W)
    for (int k = 0; k < kParts; k++) {
      const int64_t j = i + k * WN, cnt = n - j;
      if (cnt <= 0) break;
      m[k] = vmax(m[k], loadn_upto(x + j, cnt, ninf));
    }
  return hmax_parts(m);
}

// ============================================================================================
// Add, bias
// ============================================================================================

void add_forward(float* out, const float* a, const float* b, int64_t n) {
  parallel_ranges(n, kCheap, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; i++) out[i] = a[i] + b[i];
  });
}

void bias_add_forward(float* out, const float* inp, const float* bias, int64_t N, int64_t C) {
  parallel_ranges(N, std::max<int64_t>(2, kCheap / std::max<int64_t>(C, 1)), [&](int64_t n0, int64_t n1) {
    for (int64_t n = n0; n < n1; n++)
      for (int64_t c = 0; c < C; c++) out[n * C + c] = inp[n * C + c] + bias[c];
  });
}

void bias_add_backward(float* dinp, float* dbias, const float* dout, int64_t N, int64_t C) {
  if (dinp != nullptr) {
    parallel_ranges(N * C, kCheap, [&](int64_t i0, int64_t i1) {
      for (int64_t i = i0; i < i1; i++) dinp[i] += dout[i];
    });
  }
  if (dbias == nullptr) return;
  // dbias[C] += sum_n dout[n, :]: column blocks over threads, rows summed in order.
  constexpr int64_t kCols = 64;
  const int64_t nblocks = (C + kCols - 1) / kCols;
  const bool par = N * C >= kCheap && nblocks > 1;
  parallel_for(nblocks, par, [&](int64_t blk) {
    const int64_t c0 = blk * kCols, c1 = std::min(C, c0 + kCols);
    float acc[kCols] = {};
    for (int64_t n = 0; n < N; n++) {
      const float* d = dout + n * C;
      for (int64_t c = c0; c < c1; c++) acc[c - c0] += d[c];
    }
    for (int64_t c = c0; c < c1; c++) dbias[c] += acc[c - c0];
  });
}

// ============================================================================================
// Activations
// ============================================================================================

void relu_forward(float* out, const float* inp, int64_t n) {
  parallel_ranges(n, kCheap, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; i++) out[i] = inp[i] > 0.0f ? inp[i] : 0.0f;
  });
}

void relu_backward(float* dinp, const float* dout, const float* inp, int64_t n) {
  parallel_ranges(n, kCheap, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; i++) dinp[i] += inp[i] > 0.0f ? dout[i] : 0.0f;
  });
}

// 0.5 x (1 + tanh(u)) = x * sigmoid(2u),  u = sqrt(2/pi) (x + 0.044715 x^3)
void gelu_tanh_forward(float* out, const float* inp, int64_t n) {
  map_vectors(n, kMath, [&](int64_t i, int64_t cnt) {
    const vn x = ld(inp, i, cnt);
    const vn u = kSqrt2OverPi * (x + kGeluCoef * x * x * x);
    st(out, i, cnt, x * vsigmoid(2.0f * u));
  });
}

// d/dx = 0.5 (1 + tanh u) + 0.5 x (1 - tanh^2 u) u',  u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
//      = s + 2 x s (1 - s) u'  with s = sigmoid(2u)
void gelu_tanh_backward(float* dinp, const float* dout, const float* inp, int64_t n) {
  map_vectors(n, kMath, [&](int64_t i, int64_t cnt) {
    const vn x = ld(inp, i, cnt);
    const vn x2 = x * x;
    const vn u = kSqrt2OverPi * (x + kGeluCoef * x2 * x);
    const vn du = kSqrt2OverPi * (1.0f + 3.0f * kGeluCoef * x2);
    const vn s = vsigmoid(2.0f * u);
    const vn grad = s + 2.0f * x * s * (1.0f - s) * du;
    st(dinp, i, cnt, ld(dinp, i, cnt) + ld(dout, i, cnt) * grad);
  });
}

// 0.5 x (1 + erf(x / sqrt 2)) = x Phi(x);  d/dx = Phi(x) + x phi(x),  phi(x) = exp(-x^2/2)/sqrt(2
// pi)
void gelu_erf_forward(float* out, const float* inp, int64_t n) {
  map_vectors(n, kMath, [&](int64_t i, int64_t cnt) {
    const vn x = ld(inp, i, cnt);
    st(out, i, cnt, x * vnormal_cdf(x));
  });
}

void gelu_erf_backward(float* dinp, const float* dout, const float* inp, int64_t n) {
  gelu_erf_backward_ex(dinp, dout, inp, n, true);
}

void gelu_erf_backward_ex(float* dinp, const float* dout, const float* inp, int64_t n, bool accumulate) {
  map_vectors(n, kMath, [&](int64_t i, int64_t cnt) {
    const vn x = ld(inp, i, cnt);
    const vn pdf = vexp(-0.5f * x * x) * 0.39894228040143268f;
    vn d = ld(dout, i, cnt) * (vnormal_cdf(x) + x * pdf);
    if (accumulate) d += ld(dinp, i, cnt);
    st(dinp, i, cnt, d);
  });
}

// GELU with its slope kept for the backward: y = x Phi(x), slope = Phi(x) + x phi(x) (the
// same expressions as gelu_erf_forward and gelu_erf_backward, so the same bits). In place when
// out == inp.
VINLINE void gelu_erf_slope_vec(float* out, float* slope, const float* inp, int64_t i, int64_t cnt) {
  const vn x = ld(inp, i, cnt);
  const vn cdf = vnormal_cdf(x);
  st(out, i, cnt, x * cdf);
  if (slope != nullptr) {
    const vn pdf = vexp(-0.5f * x * x) * 0.39894228040143268f;
    st(slope, i, cnt, cdf + x * pdf);
  }
}

void gelu_erf_forward_slope(float* out, float* slope, const float* inp, int64_t n) {
  map_vectors(n, kMath, [&](int64_t i, int64_t cnt) { gelu_erf_slope_vec(out, slope, inp, i, cnt); });
}

void gelu_erf_slope_rows(float* x, float* slope, int64_t ld, int64_t rows, int64_t cols) {
  for (int64_t r = 0; r < rows; r++) {
    float* row = x + r * ld;
    float* srow = slope != nullptr ? slope + r * ld : nullptr;
    int64_t i = 0;
    for (; i + WN <= cols; i += WN) gelu_erf_slope_vec(row, srow, row, i, WN);
    if (i < cols) gelu_erf_slope_vec(row, srow, row, i, cols - i);
  }
}

void gelu_erf_bias_slope(float* x, float* slope, const float* bias, int64_t N, int64_t C) {
  parallel_ranges(N, kMath / std::max<int64_t>(C, 1) + 1, [&](int64_t r0, int64_t r1) {
    for (int64_t r = r0; r < r1; r++) {
      float* row = x + r * C;
      float* srow = slope != nullptr ? slope + r * C : nullptr;
      for (int64_t i = 0; i < C; i += WN) {
        const int64_t cnt = std::min<int64_t>(WN, C - i);
        st(row, i, cnt, ld(row, i, cnt) + ld(bias, i, cnt));
        gelu_erf_slope_vec(row, srow, row, i, cnt);
      }
    }
  });
}

void gelu_erf_backward_slope(float* dinp, const float* dout, const float* slope, int64_t n, bool accumulate) {
  map_vectors(n, kCheap, [&](int64_t i, int64_t cnt) {
    vn d = ld(dout, i, cnt) * ld(slope, i, cnt);
    if (accumulate) d += ld(dinp, i, cnt);
    st(dinp, i, cnt, d);
  });
}

// silu(x) = x s, s = sigmoid(x);  d/dx = s (1 + x (1 - s))
void silu_forward(float* out, const float* inp, int64_t n) {
  map_vectors(n, kMath, [&](int64_t i, int64_t cnt) {
    const vn x = ld(inp, i, cnt);
    st(out, i, cnt, x * vsigmoid(x));
  });
}

void silu_backward(float* dinp, const float* dout, const float* inp, int64_t n) {
  map_vectors(n, kMath, [&](int64_t i, int64_t cnt) {
    const vn x = ld(inp, i, cnt);
    const vn s = vsigmoid(x);
    st(dinp, i, cnt, ld(dinp, i, cnt) + ld(dout, i, cnt) * s * (1.0f + x * (1.0f - s)));
  });
}

// out = silu(gate) * up;  dgate += dout * up * silu'(gate);  dup += dout * silu(gate)
void swiglu_forward(float* out, const float* gate, const float* up, int64_t n) {
  map_vectors(n, kMath, [&](int64_t i, int64_t cnt) {
    const vn g = ld(gate, i, cnt);
    st(out, i, cnt, g * vsigmoid(g) * ld(up, i, cnt));
  });
}

void swiglu_backward(float* dgate, float* dup, const float* dout, const float* gate, const float* up, int64_t n) {
  map_vectors(n, kMath, [&](int64_t i, int64_t cnt) {
    const vn g = ld(gate, i, cnt), d = ld(dout, i, cnt);
    const vn s = vsigmoid(g);
    if (dgate != nullptr) st(dgate, i, cnt, ld(dgate, i, cnt) + d * ld(up, i, cnt) * s * (1.0f + g * (1.0f - s)));
    if (dup != nullptr) st(dup, i, cnt, ld(dup, i, cnt) + d * g * s);
  });
}

// ============================================================================================
// Dropout: keep(i) = counter_uniform(seed, first + i) >= p; kept elements are divided by 1 - p
// ============================================================================================

void dropout_forward(float* out, const float* inp, int64_t n, float p, uint64_t seed, uint64_t first) {
  if (p == 0.0f) {
    if (out != inp) std::memmove(out, inp, sizeof(float) * static_cast<size_t>(n));
    return;
  }
  const float q = 1.0f - p;
  parallel_ranges(n, kMath, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; i++) {
      const bool keep = counter_uniform(seed, first + static_cast<uint64_t>(i)) >= p;
      out[i] = keep ? inp[i] / q : 0.0f;
    }
  });
}

void dropout_backward(float* dinp, const float* dout, int64_t n, float p, uint64_t seed, uint64_t first) {
  const float q = 1.0f - p;
  parallel_ranges(n, kMath, [&](int64_t i0, int64_t i1) {
    for (int64_t i = i0; i < i1; i++) {
      const bool keep = p == 0.0f || counter_uniform(seed, first + static_cast<uint64_t>(i)) >= p;
      dinp[i] += keep ? dout[i] / q : 0.0f;
    }
  });
}

}  // namespace atto::kernels
