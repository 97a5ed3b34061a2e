// atto/kernels/gemm_bf16.cpp: bf16 GEMM on AMX tiles or AVX512_BF16 registers, fp32 sums.
//
// C[M, N] = alpha * op(A) @ B + beta * C. B comes packed (pack_bf16: pairs of K interleaved,
// blocks of 16 columns); op(A) is rounded to bf16 into a [Mp, Kp] scratch (rows padded to 32, K
// to 32 with zeros): tiled for AMX (a_tile_offset: each 16 x 32 tile 1 KiB in a row), row-major
// for AVX512_BF16. C is cut into blocks of 32 rows and panels of 32 columns (two B blocks); a
// thread takes a run of (row block, panel) tasks, the panels of a row block in a row, so its
// block of A stays in L1/L2 while B's panels stream.
//   AMX: 2 x 2 accumulator tiles (32 x 32 of C), A tiles 4-5, B tiles 6-7; one tdpbf16ps
//        multiplies 16 x 32 by 32 x 16 (16 K pairs).
//   AVX512_BF16: up to 8 rows x 2 vectors of accumulators; per K pair, one 32-bit broadcast of
//        the row's pair and one vdpbf16ps per vector.
// Every C element is one chain over K in a fixed order, so neither the thread count nor the
// rows beside it change its bits.
//
// The functions with the target attribute run only after bf16_backend() has found the
// instructions: the rest of the binary is built for whatever -march the build chose.
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


namespace atto::kernels {

namespace {

constexpr int64_t kPanel = 32;    // columns of C per task (two B blocks)
constexpr int64_t kAmxRows = 32;  // rows of C per AMX task (two tiles)
constexpr int64_t kAvxRows = 8;   // rows of C per AVX512_BF16 register block

int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

// ---- Packing (rounding to bf16 on the way) -------------------------------------------------
// The vector forms use vcvtne2ps2bf16, which rounds as detail::round_bf16 does (nearest even,
// denormals to signed zero, NaN quieted); they run only where bf16_backend() found AVX512_BF16.
bool vector_packing() { return bf16_backend() != Bf16Backend::None; }
using detail::amx_configure;
using detail::amx_release;
using detail::round_row_avx;

// One block of 16 columns (nn valid, the rest zero) of B[K, N] (row stride ldb) in pairs: rows
// of 16 pairs (r0[j], r1[j]) at blk, one per two rows of B.
ATTO_BF16_TARGET void pair_block_avx(uint16_t* blk, const float* B, int64_t ldb, int64_t K, int64_t nn) {
  const __mmask16 m = static_cast<__mmask16>(nn >= 16 ? 0xffff : (1u << nn) - 1u);
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                              6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  for (int64_t k = 0; k < K; k += 2) {
    const __m512 a = _mm512_maskz_loadu_ps(m, B + k * ldb);
    const __m512 b = k + 1 < K ? _mm512_maskz_loadu_ps(m, B + (k + 1) * ldb) : _mm512_setzero_ps();
    const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(b, a);  // a in lanes 0-15, b in 16-31
    _mm512_storeu_si512(blk + (k / 2) * 32, _mm512_permutexvar_epi16(interleave, both));
  }
}

// dst[i * stride + c] = src[c * 16 + i] for i, c < 16: a 16 x 16 transpose of 32-bit pairs.
ATTO_BF16_TARGET void transpose16_avx(uint32_t* dst, int64_t stride, const uint32_t* src) {
  const __m512i idx = _mm512_setr_epi32(0, 16, 32, 48, 64, 80, 96, 112, 128, 144, 160, 176, 192, 208, 224, 240);
  for (int64_t i = 0; i < 16; i++)
    _mm512_storeu_si512(dst + i * stride, _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), 0xffff, idx, src + i, 4));
}

void transpose16(uint32_t* dst, int64_t stride, const uint32_t* src, bool vec) {
  if (vec) {
    transpose16_avx(dst, stride, src);
    return;
  }
  for (int64_t i = 0; i < 16; i++)
    for (int64_t c = 0; c < 16; c++) dst[i * stride + c] = src[c * 16 + i];
}

