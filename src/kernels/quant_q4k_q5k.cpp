// atto/kernels/quant_q4k_q5k.cpp: the linear layer's Q4_K and Q5_K outputs in quant.h's order:
// per output one float chain, two FMAs a sub-block of 32 (activation block b = 8s + j):
// acc = fma((d * sc_b) * dx_b, float(P_b), acc), acc = fma(-((dmin * m_b) * dx_b), float(S_b), acc),
// P_b = sum u * x_int (exact int32: vpdpbusd's u8 x s8 as it is), S_b = sum x_int; u the nibble
// (Q4_K) or the nibble plus 16 times its bit of qh (Q5_K: bit j of byte i for value i of
// sub-block j). The two types differ only there and in their bytes (144 and 176 a super-block).
// As quant_q4_q8.cpp's q4_0, x86 computes 16 (zmm) or 8 (ymm) columns at once, one a lane: the
// 32 bytes of nibbles that sub-blocks 2p and 2p + 1 share (values 64p + i: low nibble of byte i;
// 64p + 32 + i: its high one) are laid out [g = 0..7][column][4 bytes qs[32p + 4g..+3]], and each
// sub-block takes the low or high nibbles of those 8 vectors (Q5_K: with the fifth bits of the 8
// vectors of qh[4g..+3], shifted to bit 4). A super-block's 8 x 2 scale products (d * sc_b and
// dmin * m_b: exact, 17 bits) are formed once for the columns.
// Decoding (M <= the rows of a tile) builds them from the rows as it goes; prompts lay a column
// group out once for all row tiles (a scratch of K/256 * 48 vectors a thread: the nibble bytes and
// the scale products; Q5_K 80: its 5-bit values joined once, 1.15x its prompts' speed on Zen 4).
#if !defined(ATTO_Q4K_CHAIN)
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/quant_impl.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace ATTO_KERNELS_NS::quant_detail {
namespace {

// Bytes a super-block: d, dmin, 12 bytes of scales, (Q5_K: 32 of fifth bits,) 128 of nibbles.
constexpr int64_t kSb4 = 144, kSb5 = 176;
constexpr int64_t sb_bytes(bool q5) { return q5 ? kSb5 : kSb4; }

// The 12 scale bytes as 4 words of 4 six-bit values (ggml's get_scale_min_k4): u[0] the scales
// of sub-blocks 0-3, u[1] those of 4-7, u[2] the mins of 0-3, u[3] those of 4-7 (byte j % 4).
QINLINE void scale_words(uint32_t* u, const uint8_t* sc12) {
  uint32_t a[3];
  std::memcpy(a, sc12, 12);
  u[0] = a[0] & 0x3f3f3f3fu;
  u[1] = (a[2] & 0x0f0f0f0fu) | ((a[0] >> 2) & 0x30303030u);
  u[2] = a[1] & 0x3f3f3f3fu;
  u[3] = ((a[2] >> 4) & 0x0f0f0f0fu) | ((a[1] >> 2) & 0x30303030u);
}
QINLINE int six_bits(const uint32_t* u, int w, int j) {
  return static_cast<int>((u[w + j / 4] >> (8 * (j % 4))) & 0xffu);
}

// S_b: the activation block's sum, from -8 * sum (exact).
QINLINE float act_sum(const ActBlock& a) { return static_cast<float>(-(a.nsum8 / 8)); }

// One sub-block's two steps of the chain (dsc = d * sc_b, dmn = dmin * m_b).
QINLINE float step(float acc, float dsc, float dmn, const ActBlock& a, int32_t p) {
  acc = std::fma(dsc * a.d, static_cast<float>(p), acc);
  return std::fma(-(dmn * a.d), act_sum(a), acc);
}

// Value i of sub-block j of super-block blk: its nibble (Q5_K: plus 16 for its bit of qh).
QINLINE int k_value(bool q5, const uint8_t* blk, int j, int i) {
  const uint8_t b = blk[(q5 ? 48 : 16) + 32 * (j / 2) + i];
  const int nib = j % 2 != 0 ? b >> 4 : b & 0x0F;
  return q5 ? nib | (((blk[16 + i] >> j) & 1) << 4) : nib;
}

// P_b: sub-block j's values times q, exact.
int32_t sub_dot_ref(bool q5, const uint8_t* blk, int j, const int8_t* q) {
  int32_t p = 0;
  for (int i = 0; i < 32; i++) p += int32_t{k_value(q5, blk, j, i)} * q[i];
  return p;
}

#if defined(__aarch64__)
// The same chain, P_b on NEON: 16-bit products (value * x: at most 31 * 127 = 3937, four a lane:
// 15748), then across.
float dot_neon(bool q5, const ActBlock* xa, const uint8_t* w, int64_t nb) {
  float acc = 0.0f;
  for (int64_t s = 0; s < nb / 8; s++) {
    const uint8_t* blk = w + s * sb_bytes(q5);
    const float d = half_at(blk), dmin = half_at(blk + 2);
    uint32_t u[4];
    scale_words(u, blk + 4);
    for (int j = 0; j < 8; j++) {
      const uint8_t* qs = blk + (q5 ? 48 : 16) + 32 * (j / 2);
      uint8x16_t q0 = vld1q_u8(qs), q1 = vld1q_u8(qs + 16);
      if (j % 2 == 0)
        q0 = vandq_u8(q0, vdupq_n_u8(0x0F)), q1 = vandq_u8(q1, vdupq_n_u8(0x0F));
      else
        q0 = vshrq_n_u8(q0, 4), q1 = vshrq_n_u8(q1, 4);
      if (q5) {  // bit j of qh[i] to bit 4 of value i
        const int8x16_t to4 = vdupq_n_s8(static_cast<int8_t>(4 - j));
        const uint8x16_t bit = vdupq_n_u8(0x10);
        q0 = vorrq_u8(q0, vandq_u8(vshlq_u8(vld1q_u8(blk + 16), to4), bit));
        q1 = vorrq_u8(q1, vandq_u8(vshlq_u8(vld1q_u8(blk + 32), to4), bit));
      }
      const int8x16_t n0 = vreinterpretq_s8_u8(q0), n1 = vreinterpretq_s8_u8(q1);
      const ActBlock& a = xa[8 * s + j];
      const int8x16_t x0 = vld1q_s8(a.q), x1 = vld1q_s8(a.q + 16);
      int16x8_t p = vmull_s8(vget_low_s8(n0), vget_low_s8(x0));
      p = vmlal_high_s8(p, n0, x0);
      p = vmlal_s8(p, vget_low_s8(n1), vget_low_s8(x1));
      p = vmlal_high_s8(p, n1, x1);
      acc = step(acc, d * static_cast<float>(six_bits(u, 0, j)), dmin * static_cast<float>(six_bits(u, 2, j)), a,
                 vaddlvq_s16(p));
    }
  }
  return acc;
}
#endif

}  // namespace

float k45_dot_ref(bool q5, const ActBlock* xa, const uint8_t* w, int64_t nb) {
  float acc = 0.0f;
  for (int64_t s = 0; s < nb / 8; s++) {
    const uint8_t* blk = w + s * sb_bytes(q5);
    const float d = half_at(blk), dmin = half_at(blk + 2);
    uint32_t u[4];
    scale_words(u, blk + 4);
    for (int j = 0; j < 8; j++) {
      const ActBlock& a = xa[8 * s + j];
      const int32_t p = sub_dot_ref(q5, blk, j, a.q);
      acc = step(acc, d * static_cast<float>(six_bits(u, 0, j)), dmin * static_cast<float>(six_bits(u, 2, j)), a, p);
    }
  }
  return acc;
}

// As io's dequantize_q4_k and dequantize_q5_k: (d * sc) * value - dmin * m (both products exact,
// so one rounding, fused or not).
void k45_dequantize_row(bool q5, float* out, const uint8_t* row, int64_t K) {
  for (int64_t s = 0; s < K / 256; s++) {
    const uint8_t* blk = row + s * sb_bytes(q5);
    const float d = half_at(blk), dmin = half_at(blk + 2);
    uint32_t u[4];
    scale_words(u, blk + 4);
    for (int j = 0; j < 8; j++) {
      const float d1 = d * static_cast<float>(six_bits(u, 0, j)), m1 = dmin * static_cast<float>(six_bits(u, 2, j));
      float* o = out + s * 256 + 32 * j;
      for (int i = 0; i < 32; i++) o[i] = d1 * static_cast<float>(k_value(q5, blk, j, i)) - m1;
    }
  }
}

}  // namespace ATTO_KERNELS_NS::quant_detail

