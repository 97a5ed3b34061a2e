// atto/kernels/quant_q6k.cpp: the linear layer's Q6_K outputs in quant.h's Q6_K order: per output
// one float chain, one FMA an activation block of 32 (b = 8s + j, sub-blocks 2j and 2j + 1 of
// super-block s): acc = fma(d * dx_b, float(Q_b), acc), Q_b = sc_2j P_2j + sc_2j+1 P_2j+1 exact,
// P_i = sum (u - 32) * x_int over 16 values, u the 6-bit weight. On x86 the unsigned u meets x in
// vpdpbusd (or vpmaddubsw + vpmaddwd), and 32 * sum(x) over the 16 values comes off after.
// As quant_q4k_q5k.cpp's Q4_K, x86 computes 16 (zmm) or 8 (ymm) columns at once, one a lane: a
// super-block of W columns is laid out as 8 x 8 vectors of u (block j, dword g: lane c = column
// c's u[32j + 4g..+3]), 16 vectors of int32 scales and one of d. Decoding (M <= the rows of a
// tile) builds each block's vectors in registers from a packing (from rows: lays out each
// super-block) as it goes; prompts lay out a column group once for all row tiles.
#if !defined(ATTO_Q6K_CHAIN)
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/quant_impl.h"

#if defined(__aarch64__)
#include <arm_neon.h>
#endif

namespace ATTO_KERNELS_NS::quant_detail {
namespace {

constexpr int64_t kSb6 = 210;  // bytes a Q6_K super-block: 128 ql, 64 qh, 16 int8 scales, f16 d

// The 6-bit value v (0..255) of a super-block: ql's low or high nibble and qh's bit pair (ggml's
// dequantize_row_q6_K): half h = v / 128, run g = (v % 128) / 32, l = v % 32.
QINLINE int six_bit(const uint8_t* blk, int v) {
  const int h = v / 128, g = (v % 128) / 32, l = v % 32;
  const uint8_t lo = blk[64 * h + 32 * (g % 2) + l], hi = blk[128 + 32 * h + l];
  return ((g >= 2 ? lo >> 4 : lo & 0x0F) | (((hi >> (2 * g)) & 3) << 4));
}
QINLINE int scale_of(const uint8_t* blk, int i) { return static_cast<int8_t>(blk[192 + i]); }

// Q_b of sub-blocks 2j and 2j + 1 against activation ints q (exact: |Q_b| <= 2 * 128 * 16 * 32 * 127).
int32_t block_q6_ref(const uint8_t* blk, int j, const int8_t* q) {
  int32_t p[2] = {0, 0};
  for (int i = 0; i < 32; i++) p[i / 16] += (six_bit(blk, 32 * j + i) - 32) * int32_t{q[i]};
  return scale_of(blk, 2 * j) * p[0] + scale_of(blk, 2 * j + 1) * p[1];
}

#if defined(__aarch64__)
// The same chain, P on NEON: the 32 values u - 32 of the block built from ql and qh, 16-bit
// products (at most 32 * 127, two a lane), then across each half.
float dot_neon(const ActBlock* xa, const uint8_t* w, int64_t nb) {
  float acc = 0.0f;
  for (int64_t s = 0; s < nb / 8; s++) {
    const uint8_t* blk = w + s * kSb6;
    const float d = half_at(blk + 208);
    for (int j = 0; j < 8; j++) {
      const int h = j / 4, g = j % 4;
      const uint8_t* ql = blk + 64 * h + 32 * (g % 2);
      const uint8_t* qh = blk + 128 + 32 * h;
      const int8x16_t shift = vdupq_n_s8(static_cast<int8_t>(-2 * g));
      int8x16_t v[2];
      for (int k = 0; k < 2; k++) {
        uint8x16_t lo = vld1q_u8(ql + 16 * k);
        lo = g >= 2 ? vshrq_n_u8(lo, 4) : vandq_u8(lo, vdupq_n_u8(0x0F));
        const uint8x16_t hi = vandq_u8(vshlq_u8(vld1q_u8(qh + 16 * k), shift), vdupq_n_u8(3));
        v[k] = vsubq_s8(vreinterpretq_s8_u8(vorrq_u8(lo, vshlq_n_u8(hi, 4))), vdupq_n_s8(32));
      }
      const ActBlock& a = xa[8 * s + j];
      int32_t p[2];
      for (int k = 0; k < 2; k++) {
        const int8x16_t x = vld1q_s8(a.q + 16 * k);
        p[k] = vaddlvq_s16(vmlal_high_s8(vmull_s8(vget_low_s8(v[k]), vget_low_s8(x)), v[k], x));
      }
      const int32_t qb = scale_of(blk, 2 * j) * p[0] + scale_of(blk, 2 * j + 1) * p[1];
      acc = std::fma(d * a.d, static_cast<float>(qb), acc);
    }
  }
  return acc;
}
#endif

}  // namespace

float q6k_dot_ref(const ActBlock* xa, const uint8_t* w, int64_t nb) {
  float acc = 0.0f;
  for (int64_t s = 0; s < nb / 8; s++) {
    const uint8_t* blk = w + s * kSb6;
    const float d = half_at(blk + 208);
    for (int j = 0; j < 8; j++) {
      const ActBlock& a = xa[8 * s + j];
      acc = std::fma(d * a.d, static_cast<float>(block_q6_ref(blk, j, a.q)), acc);
    }
  }
  return acc;
}

// As io's dequantize_q6_k: (d * sc) * (u - 32), left to right.
void q6k_dequantize_row(float* out, const uint8_t* row, int64_t K) {
  for (int64_t s = 0; s < K / 256; s++) {
    const uint8_t* blk = row + s * kSb6;
    const float d = half_at(blk + 208);
    for (int v = 0; v < 256; v++)
      out[s * 256 + v] = d * static_cast<float>(scale_of(blk, v / 16)) * static_cast<float>(six_bit(blk, v) - 32);
  }
}

}  // namespace ATTO_KERNELS_NS::quant_detail