void pair_block(uint16_t* blk, const float* B, int64_t ldb, int64_t K, int64_t nn, bool vec) {
  if (vec) {
    pair_block_avx(blk, B, ldb, K, nn);
    return;
  }
  for (int64_t k = 0; k < K; k += 2) {
    const float* r0 = B + k * ldb;
    const float* r1 = k + 1 < K ? r0 + ldb : nullptr;
    uint16_t* row = blk + (k / 2) * 32;
    for (int64_t j = 0; j < 16; j++) {  // zeros past nn, as the vector path's masked loads
      row[2 * j] = j < nn ? detail::round_bf16(r0[j]) : 0;
      row[2 * j + 1] = j < nn && r1 != nullptr ? detail::round_bf16(r1[j]) : 0;
    }
  }
}

// The tiled layout of op(A) for AMX: tile (m / 16, k / 32), a 16 x 32 block of bf16 (1 KiB,
// 64-byte lines), at (m / 16) * 16 * Kp + (k / 32) * 512, tiles of a row band in k order; so a
// tile load reads 1 KiB in a row instead of 16 lines a row of A apart. Element (m, k):
inline int64_t a_tile_offset(int64_t m, int64_t k, int64_t Kp) {
  return (m / 16) * 16 * Kp + (k / 32) * 512 + (m % 16) * 32 + k % 32;
}

// op(A) rows [0, M) rounded to bf16 into dst [Mp, Kp]; padding rows and columns zero.
void pack_a(uint16_t* dst, bool transA, int64_t M, int64_t K, int64_t Mp, int64_t Kp, const float* A, int64_t lda,
            bool tiled) {
  const bool par = M * K >= (1 << 16), vec = vector_packing();
  if (!transA && tiled) {  // row m's run of 32 k at tile (m / 16, k / 32), line m % 16
    parallel_for(Mp, par, [&](int64_t m) {
      for (int64_t k0 = 0; k0 < Kp; k0 += 32) {
        uint16_t* seg = dst + a_tile_offset(m, k0, Kp);
        const int64_t n = m < M ? std::clamp<int64_t>(K - k0, 0, 32) : 0;
        if (n > 0) {
          if (vec) {
            round_row_avx(seg, A + m * lda + k0, n);
          } else {
            detail::round_bf16_row(seg, A + m * lda + k0, n);
          }
        }
        for (int64_t k = n; k < 32; k++) seg[k] = 0;
      }
    });
    return;
  }
  if (!transA) {
    parallel_for(Mp, par, [&](int64_t m) {
      uint16_t* row = dst + m * Kp;
      if (m >= M) {
        std::memset(row, 0, sizeof(uint16_t) * Kp);
        return;
      }
      if (vec) {
        round_row_avx(row, A + m * lda, K);
      } else {
        detail::round_bf16_row(row, A + m * lda, K);
      }
      for (int64_t k = K; k < Kp; k++) row[k] = 0;
    });
    return;
  }
  // A is [K, M]: 16 rows of dst (columns of A) at a time, paired as B is (pair_block), then each
  // 16 x 16 tile of pairs transposed into the rows.
  // (Columns past M come out of the pairing as zeros, so the padding rows are written too.)
  parallel_for(Mp / 16, par, [&](int64_t mb) {
    const int64_t m0 = mb * 16, mm = std::clamp<int64_t>(M - m0, 0, 16);
    const int64_t tail = mm == 0 ? 0 : (K + 31) / 32 * 32;  // whole tiles are written below; zero the rest
    if (tiled) {
      std::memset(dst + m0 * Kp + tail * 16, 0, sizeof(uint16_t) * (Kp - tail) * 16);
    } else {
      for (int64_t j = 0; j < 16; j++) std::memset(dst + (m0 + j) * Kp + tail, 0, sizeof(uint16_t) * (Kp - tail));
    }
    if (mm == 0) return;
    alignas(64) uint32_t tile[16 * 16];
    for (int64_t k0 = 0; k0 < K; k0 += 32) {
      const int64_t kk = std::min<int64_t>(32, K - k0);
      if (kk < 32) std::memset(tile, 0, sizeof(tile));
      pair_block(reinterpret_cast<uint16_t*>(tile), A + k0 * lda + m0, lda, kk, mm, vec);
      if (tiled) {
        transpose16(reinterpret_cast<uint32_t*>(dst + m0 * Kp + k0 * 16), 16, tile, vec);
      } else {
        transpose16(reinterpret_cast<uint32_t*>(dst + m0 * Kp + k0), Kp / 2, tile, vec);
      }
    }
  });
}