#if defined(__AVX2__)
#define ATTO_Q4K_CHAIN 1
#define ATTO_Q4K_CHAIN_NS q4k_avx2
#include "kernels/quant_q4k_q5k.cpp"  // NOLINT(build/include): 8 columns, vpmaddubsw + vpmaddwd
#undef ATTO_Q4K_CHAIN_NS
#if ATTO_QUANT_AVXVNNI
ATTO_QUANT_TARGET_PUSH("avxvnni")
#define ATTO_Q4K_CHAIN_NS q4k_avxvnni
#define ATTO_Q4K_DPBUSD(src, u, s) _mm256_dpbusd_avx_epi32(src, u, s)
#include "kernels/quant_q4k_q5k.cpp"  // NOLINT(build/include): 8 columns, VEX vpdpbusd
#undef ATTO_Q4K_DPBUSD
#undef ATTO_Q4K_CHAIN_NS
ATTO_QUANT_TARGET_POP
#endif
#if ATTO_QUANT_AVX512VNNI
ATTO_QUANT_TARGET_PUSH("avx512vnni,avx512vl")
#define ATTO_Q4K_CHAIN_NS q4k_avx512vnni
#define ATTO_Q4K_ZMM 1
#include "kernels/quant_q4k_q5k.cpp"  // NOLINT(build/include): 16 columns on zmm, vpdpbusd
#undef ATTO_Q4K_ZMM
#undef ATTO_Q4K_CHAIN_NS
ATTO_QUANT_TARGET_POP
#endif
#undef ATTO_Q4K_CHAIN
#endif  // __AVX2__