#if defined(__AVX2__)
#define ATTO_Q6K_CHAIN 1
#define ATTO_Q6K_CHAIN_NS q6k_avx2
#include "kernels/quant_q6k.cpp"  // NOLINT(build/include): 8 columns, vpmaddubsw + vpmaddwd
#undef ATTO_Q6K_CHAIN_NS
#if ATTO_QUANT_AVXVNNI
ATTO_QUANT_TARGET_PUSH("avxvnni")
#define ATTO_Q6K_CHAIN_NS q6k_avxvnni
#define ATTO_Q6K_DPBUSD(src, u, s) _mm256_dpbusd_avx_epi32(src, u, s)
#include "kernels/quant_q6k.cpp"  // NOLINT(build/include): 8 columns, VEX vpdpbusd
#undef ATTO_Q6K_DPBUSD
#undef ATTO_Q6K_CHAIN_NS
ATTO_QUANT_TARGET_POP
#endif
#if ATTO_QUANT_AVX512VNNI
ATTO_QUANT_TARGET_PUSH("avx512vnni,avx512vl")
#define ATTO_Q6K_CHAIN_NS q6k_avx512vnni
#define ATTO_Q6K_ZMM 1
#include "kernels/quant_q6k.cpp"  // NOLINT(build/include): 16 columns on zmm, vpdpbusd
#undef ATTO_Q6K_ZMM
#undef ATTO_Q6K_CHAIN_NS
ATTO_QUANT_TARGET_POP
#endif
#undef ATTO_Q6K_CHAIN
#endif  // __AVX2__

