// atto/kernels/gemm_bf16.cpp: bf16 GEMM on AMX tiles or AVX512_BF16 registers, fp32 sums.
//
// C[M, N] = alpha * op(A) @ B + beta * C. B comes packed (pack_bf16: pairs of K interleaved,
// blocks of 16 columns); op(A) is rounded to bf16 into a [Mp, Kp] scratch (rows padded to 32, K
// to 32 with zeros; pack_a_bf16 in bf16_pack.cpp), in AMX tiles (each 16 x 32 tile 1 KiB in a
// row) or row-major for AVX512_BF16. C is cut into blocks of 32 rows and panels of 32 columns
// (two B blocks); a thread takes a run of (row block, panel) tasks, the panels of a row block in
// a row, so its block of A stays in L1/L2 while B's panels stream.
//   AMX: 2 x 2 accumulator tiles (32 x 32 of C), A tiles 4-5, B tiles 6-7; one tdpbf16ps
//        multiplies 16 x 32 by 32 x 16 (16 K pairs).
//   AVX512_BF16: up to 8 rows x 2 vectors of accumulators; per K pair, one 32-bit broadcast of
//        the row's pair and one vdpbf16ps per vector.
// Every C element is one chain over K in a fixed order, so neither the thread count nor the
// rows beside it change its bits.
//
// The functions with the target attribute run only after bf16_backend() has found the
// instructions: the rest of the binary is built for whatever -march the build chose.
#if defined(__x86_64__)  // the bf16 kernels are x86-64 only; elsewhere bf16_absent.cpp stands in
#include <immintrin.h>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <stdexcept>
#include <vector>

#include "kernels/bf16_impl.h"
#include "kernels/kernels.h"
#include "kernels/parallel.h"