namespace ATTO_KERNELS_NS::quant_detail {

void k45_columns(DotKind k, bool q5, bool packed, float* y, const ActBlock* xa, const uint8_t* w, const float* bias,
                 int64_t M, int64_t N, int64_t nb, int64_t n0, int64_t n1) {
#if defined(__AVX2__)
  switch (k) {
#if ATTO_QUANT_AVX512VNNI
    case DotKind::Avx512Vnni:
      return (q5 ? q4k_avx512vnni::columns<true> : q4k_avx512vnni::columns<false>)(packed, y, xa, w, bias, M, N, nb,
                                                                                    n0, n1);
#endif
#if ATTO_QUANT_AVXVNNI
    case DotKind::AvxVnni:
      return (q5 ? q4k_avxvnni::columns<true> : q4k_avxvnni::columns<false>)(packed, y, xa, w, bias, M, N, nb, n0, n1);
#endif
    case DotKind::Avx2:
      return (q5 ? q4k_avx2::columns<true> : q4k_avx2::columns<false>)(packed, y, xa, w, bias, M, N, nb, n0, n1);
    default: break;
  }
#endif
  const auto dot = [k, q5, nb](const ActBlock* x, const uint8_t* r) {
#if defined(__aarch64__)
    if (k == DotKind::Neon) return dot_neon(q5, x, r, nb);
#else
    (void)k;
#endif
    return k45_dot_ref(q5, x, r, nb);
  };
  const int64_t sb = sb_bytes(q5);
  if (packed) return packed_columns_one_by_one(y, xa, w, LaneBlock{sb, 0, 256}, bias, M, N, nb, n0, n1, dot);
  columns_one_by_one(y, xa, w, bias, M, N, nb, nb / 8 * sb, n0, n1, dot);
}

}  // namespace ATTO_KERNELS_NS::quant_detail

