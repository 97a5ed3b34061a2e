// atto/kernels/quant_q4_q8.cpp: the linear layer's q4_0, q8_0 and U8M outputs (blocks of 32
// values) in quant.h's order: per output one float chain, acc = fma(dw_b * dx_b, float(p_b), acc),
// p_b the block's exact int32 dot (U8M then adds its min: acc = fma(dm_b * dx_b, float(S_b),
// acc)). x86 computes 16 (zmm) or 8 (ymm) columns at once: a block's weights of those columns are
// laid out as 8 vectors [g = 0..7][column][4 values] (q4_0: g < 4 the low nibbles of qs[4g..4g+3],
// values 4g..4g+3; g >= 4 their high nibbles, values 16+4(g-4)..; q8_0 and U8M: the values
// 4g..4g+3), so that each vector of weights meets one broadcast dword of the activations, and 8
// products give each column's block sum in one int32 lane. vpdpbusd takes the weights unsigned:
// q4_0's nibbles and U8M's values as they are, q8_0's int8 + 128 (the sign bit flipped), and the
// sum starts from -8, -128 (or 0) times the activations' sum. AVX2's vpmaddubsw saturates its
// int16 pairs, so there q8_0 multiplies |w| by x with w's sign (vpsignb), as ggml does.
// Decoding (M <= the rows of a tile) builds them in registers from the rows (or a Lanes16
// packing) as it goes; prompts lay a column group out once (a scratch of K/32 * 576 bytes a
// thread, U8M's 640 with its mins, AVX2's q8_0 its |w| besides) for all row tiles.
#if !defined(ATTO_Q4_CHAIN)
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/quant_impl.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace ATTO_KERNELS_NS::quant_detail {
namespace {

// Bytes a block: q4_0 18, q8_0 34 (an fp16 d, then 16 bytes of nibbles or 32 int8), U8M 36 (fp16
// d and m, 32 uint8), Q8F 36 (32 int8, f32 d).
constexpr int64_t block_size(int t) { return t == kB32Q8 ? 34 : t == kB32Q4 ? 18 : 36; }
// Where a block's 32 values start.
constexpr int64_t values_at(int t) { return t == kB32U8M ? 4 : t == kB32Q8F ? 0 : 2; }

// A block's scale as float: the fp16 d at its start, Q8F's f32 d at its end.
QINLINE float scale_of(B32 t, const uint8_t* blk) {
  if (t != kB32Q8F) return half_at(blk);
  float d;
  std::memcpy(&d, blk + 32, 4);
  return d;
}

// p_b: the block's sum of (nibble - 8) * x, w * x or (U8M) q * x, exact.
int32_t block_dot_ref(B32 t, const uint8_t* blk, const int8_t* q) {
  int32_t p = 0;
  if (t != kB32Q4) {
    const uint8_t* v = blk + values_at(t);
    for (int i = 0; i < 32; i++) p += (t == kB32U8M ? int32_t{v[i]} : int32_t{static_cast<int8_t>(v[i])}) * q[i];
    return p;
  }
  for (int j = 0; j < 16; j++)
    p += (int32_t{blk[2 + j] & 0x0F} - 8) * q[j] + (int32_t{blk[2 + j] >> 4} - 8) * q[j + 16];
  return p;
}

#if defined(__aarch64__)
// The same chain, p_b on NEON. q4_0: 16-bit products (|(n - 8) x| <= 1016, four a lane), then
// across; q8_0 and U8M (its values 0..31 as int8): vmull_s8's 16-bit products (|w x| <= 16256)
// widened pairwise to 32 bits.
float dot_neon(B32 t, const ActBlock* xa, const uint8_t* w, int64_t nb) {
  float acc = 0.0f;
  if (t != kB32Q4) {
    const int64_t bs = block_size(t), at = values_at(t);
    for (int64_t b = 0; b < nb; b++) {
      const uint8_t* blk = w + b * bs;
      const int8x16_t w0 = vld1q_s8(reinterpret_cast<const int8_t*>(blk + at));
      const int8x16_t w1 = vld1q_s8(reinterpret_cast<const int8_t*>(blk + at + 16));
      const int8x16_t x0 = vld1q_s8(xa[b].q), x1 = vld1q_s8(xa[b].q + 16);
      int32x4_t p = vpaddlq_s16(vmull_s8(vget_low_s8(w0), vget_low_s8(x0)));
      p = vpadalq_s16(p, vmull_high_s8(w0, x0));
      p = vpadalq_s16(p, vmull_s8(vget_low_s8(w1), vget_low_s8(x1)));
      p = vpadalq_s16(p, vmull_high_s8(w1, x1));
      const float s = scale_of(t, blk) * xa[b].d;
      acc = std::fma(s, static_cast<float>(vaddvq_s32(p)), acc);
      if (t == kB32U8M) acc = std::fma(half_at(blk + 2) * xa[b].d, static_cast<float>(xa[b].nsum8 / -8), acc);
    }
    return acc;
  }
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* blk = w + b * 18;
    const uint8x16_t q = vld1q_u8(blk + 2);
    const int8x16_t lo = vsubq_s8(vreinterpretq_s8_u8(vandq_u8(q, vdupq_n_u8(0x0F))), vdupq_n_s8(8));
    const int8x16_t hi = vsubq_s8(vreinterpretq_s8_u8(vshrq_n_u8(q, 4)), vdupq_n_s8(8));
    const int8x16_t x0 = vld1q_s8(xa[b].q), x1 = vld1q_s8(xa[b].q + 16);
    int16x8_t p = vmull_s8(vget_low_s8(lo), vget_low_s8(x0));
    p = vmlal_high_s8(p, lo, x0);
    p = vmlal_s8(p, vget_low_s8(hi), vget_low_s8(x1));
    p = vmlal_high_s8(p, hi, x1);
    const float s = half_at(blk) * xa[b].d;
    acc = std::fma(s, static_cast<float>(vaddlvq_s16(p)), acc);
  }
  return acc;
}
#endif

}  // namespace

