// atto/kernels/gemm_blocked.cpp: the register-blocked GEMM for cache-sized products (gemm.cpp
// chooses it through use_blocked; the linear layers fuse their bias, GELU and residual into it).

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/gemm_blocked.h"
#include "kernels/kernels.h"
#include "kernels/parallel.h"
#include "kernels/simd.h"

namespace ATTO_KERNELS_NS {
namespace {

using simd::vf16, simd::W;

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

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
int64_t round_up(int64_t a, int64_t b) { return ceil_div(a, b) * b; }

// ---- Cache-sized products: a register-blocked kernel ----------------------------------------
// On small models' shapes OpenBLAS spends much of its time packing both operands and in its
// driver. Here each task computes R rows x up to 64 columns of C in registers: for each k
// it loads V vectors of row k of op(B) and broadcasts R elements of column k of op(A). With
// AVX-512 neither operand needs packing when op(B) is B itself (row-major rows of B are vectors,
// and op(A) is read through strides either way): only op(B) = B^T (a linear layer's forward,
// weight^T) is packed, into [K, 64] column panels; narrow builds pack more (below). Every C element is one accumulation over
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

constexpr int64_t kActPanels = 64 / kPanel;  // panels of C a BlockActivation call covers

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
    if (a_packed) {
      switch ((n + KW - 1) / KW) {
        case 4: panel_rows_packed<4>(M, K, A, B + j, ldb, C + j, ldc, n, e); break;
        case 3: panel_rows_packed<3>(M, K, A, B + j, ldb, C + j, ldc, n, e); break;
        case 2: panel_rows_packed<2>(M, K, A, B + j, ldb, C + j, ldc, n, e); break;
        default: panel_rows_packed<1>(M, K, A, B + j, ldb, C + j, ldc, n, e); break;
      }
      continue;
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
}  // namespace

bool use_blocked(int64_t M, int64_t N, int64_t K) {
  const double nk = static_cast<double>(N) * static_cast<double>(K), mnk = static_cast<double>(M) * nk;
  return K <= 2048 && mnk <= kBlockedMaxMNK && (mnk <= kBlockedAnyNK || nk <= kBlockedMaxPackedNK);
}

namespace {

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

}  // namespace

void gemm_blocked(bool transA, bool transB, int64_t M, int64_t N, int64_t K, const float* A, int64_t lda,
                  const float* B, int64_t ldb, float* C, int64_t ldc, const Epilogue& ep,
                  const BlockActivation& act) {
  const int64_t ars = transA ? 1 : lda, aks = transA ? lda : 1;
  const int64_t npanels = ceil_div(N, kPanel);
  // op(A)'s copy is made once per row block for all panels: with 4 panels or fewer it costs more
  // than its strides did (M = N = 64, K = 512: 57 against 60 GFLOP/s, one Zen 3 thread).
  // AVX-512 reads op(B) = B in place, but a weight gradient's (op(A) = A^T, K = the batch's rows)
  // past 4 panels and 1,024 rows is packed as narrow builds pack it, op(A) too: read in place,
  // the kernel fell to 140-230 GFLOP/s at K = 2,048 (300-350 packed), while at K = 384 the copies
  // cost a third (docs/perf-log.md 2026-12-02).
  const bool wide_tn = !kNarrow && transA && npanels > 4 && K >= 1024;
  const bool pack_b = transB || kNarrow || wide_tn, pack_a = transA && (kNarrow || wide_tn) && npanels > 4;
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

}  // namespace ATTO_KERNELS_NS