#else  // ATTO_Q4K_CHAIN: W columns at once for one dot product, included up to three times above
namespace ATTO_KERNELS_NS::quant_detail {
namespace ATTO_Q4K_CHAIN_NS {

#if defined(ATTO_Q4K_ZMM)
// (GCC 12 flags the intrinsics' own undefined-register idiom as (maybe-)uninitialized.)
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
#define ATTO_QUANT_LANES_ZMM 1
#include "kernels/quant_lanes.h"  // NOLINT(build/include): W, VI, VF and their operations
#undef ATTO_QUANT_LANES_ZMM
QINLINE VI srl32(VI a, int n) { return _mm512_srl_epi32(a, _mm_cvtsi32_si128(n)); }
QINLINE VI sll32(VI a, int n) { return _mm512_sll_epi32(a, _mm_cvtsi32_si128(n)); }
QINLINE VI hi4(VI a) { return srl16<4>(a); }
// (src & lo) | bit in one vpternlogd (truth table 0xEC: a & c | b).
QINLINE VI nibble_or_bit(VI src, VI bit, VI lo) { return _mm512_ternarylogic_epi32(src, bit, lo, 0xEC); }
// P_b of the 16 columns (value vectors v) against activation block a.
template <bool Q5>
QINLINE VI block_ints(const VI* v, const ActBlock& a) {
  VI i0 = zeroi(), i1 = zeroi();
  for (int j = 0; j < 8; j += 2) {
    i0 = _mm512_dpbusd_epi32(i0, v[j], set1(ldq4(a.q + 4 * j)));
    i1 = _mm512_dpbusd_epi32(i1, v[j + 1], set1(ldq4(a.q + 4 * j + 4)));
  }
  return _mm512_add_epi32(i0, i1);
}
// The first 4 dwords (d and dmin, the 12 scale bytes) of the 16 super-blocks at wb + off[c], by
// 4 gathers: w[q] lane c = column c's dword q.
QINLINE void head_words(VI* w, const uint8_t* wb, const int32_t* off) {
  const VI idx = _mm512_loadu_si512(off);
  for (int q = 0; q < 4; q++) w[q] = _mm512_i32gather_epi32(idx, wb + 4 * q, 1);
}
// d and dmin of the 16 columns from their first dwords (exact).
QINLINE void halves_of(VF& d, VF& dmin, VI h) {
  d = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(h));
  dmin = _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h, 16)));
}
QINLINE VF fma_sub(VF dsc, VF dmn, const ActBlock& a, VI p, VF acc) {
  const VF dx = set1f(a.d);
  acc = _mm512_fmadd_ps(vmul(dsc, dx), cvt(p), acc);
  return _mm512_fnmadd_ps(vmul(dmn, dx), set1f(act_sum(a)), acc);  // fma(-(dmn dx), S, acc)
}
#else
#include "kernels/quant_lanes.h"  // NOLINT(build/include): W, VI, VF and their operations
QINLINE VI srl32(VI a, int n) { return _mm256_srl_epi32(a, _mm_cvtsi32_si128(n)); }
QINLINE VI sll32(VI a, int n) { return _mm256_sll_epi32(a, _mm_cvtsi32_si128(n)); }
QINLINE VI hi4(VI a) { return srl16<4>(a); }
QINLINE VI nibble_or_bit(VI src, VI bit, VI lo) { return vor(vand(src, lo), bit); }
QINLINE VF halves(const uint16_t* h) {
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
}
// P_b of the 8 columns (value vectors v) against activation block a (vpmaddubsw: an int16 lane
// sums 2 products a vector, at most 15 * 127 each for Q4_K: 30480 < 32767 over the 8 vectors;
// Q5_K's values to 31 reach 31496 over 4, so its two halves widen to int32 apart: exact).
template <bool Q5>
QINLINE VI block_ints(const VI* v, const ActBlock& a) {
#if defined(ATTO_Q4K_DPBUSD)
  VI i0 = zeroi(), i1 = zeroi();
  for (int j = 0; j < 8; j += 2) {
    i0 = ATTO_Q4K_DPBUSD(i0, v[j], set1(ldq4(a.q + 4 * j)));
    i1 = ATTO_Q4K_DPBUSD(i1, v[j + 1], set1(ldq4(a.q + 4 * j + 4)));
  }
  return _mm256_add_epi32(i0, i1);
#else
  VI s0 = _mm256_maddubs_epi16(v[0], set1(ldq4(a.q))), s1 = _mm256_maddubs_epi16(v[1], set1(ldq4(a.q + 4)));
  for (int j = 2; j < 8; j += 2) {
    s0 = _mm256_add_epi16(s0, _mm256_maddubs_epi16(v[j], set1(ldq4(a.q + 4 * j))));
    s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(v[j + 1], set1(ldq4(a.q + 4 * j + 4))));
  }
  const VI ones = _mm256_set1_epi16(1);
  if constexpr (Q5) return _mm256_add_epi32(_mm256_madd_epi16(s0, ones), _mm256_madd_epi16(s1, ones));
  return _mm256_madd_epi16(_mm256_add_epi16(s0, s1), ones);
