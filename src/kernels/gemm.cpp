// atto/kernels/gemm.cpp: GEMM (a register-blocked kernel for cache-sized products, OpenBLAS
// with deterministic tiling for large ones) and the linear layer.
//
// Products with K <= 2048 and M*N*K <= 2^32 with AVX-512, 2^29 with AVX2 (use_blocked) run atto's
// register-blocked kernel (gemm_blocked), where OpenBLAS spent much of its time packing operands.
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
#include "kernels/kernels.h"
#include "kernels/parallel.h"
#include "kernels/simd.h"

namespace ATTO_KERNELS_NS {
namespace {

using simd::vf16, simd::W;

// Tiles are large because every tile call packs its own panels of A and B (docs/bench.md has
// the measurements): past OpenBLAS's own serial threshold (M*N*K > 65536 * 4) at least 2 tiles
// when the shape allows, tiles of >= 8 MFLOP, and no more tiles than threads (rounded up to a
// power of two, at least 2). The plan is the same for 1 and 2 threads (so are the bits).
constexpr double kOpenblasSerialMNK = 65536.0 * 4.0;
constexpr double kMinTileFlops = 8.0 * 1024 * 1024;
constexpr int64_t kMaxTiles = 16;
constexpr int64_t kMinTileEdge = 32;                    // tiles are not cut below 32 x 32
constexpr int64_t kTileAlign = 16;                      // tile edges are multiples of 16 (OpenBLAS unroll)
// Larger products go to OpenBLAS: with AVX-512 the blocked kernel held ~200 GFLOP/s a thread to
// 1024^3, OpenBLAS ~100; with AVX2 it fell below OpenBLAS past 2^29 (docs/perf-log.md 2026-11-29).
constexpr double kBlockedAnyNK = 512.0 * 1024 * 1024;  // 2^29: up to here, whatever B^T's size
#if defined(__AVX512F__)
constexpr double kBlockedMaxMNK = 4.0 * 1024 * 1024 * 1024;
#else
constexpr double kBlockedMaxMNK = kBlockedAnyNK;
#endif
constexpr double kBlockedMaxPackedNK = 4.0 * 1024 * 1024;  // past it: B^T's packed copy <= 16 MB
constexpr double kBlockedParFlops = 256.0 * 1024;       // smaller blocked products: 1 thread

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

// ---- Cache-sized products: a register-blocked AVX-512 kernel, no packing of A ----------------
// On small models' shapes OpenBLAS spends much of its time packing both operands and in its
// driver. Here each task computes R rows x up to 64 columns of C in registers: for each k
// it loads V vectors of row k of op(B) and broadcasts R elements of column k of op(A), so
// neither operand needs packing when op(B) is B itself (row-major rows of B are vectors, and
// op(A) is read through strides either way). Only op(B) = B^T (a linear layer's forward,
// weight^T) is packed, into [K, 64] column panels. Every C element is one accumulation over
// k = 0, 1, ..., K-1 in order from zero (one FMA per k), then alpha * acc + beta * C, so its
// bits do not depend on the blocking, the task split or the thread count.
constexpr int64_t kRowBlock = 48;  // rows of A kept in cache while they meet every panel

// The kernel's vector: the machine's register. With AVX-512 a 16-lane vf16. Without (AVX2), GCC
// does not keep a 16-lane vector in a pair of 8-lane registers through a loop (docs/bench.md),
// so AVX2 builds use 8-lane vectors and 16-column panels (OpenBLAS's Haswell shape: 6 rows x 16
// columns). The sums are the same either way (one FMA per k).
//
// Narrow builds (AVX2, ARM64) read one 64-byte line of op(B) per k. Read in place (a 16-column
// slice of a 64-column panel, or B's own rows) that line is one of 4 or more of each row, and
// the kernel held 50-70% of the FMA ceiling on a Zen 3 (30% at K = 2,048, N = 1,536); from a
// packed [K, 16] panel, lines in a row, 85-97%. So these builds pack op(B) whatever it is, and
// pack op(A) = A^T as well (each k's few elements of a block are then one run, not R rows
// thousands of bytes apart: 32 -> 87 GFLOP/s a thread at M = 1,536, K = 2,048).
#if defined(__AVX2__) && !defined(__AVX512F__)
typedef float kvec __attribute__((vector_size(32)));
constexpr int64_t KW = 8;          // lanes of kvec
constexpr int64_t kSubPanel = 16;  // columns per kernel call
constexpr int64_t kPanel = 16;     // columns of a packed panel of op(B)
constexpr bool kNarrow = true;     // op(B) always packed, op(A) = A^T packed (above)
template <int V>
constexpr int rows_for() {
  return V == 1 ? 8 : 6;  // V = 1, 2
}
VINLINE kvec kload(const float* p) {
  kvec v;
  std::memcpy(&v, p, sizeof(v));
  return v;
}
VINLINE void kstore(float* p, kvec v) { std::memcpy(p, &v, sizeof(v)); }
VINLINE kvec ksplat(float x) {
  const __m256 v = _mm256_set1_ps(x);
  kvec r;
  std::memcpy(&r, &v, sizeof(r));
  return r;
}
VINLINE __m256i kmask(int64_t n) {  // lanes [0, n) set
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(static_cast<int>(n)), _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7));
}
VINLINE kvec kload_part(const float* p, int64_t n) {  // lanes past n are 0 and not read
  const __m256 v = _mm256_maskload_ps(p, kmask(n));
  kvec r;
  std::memcpy(&r, &v, sizeof(r));
  return r;
}
VINLINE void kstore_part(float* p, kvec v, int64_t n) {
  __m256 x;
  std::memcpy(&x, &v, sizeof(x));
  _mm256_maskstore_ps(p, kmask(n), x);
}
#elif defined(__aarch64__)
// ARM64: as on AVX2, 4-lane vectors (one NEON register) in 16-column panels; NEON has 32
// registers, as AVX-512 does, so the same rows per block (24 accumulators). Same sums.
typedef float kvec __attribute__((vector_size(16)));
constexpr int64_t KW = 4;
constexpr int64_t kSubPanel = 16;
constexpr int64_t kPanel = 16;
constexpr bool kNarrow = true;
template <int V>
constexpr int rows_for() {
  return V == 1 ? 16 : V == 2 ? 12 : V == 3 ? 8 : 6;
}
VINLINE kvec kload(const float* p) { return vld1q_f32(p); }
VINLINE void kstore(float* p, kvec v) { vst1q_f32(p, v); }
VINLINE kvec ksplat(float x) { return vdupq_n_f32(x); }
VINLINE kvec kload_part(const float* p, int64_t n) { return simd::load4_part(p, n); }
VINLINE void kstore_part(float* p, kvec v, int64_t n) { simd::store4_part(p, v, n); }
#else
using kvec = vf16;
constexpr int64_t KW = W;
constexpr int64_t kPanel = 64;  // columns of C per kernel call (4 vectors)
constexpr int64_t kSubPanel = kPanel;
constexpr bool kNarrow = false;
template <int V>
constexpr int rows_for() {  // 24 accumulators (of 32 registers) for V = 2..4
  return V == 1 ? 16 : V == 2 ? 12 : V == 3 ? 8 : 6;
}
VINLINE kvec kload(const float* p) { return simd::load(p); }
VINLINE void kstore(float* p, kvec v) { simd::store(p, v); }
VINLINE kvec ksplat(float x) { return simd::splat(x); }
VINLINE kvec kload_part(const float* p, int64_t n) { return simd::load_part(p, n); }
VINLINE void kstore_part(float* p, kvec v, int64_t n) { simd::store_part(p, v, n); }
#endif