namespace ATTO_KERNELS_NS {

namespace {

constexpr int64_t kPanel = 32;    // columns of C per task (two B blocks)
constexpr int64_t kAmxRows = 32;  // rows of C per AMX task (two tiles)
constexpr int64_t kAvxRows = 8;   // rows of C per AVX512_BF16 register block

int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }
using detail::amx_configure;
using detail::amx_release;

// C[rows, cols] (row stride ldc) = alpha * acc (row stride 32) + beta * (init or C), init's rows
// ldi apart (0: one row for all, a bias).
void store_block(float* C, int64_t ldc, const float* acc, int64_t rows, int64_t cols, float alpha, float beta,
                 const float* init, int64_t ldi) {
  for (int64_t i = 0; i < rows; i++) {
    float* c = C + i * ldc;
    const float* a = acc + i * kPanel;
    const float* r = init != nullptr ? init + i * ldi : c;
    if (beta == 0.0f) {
      for (int64_t j = 0; j < cols; j++) c[j] = alpha * a[j];
    } else {
      for (int64_t j = 0; j < cols; j++) c[j] = alpha * a[j] + beta * r[j];
    }
  }
}

// ---- AMX ----------------------------------------------------------------------------------
// out[TM * 16, 32] (row stride ldo floats) = (from, or 0) + A[TM * 16 rows of Kp] @ (B0 | B1);
// TM = 1 or 2; A tiled (a_tile_offset) or row-major. The sums start from `from`'s values (rows
// ldf floats apart; ldf 0 loads one row into every row of the tiles: a bias): C += A B with
// from = out, or out = init + A B without a pass writing init into out first.
template <int TM>
ATTO_AMX_TARGET void amx_block(float* out, int64_t ldo, const float* from, int64_t ldf, const uint16_t* A, int64_t Kp,
                               bool tiled, const uint16_t* B0, const uint16_t* B1) {
  const int64_t stride = tiled ? 64 : Kp * 2, cstride = ldo * 4, step = tiled ? 512 : 32, fstride = ldf * 4;
  if (from != nullptr) {
    _tile_loadd(0, from, fstride);
    _tile_loadd(1, from + 16, fstride);
    if (TM == 2) {
      _tile_loadd(2, from + 16 * ldf, fstride);
      _tile_loadd(3, from + 16 * ldf + 16, fstride);
    }
  } else {
    _tile_zero(0);
    _tile_zero(1);
    if (TM == 2) {
      _tile_zero(2);
      _tile_zero(3);
    }
  }
  for (int64_t kb = 0; kb < Kp / 32; kb++) {
    _tile_loadd(4, A + kb * step, stride);
    _tile_loadd(6, B0 + kb * 512, 64);
    _tile_loadd(7, B1 + kb * 512, 64);
    _tile_dpbf16ps(0, 4, 6);
    _tile_dpbf16ps(1, 4, 7);
    if (TM == 2) {
      _tile_loadd(5, A + 16 * Kp + kb * step, stride);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, out, cstride);
  _tile_stored(1, out + 16, cstride);
  if (TM == 2) {
    _tile_stored(2, out + 16 * ldo, cstride);
    _tile_stored(3, out + 16 * ldo + 16, cstride);
  }
}

// ---- AVX512_BF16 --------------------------------------------------------------------------
// 16 columns of a row of C: all (whole: plain loads and stores) or those of mask m.
ATTO_BF16_TARGET inline __m512 load_cols(const float* p, __mmask16 m, bool whole) {
  return whole ? _mm512_loadu_ps(p) : _mm512_maskz_loadu_ps(m, p);
}
ATTO_BF16_TARGET inline void store_cols(float* p, __mmask16 m, __m512 v, bool whole) {
  if (whole) {
    _mm512_storeu_ps(p, v);
  } else {
    _mm512_mask_storeu_ps(p, m, v);
  }
}

// Where op(A)'s bf16 copy has its rows: row-major (row i's pair r at i * Kp + 2 r), AMX tiles
// (a_tile_offset in bf16_pack.cpp), or in pairs (blocks of 8 rows, Kp * 8 elements apart; in
// each, pair r of row i at r * 16 + 2 (i % 8)): a linear layer's dout as the A of dweight =
// dout^T inp, made by pairing two rows of dout instead of transposing them, and read by a
// register block as one run of memory (its 8 rows' pairs side by side).
enum class ALayout { Rows, Tiles, Pairs };

// C[MR rows, nj <= 32 columns] (row stride ldc) = A[MR rows of Kp] @ (B0 | B1), plus, with
// `add`, the rows of init (ldi apart; 0: one row for all, a bias) or of C itself, each plus
// `bias` first when there is one (a residual's rows + the bias: the bits of a pass writing
// r + b into C before a product added onto it). The sums start from zero and are written from
// the registers (no block in memory between the sums and C), or with `resume` start from C: the
// sums of an earlier part of K, which this part continues exactly as one pass over all of K
// would (a K-blocked sweep, run_tasks). `pairs` pairs of K; A's rows Kp apart.
// A row-major (Pairs false) or in pairs (the MR rows of one block of 8).
template <int MR, bool Pairs>
ATTO_BF16_TARGET void avx_block(float* C, int64_t ldc, int64_t nj, bool add, const float* init, int64_t ldi,
                                const float* bias, const uint16_t* A, int64_t Kp, int64_t pairs, bool resume,
                                const uint16_t* B0, const uint16_t* B1) {
  const bool whole = nj == 32;
  const __mmask16 m0 = static_cast<__mmask16>(nj >= 16 ? 0xffff : (1u << nj) - 1u);
  const __mmask16 m1 = static_cast<__mmask16>(nj >= 32 ? 0xffff : nj > 16 ? (1u << (nj - 16)) - 1u : 0u);
  __m512 c0[MR], c1[MR];
  for (int i = 0; i < MR; i++) {
    c0[i] = resume ? load_cols(C + i * ldc, m0, whole) : _mm512_setzero_ps();
    c1[i] = resume ? load_cols(C + i * ldc + 16, m1, whole) : _mm512_setzero_ps();
  }
  for (int64_t r = 0; r < pairs; r++) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(B0 + r * 32);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(B1 + r * 32);
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
      int32_t pair;
      std::memcpy(&pair, Pairs ? A + r * 16 + 2 * i : A + i * Kp + 2 * r, sizeof(pair));
      const __m512bh a = (__m512bh)_mm512_set1_epi32(pair);
      c0[i] = _mm512_dpbf16_ps(c0[i], a, b0);
      c1[i] = _mm512_dpbf16_ps(c1[i], a, b1);
    }
  }
  // Whole rows (nj 32) take plain loads and stores: masked stores, even with full masks, cost
  // more on AMD Zen (proj and fc2 with their residual: 24.2 against 22.4 ms a (d) step).
  for (int i = 0; i < MR; i++) {
    float* c = C + i * ldc;
    if (add) {
      const float* r = init != nullptr ? init + i * ldi : c;
      __m512 r0 = load_cols(r, m0, whole), r1 = load_cols(r + 16, m1, whole);
      if (bias != nullptr) {
        r0 = _mm512_add_ps(r0, load_cols(bias, m0, whole));
        r1 = _mm512_add_ps(r1, load_cols(bias + 16, m1, whole));
      }
      c0[i] = _mm512_add_ps(c0[i], r0);
      c1[i] = _mm512_add_ps(c1[i], r1);
    }
    store_cols(c, m0, c0[i], whole);
    store_cols(c + 16, m1, c1[i], whole);
  }
}