#endif
}
// The first 4 dwords (d and dmin, the 12 scale bytes) of the 8 super-blocks at wb + off[c]: w[q]
// lane c = column c's dword q.
QINLINE void head_words(VI* w, const uint8_t* wb, const int32_t* off) {
  alignas(32) uint32_t v[4][W];
  for (int c = 0; c < W; c++) std::memcpy(&v[0][c], wb + off[c], 4), std::memcpy(&v[1][c], wb + off[c] + 4, 4),
                                std::memcpy(&v[2][c], wb + off[c] + 8, 4), std::memcpy(&v[3][c], wb + off[c] + 12, 4);
  for (int q = 0; q < 4; q++) w[q] = vload(v[q]);
}
// d and dmin of the 8 columns from their first dwords (exact).
QINLINE void halves_of(VF& d, VF& dmin, VI h) {
  alignas(32) uint32_t v[W];
  alignas(32) uint16_t hd[W], hm[W];
  vstore(v, h);
  for (int c = 0; c < W; c++) hd[c] = static_cast<uint16_t>(v[c]), hm[c] = static_cast<uint16_t>(v[c] >> 16);
  d = halves(hd), dmin = halves(hm);
}
QINLINE VF fma_sub(VF dsc, VF dmn, const ActBlock& a, VI p, VF acc) {
  const VF dx = set1f(a.d);
  acc = _mm256_fmadd_ps(vmul(dsc, dx), cvt(p), acc);
  return _mm256_fnmadd_ps(vmul(dmn, dx), set1f(act_sum(a)), acc);  // fma(-(dmn dx), S, acc)
}
#endif

template <bool Q5>
using Source = LaneSource<sb_bytes(Q5)>;

// The first 4 dwords of super-block s of src's columns (w[q] lane c = column c's dword q).
template <bool Q5>
QINLINE void head_of(VI* w, const Source<Q5>& src, int64_t s) {
  if (src.pg == nullptr) return head_words(w, src.wg + s * sb_bytes(Q5), src.off);
  src.load4(w, s, 0);
}

// A super-block's d, dmin and 6-bit words (scale_words: the scales of sub-blocks 0-3 and 4-7, the
// mins of 0-3 and 4-7, byte j % 4) of the W columns.
template <bool Q5>
QINLINE void scale_vectors(VI* u, VF& d, VF& dmin, const Source<Q5>& src, int64_t s) {
  VI a[4];
  head_of<Q5>(a, src, s);
  halves_of(d, dmin, a[0]);
  const VI m6 = set1(0x3f3f3f3f), m4 = set1(0x0f0f0f0f), m2 = set1(0x30303030);
  u[0] = vand(a[1], m6);
  u[1] = vor(vand(a[3], m4), vand(srl32(a[1], 2), m2));
  u[2] = vand(a[2], m6);
  u[3] = vor(vand(srl32(a[3], 4), m4), vand(srl32(a[2], 2), m2));
}

// Floats a super-block's scale products take: d * sc_b (rows 0..7) and dmin * m_b (8..15), W each.
constexpr int64_t kScaleFloats = 16 * W;
// Vectors of a laid-out super-block before its scale products: 4 pairs x 8 nibble vectors (Q5_K:
// its 8 sub-blocks' 8 vectors of values, joined once for all row tiles); and its bytes.
// On vpmaddubsw (AVX2 without VNNI) Q4_K's sub-blocks are laid out apart too: a pair's 8 byte
// vectors and a sub-block's 8 value vectors, held across the rows, spill on 16 ymm registers
// (1.1-1.3x its prompts on Zen 3).
#if !defined(ATTO_Q4K_ZMM) && !defined(ATTO_Q4K_DPBUSD)
constexpr bool joined(bool) { return true; }
#else
constexpr bool joined(bool q5) { return q5; }
#endif
constexpr int64_t laid_vectors(bool q5) { return joined(q5) ? 64 : 32; }
constexpr int64_t laid_bytes(bool q5) { return laid_vectors(q5) * W * 4 + kScaleFloats * 4; }

