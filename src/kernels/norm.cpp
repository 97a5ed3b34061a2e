// atto/kernels/norm.cpp: LayerNorm, RMSNorm and softmax over the last dimension C.
//
// Rows are independent, so forward and dinp split rows over threads. The weight/bias gradients
// sum over rows: rows are cut into fixed chunks (a function of N only), each chunk sums its rows
// in order into its own partial, and the partials are added in chunk order.

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/kernels.h"
#include "kernels/parallel.h"
#include "kernels/simd.h"

namespace ATTO_KERNELS_NS {

namespace {

using namespace simd;

// LayerNorm works at the native vector width (simd::vn; a 16-lane vector that GCC splits went
// through memory on every partial load and store). Its row sums are 16-lane accumulators held as
// kParts native vectors: lane l sums the columns c = l mod 16 and hsum_parts adds the lanes in
// hsum's tree, so the sums have the same bits at every width.

// The native vector of p at c (< C); lanes at or past C are `fill` (and not read).
VINLINE vn ldv(const float* p, int64_t c, int64_t C, float fill = 0.0f) {
  return loadn_upto(p + c, C - c, fill);
}
VINLINE void stv(float* p, int64_t c, int64_t C, vn v) { storen_upto(p + c, v, C - c); }
// f(k, c) for each native block c < C of a row, in order, with k = the accumulator part it
// adds into. (Lanes of the last 16-lane block past C, which added exact zeros in the 16-lane
// form, are not visited.)
template <class F>
VINLINE void for_parts(int64_t C, F f) {
  for (int64_t c0 = 0; c0 < C; c0 += W) {
#pragma GCC unroll 4
    for (int k = 0; k < kParts; k++) {
      if (c0 + k * WN >= C) break;
      f(k, c0 + k * WN);
    }
  }
}

// sum_{i < n} term(i) with 16 interleaved partial sums (lane l takes i = l mod 16), combined
// at the end by a fixed pairwise tree (l + l+8, +4, +2, +1): a fixed order the compiler can
// vectorise, with a short dependency chain.
template <class F>
float lane_sum(int64_t n, F term) {
  float acc[16] = {};
  int64_t i = 0;
  for (; i + 16 <= n; i += 16)
    for (int l = 0; l < 16; l++) acc[l] += term(i + l);
  for (int l = 0; i + l < n; l++) acc[l] += term(i + l);
  for (int w = 8; w >= 1; w /= 2)
    for (int l = 0; l < w; l++) acc[l] += acc[l + w];
  return acc[0];
}

constexpr int64_t kParallelElems = 1 << 14;
bool worth_threads(int64_t N, int64_t C) { return N > 1 && N * C >= kParallelElems; }

// Row chunks for the weight-gradient reductions: at most 64 chunks, a function of N only.
int64_t chunk_rows(int64_t N) { return std::max<int64_t>(1, (N + 63) / 64); }

// dst[c] += sum over chunks k (in order) of part[k * C + c]
void add_partials(float* dst, const float* part, int64_t nchunks, int64_t C) {
  const bool par = worth_threads(nchunks, C);
  parallel_for(C, par, [&](int64_t c) {
    float s = 0.0f;
    for (int64_t k = 0; k < nchunks; k++) s += part[k * C + c];
    dst[c] += s;
  });
}

}  // namespace

// ============================================================================================
// LayerNorm
// ============================================================================================

void layernorm_forward(float* out, float* mean, float* rstd, const float* inp, const float* weight, const float* bias,
                       int64_t N, int64_t C, float eps) {
  const bool par = worth_threads(N, C);
  parallel_for(N, par, [&](int64_t n) {
    const float* x = inp + n * C;
    vn acc[kParts] = {};
    for_parts(C, [&](int k, int64_t c) { acc[k] += ldv(x, c, C); });
    const float m = hsum_parts(acc) / static_cast<float>(C);
    // Padded lanes read x = m: they add exact zeros to the variance.
    vn acc2[kParts] = {};
    for_parts(C, [&](int k, int64_t c) {
      const vn d = ldv(x, c, C, m) - m;
      acc2[k] += d * d;
    });
    const float var = hsum_parts(acc2) / static_cast<float>(C);
    const float s = 1.0f / std::sqrt(var + eps);
    float* o = out + n * C;
    for (int64_t c = 0; c < C; c += WN) {
      const vn y = (ldv(x, c, C, m) - m) * s * ldv(weight, c, C);
      stv(o, c, C, bias != nullptr ? y + ldv(bias, c, C) : y);
    }
    if (mean != nullptr) mean[n] = m;
    if (rstd != nullptr) rstd[n] = s;
  });
}

// norm = (x - mean) rstd;  dnorm = dout * weight
// dinp += rstd (dnorm - mean_c(dnorm) - norm * mean_c(dnorm * norm))
// dweight += sum_n dout * norm;  dbias += sum_n dout
void layernorm_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, const float* mean, const float* rstd, int64_t N, int64_t C) {
  const int64_t R = chunk_rows(N), nchunks = (N + R - 1) / R;
  const bool want_w = dweight != nullptr, want_b = dbias != nullptr;
  AlignedVector<float> pw(want_w ? static_cast<size_t>(nchunks * C) : 0);
  AlignedVector<float> pb(want_b ? static_cast<size_t>(nchunks * C) : 0);
  const bool par = worth_threads(N, C) && nchunks > 1;
  parallel_for(nchunks, par, [&](int64_t k) {
    float* w_acc = want_w ? pw.data() + k * C : nullptr;
    float* b_acc = want_b ? pb.data() + k * C : nullptr;
    for (int64_t n = k * R; n < std::min(N, (k + 1) * R); n++) {
      const float* x = inp + n * C;
      const float* d = dout + n * C;
      const float m = mean[n], s = rstd[n];
      // Padded lanes read d = 0 and x = m: they add exact zeros.
      vn acc1[kParts] = {}, acc2[kParts] = {};
      for_parts(C, [&](int k, int64_t c) {
        const vn dv = ldv(d, c, C), norm = (ldv(x, c, C, m) - m) * s;
        if (w_acc != nullptr) stv(w_acc, c, C, ldv(w_acc, c, C) + dv * norm);
        if (b_acc != nullptr) stv(b_acc, c, C, ldv(b_acc, c, C) + dv);
        const vn dw = dv * ldv(weight, c, C);
        acc1[k] += dw;
        acc2[k] += dw * norm;
      });
      if (dinp == nullptr) continue;
      const float dmean = hsum_parts(acc1) / static_cast<float>(C);
      const float dnorm_norm = hsum_parts(acc2) / static_cast<float>(C);
      float* di = dinp + n * C;
      for (int64_t c = 0; c < C; c += WN) {
        const vn dw = ldv(d, c, C) * ldv(weight, c, C), norm = (ldv(x, c, C, m) - m) * s;
        stv(di, c, C, ldv(di, c, C) + s * (dw - dmean - norm * dnorm_norm));
      }
    }
  });
  if (want_w) add_partials(dweight, pw.data(), nchunks, C);
  if (want_b) add_partials(dbias, pb.data(), nchunks, C);
}