template <bool Pairs>
void avx_rows_in(float* C, int64_t ldc, int64_t rows, int64_t nj, bool add, const float* init, int64_t ldi,
                 const float* bias, const uint16_t* A, int64_t Kp, int64_t pairs, bool resume, const uint16_t* B0,
                 const uint16_t* B1) {
  switch (rows) {
    case 1: avx_block<1, Pairs>(C, ldc, nj, add, init, ldi, bias, A, Kp, pairs, resume, B0, B1); break;
    case 2: avx_block<2, Pairs>(C, ldc, nj, add, init, ldi, bias, A, Kp, pairs, resume, B0, B1); break;
    case 3: avx_block<3, Pairs>(C, ldc, nj, add, init, ldi, bias, A, Kp, pairs, resume, B0, B1); break;
    case 4: avx_block<4, Pairs>(C, ldc, nj, add, init, ldi, bias, A, Kp, pairs, resume, B0, B1); break;
    case 5: avx_block<5, Pairs>(C, ldc, nj, add, init, ldi, bias, A, Kp, pairs, resume, B0, B1); break;
    case 6: avx_block<6, Pairs>(C, ldc, nj, add, init, ldi, bias, A, Kp, pairs, resume, B0, B1); break;
    case 7: avx_block<7, Pairs>(C, ldc, nj, add, init, ldi, bias, A, Kp, pairs, resume, B0, B1); break;
    default: avx_block<8, Pairs>(C, ldc, nj, add, init, ldi, bias, A, Kp, pairs, resume, B0, B1); break;
  }
}

void avx_rows(ALayout layout, float* C, int64_t ldc, int64_t rows, int64_t nj, bool add, const float* init,
              int64_t ldi, const float* bias, const uint16_t* A, int64_t Kp, const uint16_t* B0, const uint16_t* B1,
              int64_t k0 = 0, int64_t kn = -1) {
  // K pairs [k0 / 2, (k0 + kn) / 2) (all of K by default), continuing C's sums when k0 > 0.
  const int64_t pairs = (kn < 0 ? Kp : kn) / 2;
  const uint16_t *a = A + (layout == ALayout::Pairs ? k0 * 8 : k0), *b0 = B0 + k0 * 16, *b1 = B1 + k0 * 16;
  if (layout == ALayout::Pairs) {
    avx_rows_in<true>(C, ldc, rows, nj, add, init, ldi, bias, a, Kp, pairs, k0 > 0, b0, b1);
  } else {
    avx_rows_in<false>(C, ldc, rows, nj, add, init, ldi, bias, a, Kp, pairs, k0 > 0, b0, b1);
  }
}

// AMX for products of many rows. A few rows (decoding a token per sequence) stream the weights
// through vdpbf16ps instead: a 16-row tile would do 16 times the work for one row. Under a
// RowStableScope (a server's decode batch) every row count takes vdpbf16ps, so that a row's
// bits never depend on the rows decoded beside it.
constexpr int64_t kAmxMinRows = 16;
bool uses_amx(Bf16Backend backend, int64_t M) {
  return backend == Bf16Backend::Amx && M > kAmxMinRows && !row_stable_enabled();
}