// What happens to a block's sums: C = alpha * acc + beta * C (+ bias[j] when set: a linear forward,
// beta = 0) (+ residual[i, j] when set, last: a residual add after the linear, in the ops' order).
struct Epilogue {
  float alpha = 1.0f, beta = 0.0f;
  const float* bias = nullptr;      // indexed by the column of C
  const float* residual = nullptr;  // laid out as C (same leading dimension), from C's (0, 0)
};

// What gemm_blocked does to each finished block of C (48 x 64 at most, still in L1): nothing,
// or GELU (erf) in place, keeping its slope in `slope` (same layout as C) when that is set.
constexpr int64_t kActPanels = 64 / kPanel;  // panels of C a BlockActivation call covers
struct BlockActivation {
  bool gelu = false;
  float* slope = nullptr;
};

// C[R, nc] = epilogue(A(R x K) B(K x nc)), nc in ((V-1) * KW, V * KW].
// A(i, k) = A[i * ars + k * aks]; row k of B at B + k * ldb (only nc floats are read).
template <int R, int V>
void block_kernel(int64_t K, const float* A, int64_t ars, int64_t aks, const float* B, int64_t ldb, float* C,
                  int64_t ldc, int64_t nc, const Epilogue& ep) {
  const int64_t tail = nc - (V - 1) * KW;  // lanes of the last vector, 1..KW
  // Every loop over i and v is unrolled (the pragmas): one left rolled indexes acc at run time,
  // and GCC then keeps the accumulators in memory, storing all of them on every k.
  kvec acc[R][V];
#pragma GCC unroll 16
  for (int i = 0; i < R; i++)
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) acc[i][v] = kvec{};
#pragma GCC unroll 1
  for (int64_t k = 0; k < K; k++) {
    const float* b = B + k * ldb;
    kvec bv[V];
#pragma GCC unroll 4
    for (int v = 0; v < V - 1; v++) bv[v] = kload(b + v * KW);
#if (defined(__AVX2__) && !defined(__AVX512F__)) || defined(__aarch64__)
    // AVX2's masked load (vmaskmovps) costs more than a plain one, and NEON has none: whole
    // vectors load plainly (the test is loop-invariant: GCC unswitches the loop on it).
    bv[V - 1] = tail == KW ? kload(b + (V - 1) * KW) : kload_part(b + (V - 1) * KW, tail);
#else
    bv[V - 1] = kload_part(b + (V - 1) * KW, tail);  // tail == KW: a whole vector
#endif
    const float* a = A + k * aks;
#pragma GCC unroll 16
    for (int i = 0; i < R; i++) {
      const kvec ai = ksplat(a[i * ars]);
#pragma GCC unroll 4
      for (int v = 0; v < V; v++) acc[i][v] += ai * bv[v];
    }
  }
  const float beta = ep.beta;
  const kvec va = ksplat(ep.alpha), vb = ksplat(beta);
  kvec bias[V];
