// atto/kernels/bf16_pack.cpp: rounding fp32 operands to bf16 in the layouts the bf16 products
// read (gemm_bf16.cpp, attention_bf16.cpp): B packed in pairs of K (pack_bf16, public), op(A)
// row-major or in AMX tiles (pack_a_bf16), and a linear layer's dout for both of its backward
// products and its bias in one pass (pack_dout_bf16).
//
// The vector forms use vcvtne2ps2bf16, which rounds as detail::round_bf16 does (nearest even,
// denormals to signed zero, NaN quieted); they run only where bf16_backend() found AVX512_BF16
// (x86-64 only: elsewhere the vector forms are stubs that are never called).
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <algorithm>
#include <cstring>

#include "kernels/bf16_impl.h"
#include "kernels/kernels.h"
#include "kernels/parallel.h"
#include "kernels/simd.h"

namespace ATTO_KERNELS_NS {

namespace {

int64_t round_up(int64_t a, int64_t b) { return (a + b - 1) / b * b; }

bool vector_packing() { return bf16_backend() != Bf16Backend::None; }
#if defined(__x86_64__)
using detail::pair_rows_avx;
#endif
using detail::round_row_avx;

// dst[i * stride + c] = src[c * 16 + i] for i, c < 16: a 16 x 16 transpose of 32-bit pairs, in
// registers (simd::transpose16's shuffles move bits, so bf16 pairs pass through unchanged).
ATTO_BF16_TARGET void transpose16_avx(uint32_t* dst, int64_t stride, const uint32_t* src) {
  simd::transpose16(reinterpret_cast<float*>(dst), stride, reinterpret_cast<const float*>(src), 16, 16, 16);
}

// nblk (<= kPairBlocks) blocks of 16 columns of B[K, N] (row stride ldb; columns past N zero),
// the first at column n0, in pairs: in each block (blk_stride elements apart) a row of 16 pairs
// (r0[j], r1[j]) per two rows of B. Row by row across the blocks, so that each row of B is read
// up to kPairBlocks * 16 columns at a time (see pack_bf16).
constexpr int64_t kPairBlocks = 48;
ATTO_BF16_TARGET void pair_blocks_avx(uint16_t* blk0, int64_t blk_stride, const float* B, int64_t ldb, int64_t K,
                                      int64_t n0, int64_t N, int64_t nblk) {
#if defined(__x86_64__)
  __mmask16 m[kPairBlocks];
  for (int64_t b = 0; b < kPairBlocks; b++) {
    const int64_t nn = b < nblk ? std::clamp<int64_t>(N - n0 - 16 * b, 0, 16) : 0;
    m[b] = static_cast<__mmask16>(nn >= 16 ? 0xffff : (1u << nn) - 1u);
  }
  const int64_t cols = std::clamp<int64_t>(N - n0, 0, 16 * nblk);
  for (int64_t k = 0; k < K; k += 2) {
    const float* r0 = B + k * ldb + n0;
    if (k + kPrefetchRows + 1 < K) {
      prefetch_run(r0 + kPrefetchRows * ldb, cols);
      prefetch_run(r0 + (kPrefetchRows + 1) * ldb, cols);
    }
    for (int64_t b = 0; b < nblk; b++) {
      const __m512 a = _mm512_maskz_loadu_ps(m[b], r0 + 16 * b);
      const __m512 c = k + 1 < K ? _mm512_maskz_loadu_ps(m[b], r0 + ldb + 16 * b) : _mm512_setzero_ps();
      _mm512_storeu_si512(blk0 + b * blk_stride + (k / 2) * 32, pair_rows_avx(a, c));
    }
  }
#else
  detail::no_bf16_vector_form();
#endif
}

void transpose16(uint32_t* dst, int64_t stride, const uint32_t* src, bool vec) {
  if (vec) {
    transpose16_avx(dst, stride, src);
    return;
  }
  for (int64_t i = 0; i < 16; i++)
    for (int64_t c = 0; c < 16; c++) dst[i * stride + c] = src[c * 16 + i];
}

// One block (nn valid columns, the rest zero), vector or scalar.
void pair_block(uint16_t* blk, const float* B, int64_t ldb, int64_t K, int64_t nn, bool vec) {
  if (vec) {
    pair_blocks_avx(blk, 0, B, ldb, K, 0, nn, 1);
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

// A thread's columns of dout are taken kDoutGroups groups of 16 at a time (384 columns: 1.5 KiB
// of a row), walking down the rows, so that each row is read as one long run (a narrower slice
// read a new page per row: 64 columns a pass took 1.25 to 1.7 times as long). The transposed
// layout's tiles of the slice (1 KiB a group) stay in L1 with the rows coming in: with 48 groups
// they filled it (48 KiB), and (d)'s four gradients a layer took 1.74-1.80 ms against 1.52-1.59
// with 24 (cold, one Zen 5 core; 32 groups 1.64-1.68, 16 groups 1.82-1.86).
constexpr int64_t kDoutGroups = 24;

// pack_dout_bf16 for the 16-column groups [g0, g1) (g1 - g0 <= kDoutGroups), row by row.
ATTO_BF16_TARGET void pack_dout_groups(uint16_t* rows, int64_t OCp, int64_t Np, bool rows_tiled, uint16_t* cols,
                                       int64_t Kn, int64_t OCq, bool tiled, float* dbias, const float* dout,
                                       const float* scale, int64_t N, int64_t OC, int64_t g0, int64_t g1) {
#if defined(__x86_64__)
  const int64_t G = g1 - g0;
  __mmask16 m[kDoutGroups];
  bool to_rows[kDoutGroups], to_cols[kDoutGroups];
  alignas(64) float acc[kDoutGroups * 16] = {};  // column sums, each over the rows in order
  alignas(64) uint32_t tile[kDoutGroups][16 * 16];
  for (int64_t g = 0; g < G; g++) {
    const int64_t c0 = 16 * (g0 + g), nc = std::clamp<int64_t>(OC - c0, 0, 16);
    m[g] = static_cast<__mmask16>(nc >= 16 ? 0xffff : (1u << nc) - 1u);
    to_rows[g] = rows != nullptr && c0 < OCp;
    to_cols[g] = cols != nullptr && c0 < OCq;
  }
  // Where row r's 16 values of group g go: at (r, c0), or in the tiled layout (a_tile_offset).
  auto row_at = [&](int64_t r, int64_t g) {
    const int64_t c0 = 16 * (g0 + g);
    return rows + (rows_tiled ? a_tile_offset(r, c0, OCp) : r * OCp + c0);
  };
  for (int64_t k0 = 0; k0 < N; k0 += 32) {
    const int64_t kk = std::min<int64_t>(32, N - k0);
    for (int64_t k = k0; k < k0 + kk; k += 2) {
      const bool two = k + 1 < N;
      const float* r0 = dout + k * OC + 16 * g0;
      const float* s0 = scale != nullptr ? scale + k * OC + 16 * g0 : nullptr;
      if (k + kPrefetchRows + 1 < N) {  // the rows kPrefetchRows ahead, this thread's columns
        prefetch_run(r0 + kPrefetchRows * OC, 16 * G);
        prefetch_run(r0 + (kPrefetchRows + 1) * OC, 16 * G);
        if (s0 != nullptr) {
          prefetch_run(s0 + kPrefetchRows * OC, 16 * G);
          prefetch_run(s0 + (kPrefetchRows + 1) * OC, 16 * G);
        }
      }
      for (int64_t g = 0; g < G; g++) {
        __m512 a = _mm512_maskz_loadu_ps(m[g], r0 + 16 * g);
        __m512 b = two ? _mm512_maskz_loadu_ps(m[g], r0 + OC + 16 * g) : _mm512_setzero_ps();
        if (s0 != nullptr) {  // dout * scale, as gelu_erf_backward_slope would have stored it
          a = _mm512_mul_ps(a, _mm512_maskz_loadu_ps(m[g], s0 + 16 * g));
          if (two) b = _mm512_mul_ps(b, _mm512_maskz_loadu_ps(m[g], s0 + OC + 16 * g));
        }
        __m512 sum = _mm512_add_ps(_mm512_load_ps(acc + 16 * g), a);
        if (two) sum = _mm512_add_ps(sum, b);
        _mm512_store_ps(acc + 16 * g, sum);
        if (to_rows[g]) {  // vcvtneps2bf16 rounds as vcvtne2ps2bf16 does
          _mm256_storeu_si256(reinterpret_cast<__m256i*>(row_at(k, g)), (__m256i)_mm512_cvtneps_pbh(a));
          if (two) _mm256_storeu_si256(reinterpret_cast<__m256i*>(row_at(k + 1, g)), (__m256i)_mm512_cvtneps_pbh(b));
        }
        if (to_cols[g]) _mm512_store_si512(tile[g] + (k - k0) / 2 * 16, pair_rows_avx(a, b));
      }
    }
    for (int64_t g = 0; g < G; g++) {
      if (!to_cols[g]) continue;
      const int64_t c0 = 16 * (g0 + g);
      for (int64_t r = (kk + 1) / 2; r < 16; r++) _mm512_store_si512(tile[g] + r * 16, _mm512_setzero_si512());
      if (tiled) {
        transpose16_avx(reinterpret_cast<uint32_t*>(cols + c0 * Kn + k0 * 16), 16, tile[g]);
        continue;
      }
      // In pairs: the tile's 16 rows of 16 pairs split into columns c0..c0+7 and c0+8..c0+15, each
      // 16 rows of 8 pairs in a row (512 bytes) in its block of 8: no transpose.
      uint16_t* lo = cols + c0 * Kn + k0 * 8;
      uint16_t* hi = lo + 8 * Kn;
      for (int64_t r = 0; r < 16; r += 2) {
        const __m512i v0 = _mm512_load_si512(tile[g] + r * 16), v1 = _mm512_load_si512(tile[g] + (r + 1) * 16);
        _mm512_storeu_si512(lo + r * 16, _mm512_maskz_shuffle_i64x2(0xff, v0, v1, 0x44));
        _mm512_storeu_si512(hi + r * 16, _mm512_maskz_shuffle_i64x2(0xff, v0, v1, 0xee));
      }
    }
  }
  const int64_t tail = (N + 31) / 32 * 32;  // K's padding past the last whole tile
  for (int64_t g = 0; g < G; g++) {
    const int64_t c0 = 16 * (g0 + g);
    if (to_cols[g] && tiled) {  // K's padding past the last whole tile
      std::memset(cols + c0 * Kn + tail * 16, 0, sizeof(uint16_t) * (Kn - tail) * 16);
    } else if (to_cols[g]) {  // in pairs: in both blocks of 8
      for (int64_t c = c0; c < c0 + 16; c += 8)
        std::memset(cols + c * Kn + tail * 8, 0, sizeof(uint16_t) * (Kn - tail) * 8);
    }
    if (to_rows[g])
      for (int64_t r = N; r < Np; r++) _mm256_storeu_si256(reinterpret_cast<__m256i*>(row_at(r, g)), _mm256_setzero_si256());
    if (dbias != nullptr && m[g] != 0)
      _mm512_mask_storeu_ps(dbias + c0, m[g],
                            _mm512_add_ps(_mm512_maskz_loadu_ps(m[g], dbias + c0), _mm512_load_ps(acc + 16 * g)));
  }
#else
  detail::no_bf16_vector_form();
#endif
}

}  // namespace

namespace detail {

void pack_a_bf16(uint16_t* dst, bool transA, int64_t M, int64_t K, int64_t Mp, int64_t Kp, const float* A, int64_t lda,
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

// Each thread one contiguous run of 16-column groups, kDoutGroups at a time.
void pack_dout_bf16(uint16_t* rows, int64_t OCp, int64_t Np, bool rows_tiled, uint16_t* cols, int64_t Kn,
                    int64_t OCq, bool cols_tiled, float* dbias, const float* dout, const float* scale, int64_t N,
                    int64_t OC) {
  const int64_t width = std::max({rows != nullptr ? OCp : 0, cols != nullptr ? OCq : 0, round_up(OC, 16)});
  parallel_region(N * OC >= (1 << 16), [&](int64_t t, int64_t nt) {
    const auto [begin, end] = static_range(width / 16, t, nt);
    for (int64_t g = begin; g < end; g += kDoutGroups)
      pack_dout_groups(rows, OCp, Np, rows_tiled, cols, Kn, OCq, cols_tiled, dbias, dout, scale, N, OC, g,
                       std::min(end, g + kDoutGroups));
  });
}

}  // namespace detail

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
  if (!transB) {  // B[k][n]: two rows paired; each thread a contiguous run of blocks, up to kPairBlocks
    // (768 columns: 3 KiB of a row) at a time: read as narrower slices (64 columns), each row a new
    // page, the packing of an activation took up to twice as long.
    parallel_region(K * N >= (1 << 16), [&](int64_t t, int64_t nt) {
      const auto [begin, end] = static_range(blocks, t, nt);
      for (int64_t nb = begin; nb < end; nb++)  // K's padding
        std::memset(dst + nb * Kp * 16 + pair_rows * 32, 0, sizeof(uint16_t) * (Kp / 2 - pair_rows) * 32);
      for (int64_t nb0 = begin; nb0 < end; nb0 += kPairBlocks) {
        const int64_t nblk = std::min(kPairBlocks, end - nb0);
        if (vec) {
          pair_blocks_avx(dst + nb0 * Kp * 16, Kp * 16, B, ldb, K, nb0 * 16, N, nblk);
        } else {
          for (int64_t nb = nb0; nb < nb0 + nblk; nb++)
            pair_block(dst + nb * Kp * 16, B + nb * 16, ldb, K, std::min<int64_t>(16, N - nb * 16), false);
        }
      }
    });
    return;
  }
  parallel_for(blocks, K * N >= (1 << 16), [&](int64_t nb) {
    uint16_t* blk = dst + nb * Kp * 16;
    const int64_t n0 = nb * 16, nn = std::min<int64_t>(16, N - n0);
    std::memset(blk + pair_rows * 32, 0, sizeof(uint16_t) * (Kp / 2 - pair_rows) * 32);  // K's padding
    // B[n][k]: 16 columns' runs of 32 k rounded into rows of 16 pairs, then transposed. The next
    // block's 16 rows are prefetched first (rows a stride apart, as an attention head's keys).
    for (int64_t j = 0; j < std::min<int64_t>(16, N - n0 - 16); j++) prefetch_run(B + (n0 + 16 + j) * ldb, K);
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


uint16_t to_bf16(float x) { return detail::round_bf16(x); }

float from_bf16(uint16_t b) {
  const uint32_t u = uint32_t{b} << 16;
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
}

}  // namespace atto::kernels