// The order of the tasks. A thread's tasks go across the panels of one row block, so that A's
// rows stay in L1 while B streams from L2, unless A's block does not fit L1 (a long K: a
// dweight, K = the batch's tokens) and B is too large to stay in L2 from one row block to the
// next. Then groups of row blocks (about kGroupBytes of A) take each panel in turn, and B comes
// from beyond L2 once per group instead of once per row block: on (d), fc2's dweight (K 2,048,
// B 6 MiB) took 0.70-0.87x the time of the plain order (medians of five in-process runs, the two
// orders alternating), the other dweights 0.87-1.0x, the shapes it leaves alone within the
// noise. The sizes are those of the Xeon it was measured on (48 KiB L1d, 2 MiB L2 a core), with
// AMX. On vdpbf16ps A's block must fit two thirds of L1: GPT-2's fc2 (4096 x 768 x 3072, a
// 48 KiB block evicted by B's panels streaming past) ran 4-6% faster grouped (Zen 5). A B past kFarBytes is grouped too, whatever A's block: GPT-2's head
// (4096 x 50257 x 768, B 77 MB) read all of B from memory for every 8 rows and ran at 210 GFLOP/s,
// 713 grouped (AVX512_BF16, Zen 5, bench/onednn/run.sh's shape). Each C block is computed as
// before: the order changes no bits.
constexpr int64_t kL1Bytes = 48 << 10, kL2KeepBytes = 3 << 19, kGroupBytes = 512 << 10, kFarBytes = 16 << 20;
int64_t row_blocks_per_group(bool amx, int64_t rows, int64_t blocks, int64_t k, const PackedBf16& B) {
  const int64_t a_block = rows * k * 2, b_bytes = B.Kp * B.Np * 2, a_keep = amx ? kL1Bytes : kL1Bytes * 2 / 3;
  if (b_bytes < kL2KeepBytes || (a_block <= a_keep && b_bytes < kFarBytes)) return 1;
  return std::clamp<int64_t>(kGroupBytes / a_block, 1, blocks);
}

// Where a quarter of kGroupBytes holds no more than one row block of A and B is past kFarBytes
// (GPT-2's head input gradient: K 50,257, one 8-row block of A 804 KB, B 77 MB), a group has
// at most 3 row blocks, or none fits L2, and B came from memory for every 8 to 24 rows. Then
// the tasks sweep K in parts of kKPart: each C block's sums
// continue from the last part's (avx_block's resume), exactly the chain of one pass, and the
// groups are those of A's part (16 blocks of 32 KB). Products that overwrite C (beta 0, alpha 1,
// the row-major A of a linear layer's dout) on vdpbf16ps only: they need no second buffer.
constexpr int64_t kKPart = 2048;
bool k_parts(bool amx, int64_t rows, int64_t blocks, ALayout layout, const PackedBf16& B, float alpha, float beta,
             const float* init) {
  return !amx && blocks > 1 && alpha == 1.0f && beta == 0.0f && init == nullptr && layout == ALayout::Rows &&
         rows * B.Kp * 2 > kGroupBytes / 4 && B.Kp * B.Np * 2 >= kFarBytes;
}

// Tasks [begin, end) of run_tasks' order (groups of row blocks, each taking the panels in turn),
// K [k0, k0 + kn) of each: C = A B over that part, continuing C's sums when k0 > 0.
void sweep_part(int64_t begin, int64_t end, int64_t group, int64_t panels, int64_t blocks, int64_t rows, int64_t M,
                int64_t N, const uint16_t* A, ALayout layout, const PackedBf16& B, float* C, int64_t ldc, int64_t k0,
                int64_t kn) {
  const int64_t Kp = B.Kp;
  for (int64_t task = begin; task < end; task++) {
    const int64_t g0 = task / (group * panels) * group, gn = std::min(group, blocks - g0);
    const int64_t p = (task - g0 * panels) / gn, m0 = (g0 + (task - g0 * panels) % gn) * rows;
    const int64_t mi = std::min(rows, M - m0), n0 = p * kPanel, nj = std::min(kPanel, N - n0);
    const uint16_t* b0 = B.data.data() + (2 * p) * Kp * 16;
    avx_rows(layout, C + m0 * ldc + n0, ldc, mi, nj, false, nullptr, 0, nullptr, A + m0 * Kp, Kp, b0, b0 + Kp * 16, k0,
             kn);
  }
}