#pragma GCC unroll 4
  for (int v = 0; v < V; v++)
    bias[v] = ep.bias == nullptr ? kvec{} : v < V - 1 ? kload(ep.bias + v * KW) : kload_part(ep.bias + v * KW, tail);
#pragma GCC unroll 16
  for (int i = 0; i < R; i++) {
    float* c = C + i * ldc;
#pragma GCC unroll 4
    for (int v = 0; v < V; v++) {
      kvec r = va * acc[i][v];
      if (v < V - 1 || tail == KW) {
        if (beta != 0.0f) r += vb * kload(c + v * KW);
        if (ep.bias != nullptr) r += bias[v];
        if (ep.residual != nullptr) r += kload(ep.residual + i * ldc + v * KW);
        kstore(c + v * KW, r);
      } else {
        if (beta != 0.0f) r += vb * kload_part(c + v * KW, tail);
        if (ep.bias != nullptr) r += bias[v];
        if (ep.residual != nullptr) r += kload_part(ep.residual + i * ldc + v * KW, tail);
        kstore_part(c + v * KW, r, tail);
      }
    }
  }
}

// Rows [0, M) of one column panel: full blocks of rows_for<V>() rows, then 4, 2, 1 (those below it).
template <int V>
void panel_rows(int64_t M, int64_t K, const float* A, int64_t ars, int64_t aks, const float* B, int64_t ldb, float* C,
                int64_t ldc, int64_t nc, const Epilogue& ep) {
  constexpr int R = rows_for<V>();
  Epilogue e = ep;
  auto rows_at = [&](int64_t i) -> const Epilogue& {  // the residual of the block's rows
    if (ep.residual != nullptr) e.residual = ep.residual + i * ldc;
    return e;
  };
  int64_t i = 0;
  for (; i + R <= M; i += R) block_kernel<R, V>(K, A + i * ars, ars, aks, B, ldb, C + i * ldc, ldc, nc, rows_at(i));
  if constexpr (R > 4)
    for (; i + 4 <= M; i += 4) block_kernel<4, V>(K, A + i * ars, ars, aks, B, ldb, C + i * ldc, ldc, nc, rows_at(i));
  if constexpr (R > 2)
    for (; i + 2 <= M; i += 2) block_kernel<2, V>(K, A + i * ars, ars, aks, B, ldb, C + i * ldc, ldc, nc, rows_at(i));
  for (; i < M; i++) block_kernel<1, V>(K, A + i * ars, ars, aks, B, ldb, C + i * ldc, ldc, nc, rows_at(i));
}

