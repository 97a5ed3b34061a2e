// atto/kernels/bf16_tiles.cpp: small bf16 products on one thread, for attention's tiles
// (detail::TileProducts, detail::round_rows_bf16 in bf16_impl.h).
//
//   const detail::TileProducts mm;        // per thread; holds the AMX tile configuration
//   mm(M, N, K, A, lda, B, ldb, C, ldc, accumulate);
//
// AMX: C in blocks of up to 2 x 2 tiles (32 x 32), A tiles 4-5, B tiles 6-7. AVX512_BF16: 4 rows
// x up to 4 vectors of C per block, one 32-bit broadcast of a row's pair of k and one vdpbf16ps
// per vector. Either way each C element is one chain over K in order.
#if defined(__x86_64__)  // the bf16 kernels are x86-64 only; elsewhere bf16_absent.cpp stands in
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/bf16_impl.h"
#include "kernels/kernels.h"

namespace ATTO_KERNELS_NS {

namespace {

// C[16 TM, 16 TN] (+)= A B on tiles 0-3 (C), 4-5 (A), 6-7 (B); TM, TN = 1 or 2.
template <int TM, int TN>
ATTO_AMX_TARGET void amx_tile_block(int64_t K, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb,
                                    float* C, int64_t ldc, bool accumulate) {
  const int64_t astride = lda * 2, cstride = ldc * 4;
  if (accumulate) {
    _tile_loadd(0, C, cstride);
    if (TN == 2) _tile_loadd(1, C + 16, cstride);
    if (TM == 2) _tile_loadd(2, C + 16 * ldc, cstride);
    if (TM == 2 && TN == 2) _tile_loadd(3, C + 16 * ldc + 16, cstride);
  } else {
    _tile_zero(0);
    if (TN == 2) _tile_zero(1);
    if (TM == 2) _tile_zero(2);
    if (TM == 2 && TN == 2) _tile_zero(3);
  }
  for (int64_t k = 0; k < K; k += 32) {
    _tile_loadd(4, A + k, astride);
    _tile_loadd(6, B + k * 16, 64);
    if (TN == 2) _tile_loadd(7, B + ldb + k * 16, 64);
    _tile_dpbf16ps(0, 4, 6);
    if (TN == 2) _tile_dpbf16ps(1, 4, 7);
    if (TM == 2) {
      _tile_loadd(5, A + 16 * lda + k, astride);
      _tile_dpbf16ps(2, 5, 6);
      if (TN == 2) _tile_dpbf16ps(3, 5, 7);
    }
  }
  _tile_stored(0, C, cstride);
  if (TN == 2) _tile_stored(1, C + 16, cstride);
  if (TM == 2) _tile_stored(2, C + 16 * ldc, cstride);
  if (TM == 2 && TN == 2) _tile_stored(3, C + 16 * ldc + 16, cstride);
}

ATTO_AMX_TARGET void amx_tile_product(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda,
                                      const uint16_t* B, int64_t ldb, float* C, int64_t ldc, bool accumulate) {
  for (int64_t n0 = 0; n0 < N; n0 += 32) {
    const bool wide = N - n0 >= 32;
    const uint16_t* b = B + (n0 / 16) * ldb;
    for (int64_t m0 = 0; m0 < M; m0 += 32) {
      const uint16_t* a = A + m0 * lda;
      float* c = C + m0 * ldc + n0;
      if (M - m0 >= 32) {
        if (wide) {
          amx_tile_block<2, 2>(K, a, lda, b, ldb, c, ldc, accumulate);
        } else {
          amx_tile_block<2, 1>(K, a, lda, b, ldb, c, ldc, accumulate);
        }
      } else if (wide) {
        amx_tile_block<1, 2>(K, a, lda, b, ldb, c, ldc, accumulate);
      } else {
        amx_tile_block<1, 1>(K, a, lda, b, ldb, c, ldc, accumulate);
      }
    }
  }
}

// 4 rows x NV vectors of C per block; per pair of k one 32-bit broadcast of each row's pair and
// one vdpbf16ps per vector, in k order (as avx_block).
template <int NV>
ATTO_BF16_TARGET void avx_tile_rows(int64_t K, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb,
                                    float* C, int64_t ldc, bool accumulate) {
  __m512 c[4][NV];
  for (int i = 0; i < 4; i++)
    for (int v = 0; v < NV; v++) c[i][v] = accumulate ? _mm512_loadu_ps(C + i * ldc + v * 16) : _mm512_setzero_ps();
  for (int64_t r = 0; r < K / 2; r++) {
    __m512bh b[NV];
    for (int v = 0; v < NV; v++) b[v] = (__m512bh)_mm512_loadu_si512(B + v * ldb + r * 32);
    for (int i = 0; i < 4; i++) {
      int32_t pair;
      std::memcpy(&pair, A + i * lda + 2 * r, sizeof(pair));
      const __m512bh a = (__m512bh)_mm512_set1_epi32(pair);
      for (int v = 0; v < NV; v++) c[i][v] = _mm512_dpbf16_ps(c[i][v], a, b[v]);
    }
  }
  for (int i = 0; i < 4; i++)
    for (int v = 0; v < NV; v++) _mm512_storeu_ps(C + i * ldc + v * 16, c[i][v]);
}

void avx_tile_product(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb,
                      float* C, int64_t ldc, bool accumulate) {
  for (int64_t n0 = 0; n0 < N; n0 += 64) {
    const uint16_t* b = B + (n0 / 16) * ldb;
    const int64_t nv = std::min<int64_t>(4, (N - n0) / 16);
    for (int64_t m0 = 0; m0 < M; m0 += 4) {
      const uint16_t* a = A + m0 * lda;
      float* c = C + m0 * ldc + n0;
      switch (nv) {
        case 4: avx_tile_rows<4>(K, a, lda, b, ldb, c, ldc, accumulate); break;
        case 3: avx_tile_rows<3>(K, a, lda, b, ldb, c, ldc, accumulate); break;
        case 2: avx_tile_rows<2>(K, a, lda, b, ldb, c, ldc, accumulate); break;
        default: avx_tile_rows<1>(K, a, lda, b, ldb, c, ldc, accumulate); break;
      }
    }
  }
}

// pack_row_pairs_bf16's vector form: per pair of rows and 16 columns, pack_bf16's pairing
// (pair_rows_avx), and the rows rounded as they are when asked for.
ATTO_BF16_TARGET void pack_row_pairs_avx(uint16_t* pairs, int64_t blk_stride, uint16_t* rows_out, int64_t ldr,
                                         const float* src, int64_t lds, int64_t rows, int64_t cols) {
  for (int64_t i = 0; i < rows; i += 2) {
    for (int64_t j = 0; j < cols; j += 16) {
      const __m512 a = _mm512_loadu_ps(src + i * lds + j), b = _mm512_loadu_ps(src + (i + 1) * lds + j);
      _mm512_storeu_si512(pairs + (j / 16) * blk_stride + (i / 2) * 32, detail::pair_rows_avx(a, b));
      if (rows_out != nullptr) {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(rows_out + i * ldr + j), (__m256i)_mm512_cvtneps_pbh(a));
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(rows_out + (i + 1) * ldr + j), (__m256i)_mm512_cvtneps_pbh(b));
      }
    }
  }
}

}  // namespace