float b32_dot_ref(B32 t, const ActBlock* xa, const uint8_t* w, int64_t nb) {
  float acc = 0.0f;
  for (int64_t b = 0; b < nb; b++) {
    const uint8_t* blk = w + b * block_size(t);
    const float s = scale_of(t, blk) * xa[b].d;
    acc = std::fma(s, static_cast<float>(block_dot_ref(t, blk, xa[b].q)), acc);
    if (t == kB32U8M) acc = std::fma(half_at(blk + 2) * xa[b].d, static_cast<float>(xa[b].nsum8 / -8), acc);
  }
  return acc;
}

}  // namespace ATTO_KERNELS_NS::quant_detail

#if defined(__AVX2__)
#define ATTO_Q4_CHAIN 1
#define ATTO_Q4_CHAIN_NS chain_avx2
#include "kernels/quant_q4_q8.cpp"  // NOLINT(build/include): 8 columns, vpmaddubsw + vpmaddwd
#undef ATTO_Q4_CHAIN_NS
#if ATTO_QUANT_AVXVNNI
ATTO_QUANT_TARGET_PUSH("avxvnni")
#define ATTO_Q4_CHAIN_NS chain_avxvnni
#define ATTO_Q4_DPBUSD(src, u, s) _mm256_dpbusd_avx_epi32(src, u, s)
#include "kernels/quant_q4_q8.cpp"  // NOLINT(build/include): 8 columns, VEX vpdpbusd
#undef ATTO_Q4_DPBUSD
#undef ATTO_Q4_CHAIN_NS
ATTO_QUANT_TARGET_POP
#endif
#if ATTO_QUANT_AVX512VNNI
ATTO_QUANT_TARGET_PUSH("avx512vnni,avx512vl")
#define ATTO_Q4_CHAIN_NS chain_avx512vnni
#define ATTO_Q4_ZMM 1
#include "kernels/quant_q4_q8.cpp"  // NOLINT(build/include): 16 columns on zmm, vpdpbusd
#undef ATTO_Q4_ZMM
#undef ATTO_Q4_CHAIN_NS
ATTO_QUANT_TARGET_POP
#endif
#undef ATTO_Q4_CHAIN
#endif  // __AVX2__