// Narrow builds' packed op(A) (pack_a_groups): groups of kGroup rows, each [K, kGroup], then the
// rest of the block's rows (M % kGroup) as one [K, rest].
constexpr int kGroup = rows_for<kSubPanel / KW>();

// Rows [0, M) of one column panel from op(A) packed so: the groups, then the rest in blocks of 4, 2, 1.
template <int V>
void panel_rows_packed(int64_t M, int64_t K, const float* Ap, const float* B, int64_t ldb, float* C, int64_t ldc,
                       int64_t nc, const Epilogue& ep) {
  Epilogue e = ep;
  auto rows_at = [&](int64_t i) -> const Epilogue& {
    if (ep.residual != nullptr) e.residual = ep.residual + i * ldc;
    return e;
  };
  const int64_t groups = M / kGroup, base = groups * kGroup, rest = M - base;
  for (int64_t g = 0; g < groups; g++)
    block_kernel<kGroup, V>(K, Ap + g * kGroup * K, 1, kGroup, B, ldb, C + g * kGroup * ldc, ldc, nc,
                            rows_at(g * kGroup));
  const float* a = Ap + base * K;
  int64_t i = 0;
  for (; i + 4 <= rest; i += 4)
    block_kernel<4, V>(K, a + i, 1, rest, B, ldb, C + (base + i) * ldc, ldc, nc, rows_at(base + i));
  for (; i + 2 <= rest; i += 2)
    block_kernel<2, V>(K, a + i, 1, rest, B, ldb, C + (base + i) * ldc, ldc, nc, rows_at(base + i));
  for (; i < rest; i++) block_kernel<1, V>(K, a + i, 1, rest, B, ldb, C + (base + i) * ldc, ldc, nc, rows_at(base + i));
}