namespace ATTO_KERNELS_NS::quant_detail {

std::vector<int32_t> q6k_half_sums(const ActBlock* xa, int64_t n) {
  std::vector<int32_t> out(static_cast<size_t>(2 * n));
  for (int64_t b = 0; b < n; b++)
    for (int h = 0; h < 2; h++) {
      int32_t sum = 0;
      for (int i = 0; i < 16; i++) sum += xa[b].q[16 * h + i];
      out[static_cast<size_t>(2 * b + h)] = 32 * sum;
    }
  return out;
}

void q6k_columns(DotKind k, bool packed, float* y, const ActBlock* xa, const int32_t* xs32, const uint8_t* w,
                 const float* bias, int64_t M, int64_t N, int64_t nb, int64_t n0, int64_t n1) {
#if defined(__AVX2__)
  switch (k) {
#if ATTO_QUANT_AVX512VNNI
    case DotKind::Avx512Vnni: return q6k_avx512vnni::columns(packed, y, xa, xs32, w, bias, M, N, nb, n0, n1);
#endif
#if ATTO_QUANT_AVXVNNI
    case DotKind::AvxVnni: return q6k_avxvnni::columns(packed, y, xa, xs32, w, bias, M, N, nb, n0, n1);
#endif
    case DotKind::Avx2: return q6k_avx2::columns(packed, y, xa, xs32, w, bias, M, N, nb, n0, n1);
    default: break;
  }
#else
  (void)xs32;
#endif
  const auto dot = [k, nb](const ActBlock* x, const uint8_t* r) {
#if defined(__aarch64__)
    if (k == DotKind::Neon) return dot_neon(x, r, nb);
#else
    (void)k;
#endif
    return q6k_dot_ref(x, r, nb);
  };
  if (packed) return packed_columns_one_by_one(y, xa, w, LaneBlock{kSb6, 0, 256}, bias, M, N, nb, n0, n1, dot);
  columns_one_by_one(y, xa, w, bias, M, N, nb, nb / 8 * kSb6, n0, n1, dot);
}

}  // namespace ATTO_KERNELS_NS::quant_detail

#else  // ATTO_Q6K_CHAIN: W columns at once for one dot product, included up to three times above
namespace ATTO_KERNELS_NS::quant_detail {
namespace ATTO_Q6K_CHAIN_NS {

#if defined(ATTO_Q6K_ZMM)
// (GCC 12 flags the intrinsics' own undefined-register idiom as (maybe-)uninitialized.)
#pragma GCC diagnostic push
#if !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif
#pragma GCC diagnostic ignored "-Wuninitialized"
#define ATTO_QUANT_LANES_ZMM 1
#include "kernels/quant_lanes.h"  // NOLINT(build/include): W, VI, VF and their operations
#undef ATTO_QUANT_LANES_ZMM
template <int n>
QINLINE VI byte_of(VI a) {  // the sign-extended byte n of each dword
  return _mm512_srai_epi32(_mm512_slli_epi32(a, 24 - 8 * n), 24);
}
// The 16 columns' d (the f16 at byte 208 of the super-block, read as the high half of bytes 206..209).
QINLINE VF scale_d(const uint8_t* wb, const int32_t* off) {
  const VI h = _mm512_i32gather_epi32(_mm512_loadu_si512(off), wb + 206, 1);
  return _mm512_cvtph_ps(_mm512_cvtepi32_epi16(_mm512_srli_epi32(h, 16)));  // exact
}
// 16 halves at p as floats (exact).
QINLINE VF load_halves(const uint8_t* p) { return _mm512_cvtph_ps(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(p))); }
// sum (u - 32) x_int over 16 values of the 16 columns (u vectors v[0..3], x dwords at q), before
// the -32 sum(x) (vpdpbusd: u8 x s8, exact).
QINLINE VI half_ints(const VI* v, const int8_t* q) {
  VI i0 = _mm512_dpbusd_epi32(zeroi(), v[0], set1(ldq4(q)));
  VI i1 = _mm512_dpbusd_epi32(zeroi(), v[1], set1(ldq4(q + 4)));
  i0 = _mm512_dpbusd_epi32(i0, v[2], set1(ldq4(q + 8)));
  i1 = _mm512_dpbusd_epi32(i1, v[3], set1(ldq4(q + 12)));
  return _mm512_add_epi32(i0, i1);
}
#else
#include "kernels/quant_lanes.h"  // NOLINT(build/include): W, VI, VF and their operations
template <int n>
QINLINE VI byte_of(VI a) {  // the sign-extended byte n of each dword
  return _mm256_srai_epi32(_mm256_slli_epi32(a, 24 - 8 * n), 24);
}
// The 8 columns' d (the f16 at byte 208 of the super-block).
QINLINE VF scale_d(const uint8_t* wb, const int32_t* off) {
  alignas(16) uint16_t h[W];
  for (int c = 0; c < W; c++) std::memcpy(h + c, wb + off[c] + 208, 2);
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));  // exact
}
// 8 halves at p as floats (exact).
QINLINE VF load_halves(const uint8_t* p) { return _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p))); }
// sum u x_int over 16 values of the 8 columns (u vectors v[0..3], x dwords at q).
QINLINE VI half_ints(const VI* v, const int8_t* q) {
#if defined(ATTO_Q6K_DPBUSD)
  VI i0 = ATTO_Q6K_DPBUSD(zeroi(), v[0], set1(ldq4(q)));
  VI i1 = ATTO_Q6K_DPBUSD(zeroi(), v[1], set1(ldq4(q + 4)));
  i0 = ATTO_Q6K_DPBUSD(i0, v[2], set1(ldq4(q + 8)));
  i1 = ATTO_Q6K_DPBUSD(i1, v[3], set1(ldq4(q + 12)));
  return _mm256_add_epi32(i0, i1);
#else
  // vpmaddubsw: pairs of u * x, at most 2 * 63 * 127 = 16002; two vectors' pairs summed, 32004 < 32767.
  const VI s0 =
      _mm256_add_epi16(_mm256_maddubs_epi16(v[0], set1(ldq4(q))), _mm256_maddubs_epi16(v[1], set1(ldq4(q + 4))));
  const VI s1 =
      _mm256_add_epi16(_mm256_maddubs_epi16(v[2], set1(ldq4(q + 8))), _mm256_maddubs_epi16(v[3], set1(ldq4(q + 12))));
  const VI one = _mm256_set1_epi16(1);
  return _mm256_add_epi32(_mm256_madd_epi16(s0, one), _mm256_madd_epi16(s1, one));
#endif
}
#endif

