// atto/kernels/quant_impl.h: what the integer kernels' files share (quant.cpp: the entry points,
// the activations; quant_q4_q8.cpp: q4_0, q8_0 and U8M; quant_q4k_q5k.cpp: Q4_K and Q5_K;
// quant_q6k.cpp: Q6_K).
// Internal to src/kernels.
#pragma once

#include <cstdint>
#include <cstring>
#include <vector>

#include "kernels/kernels.h"

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#define QINLINE inline __attribute__((always_inline))

// The VNNI forms each level holds: AVX512_VNNI's vpdpbusd in AVX-512 objects, AVX-VNNI's (its VEX
// form: Alder Lake, Zen 5) in AVX2 ones (a CPU with both runs the avx512 level).
#if defined(__AVX2__)
#if defined(__AVX512F__) && defined(__AVX512VL__)
#define ATTO_QUANT_AVX512VNNI 1
#define ATTO_QUANT_AVXVNNI 0
#else
#define ATTO_QUANT_AVX512VNNI 0
#define ATTO_QUANT_AVXVNNI 1
#endif
#endif

// A region of functions compiled for an extra target (GCC inlines vpdpbusd only into code compiled
// for it: a pragma's region; clang has no GCC target pragma, and takes an attribute on each
// function of the region).
#define ATTO_QUANT_PRAGMA(x) _Pragma(#x)
#if defined(__clang__)
#define ATTO_QUANT_TARGET_PUSH(t) \
  ATTO_QUANT_PRAGMA(clang attribute push(__attribute__((target(t))), apply_to = function))
#define ATTO_QUANT_TARGET_POP ATTO_QUANT_PRAGMA(clang attribute pop)
#else
#define ATTO_QUANT_TARGET_PUSH(t) ATTO_QUANT_PRAGMA(GCC push_options) ATTO_QUANT_PRAGMA(GCC target(t))
#define ATTO_QUANT_TARGET_POP ATTO_QUANT_PRAGMA(GCC pop_options)
#endif