// One panel of C's columns (at most kPanel), rows [0, M): A is op(A)'s block, or its packed copy
// when a_packed (ars and aks are then not used).
void panel_dispatch(int64_t M, int64_t K, const float* A, int64_t ars, int64_t aks, bool a_packed, const float* B,
                    int64_t ldb, float* C, int64_t ldc, int64_t nc, const Epilogue& ep) {
  for (int64_t j = 0; j < nc; j += kSubPanel) {  // one pass but for AVX-512's [K, 64] panels
    Epilogue e = ep;
    if (e.bias != nullptr) e.bias += j;
    if (e.residual != nullptr) e.residual += j;
    const int64_t n = std::min(kSubPanel, nc - j);
    if constexpr (kNarrow) {
      if (a_packed) {
        switch ((n + KW - 1) / KW) {
          case 4: panel_rows_packed<4>(M, K, A, B + j, ldb, C + j, ldc, n, e); break;
          case 3: panel_rows_packed<3>(M, K, A, B + j, ldb, C + j, ldc, n, e); break;
          case 2: panel_rows_packed<2>(M, K, A, B + j, ldb, C + j, ldc, n, e); break;
          default: panel_rows_packed<1>(M, K, A, B + j, ldb, C + j, ldc, n, e); break;
        }
        continue;
      }
    }
    switch ((n + KW - 1) / KW) {
      case 4: panel_rows<4>(M, K, A, ars, aks, B + j, ldb, C + j, ldc, n, e); break;
      case 3: panel_rows<3>(M, K, A, ars, aks, B + j, ldb, C + j, ldc, n, e); break;
      case 2: panel_rows<2>(M, K, A, ars, aks, B + j, ldb, C + j, ldc, n, e); break;
      default: panel_rows<1>(M, K, A, ars, aks, B + j, ldb, C + j, ldc, n, e); break;
    }
  }
}

// Whether gemm takes the register-blocked path: a [K, 64] panel of op(B) stays in L2 (K <= 2048:
// 512 KB) and the product is small enough that OpenBLAS's packing is a large share.
bool use_blocked(int64_t M, int64_t N, int64_t K) {
  const double nk = static_cast<double>(N) * static_cast<double>(K), mnk = static_cast<double>(M) * nk;
  return K <= 2048 && mnk <= kBlockedMaxMNK && (mnk <= kBlockedAnyNK || nk <= kBlockedMaxPackedNK);
}

// Packs rows [k0, k1) of op(B) = B^T into column panels: panel p holds columns [kPanel p,
// kPanel (p + 1)) of op(B) as K rows of kPanel floats (16 x 16 register transposes; lanes past N
// are not read).
void pack_panels(float* packed, const float* B, int64_t ldb, int64_t N, int64_t K, int64_t k0, int64_t k1) {
  for (int64_t j0 = 0; j0 < N; j0 += kPanel) {
    float* dst = packed + (j0 / kPanel) * K * kPanel;
    const int64_t nj = std::min(kPanel, N - j0);
    for (int64_t k = k0; k < k1; k += W)
      for (int64_t jj = 0; jj < nj; jj += W)
        simd::transpose16(dst + k * kPanel + jj, kPanel, B + (j0 + jj) * ldb + k, ldb, std::min(W, nj - jj),
                          std::min(W, k1 - k));
  }
}

// The same panels from op(B) = B (narrow builds): rows [k0, k1), each row k of B read once, in order.
void pack_rows(float* packed, const float* B, int64_t ldb, int64_t N, int64_t K, int64_t k0, int64_t k1) {
  const int64_t full = N / kPanel, tail = N - full * kPanel;
  for (int64_t k = k0; k < k1; k++) {
    const float* b = B + k * ldb;
    float* dst = packed + k * kPanel;
    for (int64_t p = 0; p < full; p++) std::memcpy(dst + p * K * kPanel, b + p * kPanel, sizeof(float) * kPanel);
    for (int64_t j = 0; j < tail; j++) dst[full * K * kPanel + j] = b[full * kPanel + j];
  }
}

// Packs rows [0, M) of op(A) = A^T (A + i at column i of op(A)'s row block) for panel_rows_packed:
// row k of A read once, in order, its M floats spread over the groups.
void pack_a_groups(float* dst, const float* A, int64_t lda, int64_t M, int64_t K) {
  const int64_t groups = M / kGroup, base = groups * kGroup, rest = M - base;
  for (int64_t k = 0; k < K; k++) {
    const float* a = A + k * lda;
    for (int64_t g = 0; g < groups; g++)
      std::memcpy(dst + g * kGroup * K + k * kGroup, a + g * kGroup, sizeof(float) * kGroup);
    for (int64_t r = 0; r < rest; r++) dst[base * K + k * rest + r] = a[base + r];
  }
}