void layernorm_forward_naive(float* out, float* mean, float* rstd, const float* inp, const float* weight,
                             const float* bias, int64_t N, int64_t C, float eps) {
  for (int64_t n = 0; n < N; n++) {
    const float* x = inp + n * C;
    float m = 0.0f;
    for (int64_t c = 0; c < C; c++) m += x[c];
    m /= static_cast<float>(C);
    float var = 0.0f;
    for (int64_t c = 0; c < C; c++) var += (x[c] - m) * (x[c] - m);
    var /= static_cast<float>(C);
    const float s = 1.0f / std::sqrt(var + eps);
    for (int64_t c = 0; c < C; c++) out[n * C + c] = (x[c] - m) * s * weight[c] + (bias != nullptr ? bias[c] : 0.0f);
    if (mean != nullptr) mean[n] = m;
    if (rstd != nullptr) rstd[n] = s;
  }
}

void layernorm_backward_naive(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                              const float* weight, const float* mean, const float* rstd, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; n++) {
    const float* x = inp + n * C;
    const float* d = dout + n * C;
    float dmean = 0.0f, dnorm_norm = 0.0f;
    for (int64_t c = 0; c < C; c++) {
      const float norm = (x[c] - mean[n]) * rstd[n];
      dmean += d[c] * weight[c];
      dnorm_norm += d[c] * weight[c] * norm;
    }
    dmean /= static_cast<float>(C);
    dnorm_norm /= static_cast<float>(C);
    for (int64_t c = 0; c < C; c++) {
      const float norm = (x[c] - mean[n]) * rstd[n];
      if (dweight != nullptr) dweight[c] += d[c] * norm;
      if (dbias != nullptr) dbias[c] += d[c];
      if (dinp != nullptr) dinp[n * C + c] += rstd[n] * (d[c] * weight[c] - dmean - norm * dnorm_norm);
    }
  }
}

// ============================================================================================
// RMSNorm
// ============================================================================================