namespace ATTO_KERNELS_NS::quant_detail {

void b32_columns(DotKind k, B32 t, bool packed, float* y, const ActBlock* xa, const uint8_t* w, const float* bias,
                 int64_t M, int64_t N, int64_t nb, int64_t n0, int64_t n1) {
#if defined(__AVX2__)
#define ATTO_B32_CALL(ns)                                                                 \
  return t == kB32Q8 ? ns::columns<kB32Q8>(packed, y, xa, w, bias, M, N, nb, n0, n1)     \
         : t == kB32U8M ? ns::columns<kB32U8M>(packed, y, xa, w, bias, M, N, nb, n0, n1) \
         : t == kB32Q8F ? ns::columns<kB32Q8F>(packed, y, xa, w, bias, M, N, nb, n0, n1) \
                        : ns::columns<kB32Q4>(packed, y, xa, w, bias, M, N, nb, n0, n1)
  switch (k) {
#if ATTO_QUANT_AVX512VNNI
    case DotKind::Avx512Vnni: ATTO_B32_CALL(chain_avx512vnni);
#endif
#if ATTO_QUANT_AVXVNNI
    case DotKind::AvxVnni: ATTO_B32_CALL(chain_avxvnni);
#endif
    case DotKind::Avx2: ATTO_B32_CALL(chain_avx2);
    default: break;
  }
#undef ATTO_B32_CALL
#endif
  const auto dot = [k, t, nb](const ActBlock* x, const uint8_t* r) {
#if defined(__aarch64__)
    if (k == DotKind::Neon) return dot_neon(t, x, r, nb);
#else
    (void)k;
#endif
    return b32_dot_ref(t, x, r, nb);
  };
  const int64_t bs = block_size(t);
  if (packed)
    return packed_columns_one_by_one(y, xa, w, LaneBlock{bs, t == kB32Q8F ? 0 : values_at(t), 32}, bias, M, N, nb, n0,
                                     n1, dot);
  columns_one_by_one(y, xa, w, bias, M, N, nb, nb * bs, n0, n1, dot);
}

}  // namespace ATTO_KERNELS_NS::quant_detail