void gemm_blocked(bool transA, bool transB, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                  const float* B, int64_t ldb, float* C, int64_t ldc, const Epilogue& ep,
                  const BlockActivation& act = {}) {
  const int64_t ars = transA ? 1 : lda, aks = transA ? lda : 1;
  const int64_t npanels = ceil_div(N, kPanel);
  // op(A)'s copy is made once per row block for all panels: with 4 panels or fewer it costs more
  // than its strides did (M = N = 64, K = 512: 57 against 60 GFLOP/s, one Zen 3 thread).
  const bool pack_b = transB || kNarrow, pack_a = transA && kNarrow && npanels > 4;
  thread_local AlignedVector<float> packed_store;
  float* packed = nullptr;
  if (pack_b) {
    packed_store.resize(static_cast<size_t>(npanels * K * kPanel));
    packed = packed_store.data();
  }
  const double flops = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  const bool par = flops >= kBlockedParFlops && omp_get_max_threads() > 1;
  parallel_region(par, [&](int64_t t, int64_t nt) {
    if (pack_b) {  // each thread packs its share of the K rows of every panel
      const int64_t k0 = round_up(K * t / nt, W), k1 = std::min(K, round_up(K * (t + 1) / nt, W));
      if (transB) {
        pack_panels(packed, B, ldb, N, K, k0, k1);
      } else {
        pack_rows(packed, B, ldb, N, K, k0, k1);
      }
      if (nt > 1) {
#pragma omp barrier
      }
    }
    thread_local AlignedVector<float> a_store;  // this thread's packed row block of op(A)
    if (pack_a) a_store.resize(static_cast<size_t>(kRowBlock * K));
    // Each thread takes an equal share of the rows (all panels), or of the panels when there
    // are few rows: every element costs the same, so the shares are balanced whatever the
    // shape. Within a share, blocks of 48 rows, each against every panel.
    int64_t r0 = 0, r1 = M, p0 = 0, p1 = npanels;
    if (M >= 16 * nt || npanels < nt) {
      r0 = M * t / nt;
      r1 = M * (t + 1) / nt;
    } else {
      p0 = npanels * t / nt;
      p1 = npanels * (t + 1) / nt;
    }
    for (int64_t i0 = r0; i0 < r1; i0 += kRowBlock) {
      const int64_t mi = std::min(kRowBlock, r1 - i0);
      if (pack_a) pack_a_groups(a_store.data(), A + i0, lda, mi, K);
      const float* a = pack_a ? a_store.data() : A + i0 * ars;
      for (int64_t p = p0; p < p1; p++) {
        const int64_t j0 = p * kPanel, nj = std::min(kPanel, N - j0);
        const float* b = pack_b ? packed + p * K * kPanel : B + j0;
        const int64_t bld = pack_b ? kPanel : ldb;
        Epilogue e = ep;
        if (e.bias != nullptr) e.bias += j0;
        if (e.residual != nullptr) e.residual += i0 * ldc + j0;
        panel_dispatch(mi, K, a, ars, aks, pack_a, b, bld, C + i0 * ldc + j0, ldc, nj, e);
        // GELU over the last 64 columns done (one narrow panel's 16 columns a row made it 5% slower)
        if (act.gelu && ((p - p0 + 1) % kActPanels == 0 || p + 1 == p1)) {
          const int64_t a0 = (p - (p - p0) % kActPanels) * kPanel;
          gelu_erf_slope_rows(C + i0 * ldc + a0, act.slope != nullptr ? act.slope + i0 * ldc + a0 : nullptr, ldc, mi,
                              j0 + nj - a0);
        }
      }
    }
  });
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