// The scale products of super-block s of the W columns of src, exact.
template <bool Q5>
QINLINE void scales(float* out, const Source<Q5>& src, int64_t s) {
  VI u[4];
  VF d, dmin;
  scale_vectors<Q5>(u, d, dmin, src, s);
  const VI ff = set1(0xff);
  for (int i = 0; i < 4; i++) {
    const VI v = u[i];
    for (int b = 0; b < 4; b++) {
      const VF six = cvt(vand(srl32(v, 8 * b), ff));
      vstoref(out + ((i % 2) * 4 + b + (i / 2) * 8) * W, vmul(i < 2 ? d : dmin, six));
    }
  }
}

// The 8 nibble vectors of sub-block pair p of super-block s (raw bytes: both sub-blocks' nibbles).
template <bool Q5>
QINLINE void pair_bytes(VI* t, const Source<Q5>& src, int64_t s, int p) {
  constexpr int64_t qs = Q5 ? 48 : 16;
  src.load4(t, s, qs + 32 * p);
  src.load4(t + 4, s, qs + 32 * p + 16);
}

// Sub-block j's value vectors from its pair's bytes t (its low or high nibbles) and, Q5_K, the
// super-block's fifth bits qh (bit j of each byte moved to bit 4).
template <bool Q5>
QINLINE void sub_values(VI* v, const VI* t, const VI* qh, int j) {
  const VI lo = set1(0x0f0f0f0f), b4 = set1(0x10101010);
  for (int g = 0; g < 8; g++) {
    const VI src = j % 2 == 0 ? t[g] : hi4(t[g]);
    if constexpr (Q5)
      v[g] = nibble_or_bit(src, vand(j >= 4 ? srl32(qh[g], j - 4) : sll32(qh[g], 4 - j), b4), lo);
    else
      v[g] = vand(src, lo);
  }
}

// R rows (xa, row r at xa + r * nb) of one column group: the weights built from src as they come
// or read from the group's laid-out super-blocks (kLaid: pk).
template <bool Q5, int R, bool kLaid>
QINLINE void tile(float* y, int64_t ldy, const ActBlock* xa, const Source<Q5>& src, const uint8_t* pk,
                  const float* bias, int64_t nb, int cols) {
  constexpr int64_t kLaidBytes = laid_bytes(Q5);
  VF acc[R];
  for (int r = 0; r < R; r++) acc[r] = zerof();
  alignas(64) float sbuf[kLaid ? 1 : kScaleFloats];
  for (int64_t s = 0; s < nb / 8; s++) {
    const float* sc = sbuf;
    VI qh[Q5 ? 8 : 1];
    if constexpr (kLaid) {
      sc = reinterpret_cast<const float*>(pk + s * kLaidBytes + laid_vectors(Q5) * W * 4);
    } else {
      scales<Q5>(sbuf, src, s);
      if constexpr (Q5) src.load4(qh, s, 16), src.load4(qh + 4, s, 32);
    }
    for (int p = 0; p < 4; p++) {
      VI t[8];
      if constexpr (kLaid && !joined(Q5)) {
        for (int g = 0; g < 8; g++) t[g] = vload(pk + s * kLaidBytes + (8 * p + g) * W * 4);
      } else if constexpr (!kLaid) {
        if constexpr (R <= 2) src.prefetch_next(s, sb_bytes(Q5) / 4 * p, nb / 8);
        pair_bytes<Q5>(t, src, s, p);
      }
      for (int h = 0; h < 2; h++) {
        const int j = 2 * p + h;
        VI v[8];
        if constexpr (kLaid && joined(Q5)) {
          for (int g = 0; g < 8; g++) v[g] = vload(pk + s * kLaidBytes + (8 * j + g) * W * 4);
        } else {
          sub_values<Q5>(v, t, qh, j);
        }
        const VF dsc = vloadf(sc + j * W), dmn = vloadf(sc + (8 + j) * W);
        for (int r = 0; r < R; r++) {
          const ActBlock& a = xa[r * nb + 8 * s + j];
          acc[r] = fma_sub(dsc, dmn, a, block_ints<Q5>(v, a), acc[r]);
        }
      }
    }
  }
  alignas(64) float out[W];
  for (int r = 0; r < R; r++) {
    vstoref(out, acc[r]);
    store_row(y + r * ldy, out, bias, cols);
  }
}

