// atto/kernels/bf16_impl.h: what the kernel files share of bf16 (internal to src/kernels):
// fp32 -> bf16 rounding, inline and branch-free so that loops of it vectorise (kernels::to_bf16
// is this), and its AVX512_BF16 form; the AMX tile configuration; the packing of GEMM operands
// (bf16_pack.cpp); the linear layers' bf16 paths that gemm.cpp's linear functions take under a
// BF16 PrecisionScope; and the small one-thread products attention's bf16 tiles run on
// (bf16_tiles.cpp).
#pragma once

#include "kernels/isa.h"
#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include <cstdint>
#include <cstring>

#include "kernels/prefetch.h"

#if defined(__x86_64__)
// Functions with these attributes run only after bf16_backend() has found the instructions: the
// rest of the binary is built for whatever -march the build chose.
#define ATTO_BF16_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
#define ATTO_AMX_TARGET __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16,amx-tile,amx-bf16")))
#else  // no bf16 kernels off x86-64 (bf16_backend() is None): the vector forms are never called
#define ATTO_BF16_TARGET
#define ATTO_AMX_TARGET
#endif

namespace ATTO_KERNELS_NS::detail {

// Round to nearest, ties to even; NaN stays a (quiet) NaN; zero and denormals become a zero of
// their sign (the bf16 units read denormals as zero); overflow rounds to infinity.
inline uint16_t round_bf16(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
  const uint32_t nan = (u >> 16) | 0x40u, zero = (u >> 16) & 0x8000u;
  uint32_t out = (u & 0x7fffffffu) > 0x7f800000u ? nan : rounded;
  out = (u & 0x7f800000u) == 0 ? zero : out;
  return static_cast<uint16_t>(out);
}

// dst[i] = round_bf16(src[i]) for i < n.
inline void round_bf16_row(uint16_t* dst, const float* src, int64_t n) {
  for (int64_t i = 0; i < n; i++) dst[i] = round_bf16(src[i]);
}

// ---- Shared by the bf16 kernel files (gemm_bf16.cpp, bf16_tiles.cpp) ---------------------
// (x86-64 only: elsewhere there are no bf16 kernels, and bf16_absent.cpp stands in for them.)
#if defined(__x86_64__)

// dst[i] = round(src[i]), i < n.
ATTO_BF16_TARGET inline void round_row_avx(uint16_t* dst, const float* src, int64_t n) {
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m512bh v = _mm512_cvtne2ps_pbh(_mm512_loadu_ps(src + i + 16), _mm512_loadu_ps(src + i));
    _mm512_storeu_si512(dst + i, (__m512i)v);
  }
  for (; i < n; i += 16) {
    const __mmask16 m = static_cast<__mmask16>(n - i >= 16 ? 0xffff : (1u << (n - i)) - 1u);
    const __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(m, src + i));
    _mm256_mask_storeu_epi16(dst + i, m, (__m256i)v);
  }
}

// Two rows a and b of 16 floats rounded (vcvtne2ps2bf16) and interleaved (a0, b0, a1, b1, ...):
// one row of 16 pairs of pack_bf16's layout. Every pairing of rows goes through this.
ATTO_BF16_TARGET inline __m512i pair_rows_avx(__m512 a, __m512 b) {
  const __m512i interleave = _mm512_set_epi16(31, 15, 30, 14, 29, 13, 28, 12, 27, 11, 26, 10, 25, 9, 24, 8, 23, 7, 22,
                                              6, 21, 5, 20, 4, 19, 3, 18, 2, 17, 1, 16, 0);
  return _mm512_permutexvar_epi16(interleave, (__m512i)_mm512_cvtne2ps_pbh(b, a));  // a in lanes 0-15, b in 16-31
}

// AMX: every tile 16 rows of 64 bytes (16 fp32, or 16 pairs of bf16).
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

ATTO_AMX_TARGET inline void amx_configure() {
  TileConfig cfg;
  for (int t = 0; t < 8; t++) {
    cfg.colsb[t] = 64;  // 16 fp32, or 32 bf16 (16 pairs)
    cfg.rows[t] = 16;
  }
  // GCC 12 may drop the stores above where this is inlined (it does not see ldtilecfg read
  // them); the barrier keeps them.
  asm volatile("" : : "r"(&cfg) : "memory");
  _tile_loadconfig(&cfg);
}

ATTO_AMX_TARGET inline void amx_release() { _tile_release(); }
#else
[[noreturn]] inline void no_bf16_vector_form() { __builtin_trap(); }
inline void round_row_avx(uint16_t*, const float*, int64_t) { no_bf16_vector_form(); }
#endif

// Whether the calling thread's GEMMs run in bf16 (a BF16 PrecisionScope).
bool bf16_active();
// out = op + (residual or 0) + (bias or 0), op = inp[N, C] @ weight[OC, C]^T in bf16, the
// weight packed from the scope's weight cache when there is one.
void linear_forward_bf16(float* out, const float* residual, const float* inp, const float* weight, const float* bias,
                         int64_t N, int64_t C, int64_t OC);