// The tasks (panel, row block) of C for packed A [Mp, Kp] and B on `backend`: C = alpha A B +
// beta C, or with init (rows ldi apart, 0 for a bias) C = alpha A B + beta init; with
// init_bias too (AVX512_BF16 only, alpha 1, beta 1), C = A B + (init + init_bias).
void run_tasks(Bf16Backend backend, int64_t M, const uint16_t* A, ALayout layout, const PackedBf16& B, float alpha,
               float beta, float* C, int64_t ldc, const float* init = nullptr, int64_t ldi = 0,
               const float* init_bias = nullptr) {
  const int64_t Kp = B.Kp, N = B.N, panels = (N + kPanel - 1) / kPanel;
  const bool amx = uses_amx(backend, M), a_tiled = layout == ALayout::Tiles;
  const int64_t rows = amx ? kAmxRows : kAvxRows, blocks = (M + rows - 1) / rows;
  const bool parts = k_parts(amx, rows, blocks, layout, B, alpha, beta, init);
  const int64_t tasks = panels * blocks, group = row_blocks_per_group(amx, rows, blocks, parts ? kKPart : Kp, B);
  const bool par = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(Kp) >= (1 << 18);
  parallel_region(par && tasks > 1, [&](int64_t t, int64_t nt) {
    const auto [begin, end] = static_range(tasks, t, nt);
    if (begin == end) return;
    if (parts) {  // every part of K over the thread's C blocks, in order
      for (int64_t k0 = 0; k0 < Kp; k0 += kKPart)
        sweep_part(begin, end, group, panels, blocks, rows, M, N, A, layout, B, C, ldc, k0, std::min(kKPart, Kp - k0));
      return;
    }
    alignas(64) float acc[kAmxRows * kPanel];
    if (amx) amx_configure();
    // The group of row blocks from g0 (gn of them), then the panel p, then the block g0 + mb
    // within the group: found by division for the first task, then counted on (no division a task).
    int64_t g0 = begin / (group * panels) * group, gn = std::min(group, blocks - g0);
    int64_t p = (begin - g0 * panels) / gn, mb = (begin - g0 * panels) % gn;
    for (int64_t task = begin; task < end; task++, mb++) {
      if (mb == gn) {
        mb = 0;
        if (++p == panels) {
          p = 0;
          g0 += group;
          gn = std::min(group, blocks - g0);
        }
      }
      const int64_t m0 = (g0 + mb) * rows;
      const int64_t mi = std::min(rows, M - m0), n0 = p * kPanel, nj = std::min(kPanel, N - n0);
      const uint16_t* b0 = B.data.data() + (2 * p) * Kp * 16;
      const uint16_t* b1 = b0 + Kp * 16;
      const uint16_t* a = A + m0 * Kp;  // each layout: row block m0 / 8 (16 / 32 for AMX)
      float* c = C + m0 * ldc + n0;
      const float* in = init != nullptr ? init + m0 * ldi + n0 : nullptr;
      // A whole 32 x 32 block of C = A B, C += A B or C = init + A B: the tiles start from C or
      // init and write C.
      if (amx && mi == kAmxRows && nj == kPanel && alpha == 1.0f && (beta == 0.0f || beta == 1.0f)) {
        amx_block<2>(c, ldc, beta == 0.0f ? nullptr : in != nullptr ? in : c, in != nullptr ? ldi : ldc, a, Kp,
                     a_tiled, b0, b1);
        continue;
      }
      if (!amx && alpha == 1.0f && (beta == 0.0f || beta == 1.0f)) {  // C = A B (+ init or C)
        avx_rows(layout, c, ldc, mi, nj, beta == 1.0f, in, ldi, init_bias != nullptr ? init_bias + n0 : nullptr, a, Kp,
                 b0, b1);
        continue;
      }
      if (!amx) {
        avx_rows(layout, acc, kPanel, mi, kPanel, false, nullptr, 0, nullptr, a, Kp, b0, b1);
      } else if (mi > 16) {
        amx_block<2>(acc, kPanel, nullptr, 0, a, Kp, a_tiled, b0, b1);
      } else {
        amx_block<1>(acc, kPanel, nullptr, 0, a, Kp, a_tiled, b0, b1);
      }
      store_block(c, ldc, acc, mi, nj, alpha, beta, in, ldi);
    }
    if (amx) amx_release();
  });
}

