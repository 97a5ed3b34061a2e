// atto/io/ggml_quants_impl.h: what ggml_quants.cpp (f16, q8_0, q4_0, Q4_K, Q6_K) and
// ggml_quants_q5.cpp (q4_1, q5_0, q5_1, Q5_K, Q2_K, Q3_K, bf16) share: half-precision loads and
// stores, ggml's nearest_int, the K-quants' 6-bit scales and their least-squares fit. Internal to
// src/io.
#pragma once

#include <cstdint>
#include <cstring>

#include "io/ggml_quants.h"

// ggml's reference quantizers round after every multiplication and addition as C says (clang,
// and GCC on the ARM and x86 builds of ggml-quants.c whose results are the reference). GCC would
// otherwise fuse a product into the next addition (x / d + 8.5 as one FMA), and a value on a
// rounding boundary would get the neighbouring quant. (In each file that includes this header.)
#if defined(__clang__)
#pragma clang fp contract(off)
#elif defined(__GNUC__)
#pragma GCC optimize("fp-contract=off")
#endif

namespace atto::io::quant_detail {

inline constexpr uint64_t kQ6KBytes = 210;  // a Q6_K super-block of 256 values

inline float half_at(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_f32(h);
}

inline void put_half(uint8_t* p, float v) {
  const uint16_t h = f32_to_f16(v);
  std::memcpy(p, &h, 2);
}

// ggml's nearest_int: v rounded to the nearest integer (ties to even) by adding 1.5 * 2^23 and
// reading the float's mantissa; |v| <= 2^22.
inline int nearest_int(float v) {
  const float big = v + 12582912.0f;
  int32_t i;
  std::memcpy(&i, &big, 4);
  return (i & 0x007fffff) - 0x00400000;
}

// Q4_K's and Q5_K's eight 6-bit scales and mins in 12 bytes, as ggml's get_scale_min_k4:
// sub-blocks 0-3 in the low 6 bits of bytes 0-3 (scales) and 4-7 (mins); sub-blocks 4-7 in the
// nibbles of bytes 8-11 with their top 2 bits in the top bits of bytes 0-3 (scales) and 4-7 (mins).
void scale_min_k4(int j, const uint8_t* q, uint8_t& sc, uint8_t& m);

// The first half of ggml's quantize_row_q4_K_ref (nmax 15, rmin -1, 20 steps) and
// quantize_row_q5_K_ref (nmax 31, rmin -0.5, 15 steps): each sub-block of 32 of the super-block x
// fitted as scale * L - min by make_qkx2_quants, the eight scales and mins written as 6-bit
// numbers (scale_min_k4's layout) at blk + 4 over the f16 d (blk) and dmin (blk + 2).
void k_scales(const float* x, uint8_t* blk, uint8_t* L, int nmax, float rmin, int nstep);
// The quants again against the rounded scales (the second half of both): L = clamp(nearest((x +
// dmin * m) / (d * sc)), 0, nmax); a sub-block whose d * sc is 0 keeps k_scales' quants.
void k_requant(const float* x, const uint8_t* blk, uint8_t* L, int nmax);

// Q6_K's quants: the 256 values L (0..63, each the quant + 32) written as ggml's
// quantize_row_q6_K_ref lays them out, low nibbles in blk[0, 128), top bit pairs in blk[128, 192).
void q6_k_quants(const int8_t* L, uint8_t* blk);

}  // namespace atto::io::quant_detail