// The last rem < kRows rows of a column group: one tile of rem rows.
template <bool Q5, int R, bool kLaid>
QINLINE void rows_tail(float* y, int64_t ldy, const ActBlock* xa, const Source<Q5>& src, const uint8_t* pk,
                       const float* bias, int64_t nb, int cols, int64_t rem) {
  if (rem == R)
    tile<Q5, R, kLaid>(y, ldy, xa, src, pk, bias, nb, cols);
  else if constexpr (R > 1)
    rows_tail<Q5, R - 1, kLaid>(y, ldy, xa, src, pk, bias, nb, cols, rem);
}

// Columns [n0, n1) (n0 a multiple of 16) of all M rows, W a group; w in ggml's rows or (packed)
// quant.h's Lanes16.
template <bool Q5>
void columns(bool packed, float* y, const ActBlock* xa, const uint8_t* w, const float* bias, int64_t M, int64_t N,
             int64_t nb, int64_t n0, int64_t n1) {
  constexpr int64_t kLaidBytes = laid_bytes(Q5);
  const int64_t rb = nb / 8 * sb_bytes(Q5);
  std::vector<uint8_t> pk(M > kRows ? static_cast<size_t>(nb / 8 * kLaidBytes) : 0);
  for (int64_t c0 = n0; c0 < n1; c0 += W) {
    const int cols = static_cast<int>(std::min<int64_t>(W, n1 - c0));
    alignas(64) int32_t off[W];  // a missing column (past n1) repeats the last one, not stored
    for (int c = 0; c < W; c++) off[c] = static_cast<int32_t>(std::min(c, cols - 1) * rb);
    Source<Q5> src;
    if (packed && c0 < N / 16 * 16)  // a whole group of 16 (the rows past the last are as they are)
      src.pg = w + c0 / 16 * 16 * rb, src.sub = static_cast<int>(c0 % 16 / W);
    else
      src.wg = w + c0 * rb, src.off = off;
    float* yg = y + c0;
    const float* bg = bias != nullptr ? bias + c0 : nullptr;
    if (M <= kRows) {
      rows_tail<Q5, kRows, false>(yg, N, xa, src, nullptr, bg, nb, cols, M);
      continue;
    }
    for (int64_t s = 0; s < nb / 8; s++) {
      uint8_t* ps = pk.data() + s * kLaidBytes;
      VI qh[Q5 ? 8 : 1];
      if constexpr (Q5) src.load4(qh, s, 16), src.load4(qh + 4, s, 32);
      for (int p = 0; p < 4; p++) {
        VI t[8];
        pair_bytes<Q5>(t, src, s, p);
        if constexpr (joined(Q5)) {
          for (int h = 0; h < 2; h++) {
            VI v[8];
            sub_values<Q5>(v, t, qh, 2 * p + h);
            for (int g = 0; g < 8; g++) vstore(ps + (8 * (2 * p + h) + g) * W * 4, v[g]);
          }
        } else {
          for (int g = 0; g < 8; g++) vstore(ps + (8 * p + g) * W * 4, t[g]);
        }
      }
      scales<Q5>(reinterpret_cast<float*>(ps + laid_vectors(Q5) * W * 4), src, s);
    }
    int64_t m = 0;
    for (; m + kRows <= M; m += kRows)
      tile<Q5, kRows, true>(yg + m * N, N, xa + m * nb, src, pk.data(), bg, nb, cols);
    if (m < M) rows_tail<Q5, kRows - 1, true>(yg + m * N, N, xa + m * nb, src, pk.data(), bg, nb, cols, M - m);
  }
}

}  // namespace ATTO_Q4K_CHAIN_NS
}  // namespace ATTO_KERNELS_NS::quant_detail
#if defined(ATTO_Q4K_ZMM)
#pragma GCC diagnostic pop
#endif
#endif  // ATTO_Q4K_CHAIN