// The rows of op(A)'s bf16 copy for M rows of C: AMX reads whole tiles of 16 rows, in blocks of
// 32 (zeros past M); AVX512_BF16 only the rows there are.
int64_t padded_rows(Bf16Backend backend, int64_t M) {
  return uses_amx(backend, M) ? round_up(M, kAmxRows) : round_up(M, 16);
}

void scale_rows(int64_t M, int64_t N, float beta, float* C, int64_t ldc) {
  for (int64_t i = 0; i < M; i++)
    for (int64_t j = 0; j < N; j++) C[i * ldc + j] = beta == 0.0f ? 0.0f : beta * C[i * ldc + j];
}

}  // namespace

namespace {

// gemm_bf16_packed, or with init (rows ldi apart; 0: one row, a bias) C = alpha op(A) B + beta
// init (and init_bias: run_tasks), for K > 0.
void gemm_packed(bool transA, int64_t M, float alpha, const float* A, int64_t lda, const PackedBf16& B, float beta,
                 float* C, int64_t ldc, const float* init, int64_t ldi, const float* init_bias = nullptr) {
  const int64_t K = B.K;
  const Bf16Backend backend = bf16_backend();
  if (backend == Bf16Backend::None) require_bf16("bf16 GEMM");
  const int64_t Mp = padded_rows(backend, M), Kp = B.Kp;
  thread_local Bf16Buffer scratch;
  if (scratch.size() < static_cast<size_t>(Mp * Kp)) scratch.resize(static_cast<size_t>(Mp * Kp));
  const bool tiled = uses_amx(backend, M);
  detail::pack_a_bf16(scratch.data(), transA, M, K, Mp, Kp, A, lda, tiled);
  run_tasks(backend, M, scratch.data(), tiled ? ALayout::Tiles : ALayout::Rows, B, alpha, beta, C, ldc, init, ldi,
            init_bias);
}

}  // namespace

void gemm_bf16_packed(bool transA, int64_t M, float alpha, const float* A, int64_t lda, const PackedBf16& B, float beta,
                      float* C, int64_t ldc) {
  if (M <= 0 || B.N <= 0) return;
  if (B.K <= 0 || alpha == 0.0f) {
    scale_rows(M, B.N, beta, C, ldc);
    return;
  }
  gemm_packed(transA, M, alpha, A, lda, B, beta, C, ldc, nullptr, 0);
}

void gemm_bf16(bool transA, bool transB, int64_t M, int64_t N, int64_t K, float alpha, const float* A, int64_t lda,
               const float* B, int64_t ldb, float beta, float* C, int64_t ldc) {
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == 0.0f) {
    scale_rows(M, N, beta, C, ldc);
    return;
  }
  thread_local PackedBf16 packed;
  pack_bf16(packed, transB, K, N, B, ldb);
  gemm_bf16_packed(transA, M, alpha, A, lda, packed, beta, C, ldc);
}