#else  // ATTO_Q4_CHAIN: W columns at once for one dot product, included up to three times above
namespace ATTO_KERNELS_NS::quant_detail {
namespace ATTO_Q4_CHAIN_NS {

#if defined(ATTO_Q4_ZMM)
// (GCC 12 flags the intrinsics' own undefined-register idiom as (maybe-)uninitialized.)
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
#define ATTO_QUANT_LANES_ZMM 1
#include "kernels/quant_lanes.h"  // NOLINT(build/include): W, VI, VF, their operations, gather16
#undef ATTO_QUANT_LANES_ZMM
#else
#include "kernels/quant_lanes.h"  // NOLINT(build/include): W, VI, VF, their operations, gather16
#endif

QINLINE VI bcast4(const int8_t* p) {  // the 4 bytes at p in every dword
  int32_t v;
  std::memcpy(&v, p, 4);
  return set1(v);
}
QINLINE VF fma_block(VF dw, float dx, VI p, VF acc) { return vfma(vmul(dw, set1f(dx)), cvt(p), acc); }
QINLINE VI low4(VI t) { return vand(t, set1(0x0F0F0F0F)); }
QINLINE VI high4(VI t) { return vand(srl16<4>(t), set1(0x0F0F0F0F)); }
// Dword row g of a Lanes16 block at p: its columns W sub .. W sub + W - 1.
QINLINE VI packed_row(const uint8_t* p, int g, int sub) { return vload(p + g * 64 + sub * W * 4); }

#if defined(ATTO_Q4_ZMM)
QINLINE VI flip(VI t) { return _mm512_xor_si512(t, _mm512_set1_epi8(static_cast<char>(0x80))); }  // int8 + 128
// The 16 columns' fp16 scales at wb + off[c] (16-bit loads: a gather costs more), exact.
QINLINE VF scales_of(const uint8_t* wb, const int32_t* off) {
  alignas(32) uint16_t h[16];
  for (int c = 0; c < 16; c++) std::memcpy(h + c, wb + off[c], 2);
  return _mm512_cvtph_ps(_mm256_load_si256(reinterpret_cast<const __m256i*>(h)));
}
// The 16 fp16 scales of a Lanes16 block at p, exact.
QINLINE VF packed_scales(const uint8_t* p, int /*sub*/) {
  return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
}
// p_b of the 16 columns against activation block a, the weights taken unsigned and the sum started
// at -8 (q4_0), -128 (q8_0) or 0 (U8M) times the activations' sum (nsum8 = -8 sum(q)).
template <int T>
QINLINE VI block_ints(const VI* v, const ActBlock& a) {
  VI i0 = set1(T == kB32Q8 || T == kB32Q8F ? 16 * a.nsum8 : T == kB32Q4 ? a.nsum8 : 0), i1 = zeroi();
  for (int j = 0; j < 8; j += 2) {
    i0 = _mm512_dpbusd_epi32(i0, v[j], bcast4(a.q + 4 * j));
    i1 = _mm512_dpbusd_epi32(i1, v[j + 1], bcast4(a.q + 4 * j + 4));
  }
  return add32(i0, i1);
}
#else
#if defined(ATTO_Q4_DPBUSD)
QINLINE VI flip(VI t) { return _mm256_xor_si256(t, _mm256_set1_epi8(static_cast<char>(0x80))); }  // int8 + 128
#else
QINLINE VI flip(VI t) { return t; }  // vpmaddubsw's q8_0 keeps the signed bytes (block_ints)
#endif
QINLINE VF scales_of(const uint8_t* wb, const int32_t* off) {
  alignas(16) uint16_t h[8];
  for (int c = 0; c < 8; c++) std::memcpy(h + c, wb + off[c], 2);
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
}
// A Lanes16 block's columns 8 sub .. 8 sub + 7.
QINLINE VF packed_scales(const uint8_t* p, int sub) {
  return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p + sub * 16)));
}
// p_b of the 8 columns against activation block a. vpmaddubsw's int16 pairs saturate: q4_0's
// 16 products of at most 15 * 127 an int16 lane over the 8 vectors (30480 < 32767) are exact;
// U8M's 8 of at most 31 * 127 over 4 vectors (31496) are, before they are widened; q8_0's |w| * (x
// with w's sign) at most 128 * 127 a product, so each pair (<= 32512) is widened to int32 at once.
template <int T>
QINLINE VI block_ints(const VI* v, const ActBlock& a) {
#if defined(ATTO_Q4_DPBUSD)
  VI i0 = set1(T == kB32Q8 || T == kB32Q8F ? 16 * a.nsum8 : T == kB32Q4 ? a.nsum8 : 0), i1 = _mm256_setzero_si256();
  for (int j = 0; j < 8; j += 2) {
    i0 = ATTO_Q4_DPBUSD(i0, v[j], bcast4(a.q + 4 * j));
    i1 = ATTO_Q4_DPBUSD(i1, v[j + 1], bcast4(a.q + 4 * j + 4));
  }
  return _mm256_add_epi32(i0, i1);
#else
  const VI ones = _mm256_set1_epi16(1);
  if constexpr (T == kB32U8M) {
    VI s[2];
    for (int h = 0; h < 2; h++) {
      s[h] = _mm256_maddubs_epi16(v[4 * h], bcast4(a.q + 16 * h));
      for (int j = 1; j < 4; j++)
        s[h] = _mm256_add_epi16(s[h], _mm256_maddubs_epi16(v[4 * h + j], bcast4(a.q + 16 * h + 4 * j)));
    }
    return _mm256_add_epi32(_mm256_madd_epi16(s[0], ones), _mm256_madd_epi16(s[1], ones));
  } else if constexpr (T == kB32Q8 || T == kB32Q8F) {
    VI i0 = _mm256_setzero_si256(), i1 = _mm256_setzero_si256();
    for (int j = 0; j < 8; j += 2) {
      const VI p0 = _mm256_maddubs_epi16(_mm256_abs_epi8(v[j]), _mm256_sign_epi8(bcast4(a.q + 4 * j), v[j]));
      const VI p1 = _mm256_maddubs_epi16(_mm256_abs_epi8(v[j + 1]), _mm256_sign_epi8(bcast4(a.q + 4 * j + 4), v[j + 1]));
      i0 = _mm256_add_epi32(i0, _mm256_madd_epi16(p0, ones));
      i1 = _mm256_add_epi32(i1, _mm256_madd_epi16(p1, ones));
    }
    return _mm256_add_epi32(i0, i1);
  } else {
    VI s0 = _mm256_maddubs_epi16(v[0], bcast4(a.q)), s1 = _mm256_maddubs_epi16(v[1], bcast4(a.q + 4));
    for (int j = 2; j < 8; j += 2) {
      s0 = _mm256_add_epi16(s0, _mm256_maddubs_epi16(v[j], bcast4(a.q + 4 * j)));
      s1 = _mm256_add_epi16(s1, _mm256_maddubs_epi16(v[j + 1], bcast4(a.q + 4 * j + 4)));
    }
    return _mm256_add_epi32(_mm256_madd_epi16(_mm256_add_epi16(s0, s1), ones), set1(a.nsum8));
  }
#endif
}
#endif