// A laid-out super-block: 64 vectors of u (block j, dword g at 8j + g), 16 of int32 scales, d.
constexpr int64_t kU = 0, kSc = 64, kD = 80, kVecs = 81;
constexpr int64_t kPacked = kVecs * W * 4;

using Source = LaneSource<kSb6>;

// The d of super-block s of src's columns.
QINLINE VF d_of(const Source& src, int64_t s) {
  return src.pg == nullptr ? scale_d(src.wg + s * kSb6, src.off)
                           : load_halves(src.pg + s * 16 * kSb6 + 3328 + src.sub * W * 2);
}

// Lays out super-block s of the W columns of src.
QINLINE void lay_out(uint8_t* out, const Source& src, int64_t s) {
  auto at = [out](int64_t v) { return out + v * W * 4; };
  const VI m4 = set1(0x0f0f0f0f), m30 = set1(0x30303030);
  for (int h = 0; h < 2; h++) {
    VI a[8], b[8], q[8];
    src.load4(a, s, 64 * h), src.load4(a + 4, s, 64 * h + 16);
    src.load4(b, s, 64 * h + 32), src.load4(b + 4, s, 64 * h + 48);
    src.load4(q, s, 128 + 32 * h), src.load4(q + 4, s, 128 + 32 * h + 16);
    for (int g = 0; g < 8; g++) {
      vstore(at(kU + 8 * (4 * h + 0) + g), vor(vand(a[g], m4), vand(sll16<4>(q[g]), m30)));
      vstore(at(kU + 8 * (4 * h + 1) + g), vor(vand(b[g], m4), vand(sll16<2>(q[g]), m30)));
      vstore(at(kU + 8 * (4 * h + 2) + g), vor(vand(srl16<4>(a[g]), m4), vand(q[g], m30)));
      vstore(at(kU + 8 * (4 * h + 3) + g), vor(vand(srl16<4>(b[g]), m4), vand(srl16<2>(q[g]), m30)));
    }
  }
  VI t[4];
  src.load4(t, s, 192);
  for (int g = 0; g < 4; g++) {
    vstore(at(kSc + 4 * g + 0), byte_of<0>(t[g]));
    vstore(at(kSc + 4 * g + 1), byte_of<1>(t[g]));
    vstore(at(kSc + 4 * g + 2), byte_of<2>(t[g]));
    vstore(at(kSc + 4 * g + 3), byte_of<3>(t[g]));
  }
  vstoref(at(kD), d_of(src, s));
}