// ---- Linear layers ------------------------------------------------------------------------
namespace detail {

bool bf16_active() { return current_precision() == Precision::BF16; }

namespace {

// op(W) for weight [OC, C]: W^T (K = C, N = OC) for the forward, W (K = OC, N = C) for dinp.
const PackedBf16& packed_weight(bool transposed, const float* weight, int64_t C, int64_t OC, PackedBf16& local) {
  const int64_t K = transposed ? C : OC, N = transposed ? OC : C;
  if (Bf16WeightCache* cache = current_weight_cache()) return cache->get(transposed, K, N, weight, C);
  pack_bf16(local, transposed, K, N, weight, C);
  return local;
}

}  // namespace

void linear_forward_bf16(float* out, const float* residual, const float* inp, const float* weight, const float* bias,
                         int64_t N, int64_t C, int64_t OC) {
  thread_local PackedBf16 local;
  const PackedBf16& w = packed_weight(true, weight, C, OC, local);
  if (N > 0 && C > 0 && OC > 0 && (residual == nullptr) != (bias == nullptr)) {
    // The tiles start from the residual's rows or from the bias (one row loaded into every row of
    // a tile): no pass writing it into out first. The same bits as that pass and beta 1.
    gemm_packed(false, N, 1.0f, inp, C, w, 1.0f, out, OC, residual != nullptr ? residual : bias,
                residual != nullptr ? OC : 0);
    return;
  }
  if (N > 0 && C > 0 && OC > 0 && residual != nullptr && !uses_amx(bf16_backend(), N)) {
    // vdpbf16ps blocks add residual + bias as they write out: the bits of the pass below.
    gemm_packed(false, N, 1.0f, inp, C, w, 1.0f, out, OC, residual, OC, bias);
    return;
  }
  float beta = 0.0f;
  if (residual != nullptr || bias != nullptr) {  // out starts as residual + bias; the GEMM adds on
    parallel_for(N, N * OC >= (1 << 16), [&](int64_t n) {
      float* o = out + n * OC;
      const float* r = residual != nullptr ? residual + n * OC : nullptr;
      if (r == nullptr) {
        std::memcpy(o, bias, sizeof(float) * OC);
      } else if (bias == nullptr) {
        std::memcpy(o, r, sizeof(float) * OC);
      } else {
        for (int64_t j = 0; j < OC; j++) o[j] = r[j] + bias[j];
      }
    });
    beta = 1.0f;
  }
  gemm_bf16_packed(false, N, 1.0f, inp, C, w, beta, out, OC);
}

void linear_backward_bf16(float* dinp, float beta_inp, float* dweight, float beta_weight, float* dbias,
                          const float* dout, const float* inp, const float* weight, int64_t N, int64_t C, int64_t OC,
                          const float* dout_scale) {
  thread_local PackedBf16 local, inp_packed;
  const Bf16Backend backend = bf16_backend();
  if (N <= 0 || C <= 0 || OC <= 0 || backend == Bf16Backend::None) {  // the general paths (and their errors)
    std::vector<float> scaled;
    if (dout_scale != nullptr && N > 0 && OC > 0) {
      scaled.resize(static_cast<size_t>(N * OC));
      gelu_erf_backward_slope(scaled.data(), dout, dout_scale, N * OC, /*accumulate=*/false);
      dout = scaled.data();
    }
    if (dinp != nullptr) gemm_bf16_packed(false, N, 1.0f, dout, OC, packed_weight(false, weight, C, OC, local), beta_inp, dinp, C);
    if (dweight != nullptr) gemm_bf16(true, false, OC, C, N, 1.0f, dout, OC, inp, C, beta_weight, dweight, C);
    if (dbias != nullptr) bias_add_backward(nullptr, dbias, dout, N, OC);
    return;
  }
  // dinp[N, C] = dout[N, OC] @ weight[OC, C]; dweight[OC, C] = dout^T @ inp[N, C]; dbias: dout's
  // column sums. dout is rounded for both products (and summed) in one pass (pack_dout).
  const PackedBf16* w = dinp != nullptr ? &packed_weight(false, weight, C, OC, local) : nullptr;
  if (dweight != nullptr) pack_bf16(inp_packed, false, N, C, inp, C);
  const int64_t OCp = w != nullptr ? w->Kp : 0, Np = w != nullptr ? padded_rows(backend, N) : 0;
  const int64_t Kn = dweight != nullptr ? inp_packed.Kp : 0, OCq = dweight != nullptr ? padded_rows(backend, OC) : 0;
  thread_local Bf16Buffer rows, cols;
  if (rows.size() < static_cast<size_t>(Np * OCp)) rows.resize(static_cast<size_t>(Np * OCp));
  if (cols.size() < static_cast<size_t>(OCq * Kn)) cols.resize(static_cast<size_t>(OCq * Kn));
  const bool rows_tiled = uses_amx(backend, N), cols_tiled = uses_amx(backend, OC);
  pack_dout_bf16(w != nullptr ? rows.data() : nullptr, OCp, Np, rows_tiled, dweight != nullptr ? cols.data() : nullptr, Kn,
                 OCq, cols_tiled, dbias, dout, dout_scale, N, OC);
  if (w != nullptr)
    run_tasks(backend, N, rows.data(), rows_tiled ? ALayout::Tiles : ALayout::Rows, *w, 1.0f, beta_inp, dinp, C);
  if (dweight != nullptr)
    run_tasks(backend, OC, cols.data(), cols_tiled ? ALayout::Tiles : ALayout::Pairs, inp_packed, 1.0f, beta_weight,
              dweight, C);
}

}  // namespace detail