// A block of W columns (column c's block at wb + off[c]): the 8 weight vectors and the scales (U8M:
// and its mins, dm).
template <int T>
QINLINE void build(VI* v, VF& dw, VF& dm, const uint8_t* wb, const int32_t* off) {
  VI t[4];
  if constexpr (T == kB32Q4) {
    gather16(t, wb, off, 2);  // qs[4g..4g+3]
    for (int g = 0; g < 4; g++) v[g] = low4(t[g]), v[4 + g] = high4(t[g]);
  } else {
    constexpr int at = static_cast<int>(values_at(T));
    gather16(t, wb, off, at);  // values 4g..4g+3
    for (int g = 0; g < 4; g++) v[g] = T == kB32U8M ? t[g] : flip(t[g]);
    gather16(t, wb, off, at + 16);  // values 16 + 4g ..
    for (int g = 0; g < 4; g++) v[4 + g] = T == kB32U8M ? t[g] : flip(t[g]);
  }
  if constexpr (T == kB32Q8F) {
    alignas(64) float d[W];
    for (int c = 0; c < W; c++) std::memcpy(d + c, wb + off[c] + 32, 4);
    dw = vloadf(d);
  } else {
    dw = scales_of(wb, off);
  }
  if constexpr (T == kB32U8M) dm = scales_of(wb + 2, off);
}
// The same from a Lanes16 packing's block of 16 columns at p (4 or 8 dword rows, then the 16 d, and
// U8M's 16 m), its columns 8 sub .. 8 sub + 7 on ymm.
template <int T>
QINLINE void build_packed(VI* v, VF& dw, VF& dm, const uint8_t* p, int sub) {
  if constexpr (T == kB32Q4) {
    for (int g = 0; g < 4; g++) {
      const VI t = packed_row(p, g, sub);
      v[g] = low4(t), v[4 + g] = high4(t);
    }
  } else {
    for (int g = 0; g < 8; g++) v[g] = T == kB32U8M ? packed_row(p, g, sub) : flip(packed_row(p, g, sub));
  }
  if constexpr (T == kB32Q8F) {
    dw = vloadf(p + 8 * 64 + sub * W * 4);  // dword row 8: the 16 columns' f32 d
    return;
  }
  dw = packed_scales(p + (T == kB32Q4 ? 256 : 512), sub);
  if constexpr (T == kB32U8M) dm = packed_scales(p + 544, sub);
}

// vpmaddubsw's q8_0 (AVX2 without VNNI) lays out |w| beside w: a prompt's rows then take |w| and w's
// signs from the layout, not vpabsb a row (and the 8 + 8 vectors a block do not stay in registers).
#if !defined(ATTO_Q4_ZMM) && !defined(ATTO_Q4_DPBUSD)
template <int T>
constexpr bool kSignSplit = T == kB32Q8 || T == kB32Q8F;
#else
template <int T>
constexpr bool kSignSplit = false;
#endif
// Bytes of a laid-out block: 8 weight vectors, the scales (U8M: and the mins), kSignSplit's 8 |w|.
template <int T>
constexpr int64_t kPacked = ((T == kB32U8M ? 10 : 9) + (kSignSplit<T> ? 8 : 0)) * W * 4;