// ---- Packing (bf16_pack.cpp) ---------------------------------------------------------------
// op(A) rows [0, M) rounded to bf16 into dst [Mp, Kp] (op(A) = A [M, K], or A^T where A is
// [K, M] with transA); padding rows and columns zero. Row-major, or with `tiled` in AMX tiles:
// tile (m / 16, k / 32), 16 x 32 bf16 in a row (1 KiB), at (m / 16) * 16 * Kp + (k / 32) * 512,
// so that a tile load reads 1 KiB in a row instead of 16 lines a row of A apart.
void pack_a_bf16(uint16_t* dst, bool transA, int64_t M, int64_t K, int64_t Mp, int64_t Kp, const float* A, int64_t lda,
                 bool tiled);
// A linear layer's dout [N, OC] for both backward products and the bias in one pass (each used
// to read it once): `rows` [Np, OCp] as op(A) of dinp = dout W (pack_a_bf16 of dout, tiled with
// rows_tiled), `cols` [OCq, Kn] as op(A) of dweight = dout^T inp (with cols_tiled pack_a_bf16's
// AMX tiles of dout^T; otherwise in pairs: blocks of 8 columns of dout, in each the 8 pairs of
// each two rows side by side, no transpose), dbias[c] += sum_n dout[n, c] (rows summed in order
// from zero, as bias_add_backward). Any of the three may be null; the bits of each are those of the separate
// passes. With `scale` (the layout of dout) the gradient taken is dout * scale (GELU's slope:
// gelu_erf_backward_slope's product, never stored). Needs AVX512_BF16 (bf16_backend() not None).
void pack_dout_bf16(uint16_t* rows, int64_t OCp, int64_t Np, bool rows_tiled, uint16_t* cols, int64_t Kn,
                    int64_t OCq, bool cols_tiled, float* dbias, const float* dout, const float* scale, int64_t N,
                    int64_t OC);

// linear_backward in bf16: its GEMMs (beta 0 overwrites, 1 accumulates) and dbias += dout's
// column sums (the bits of bias_add_backward), any of dinp, dweight, dbias null. With
// dout_scale, of dout * dout_scale (linear_gelu_backward: GELU's slope), which is never stored.
void linear_backward_bf16(float* dinp, float beta_inp, float* dweight, float beta_weight, float* dbias,
                          const float* dout, const float* inp, const float* weight, int64_t N, int64_t C, int64_t OC,
                          const float* dout_scale = nullptr);

// ---- Small products on packed operands, one thread (attention's bf16 tiles) -------------------
// dst[r * ldd + c] = round_bf16(src[r * lds + c]) for r < rows, c < cols; zeros in columns
// [cols, cols_pad) and rows [rows, rows_pad). The vector path where the CPU has AVX512_BF16.
void round_rows_bf16(uint16_t* dst, int64_t ldd, const float* src, int64_t lds, int64_t rows, int64_t cols,
                     int64_t rows_pad, int64_t cols_pad);
// src [rows, cols] (row stride lds; rows even, cols a multiple of 16) rounded to bf16 into
// `pairs` in pack_bf16's layout for K = rows, N = cols (blocks of 16 columns, blk_stride elements
// apart: rows * 16 for a buffer of these rows alone; in each, a row of 16 pairs per two rows of
// src) and, when rows_out is set, as rows (row stride ldr): attention's P and dS as the B of sums
// over query rows, dS also as the A of dQ, in one pass over them.
void pack_row_pairs_bf16(uint16_t* pairs, int64_t blk_stride, uint16_t* rows_out, int64_t ldr, const float* src,
                         int64_t lds, int64_t rows, int64_t cols);
// Small products on the calling thread: C[M, N] = (C if accumulate, else 0) + A[M, K] B[K, N].
// A: bf16 rows (row stride lda elements). B: pack_bf16's layout from its first block: 16-column
// blocks ldb elements apart, in each a row of 16 pairs per two k (B may start at a later k0:
// block + k0 / 2 * 32). C: fp32, row stride ldc. M and N multiples of 16, K of 32. Every element
// is one chain over K in a fixed order. Under AMX the object holds the thread's tile
// configuration while it lives: one per thread around a run of products.
class TileProducts {
 public:
  TileProducts();  // the backend bf16_backend() names (not None)
  ~TileProducts();
  TileProducts(const TileProducts&) = delete;
  TileProducts& operator=(const TileProducts&) = delete;
  void operator()(int64_t M, int64_t N, int64_t K, const uint16_t* A, int64_t lda, const uint16_t* B, int64_t ldb,
                  float* C, int64_t ldc, bool accumulate) const;

 private:
  bool amx_;
};

}  // namespace atto::kernels::detail