void rmsnorm_forward(float* out, float* rstd, const float* inp, const float* weight, int64_t N, int64_t C, float eps) {
  const bool par = worth_threads(N, C);
  parallel_for(N, par, [&](int64_t n) {
    const float* x = inp + n * C;
    const float ms = lane_sum(C, [&](int64_t c) { return x[c] * x[c]; }) / static_cast<float>(C);
    const float s = 1.0f / std::sqrt(ms + eps);
    float* o = out + n * C;
    for (int64_t c = 0; c < C; c++) o[c] = x[c] * s * weight[c];
    if (rstd != nullptr) rstd[n] = s;
  });
}

// norm = x rstd;  dnorm = dout * weight
// dinp += rstd (dnorm - norm * mean_c(dnorm * norm));  dweight += sum_n dout * norm
void rmsnorm_backward(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                      const float* rstd, int64_t N, int64_t C) {
  const int64_t R = chunk_rows(N), nchunks = (N + R - 1) / R;
  AlignedVector<float> pw(dweight != nullptr ? static_cast<size_t>(nchunks * C) : 0);
  const bool par = worth_threads(N, C) && nchunks > 1;
  parallel_for(nchunks, par, [&](int64_t k) {
    float* w_acc = dweight != nullptr ? pw.data() + k * C : nullptr;
    for (int64_t n = k * R; n < std::min(N, (k + 1) * R); n++) {
      const float* x = inp + n * C;
      const float* d = dout + n * C;
      const float s = rstd[n];
      if (w_acc != nullptr)
        for (int64_t c = 0; c < C; c++) w_acc[c] += d[c] * (x[c] * s);
      if (dinp == nullptr) continue;
      const float dnorm_norm =
          lane_sum(C, [&](int64_t c) { return d[c] * weight[c] * (x[c] * s); }) / static_cast<float>(C);
      float* di = dinp + n * C;
      for (int64_t c = 0; c < C; c++) di[c] += s * (d[c] * weight[c] - x[c] * s * dnorm_norm);
    }
  });
  if (dweight != nullptr) add_partials(dweight, pw.data(), nchunks, C);
}

void rmsnorm_forward_naive(float* out, float* rstd, const float* inp, const float* weight, int64_t N, int64_t C,
                           float eps) {
  for (int64_t n = 0; n < N; n++) {
    const float* x = inp + n * C;
    float ms = 0.0f;
    for (int64_t c = 0; c < C; c++) ms += x[c] * x[c];
    ms /= static_cast<float>(C);
    const float s = 1.0f / std::sqrt(ms + eps);
    for (int64_t c = 0; c < C; c++) out[n * C + c] = x[c] * s * weight[c];
    if (rstd != nullptr) rstd[n] = s;
  }
}

void rmsnorm_backward_naive(float* dinp, float* dweight, const float* dout, const float* inp, const float* weight,
                            const float* rstd, int64_t N, int64_t C) {
  for (int64_t n = 0; n < N; n++) {
    const float* x = inp + n * C;
    const float* d = dout + n * C;
    float dnorm_norm = 0.0f;
    for (int64_t c = 0; c < C; c++) dnorm_norm += d[c] * weight[c] * x[c] * rstd[n];
    dnorm_norm /= static_cast<float>(C);
    for (int64_t c = 0; c < C; c++) {
      const float norm = x[c] * rstd[n];
      if (dweight != nullptr) dweight[c] += d[c] * norm;
      if (dinp != nullptr) dinp[n * C + c] += rstd[n] * (d[c] * weight[c] - norm * dnorm_norm);
    }
  }
}

// ============================================================================================
// Softmax over the last dimension
// ============================================================================================

void softmax_forward(float* out, const float* inp, int64_t N, int64_t C) {
  const bool par = worth_threads(N, C);
  parallel_for(N, par, [&](int64_t n) {
    const float* x = inp + n * C;
    float* o = out + n * C;
    const float m = max_of(x, C);
    const float inv = 1.0f / exp_shift_sum(o, x, C, m);
    for (int64_t c = 0; c < C; c++) o[c] *= inv;
  });
}

// dinp += out * (dout - sum_c dout * out)
void softmax_backward(float* dinp, const float* dout, const float* out, int64_t N, int64_t C) {
  const bool par = worth_threads(N, C);
  parallel_for(N, par, [&](int64_t n) {
    const float* d = dout + n * C;
    const float* y = out + n * C;
    const float dot = lane_sum(C, [&](int64_t c) { return d[c] * y[c]; });
    float* di = dinp + n * C;
    for (int64_t c = 0; c < C; c++) di[c] += y[c] * (d[c] - dot);
  });
}

}  // namespace atto::kernels