// A group's weights: W rows (wg, off) or, from a Lanes16 packing, its group of 16 (pg) and which W
// of them (sub).
template <int T>
struct Source {
  static constexpr int64_t kBs = block_size(T);
  const uint8_t* wg;
  const int32_t* off;
  const uint8_t* pg;
  int sub;
  QINLINE void build_block(VI* v, VF& dw, VF& dm, int64_t b) const {
    if (pg != nullptr) return build_packed<T>(v, dw, dm, pg + b * 16 * kBs, sub);
    build<T>(v, dw, dm, wg + b * kBs, off);
  }
};

#if !defined(ATTO_Q4_ZMM) && !defined(ATTO_Q4_DPBUSD)
QINLINE VI vabs8(VI t) { return _mm256_abs_epi8(t); }
// kSignSplit's rows of one laid-out block p (w, the scales, |w|): block_ints' q8_0 sums, the same
// bits, with |w| and w's signs read from the layout (w's as vpsignb's memory operand).
template <int R>
QINLINE void laid_sign_rows(VF* acc, const uint8_t* p, VF dw, const ActBlock* xb, int64_t nb) {
  const VI ones = _mm256_set1_epi16(1);
  for (int r = 0; r < R; r++) {
    const ActBlock& a = xb[r * nb];
    VI i0 = _mm256_setzero_si256(), i1 = _mm256_setzero_si256();
    for (int j = 0; j < 8; j += 2) {
      const VI s0 = _mm256_sign_epi8(bcast4(a.q + 4 * j), vload(p + j * W * 4));
      const VI s1 = _mm256_sign_epi8(bcast4(a.q + 4 * j + 4), vload(p + (j + 1) * W * 4));
      i0 = _mm256_add_epi32(i0, _mm256_madd_epi16(_mm256_maddubs_epi16(vload(p + (9 + j) * W * 4), s0), ones));
      i1 = _mm256_add_epi32(i1, _mm256_madd_epi16(_mm256_maddubs_epi16(vload(p + (10 + j) * W * 4), s1), ones));
    }
    acc[r] = fma_block(dw, a.d, _mm256_add_epi32(i0, i1), acc[r]);
  }
}
#else
QINLINE VI vabs8(VI t) { return t; }
template <int R>
QINLINE void laid_sign_rows(VF*, const uint8_t*, VF, const ActBlock*, int64_t) {}
#endif

// R rows (xa, row r at xa + r * nb) of one column group: the weights built in registers from src
// or read from the group's laid-out blocks (kLaid: pk).
template <int T, int R, bool kLaid>
QINLINE void tile(float* y, int64_t ldy, const ActBlock* xa, const Source<T>& src, const uint8_t* pk,
                  const float* bias, int64_t nb, int cols) {
  constexpr int64_t kBs = Source<T>::kBs;
  VF acc[R];
  for (int r = 0; r < R; r++) acc[r] = zerof();
  for (int64_t b = 0; b < nb; b++) {
    VI v[8];
    VF dw, dm = zerof();
    if constexpr (kLaid) {
      const uint8_t* p = pk + b * kPacked<T>;
      dw = vloadf(p + 8 * W * 4);
      if constexpr (!kSignSplit<T>)
        for (int j = 0; j < 8; j++) v[j] = vload(p + j * W * 4);
      if constexpr (T == kB32U8M) dm = vloadf(p + 9 * W * 4);
    } else {
      // Decoding streams the weights once from memory: the next group's rows are asked for as
      // this group's advance, every other block (prefetchnta; a hint, the same bits; past the
      // matrix's end harmless): 1.2x tokens/s on a 57M model, one thread. From a packing (one
      // stream), the block 8 on, by the first 8 of the 16 columns on ymm.
      if constexpr (R <= 2) {
        if (src.pg != nullptr && src.sub == 0) {
          const uintptr_t a = reinterpret_cast<uintptr_t>(src.pg) + static_cast<uintptr_t>((b + 8) * 16 * kBs);
          for (int64_t line = 0; line < 16 * kBs; line += 64)
            __builtin_prefetch(reinterpret_cast<const void*>(a + static_cast<uintptr_t>(line)), 0, 0);
        } else if (src.pg == nullptr && b % 2 == 0) {
          for (int c = 0; c < W; c++)  // (an address, not a pointer into w: it may be past the end)
            __builtin_prefetch(reinterpret_cast<const void*>(reinterpret_cast<uintptr_t>(src.wg) +
                                                             (W + c) * nb * kBs + b * kBs),
                               0, 0);
        }
      }
      src.build_block(v, dw, dm, b);
    }
    if constexpr (kLaid && kSignSplit<T>) {
      laid_sign_rows<R>(acc, pk + b * kPacked<T>, dw, xa + b, nb);
      continue;
    }
    for (int r = 0; r < R; r++) {
      const ActBlock& a = xa[r * nb + b];
      acc[r] = fma_block(dw, a.d, block_ints<T>(v, a), acc[r]);
      if constexpr (T == kB32U8M) acc[r] = vfma(vmul(dm, set1f(a.d)), set1f(static_cast<float>(a.nsum8 / -8)), acc[r]);
    }
  }
  alignas(64) float out[W];
  for (int r = 0; r < R; r++) {
    vstoref(reinterpret_cast<uint8_t*>(out), acc[r]);
    store_row(y + r * ldy, out, bias, cols);
  }
}