// ---- Peak ---------------------------------------------------------------------------------
namespace {

using Clock = std::chrono::steady_clock;

// 4 independent tdpbf16ps per round (tiles 0-3 from tiles 4-7 held in registers).
ATTO_AMX_TARGET int64_t amx_peak_rounds(double seconds, double* elapsed) {
  alignas(64) static const uint16_t zeros[16 * 32] = {};
  alignas(64) float out[16 * 16];
  amx_configure();
  _tile_loadd(4, zeros, 64);
  _tile_loadd(5, zeros, 64);
  _tile_loadd(6, zeros, 64);
  _tile_loadd(7, zeros, 64);
  _tile_zero(0);
  _tile_zero(1);
  _tile_zero(2);
  _tile_zero(3);
  const auto t0 = Clock::now();
  int64_t rounds = 0;
  do {
    for (int r = 0; r < 1024; r++) {
      _tile_dpbf16ps(0, 4, 6);
      _tile_dpbf16ps(1, 4, 7);
      _tile_dpbf16ps(2, 5, 6);
      _tile_dpbf16ps(3, 5, 7);
    }
    rounds += 1024;
    *elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  } while (*elapsed < seconds);
  _tile_stored(0, out, 64);
  amx_release();
  return rounds * 4 * 16 * 16 * 32 * 2;  // FLOP
}

// 24 independent vdpbf16ps chains per round.
ATTO_BF16_TARGET int64_t avx_peak_rounds(double seconds, double* elapsed) {
  __m512 acc[24];
  for (int i = 0; i < 24; i++) acc[i] = _mm512_setzero_ps();
  const __m512bh a = (__m512bh)_mm512_set1_epi32(0x3f803f80), b = (__m512bh)_mm512_set1_epi32(0x3c003c00);
  const auto t0 = Clock::now();
  int64_t rounds = 0;
  do {
    for (int r = 0; r < 1024; r++) {
#pragma GCC unroll 24
      for (int i = 0; i < 24; i++) acc[i] = _mm512_dpbf16_ps(acc[i], a, b);
    }
    for (int i = 0; i < 24; i++) asm volatile("" : "+v"(acc[i]));
    rounds += 1024;
    *elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
  } while (*elapsed < seconds);
  return rounds * 24 * 64;
}

}  // namespace

std::vector<double> bf16_peak_gflops(double seconds) {
  if (!(seconds > 0.0)) throw std::invalid_argument("bf16_peak_gflops: seconds must be > 0");
  const Bf16Backend backend = bf16_backend();
  if (backend == Bf16Backend::None) require_bf16("bf16 peak");
  const int nt = num_threads();
  std::vector<double> gflops(static_cast<size_t>(nt), 0.0);
#pragma omp parallel num_threads(nt)
  {
    double elapsed = 0.0;
#pragma omp barrier
    const int64_t flop =
        backend == Bf16Backend::Amx ? amx_peak_rounds(seconds, &elapsed) : avx_peak_rounds(seconds, &elapsed);
    gflops[static_cast<size_t>(omp_get_thread_num())] = static_cast<double>(flop) / elapsed / 1e9;
  }
  return gflops;
}

}  // namespace atto::kernels
#endif  // __x86_64__