// Block j of super-block s for R rows (xa, row r at xa + r * nb; xs32 their 32 * sum(x) per half
// block): its u vectors, its two sub-blocks' scales and the super-block's d.
template <int R>
QINLINE void block_rows(VF* acc, const ActBlock* xa, const int32_t* xs32, const VI* u, VI sc0, VI sc1, VF d, int64_t nb,
                        int64_t s, int j) {
  for (int r = 0; r < R; r++) {
    const int64_t b = r * nb + 8 * s + j;
    const ActBlock& a = xa[b];
    const VI p0 = sub32(half_ints(u, a.q), set1(xs32[2 * b]));
    const VI p1 = sub32(half_ints(u + 4, a.q + 16), set1(xs32[2 * b + 1]));
    const VI qb = add32(mul32(sc0, p0), mul32(sc1, p1));
    acc[r] = vfma(vmul(d, set1f(a.d)), cvt(qb), acc[r]);
  }
}

template <int R>
QINLINE void store_rows(float* y, int64_t ldy, const VF* acc, const float* bias, int cols) {
  alignas(64) float out[W];
  for (int r = 0; r < R; r++) {
    vstoref(out, acc[r]);
    store_row(y + r * ldy, out, bias, cols);
  }
}

// R rows of one column group: the super-blocks laid out as they come (src) or read from pk (kLaid).
template <int R, bool kLaid>
QINLINE void tile(float* y, int64_t ldy, const ActBlock* xa, const int32_t* xs32, const Source& src, const uint8_t* pk,
                  const float* bias, int64_t nb, int cols) {
  VF acc[R];
  for (int r = 0; r < R; r++) acc[r] = zerof();
  alignas(64) uint8_t sbuf[kLaid ? 64 : kPacked];
  for (int64_t s = 0; s < nb / 8; s++) {
    const uint8_t* ps;
    if constexpr (kLaid) {
      ps = pk + s * kPacked;
    } else {
      if constexpr (R <= 2)
        for (int64_t o = 0; o < 256; o += 64) src.prefetch_next(s, o, nb / 8);
      lay_out(sbuf, src, s);
      ps = sbuf;
    }
    const VF d = vloadf(ps + kD * W * 4);
    for (int j = 0; j < 8; j++) {
      VI u[8];
      for (int g = 0; g < 8; g++) u[g] = vload(ps + (kU + 8 * j + g) * W * 4);
      const VI sc0 = vload(ps + (kSc + 2 * j) * W * 4), sc1 = vload(ps + (kSc + 2 * j + 1) * W * 4);
      block_rows<R>(acc, xa, xs32, u, sc0, sc1, d, nb, s, j);
    }
  }
  store_rows<R>(y, ldy, acc, bias, cols);
}

// Block j = 4h + k of super-block s from a Lanes16 packing, built in registers: lay_out's u
// vectors of the block and the scales of its two sub-blocks (byte 2(j % 2) and the next of the
// scale dwords t[j / 2]).
template <int j>
QINLINE void packed_block(VI* u, VI* sc, const Source& src, const VI* t, int64_t s) {
  constexpr int h = j / 4, k = j % 4;
  const VI m4 = set1(0x0f0f0f0f), m30 = set1(0x30303030);
  VI l[8], q[8];
  src.load4(l, s, 64 * h + 32 * (k % 2)), src.load4(l + 4, s, 64 * h + 32 * (k % 2) + 16);
  src.load4(q, s, 128 + 32 * h), src.load4(q + 4, s, 128 + 32 * h + 16);
  for (int g = 0; g < 8; g++) {
    const VI lo = k >= 2 ? srl16<4>(l[g]) : l[g];
    const VI hi = k == 0 ? sll16<4>(q[g]) : k == 1 ? sll16<2>(q[g]) : k == 2 ? q[g] : srl16<2>(q[g]);
    u[g] = vor(vand(lo, m4), vand(hi, m30));
  }
  sc[0] = byte_of<2 * (j % 2)>(t[j / 2]), sc[1] = byte_of<2 * (j % 2) + 1>(t[j / 2]);
}

// Blocks j.. 7 of super-block s (t: its scale dwords) for R rows, each built in registers.
template <int R, int j>
QINLINE void packed_blocks(VF* acc, const ActBlock* xa, const int32_t* xs32, const Source& src, const VI* t, VF d,
                           int64_t nb, int64_t s) {
  VI u[8], sc[2];
  packed_block<j>(u, sc, src, t, s);
  block_rows<R>(acc, xa, xs32, u, sc[0], sc[1], d, nb, s, j);
  if constexpr (j < 7) packed_blocks<R, j + 1>(acc, xa, xs32, src, t, d, nb, s);
}