// A linear layer's dout [N, OC] for both backward products and the bias, read once (the three
// used to read it a pass each): `rows` [Np, OCp] is op(A) of dinp = dout W as pack_a writes it
// (rows rounded, zeros past N and OC; tiled with rows_tiled); `cols` [OCq, Kn] is op(A) of
// dweight = dout^T inp as pack_a's transposed path writes it (tiled with `tiled`); dbias[c] += sum_n dout[n, c], rows summed in order from
// zero as bias_add_backward does. Any of the three may be null. The bits of each are those of
// the separate passes. Vector form only (AVX512_BF16); a thread takes 16 columns at a time.
constexpr int64_t kDoutCols = 64;  // columns of dout per pass: 256 bytes of each row (four 16-column groups)

ATTO_BF16_TARGET void pack_dout_group(uint16_t* rows, int64_t OCp, int64_t Np, bool rows_tiled, uint16_t* cols,
                                      int64_t Kn, int64_t OCq, bool tiled, float* dbias, const float* dout, int64_t N,
                                      int64_t OC, int64_t c00) {
  constexpr int G = kDoutCols / 16;
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                              6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  __mmask16 m[G];
  bool to_rows[G], to_cols[G];
  __m512 acc[G];
  for (int g = 0; g < G; g++) {
    const int64_t c0 = c00 + 16 * g, nc = std::clamp<int64_t>(OC - c0, 0, 16);
    m[g] = static_cast<__mmask16>(nc >= 16 ? 0xffff : (1u << nc) - 1u);
    to_rows[g] = rows != nullptr && c0 < OCp;
    to_cols[g] = cols != nullptr && c0 < OCq;
    acc[g] = _mm512_setzero_ps();
  }
  // Where row r's 16 values of group g go: at (r, c0), or in the tiled layout (a_tile_offset).
  auto row_at = [&](int64_t r, int g) {
    const int64_t c0 = c00 + 16 * g;
    return rows + (rows_tiled ? a_tile_offset(r, c0, OCp) : r * OCp + c0);
  };
  alignas(64) uint32_t tile[G][16 * 16];
  for (int64_t k0 = 0; k0 < N; k0 += 32) {
    const int64_t kk = std::min<int64_t>(32, N - k0);
    for (int64_t k = k0; k < k0 + kk; k += 2) {
      const bool two = k + 1 < N;
      for (int g = 0; g < G; g++) {
        const float* src = dout + k * OC + c00 + 16 * g;
        const __m512 a = _mm512_maskz_loadu_ps(m[g], src);
        const __m512 b = two ? _mm512_maskz_loadu_ps(m[g], src + OC) : _mm512_setzero_ps();
        acc[g] = _mm512_add_ps(acc[g], a);
        if (two) acc[g] = _mm512_add_ps(acc[g], b);
        if (to_rows[g]) {  // vcvtneps2bf16 rounds as vcvtne2ps2bf16 does
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(row_at(k, g)), (__m256i)_mm512_cvtneps_pbh(a));
          if (two) _mm256_storeu_si256(reinterpret_cast<__m256i*>(row_at(k + 1, g)), (__m256i)_mm512_cvtneps_pbh(b));
        }
        if (to_cols[g]) {
          const __m512i both = (__m512i)_mm512_cvtne2ps_pbh(b, a);  // a in lanes 0-15, b in 16-31
          _mm512_store_si512(tile[g] + (k - k0) / 2 * 16, _mm512_permutexvar_epi16(interleave, both));
        }
      }
    }
    for (int g = 0; g < G; g++) {
      if (!to_cols[g]) continue;
      const int64_t c0 = c00 + 16 * g;
      for (int64_t r = (kk + 1) / 2; r < 16; r++) _mm512_store_si512(tile[g] + r * 16, _mm512_setzero_si512());
      if (tiled) {
        transpose16_avx(reinterpret_cast<uint32_t*>(cols + c0 * Kn + k0 * 16), 16, tile[g]);
      } else {
        transpose16_avx(reinterpret_cast<uint32_t*>(cols + c0 * Kn + k0), Kn / 2, tile[g]);
      }
    }
  }
  const int64_t tail = (N + 31) / 32 * 32;  // K's padding past the last whole tile
  for (int g = 0; g < G; g++) {
    const int64_t c0 = c00 + 16 * g;
    if (to_cols[g]) {
      if (tiled) {
        std::memset(cols + c0 * Kn + tail * 16, 0, sizeof(uint16_t) * (Kn - tail) * 16);
      } else {
        for (int64_t j = 0; j < 16; j++) std::memset(cols + (c0 + j) * Kn + tail, 0, sizeof(uint16_t) * (Kn - tail));
      }
    }
    if (to_rows[g])
      for (int64_t r = N; r < Np; r++) _mm256_storeu_si256(reinterpret_cast<__m256i*>(row_at(r, g)), _mm256_setzero_si256());
    if (dbias != nullptr && m[g] != 0)
      _mm512_mask_storeu_ps(dbias + c0, m[g], _mm512_add_ps(_mm512_maskz_loadu_ps(m[g], dbias + c0), acc[g]));
  }
}