// The last rem < kRows rows of a column group: one tile of rem rows.
template <int T, int R, bool kLaid>
QINLINE void rows_tail(float* y, int64_t ldy, const ActBlock* xa, const Source<T>& src, const uint8_t* pk,
                       const float* bias, int64_t nb, int cols, int64_t rem) {
  if (rem == R)
    tile<T, R, kLaid>(y, ldy, xa, src, pk, bias, nb, cols);
  else if constexpr (R > 1)
    rows_tail<T, R - 1, kLaid>(y, ldy, xa, src, pk, bias, nb, cols, rem);
}

// Columns [n0, n1) (n0 a multiple of 16) of all M rows, W a group; w in ggml's rows or (packed)
// quant.h's Lanes16.
template <int T>
void columns(bool packed, float* y, const ActBlock* xa, const uint8_t* w, const float* bias, int64_t M, int64_t N,
             int64_t nb, int64_t n0, int64_t n1) {
  const int64_t rb = nb * Source<T>::kBs;
  std::vector<uint8_t> pk(M > kRows ? static_cast<size_t>(nb * kPacked<T>) : 0);
  for (int64_t c0 = n0; c0 < n1; c0 += W) {
    const int cols = static_cast<int>(std::min<int64_t>(W, n1 - c0));
    alignas(64) int32_t off[W];  // a missing column (past n1) repeats the last one, not stored
    for (int c = 0; c < W; c++) off[c] = static_cast<int32_t>(std::min(c, cols - 1) * rb);
    Source<T> src{w + c0 * rb, off, nullptr, 0};
    if (packed && c0 < N / 16 * 16)  // a whole group of 16 (the rows past the last are as they are)
      src.pg = w + c0 / 16 * 16 * rb, src.sub = static_cast<int>(c0 % 16 / W);
    float* yg = y + c0;
    const float* bg = bias != nullptr ? bias + c0 : nullptr;
    if (M <= kRows) {
      rows_tail<T, kRows, false>(yg, N, xa, src, nullptr, bg, nb, cols, M);
      continue;
    }
    for (int64_t b = 0; b < nb; b++) {
      VI v[8];
      VF dw, dm = zerof();
      src.build_block(v, dw, dm, b);
      uint8_t* p = pk.data() + b * kPacked<T>;
      for (int j = 0; j < 8; j++) vstore(p + j * W * 4, v[j]);
      vstoref(p + 8 * W * 4, dw);
      if constexpr (kSignSplit<T>)
        for (int j = 0; j < 8; j++) vstore(p + (9 + j) * W * 4, vabs8(v[j]));
      if constexpr (T == kB32U8M) vstoref(p + 9 * W * 4, dm);
    }
    int64_t m = 0;
    for (; m + kRows <= M; m += kRows)
      tile<T, kRows, true>(yg + m * N, N, xa + m * nb, src, pk.data(), bg, nb, cols);
    if (m < M) rows_tail<T, kRows - 1, true>(yg + m * N, N, xa + m * nb, src, pk.data(), bg, nb, cols, M - m);
  }
}

}  // namespace ATTO_Q4_CHAIN_NS
}  // namespace ATTO_KERNELS_NS::quant_detail
#if defined(ATTO_Q4_ZMM)
#pragma GCC diagnostic pop
#endif
#endif  // ATTO_Q4_CHAIN