namespace detail {

void pack_row_pairs_bf16(uint16_t* pairs, int64_t blk_stride, uint16_t* rows_out, int64_t ldr, const float* src,
                         int64_t lds, int64_t rows, int64_t cols) {
  if (bf16_backend() != Bf16Backend::None) {
    pack_row_pairs_avx(pairs, blk_stride, rows_out, ldr, src, lds, rows, cols);
    return;
  }
  for (int64_t i = 0; i < rows; i++)
    for (int64_t j = 0; j < cols; j++) {
      const uint16_t v = round_bf16(src[i * lds + j]);
      pairs[(j / 16) * blk_stride + (i / 2) * 32 + (j % 16) * 2 + i % 2] = v;
      if (rows_out != nullptr) rows_out[i * ldr + j] = v;
    }
}

void round_rows_bf16(uint16_t* dst, int64_t ldd, const float* src, int64_t lds, int64_t rows, int64_t cols,
                     int64_t rows_pad, int64_t cols_pad) {
  const bool vec = bf16_backend() != Bf16Backend::None;  // vcvtne2ps2bf16 rounds as round_bf16
  for (int64_t r = 0; r < rows; r++) {
    uint16_t* d = dst + r * ldd;
    if (r + kPrefetchRows < rows) prefetch_run(src + (r + kPrefetchRows) * lds, cols);
    if (vec) {
      round_row_avx(d, src + r * lds, cols);
    } else {
      round_bf16_row(d, src + r * lds, cols);
    }
    std::fill(d + cols, d + cols_pad, uint16_t{0});
  }
  for (int64_t r = rows; r < rows_pad; r++) std::fill(dst + r * ldd, dst + r * ldd + cols_pad, uint16_t{0});
}

TileProducts::TileProducts() : amx_(bf16_backend() == Bf16Backend::Amx) {
  if (bf16_backend() == Bf16Backend::None) require_bf16("bf16 attention");
  if (amx_) amx_configure();
}
TileProducts::~TileProducts() {
  if (amx_) amx_release();
}

void TileProducts::operator()(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda, const uint16_t* B,
                              int64_t ldb, float* C, int64_t ldc, bool accumulate) const {
  if (amx_) {
    amx_tile_product(M, N, K, A, lda, B, ldb, C, ldc, accumulate);
  } else {
    avx_tile_product(M, N, K, A, lda, B, ldb, C, ldc, accumulate);
  }
}

}  // namespace detail

}  // namespace atto::kernels
#endif  // __x86_64__