void pack_dout(uint16_t* rows, int64_t OCp, int64_t Np, bool rows_tiled, uint16_t* cols, int64_t Kn, int64_t OCq,
               bool cols_tiled, float* dbias, const float* dout, int64_t N, int64_t OC) {
  const int64_t width = std::max({rows != nullptr ? OCp : 0, cols != nullptr ? OCq : 0, round_up(OC, 16)});
  parallel_for((width + kDoutCols - 1) / kDoutCols, N * OC >= (1 << 16), [&](int64_t g) {
    pack_dout_group(rows, OCp, Np, rows_tiled, cols, Kn, OCq, cols_tiled, dbias, dout, N, OC, g * kDoutCols);
  });
}

}  // namespace

// Block nb (16 columns) holds Kp / 2 rows of 16 pairs: element (k, n) at
// ((nb * Kp / 2 + k / 2) * 16 + n % 16) * 2 + k % 2. A tile of 32 k is 16 such rows (1 KiB).
void pack_bf16(PackedBf16& out, bool transB, int64_t K, int64_t N, const float* B, int64_t ldb) {
  out.K = K;
  out.N = N;
  out.Kp = (K + 31) / 32 * 32;
  out.Np = (N + 31) / 32 * 32;
  const int64_t Kp = out.Kp, blocks = (N + 15) / 16, pair_rows = (K + 1) / 2;
  // Every element is written below (the pairing writes whole rows of 16 pairs, zeros past N); a
  // buffer used again (a thread's scratch) is not cleared first.
  out.data.resize(static_cast<size_t>(Kp * out.Np));
  const bool vec = vector_packing();
  uint16_t* dst = out.data.data();
  std::memset(dst + blocks * Kp * 16, 0, sizeof(uint16_t) * (out.Np - blocks * 16) * Kp);  // blocks past N
  parallel_for(blocks, K * N >= (1 << 16), [&](int64_t nb) {
    uint16_t* blk = dst + nb * Kp * 16;
    const int64_t n0 = nb * 16, nn = std::min<int64_t>(16, N - n0);
    std::memset(blk + pair_rows * 32, 0, sizeof(uint16_t) * (Kp / 2 - pair_rows) * 32);  // K's padding
    if (!transB) {                                                                       // B[k][n]: two rows paired
      pair_block(blk, B + n0, ldb, K, nn, vec);
      return;
    }
    // B[n][k]: 16 columns' runs of 32 k rounded into rows of 16 pairs, then transposed.
    alignas(64) uint16_t rows[16 * 32];
    for (int64_t k0 = 0; k0 < K; k0 += 32) {
      const int64_t kk = std::min<int64_t>(32, K - k0);
      std::memset(rows, 0, sizeof(rows));
      for (int64_t j = 0; j < nn; j++) {
        if (vec) {
          round_row_avx(rows + j * 32, B + (n0 + j) * ldb + k0, kk);
        } else {
          detail::round_bf16_row(rows + j * 32, B + (n0 + j) * ldb + k0, kk);
        }
      }
      transpose16(reinterpret_cast<uint32_t*>(blk + k0 * 16), 16, reinterpret_cast<const uint32_t*>(rows), vec);
    }
  });
}