namespace ATTO_KERNELS_NS::quant_detail {

constexpr int64_t kQK = 32;  // values a block

// One activation block: the f32 scale, -8 * the sum of q (q4_0's offset), the 32 int8 values in
// [-127, 127].
struct ActBlock {
  float d;
  int32_t nsum8;
  int8_t q[kQK];
};

// The integer dot products (quant.cpp chooses one per call).
enum class DotKind { Scalar, Neon, Avx2, AvxVnni, Avx512Vnni };

// An IEEE binary16 at p (little-endian) as float: exact (F16C's vcvtph2ps where the level has it).
QINLINE float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
#if defined(__F16C__)
  return _cvtsh_ss(h);
#else
  const uint32_t sign = (uint32_t{h} & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  if (e == 0) {  // zero or subnormal: m * 2^-24, exact
    const float v = static_cast<float>(m) * 0x1p-24f;
    return sign != 0 ? -v : v;
  }
  const uint32_t x = sign | (e == 31 ? 0x7f800000u | (m << 13) : ((e + 112) << 23) | (m << 13));
  float f;
  std::memcpy(&f, &x, 4);
  return f;
#endif
}

// The 4 bytes at p as one int32 (to broadcast to every dword).
QINLINE int32_t ldq4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// The types of blocks of 32 values (quant_q4_q8.cpp): q4_0, q8_0, U8M and Q8F.
enum B32 : int { kB32Q4 = 0, kB32Q8 = 1, kB32U8M = 2, kB32Q8F = 3 };
// The reference chain of one output of such a type (quant.h's order of blocks of 32): activation
// row xa (nb blocks) against weight row w.
float b32_dot_ref(B32 t, const ActBlock* xa, const uint8_t* w, int64_t nb);
// Their outputs y[m * N + n] (+ bias[n]) for every row m < M and columns [n0, n1) with dot k, on W
// in ggml's rows or (packed) quant.h's Lanes16 (quant_q4_q8.cpp).
void b32_columns(DotKind k, B32 t, bool packed, float* y, const ActBlock* xa, const uint8_t* w, const float* bias,
                 int64_t M, int64_t N, int64_t nb, int64_t n0, int64_t n1);

// Q4_K's and (q5) Q5_K's (quant.h's Q4_K order; quant_q4k_q5k.cpp): the reference chain of one
// output (nb activation blocks, nb / 8 super-blocks), the outputs of columns [n0, n1) with dot k,
// and one row of K values decoded as io's decoder does (the same bits).
float k45_dot_ref(bool q5, const ActBlock* xa, const uint8_t* w, int64_t nb);
void k45_columns(DotKind k, bool q5, bool packed, float* y, const ActBlock* xa, const uint8_t* w, const float* bias,
                 int64_t M, int64_t N, int64_t nb, int64_t n0, int64_t n1);
void k45_dequantize_row(bool q5, float* out, const uint8_t* row, int64_t K);
// Q6_K's (quant.h's Q6_K order; quant_q6k.cpp): the same three (q6k_columns on W in ggml's rows or,
// packed, in quant.h's Lanes16 layout; xs32 the activations' q6k_half_sums, formed once a product).
float q6k_dot_ref(const ActBlock* xa, const uint8_t* w, int64_t nb);
void q6k_columns(DotKind k, bool packed, float* y, const ActBlock* xa, const int32_t* xs32, const uint8_t* w,
                 const float* bias, int64_t M, int64_t N, int64_t nb, int64_t n0, int64_t n1);
// 32 * sum(x) over each half (16 values) of the n activation blocks: entry 2b + h.
std::vector<int32_t> q6k_half_sums(const ActBlock* xa, int64_t n);
void q6k_dequantize_row(float* out, const uint8_t* row, int64_t K);

// A block format as quant.h's Lanes16 regroups it: `bytes` a block of `values` values, of which
// the first `lead` (q4_0's d; U8M's d and m) go after the dwords, as do the bytes past the last
// whole dword (Q6_K's d), in 2-byte fields, field by field (the 16 columns' d, then their m).
// q4_0 {18, 2, 32}, q8_0 {34, 2, 32}, U8M {36, 4, 32}, Q8F {36, 0, 32}, Q4_K {144, 0, 256}, Q5_K {176, 0, 256}, Q6_K
// {210, 0, 256}.
struct LaneBlock {
  int64_t bytes, lead, values;
};
// N rows of K values packed, and row n of such a packing unpacked (quant.cpp).
void lanes16_pack(uint8_t* out, const uint8_t* rows, LaneBlock f, int64_t N, int64_t K);
void lanes16_unpack_row(uint8_t* row, const uint8_t* w, LaneBlock f, int64_t N, int64_t K, int64_t n);

#if defined(__AVX2__)
// What the column-a-lane kernels (q8_0, q4_0, Q4_K, Q5_K, Q6_K) share.
// 4x4 dwords transposed within each 128-bit lane: t[g] lane i = z[i] lane g.
#define ATTO_Q4_TRANSPOSE(V, sfx, z, t)                                                       \
  do {                                                                                        \
    const V a0 = _mm##sfx##_unpacklo_epi32(z[0], z[1]), a1 = _mm##sfx##_unpackhi_epi32(z[0], z[1]); \
    const V a2 = _mm##sfx##_unpacklo_epi32(z[2], z[3]), a3 = _mm##sfx##_unpackhi_epi32(z[2], z[3]); \
    t[0] = _mm##sfx##_unpacklo_epi64(a0, a2), t[1] = _mm##sfx##_unpackhi_epi64(a0, a2);      \
    t[2] = _mm##sfx##_unpacklo_epi64(a1, a3), t[3] = _mm##sfx##_unpackhi_epi64(a1, a3);      \
  } while (0)

QINLINE __m128i load16(const uint8_t* p) { return _mm_loadu_si128(reinterpret_cast<const __m128i*>(p)); }

// One row of a tile's outputs: cols of them, + bias where given.
QINLINE void store_row(float* y, const float* acc, const float* bias, int cols) {
  for (int c = 0; c < cols; c++) {
    float v = acc[c];
    if (bias != nullptr) v += bias[c];  // (not + 0: that would turn -0 into +0)
    y[c] = v;
  }
}
#endif

// y[m * N + n] = dot(activation row m, weight row n) (+ bias[n]) for the columns [n0, n1), one
// dot product at a time: the path of the CPUs without a vector form of the type (the scalar
// reference; NEON on ARM64). dot(x, w) takes the rows' first block and weight byte.
template <class Dot>
inline void columns_one_by_one(float* y, const ActBlock* xa, const uint8_t* w, const float* bias, int64_t M, int64_t N,
                               int64_t nb, int64_t row_bytes, int64_t n0, int64_t n1, const Dot& dot) {
  for (int64_t n = n0; n < n1; n++)
    for (int64_t m = 0; m < M; m++) {
      float v = dot(xa + m * nb, w + n * row_bytes);
      if (bias != nullptr) v += bias[n];
      y[m * N + n] = v;
    }
}

// The same on a Lanes16 packing of blocks f: each column's row unpacked first (the scalar
// reference's and NEON's way to read a packing).
template <class Dot>
inline void packed_columns_one_by_one(float* y, const ActBlock* xa, const uint8_t* w, LaneBlock f, const float* bias,
                                      int64_t M, int64_t N, int64_t nb, int64_t n0, int64_t n1, const Dot& dot) {
  const int64_t rb = nb * kQK / f.values * f.bytes;
  std::vector<uint8_t> row(static_cast<size_t>(rb));
  for (int64_t n = n0; n < n1; n++) {
    lanes16_unpack_row(row.data(), w, f, N, nb * kQK, n);
    columns_one_by_one(y + n, xa, row.data(), bias != nullptr ? bias + n : nullptr, M, N, nb, rb, 0, 1, dot);
  }
}

}  // namespace ATTO_KERNELS_NS::quant_detail
