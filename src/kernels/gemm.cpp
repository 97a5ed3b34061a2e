// atto/kernels/gemm.cpp: GEMM (a register-blocked kernel for cache-sized products, OpenBLAS
// with deterministic tiling for large ones) and the linear layer.
//
// Products with K <= 2048 and M*N*K <= 2^32 with AVX-512, 2^29 with AVX2 (use_blocked) run atto's
// register-blocked kernel (gemm_blocked.cpp), where OpenBLAS spent much of its time packing operands.
// Each C element is one in-order FMA chain over k: the bits never depend on the thread count.
//
// Determinism of the OpenBLAS path: OpenBLAS 0.3.21 with 2 threads splits K differently from 1
// thread for some shapes (K = 777, 1031, 4097), so gemm never lets it thread: C is cut into tiles
// whose sizes depend on (M, N, K) only (past 2 threads, on the thread count too: max_tiles), each
// one single-threaded cblas_sgemm over the full K, spread over threads by OpenMP.

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "kernels/bf16_impl.h"
#include "kernels/gemm_blocked.h"
#include "kernels/kernels.h"
#include "kernels/parallel.h"
#include "kernels/simd.h"

namespace ATTO_KERNELS_NS {
namespace {

using simd::W;

// Tiles are large because every tile call packs its own panels of A and B (docs/bench.md has
// the measurements): past OpenBLAS's own serial threshold (M*N*K > 65536 * 4) at least 2 tiles
// when the shape allows, tiles of >= 8 MFLOP, and no more tiles than threads (rounded up to a
// power of two, at least 2). The plan is the same for 1 and 2 threads (so are the bits).
constexpr double kOpenblasSerialMNK = 65536.0 * 4.0;
constexpr double kMinTileFlops = 8.0 * 1024 * 1024;
constexpr int64_t kMaxTiles = 16;
constexpr int64_t kMinTileEdge = 32;                    // tiles are not cut below 32 x 32
constexpr int64_t kTileAlign = 16;                      // tile edges are multiples of 16 (OpenBLAS unroll)

int64_t max_tiles() {
  int64_t t = 2;
  while (t < kMaxTiles && t < omp_get_max_threads()) t *= 2;
  return t;
}
int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

struct Tiles {  // C in tm x tn tiles of mb x nb (the last ones smaller); a function of the shape
  int64_t tm = 1, tn = 1, mb = 0, nb = 0;
};

Tiles plan_tiles(int64_t M, int64_t N, int64_t K) {
  const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  int64_t target = flops / 2.0 > kOpenblasSerialMNK ? 2 : 1;
  const int64_t most = max_tiles();
  while (target < most && flops / static_cast<double>(2 * target) >= kMinTileFlops) target *= 2;
  int64_t tm = 1, tn = 1;
  while (tm * tn < target) {
    const int64_t em = ceil_div(M, tm), en = ceil_div(N, tn);
    const bool can_m = em >= 2 * kMinTileEdge, can_n = en >= 2 * kMinTileEdge;
    if (can_m && (em >= en || !can_n)) {
      tm *= 2;
    } else if (can_n) {
      tn *= 2;
    } else {
      break;
    }
  }
  Tiles t;
  t.mb = tm == 1 ? M : round_up(ceil_div(M, tm), kTileAlign);
  t.nb = tn == 1 ? N : round_up(ceil_div(N, tn), kTileAlign);
  t.tm = ceil_div(M, t.mb);
  t.tn = ceil_div(N, t.nb);
  return t;
}

void sgemm_call(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
                const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  cblas_sgemm(CblasRowMajor, transA ? CblasTrans : CblasNoTrans, transB ? CblasTrans : CblasNoTrans,
              static_cast<int>(M), static_cast<int>(N), static_cast<int>(K), alpha, A, static_cast<int>(lda), B,
              static_cast<int>(ldb), beta, C, static_cast<int>(ldc));
}

// One cblas_sgemm that OpenBLAS runs on one thread (the OpenMP build of OpenBLAS uses one inside
// a parallel region, with one OpenMP thread, or when M*N*K <= kOpenblasSerialMNK; otherwise a
// team of two is opened and only its first thread calls).
void sgemm_single_thread(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                         int64_t lda, const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  const double mnk = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  if (mnk <= kOpenblasSerialMNK || omp_in_parallel() || omp_get_max_threads() == 1) {
    sgemm_call(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
#pragma omp parallel num_threads(2)
  {
    if (omp_get_thread_num() == 0) sgemm_call(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  }
}

// C[M, N] *= beta (beta == 0 overwrites with zeros, ignoring NaN).
void scale_c(int64_t M, int64_t N, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; i++) {
    float* c = C + i * ldc;
    if (beta == 0.0f) {
      std::fill(c, c + N, 0.0f);
    } else {
      for (int64_t j = 0; j < N; j++) c[j] *= beta;
    }
  }
}

}  // namespace

// ============================================================================================
// GEMM
// ============================================================================================

void gemm(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
          const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (detail::bf16_active()) return gemm_bf16(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
  if (K <= 0 || alpha == 0.0f) {
    scale_c(M, N, beta, C, ldc);
    return;
  }
  if (use_blocked(M, N, K)) {
    gemm_blocked(transA, transB, M, N, K, A, lda, B, ldb, C, ldc, Epilogue{alpha, beta, nullptr});
    return;
  }
  const Tiles t = plan_tiles(M, N, K);
  const int64_t ntiles = t.tm * t.tn;
  if (ntiles == 1) {
    sgemm_single_thread(transA, transB, M, N, K, alpha, A, lda, B, ldb, beta, C, ldc);
    return;
  }
  parallel_for(ntiles, true, [&](int64_t tile) {
    const int64_t i0 = (tile / t.tn) * t.mb, j0 = (tile % t.tn) * t.nb;
    const int64_t mi = std::min(t.mb, M - i0), nj = std::min(t.nb, N - j0);
    const float* a = transA ? A + i0 : A + i0 * lda;  // rows i0.. of op(A)
    const float* b = transB ? B + j0 * ldb : B + j0;  // columns j0.. of op(B)
    sgemm_single_thread(transA, transB, mi, nj, K, alpha, a, lda, b, ldb, beta, C + i0 * ldc + j0, ldc);
  });
}

void gemm_batched(int64_t batch, bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A,
                  int64_t lda, int64_t strideA, const float* B, int64_t ldb, int64_t strideB, float beta, float* C,
                  int64_t ldc, int64_t strideC) {
  if (batch <= 0 || M <= 0 || N <= 0) return;
  const Tiles t = plan_tiles(M, N, K);
  if (batch == 1 || t.tm * t.tn > 1 || K <= 0 || detail::bf16_active()) {
    // Big matrices: gemm threads each one.
    for (int64_t i = 0; i < batch; i++)
      gemm(transA, transB, M, N, K, alpha, A + i * strideA, lda, B + i * strideB, ldb, beta, C + i * strideC, ldc);
    return;
  }
  // Small matrices: one matrix per task (the same single call gemm would make for it).
  const double flops =
      2.0 * static_cast<double>(batch) * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  if (flops < kMinTileFlops) {
    for (int64_t i = 0; i < batch; i++)
      gemm(transA, transB, M, N, K, alpha, A + i * strideA, lda, B + i * strideB, ldb, beta, C + i * strideC, ldc);
    return;
  }
  parallel_for(batch, true, [&](int64_t i) {
    sgemm_single_thread(transA, transB, M, N, K, alpha, A + i * strideA, lda, B + i * strideB, ldb, beta,
                        C + i * strideC, ldc);
  });
}

// ============================================================================================
// Linear: out[N, OC] = inp[N, C] @ weight[OC, C]^T + bias[OC]
// ============================================================================================

namespace {

// ---- A few rows (decoding): out[n, o] = <inp[n], weight[o]> + bias[o] -------------------------
// One token per sequence: a matrix-vector product streaming the weights ((d): 44-55 GB/s, 19-31
// through gemm). Each output: one dot product in a fixed order (16-lane accumulators over
// alternate 16-float blocks, the tail in the second, hsum's tree, + bias).
constexpr int64_t kFewRows = 8;               // N at most this takes the matrix-vector path
constexpr int64_t kFewRowsParMacs = 1 << 15;  // below this many MACs one thread does it all

// out[g * ldo] = <x[g * C ..], w> + b for g < G <= 4: the weight row is loaded once per 16 floats
// for all G rows; each output's order is that of G = 1. The 16-lane accumulators are kParts
// native vectors (simd::vn; split vf16s went through memory: AVX2 decoding ran at 1/3 of AVX-512).
template <int G>
VINLINE void dot_rows(float* out, int64_t ldo, const float* x, const float* w, float b, int64_t C) {
  using simd::kParts, simd::loadn, simd::loadn_upto, simd::vn, simd::WN;
  vn a0[G][kParts] = {}, a1[G][kParts] = {};
  int64_t c = 0;
  for (; c + 2 * W <= C; c += 2 * W)
    for (int k = 0; k < kParts; k++) {
      const vn w0 = loadn(w + c + k * WN), w1 = loadn(w + c + W + k * WN);
      for (int g = 0; g < G; g++) {
        a0[g][k] += loadn(x + g * C + c + k * WN) * w0;
        a1[g][k] += loadn(x + g * C + c + W + k * WN) * w1;
      }
    }
  for (int k = 0; k < kParts && c + W <= C; k++) {
    const vn w0 = loadn(w + c + k * WN);
    for (int g = 0; g < G; g++) a0[g][k] += loadn(x + g * C + c + k * WN) * w0;
  }
  if (c + W <= C) c += W;
  for (int k = 0; k < kParts && c + k * WN < C; k++) {  // the tail, in a1; lanes past C add nothing
    const int64_t at = c + k * WN, cnt = C - at;
    const vn w1 = loadn_upto(w + at, cnt);
    for (int g = 0; g < G; g++) a1[g][k] += loadn_upto(x + g * C + at, cnt) * w1;
  }
  for (int g = 0; g < G; g++) {
    for (int k = 0; k < kParts; k++) a0[g][k] += a1[g][k];
    out[g * ldo] = simd::hsum_parts(a0[g]) + b;
  }
}

// The rows n..n+G-1 (G = min(4, N - n)) against weight row o.
VINLINE void dot_group(float* out, int64_t OC, const float* inp, const float* weight, const float* bias, int64_t N,
                       int64_t C, int64_t n, int64_t o) {
  const float b = bias != nullptr ? bias[o] : 0.0f, *x = inp + n * C, *w = weight + o * C;
  float* y = out + n * OC + o;
  switch (std::min<int64_t>(4, N - n)) {
    case 4: dot_rows<4>(y, OC, x, w, b, C); break;
    case 3: dot_rows<3>(y, OC, x, w, b, C); break;
    case 2: dot_rows<2>(y, OC, x, w, b, C); break;
    default: dot_rows<1>(y, OC, x, w, b, C); break;
  }
}

// Up to kFewRows rows: each thread walks its run of weight rows once (one sequential stream),
// dotted with every input row; more (a server's decode batch): blocks of kDotBlock weight rows
// against groups of 4 input rows. Every output: the same chain.
constexpr int64_t kDotBlock = 16;
void linear_forward_few_rows(float* out, const float* inp, const float* weight, const float* bias, int64_t N, int64_t C,
                             int64_t OC) {
  const bool par = N * C * OC >= kFewRowsParMacs;
  if (N <= kFewRows) {
    parallel_for(OC, par, [&](int64_t o) {
      for (int64_t n = 0; n < N; n += 4) dot_group(out, OC, inp, weight, bias, N, C, n, o);
    });
    return;
  }
  parallel_for((OC + kDotBlock - 1) / kDotBlock, par, [&](int64_t blk) {
    const int64_t o0 = blk * kDotBlock, o1 = std::min(OC, o0 + kDotBlock);
    for (int64_t n = 0; n < N; n += 4)
      for (int64_t o = o0; o < o1; o++) dot_group(out, OC, inp, weight, bias, N, C, n, o);
  });
}

// The matrix-vector path: few rows, or any number under a RowStableScope.
bool use_dot_path(int64_t N) { return N <= kFewRows || row_stable_enabled(); }

}  // namespace

void linear_forward(float* out, const float* inp, const float* weight, const float* bias, int64_t N, int64_t C,
                    int64_t OC) {
  if (detail::bf16_active()) return detail::linear_forward_bf16(out, nullptr, inp, weight, bias, N, C, OC);
  if (use_dot_path(N)) {
    linear_forward_few_rows(out, inp, weight, bias, N, C, OC);
    return;
  }
  if (use_blocked(N, OC, C)) {  // the bias is added in the kernel's epilogue
    gemm_blocked(false, true, N, OC, C, inp, C, weight, C, out, OC, Epilogue{1.0f, 0.0f, bias});
    return;
  }
  float beta = 0.0f;
  if (bias != nullptr) {
    // out starts as the bias rows; the GEMM accumulates onto it (beta = 1).
    const bool par = N * OC >= (1 << 16);
    parallel_for(N, par, [&](int64_t n) { std::memcpy(out + n * OC, bias, sizeof(float) * OC); });
    beta = 1.0f;
  }
  gemm(false, true, N, OC, C, 1.0f, inp, C, weight, C, beta, out, OC);
}

void linear_gelu_forward(float* out, float* slope, const float* inp, const float* weight, const float* bias, int64_t N,
                         int64_t C, int64_t OC) {
  if (detail::bf16_active() && bias != nullptr && N > 0 && OC > 0) {
    // The bias goes in with GELU's pass over the output rather than as a pass of its own before
    // the GEMM.
    detail::linear_forward_bf16(out, nullptr, inp, weight, nullptr, N, C, OC);
    gelu_erf_bias_slope(out, slope, bias, N, OC);
    return;
  }
  if (!use_dot_path(N) && use_blocked(N, OC, C) && !detail::bf16_active()) {
    gemm_blocked(false, true, N, OC, C, inp, C, weight, C, out, OC, Epilogue{1.0f, 0.0f, bias},
                 BlockActivation{true, slope});
    return;
  }
  linear_forward(out, inp, weight, bias, N, C, OC);
  gelu_erf_forward_slope(out, slope, out, N * OC);
}

void linear_residual_forward(float* out, const float* residual, const float* inp, const float* weight,
                             const float* bias, int64_t N, int64_t C, int64_t OC) {
  if (detail::bf16_active()) return detail::linear_forward_bf16(out, residual, inp, weight, bias, N, C, OC);
  if (!use_dot_path(N) && use_blocked(N, OC, C)) {
    gemm_blocked(false, true, N, OC, C, inp, C, weight, C, out, OC, Epilogue{1.0f, 0.0f, bias, residual});
    return;
  }
  linear_forward(out, inp, weight, bias, N, C, OC);
  add_forward(out, out, residual, N * OC);
}

void linear_gelu_backward(float* dinp, float* dweight, float* dbias, const float* dout, float* slope, const float* inp,
                          const float* weight, int64_t N, int64_t C, int64_t OC, bool overwrite_dinp,
                          bool overwrite_dweight) {
  if (detail::bf16_active())  // dout * slope taken as the bf16 operands are rounded, never stored
    return detail::linear_backward_bf16(dinp, overwrite_dinp ? 0.0f : 1.0f, dweight, overwrite_dweight ? 0.0f : 1.0f,
                                        dbias, dout, inp, weight, N, C, OC, slope);
  gelu_erf_backward_slope(slope, dout, slope, N * OC, /*accumulate=*/false);
  linear_backward_ex(dinp, dweight, dbias, slope, inp, weight, N, C, OC, overwrite_dinp, overwrite_dweight);
}

void linear_backward(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                     const float* weight, int64_t N, int64_t C, int64_t OC) {
  linear_backward_ex(dinp, dweight, dbias, dout, inp, weight, N, C, OC, false, false);
}

void linear_backward_ex(float* dinp, float* dweight, float* dbias, const float* dout, const float* inp,
                        const float* weight, int64_t N, int64_t C, int64_t OC, bool overwrite_dinp,
                        bool overwrite_dweight) {
  const float beta_inp = overwrite_dinp ? 0.0f : 1.0f, beta_weight = overwrite_dweight ? 0.0f : 1.0f;
  if (detail::bf16_active())  // the GEMMs and dbias, dout read once
    return detail::linear_backward_bf16(dinp, beta_inp, dweight, beta_weight, dbias, dout, inp, weight, N, C, OC);
  // dinp[N, C] (+)= dout[N, OC] @ weight[OC, C];  dweight[OC, C] (+)= dout[N, OC]^T @ inp[N, C]
  if (dinp != nullptr) gemm(false, false, N, C, OC, 1.0f, dout, OC, weight, C, beta_inp, dinp, C);
  if (dweight != nullptr) gemm(true, false, OC, C, N, 1.0f, dout, OC, inp, C, beta_weight, dweight, C);
  if (dbias != nullptr) bias_add_backward(nullptr, dbias, dout, N, OC);  // dbias += sum_n dout
}

}  // namespace atto::kernels