namespace {

// C[rows, cols] (row stride ldc) = alpha * acc (row stride 32) + beta * C.
void store_block(float* C, int64_t ldc, const float* acc, int64_t rows, int64_t cols, float alpha, float beta) {
  for (int64_t i = 0; i < rows; i++) {
    float* c = C + i * ldc;
    const float* a = acc + i * kPanel;
    if (beta == 0.0f) {
      for (int64_t j = 0; j < cols; j++) c[j] = alpha * a[j];
    } else {
      for (int64_t j = 0; j < cols; j++) c[j] = alpha * a[j] + beta * c[j];
    }
  }
}

// ---- AMX ----------------------------------------------------------------------------------
// out[TM * 16, 32] (row stride ldo floats) = (out if `add`, else 0) + A[TM * 16 rows of Kp] @
// (B0 | B1); TM = 1 or 2; A tiled (a_tile_offset) or row-major. With `add` the sums start from
// out's values (C += A B in the tiles).
template <int TM>
ATTO_AMX_TARGET void amx_block(float* out, int64_t ldo, bool add, const uint16_t* A, int64_t Kp, bool tiled,
                               const uint16_t* B0, const uint16_t* B1) {
  const int64_t stride = tiled ? 64 : Kp * 2, cstride = ldo * 4, step = tiled ? 512 : 32;
  if (add) {
    _tile_loadd(0, out, cstride);
    _tile_loadd(1, out + 16, cstride);
    if (TM == 2) {
      _tile_loadd(2, out + 16 * ldo, cstride);
      _tile_loadd(3, out + 16 * ldo + 16, cstride);
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
template <int MR>
ATTO_BF16_TARGET void avx_block(float* acc, const uint16_t* A, int64_t Kp, const uint16_t* B0, const uint16_t* B1) {
  __m512 c0[MR], c1[MR];
  for (int i = 0; i < MR; i++) c0[i] = c1[i] = _mm512_setzero_ps();
  const int64_t pairs = Kp / 2;
  for (int64_t r = 0; r < pairs; r++) {
    const __m512bh b0 = (__m512bh)_mm512_loadu_si512(B0 + r * 32);
    const __m512bh b1 = (__m512bh)_mm512_loadu_si512(B1 + r * 32);
#pragma GCC unroll 8
    for (int i = 0; i < MR; i++) {
      int32_t pair;
      std::memcpy(&pair, A + i * Kp + 2 * r, sizeof(pair));
      const __m512bh a = (__m512bh)_mm512_set1_epi32(pair);
      c0[i] = _mm512_dpbf16_ps(c0[i], a, b0);
      c1[i] = _mm512_dpbf16_ps(c1[i], a, b1);
    }
  }
  for (int i = 0; i < MR; i++) {
    _mm512_storeu_ps(acc + i * kPanel, c0[i]);
    _mm512_storeu_ps(acc + i * kPanel + 16, c1[i]);
  }
}

void avx_rows(float* acc, int64_t rows, const uint16_t* A, int64_t Kp, const uint16_t* B0, const uint16_t* B1) {
  switch (rows) {
    case 1: avx_block<1>(acc, A, Kp, B0, B1); break;
    case 2: avx_block<2>(acc, A, Kp, B0, B1); break;
    case 3: avx_block<3>(acc, A, Kp, B0, B1); break;
    case 4: avx_block<4>(acc, A, Kp, B0, B1); break;
    case 5: avx_block<5>(acc, A, Kp, B0, B1); break;
    case 6: avx_block<6>(acc, A, Kp, B0, B1); break;
    case 7: avx_block<7>(acc, A, Kp, B0, B1); break;
    default: avx_block<8>(acc, A, Kp, B0, B1); break;
  }
}

// AMX for products of many rows. A few rows (decoding a token per sequence) stream the weights
// through vdpbf16ps instead: a 16-row tile would do 16 times the work for one row. Under a
// RowStableScope (a server's decode batch) every row count takes vdpbf16ps, so that a row's
// bits never depend on the rows decoded beside it.
constexpr int64_t kAmxMinRows = 16;
bool uses_amx(Bf16Backend backend, int64_t M) {
  return backend == Bf16Backend::Amx && M > kAmxMinRows && !detail::row_stable_active();
}

// The tasks (panel, row block) of C for packed A [Mp, Kp] and B on `backend`.
void run_tasks(Bf16Backend backend, int64_t M, const uint16_t* A, bool a_tiled, const PackedBf16& B, float alpha,
               float beta, float* C, int64_t ldc) {
  const int64_t Kp = B.Kp, N = B.N, panels = (N + kPanel - 1) / kPanel;
  const bool amx = uses_amx(backend, M);
  const int64_t rows = amx ? kAmxRows : kAvxRows, blocks = (M + rows - 1) / rows;
  const int64_t tasks = panels * blocks;
  const bool par = static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(Kp) >= (1 << 18);
  parallel_region(par && tasks > 1, [&](int64_t t, int64_t nt) {
    const auto [begin, end] = static_range(tasks, t, nt);
    if (begin == end) return;
    alignas(64) float acc[kAmxRows * kPanel];
    if (amx) amx_configure();
    for (int64_t task = begin; task < end; task++) {
      const int64_t p = task % panels, m0 = (task / panels) * rows;
      const int64_t mi = std::min(rows, M - m0), n0 = p * kPanel, nj = std::min(kPanel, N - n0);
      const uint16_t* b0 = B.data.data() + (2 * p) * Kp * 16;
      const uint16_t* b1 = b0 + Kp * 16;
      const uint16_t* a = A + m0 * Kp;
      float* c = C + m0 * ldc + n0;
      // A whole 32 x 32 block of C = A B or C += A B: the tiles read and write C itself.
      if (amx && mi == kAmxRows && nj == kPanel && alpha == 1.0f && (beta == 0.0f || beta == 1.0f)) {
        amx_block<2>(c, ldc, beta == 1.0f, a, Kp, a_tiled, b0, b1);
        continue;
      }
      if (!amx) {
        avx_rows(acc, mi, a, Kp, b0, b1);
      } else if (mi > 16) {
        amx_block<2>(acc, kPanel, false, a, Kp, a_tiled, b0, b1);
      } else {
        amx_block<1>(acc, kPanel, false, a, Kp, a_tiled, b0, b1);
      }
      store_block(c, ldc, acc, mi, nj, alpha, beta);
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

void gemm_bf16_packed(bool transA, int64_t M, float alpha, const float* A, int64_t lda, const PackedBf16& B, float beta,
                      float* C, int64_t ldc) {
  const int64_t N = B.N, K = B.K;
  if (M <= 0 || N <= 0) return;
  if (K <= 0 || alpha == 0.0f) {
    scale_rows(M, N, beta, C, ldc);
    return;
  }
  const Bf16Backend backend = bf16_backend();
  if (backend == Bf16Backend::None) require_bf16("bf16 GEMM");
  const int64_t Mp = padded_rows(backend, M), Kp = B.Kp;
  thread_local Bf16Buffer scratch;
  if (scratch.size() < static_cast<size_t>(Mp * Kp)) scratch.resize(static_cast<size_t>(Mp * Kp));
  const bool tiled = uses_amx(backend, M);
  pack_a(scratch.data(), transA, M, K, Mp, Kp, A, lda, tiled);
  run_tasks(backend, M, scratch.data(), tiled, B, alpha, beta, C, ldc);
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
                          const float* dout, const float* inp, const float* weight, int64_t N, int64_t C, int64_t OC) {
  thread_local PackedBf16 local, inp_packed;
  const Bf16Backend backend = bf16_backend();
  if (N <= 0 || C <= 0 || OC <= 0 || backend == Bf16Backend::None) {  // the general paths (and their errors)
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
  pack_dout(w != nullptr ? rows.data() : nullptr, OCp, Np, rows_tiled, dweight != nullptr ? cols.data() : nullptr, Kn,
            OCq, cols_tiled, dbias, dout, N, OC);
  if (w != nullptr) run_tasks(backend, N, rows.data(), rows_tiled, *w, 1.0f, beta_inp, dinp, C);
  if (dweight != nullptr) run_tasks(backend, OC, cols.data(), cols_tiled, inp_packed, 1.0f, beta_weight, dweight, C);
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