// Decoding from a Lanes16 packing: tile's R rows with each block built in registers as it is
// used, not laid out through memory first (a super-block's 81 vectors stored and read back).
template <int R>
QINLINE void tile_packed(float* y, int64_t ldy, const ActBlock* xa, const int32_t* xs32, const Source& src,
                         const float* bias, int64_t nb, int cols) {
  VF acc[R];
  for (int r = 0; r < R; r++) acc[r] = zerof();
  for (int64_t s = 0; s < nb / 8; s++) {
    if constexpr (R <= 2)
      for (int64_t o = 0; o < 256; o += 64) src.prefetch_next(s, o, nb / 8);
    VI t[4];
    src.load4(t, s, 192);
    packed_blocks<R, 0>(acc, xa, xs32, src, t, d_of(src, s), nb, s);
  }
  store_rows<R>(y, ldy, acc, bias, cols);
}

// The last rem < kRows rows of a column group: one tile of rem rows.
template <int R, bool kLaid>
QINLINE void rows_tail(float* y, int64_t ldy, const ActBlock* xa, const int32_t* xs32, const Source& src,
                       const uint8_t* pk, const float* bias, int64_t nb, int cols, int64_t rem) {
  if (rem == R) {
    if constexpr (!kLaid)
      if (src.pg != nullptr) return tile_packed<R>(y, ldy, xa, xs32, src, bias, nb, cols);
    tile<R, kLaid>(y, ldy, xa, xs32, src, pk, bias, nb, cols);
  } else if constexpr (R > 1)
    rows_tail<R - 1, kLaid>(y, ldy, xa, xs32, src, pk, bias, nb, cols, rem);
}

// Columns [n0, n1) (n0 a multiple of 16) of all M rows, W a group; w in ggml's rows or (packed)
// quant.h's Lanes16.
void columns(bool packed, float* y, const ActBlock* xa, const int32_t* xs32, const uint8_t* w, const float* bias,
             int64_t M, int64_t N, int64_t nb, int64_t n0, int64_t n1) {
  const int64_t rb = nb / 8 * kSb6;
  std::vector<uint8_t> pk(M > kRows ? static_cast<size_t>(nb / 8 * kPacked) : 0);
  for (int64_t c0 = n0; c0 < n1; c0 += W) {
    const int cols = static_cast<int>(std::min<int64_t>(W, n1 - c0));
    alignas(64) int32_t off[W];  // a missing column (past n1) repeats the last one, not stored
    for (int c = 0; c < W; c++) off[c] = static_cast<int32_t>(std::min(c, cols - 1) * rb);
    Source src;
    if (packed && c0 < N / 16 * 16)  // a whole group of 16 (the rows past the last are as they are)
      src.pg = w + c0 / 16 * 16 * rb, src.sub = static_cast<int>(c0 % 16 / W);
    else
      src.wg = w + c0 * rb, src.off = off;
    float* yg = y + c0;
    const float* bg = bias != nullptr ? bias + c0 : nullptr;
    if (M <= kRows) {
      rows_tail<kRows, false>(yg, N, xa, xs32, src, nullptr, bg, nb, cols, M);
      continue;
    }
    for (int64_t s = 0; s < nb / 8; s++) lay_out(pk.data() + s * kPacked, src, s);
    int64_t m = 0;
    for (; m + kRows <= M; m += kRows)
      tile<kRows, true>(yg + m * N, N, xa + m * nb, xs32 + 2 * m * nb, src, pk.data(), bg, nb, cols);
    if (m < M)
      rows_tail<kRows - 1, true>(yg + m * N, N, xa + m * nb, xs32 + 2 * m * nb, src, pk.data(), bg, nb, cols,
                                 M - m);
  }
}

}  // namespace ATTO_Q6K_CHAIN_NS
}  // namespace ATTO_KERNELS_NS::quant_detail
#if defined(ATTO_Q6K_ZMM)
#pragma GCC diagnostic pop
#endif
#endif  // ATTO_Q6K_CHAIN
