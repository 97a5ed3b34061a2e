// atto/kernels/quant_q4k.cpp: the linear layer's Q4_K outputs in quant.h's Q4_K order: per
// output one float chain, two FMAs a sub-block of 32 (activation block b = 8s + j):
// acc = fma((d * sc_b) * dx_b, float(P_b), acc), acc = fma(-((dmin * m_b) * dx_b), float(S_b), acc),
// P_b = sum nibble * x_int (exact int32: vpdpbusd's u8 x s8 as it is), S_b = sum x_int.
// As quant_q4_q8.cpp's q4_0, x86 computes 16 (zmm) or 8 (ymm) columns at once, one a lane: the 32
// bytes of nibbles that sub-blocks 2p and 2p + 1 share (values 64p + i: low nibble of byte i;
// 64p + 32 + i: its high one) are laid out [g = 0..7][column][4 bytes qs[32p + 4g..+3]], and each
// sub-block takes the low or high nibbles of those 8 vectors. A super-block's 8 x 2 scale
// products (d * sc_b and dmin * m_b: exact, 17 bits) are formed once for the columns.
// Decoding (M <= the rows of a tile) builds them from the rows as it goes; prompts lay a column
// group out once (a scratch of K/256 * 48 vectors a thread) for all row tiles.
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

constexpr int64_t kSb = 144;  // bytes a Q4_K super-block: d, dmin, 12 bytes of scales, 128 of nibbles

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

// P_b: the sub-block's nibbles (low or high of the 32 bytes qs) times q, exact.
int32_t sub_dot_ref(const uint8_t* qs, int high, const int8_t* q) {
  int32_t p = 0;
  for (int i = 0; i < 32; i++) p += int32_t{high != 0 ? qs[i] >> 4 : qs[i] & 0x0F} * q[i];
  return p;
}

#if defined(__aarch64__)
// The same chain, P_b on NEON: 16-bit products (nibble * x: at most 1905, four a lane), then across.
float dot_neon(const ActBlock* xa, const uint8_t* w, int64_t nb) {
  float acc = 0.0f;
  for (int64_t s = 0; s < nb / 8; s++) {
    const uint8_t* blk = w + s * kSb;
    const float d = half_at(blk), dmin = half_at(blk + 2);
    uint32_t u[4];
    scale_words(u, blk + 4);
    for (int j = 0; j < 8; j++) {
      const uint8_t* qs = blk + 16 + 32 * (j / 2);
      uint8x16_t q0 = vld1q_u8(qs), q1 = vld1q_u8(qs + 16);
      if (j % 2 == 0)
        q0 = vandq_u8(q0, vdupq_n_u8(0x0F)), q1 = vandq_u8(q1, vdupq_n_u8(0x0F));
      else
        q0 = vshrq_n_u8(q0, 4), q1 = vshrq_n_u8(q1, 4);
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

float q4k_dot_ref(const ActBlock* xa, const uint8_t* w, int64_t nb) {
  float acc = 0.0f;
  for (int64_t s = 0; s < nb / 8; s++) {
    const uint8_t* blk = w + s * kSb;
    const float d = half_at(blk), dmin = half_at(blk + 2);
    uint32_t u[4];
    scale_words(u, blk + 4);
    for (int j = 0; j < 8; j++) {
      const ActBlock& a = xa[8 * s + j];
      const int32_t p = sub_dot_ref(blk + 16 + 32 * (j / 2), j % 2, a.q);
      acc = step(acc, d * static_cast<float>(six_bits(u, 0, j)), dmin * static_cast<float>(six_bits(u, 2, j)), a, p);
    }
  }
  return acc;
}

// As io's dequantize_q4_k: (d * sc) * nibble - dmin * m (both products exact, so one rounding,
// fused or not).
void q4k_dequantize_row(float* out, const uint8_t* row, int64_t K) {
  for (int64_t s = 0; s < K / 256; s++) {
    const uint8_t* blk = row + s * kSb;
    const float d = half_at(blk), dmin = half_at(blk + 2);
    uint32_t u[4];
    scale_words(u, blk + 4);
    for (int j = 0; j < 8; j++) {
      const float d1 = d * static_cast<float>(six_bits(u, 0, j)), m1 = dmin * static_cast<float>(six_bits(u, 2, j));
      const uint8_t* qs = blk + 16 + 32 * (j / 2);
      float* o = out + s * 256 + 32 * j;
      for (int i = 0; i < 32; i++) o[i] = d1 * static_cast<float>(j % 2 != 0 ? qs[i] >> 4 : qs[i] & 0x0F) - m1;
    }
  }
}

}  // namespace ATTO_KERNELS_NS::quant_detail

#if defined(__AVX2__)
#define ATTO_Q4K_CHAIN 1
#define ATTO_Q4K_CHAIN_NS q4k_avx2
#include "kernels/quant_q4k.cpp"  // NOLINT(build/include): 8 columns, vpmaddubsw + vpmaddwd
#undef ATTO_Q4K_CHAIN_NS
#if ATTO_QUANT_AVXVNNI
ATTO_QUANT_TARGET_PUSH("avxvnni")
#define ATTO_Q4K_CHAIN_NS q4k_avxvnni
#define ATTO_Q4K_DPBUSD(src, u, s) _mm256_dpbusd_avx_epi32(src, u, s)
#include "kernels/quant_q4k.cpp"  // NOLINT(build/include): 8 columns, VEX vpdpbusd
#undef ATTO_Q4K_DPBUSD
#undef ATTO_Q4K_CHAIN_NS
ATTO_QUANT_TARGET_POP
#endif
#if ATTO_QUANT_AVX512VNNI
ATTO_QUANT_TARGET_PUSH("avx512vnni,avx512vl")
#define ATTO_Q4K_CHAIN_NS q4k_avx512vnni
#define ATTO_Q4K_ZMM 1
#include "kernels/quant_q4k.cpp"  // NOLINT(build/include): 16 columns on zmm, vpdpbusd
#undef ATTO_Q4K_ZMM
#undef ATTO_Q4K_CHAIN_NS
ATTO_QUANT_TARGET_POP
#endif
#undef ATTO_Q4K_CHAIN
#endif  // __AVX2__

namespace ATTO_KERNELS_NS::quant_detail {

void q4k_columns(DotKind k, bool packed, float* y, const ActBlock* xa, const uint8_t* w, const float* bias, int64_t M,
                 int64_t N, int64_t nb, int64_t n0, int64_t n1) {
#if defined(__AVX2__)
  switch (k) {
#if ATTO_QUANT_AVX512VNNI
    case DotKind::Avx512Vnni: return q4k_avx512vnni::columns(packed, y, xa, w, bias, M, N, nb, n0, n1);
#endif
#if ATTO_QUANT_AVXVNNI
    case DotKind::AvxVnni: return q4k_avxvnni::columns(packed, y, xa, w, bias, M, N, nb, n0, n1);
#endif
    case DotKind::Avx2: return q4k_avx2::columns(packed, y, xa, w, bias, M, N, nb, n0, n1);
    default: break;
  }
#endif
  const auto dot = [k, nb](const ActBlock* x, const uint8_t* r) {
#if defined(__aarch64__)
    if (k == DotKind::Neon) return dot_neon(x, r, nb);
#else
    (void)k;
#endif
    return q4k_dot_ref(x, r, nb);
  };
  if (packed) return packed_columns_one_by_one(y, xa, w, LaneBlock{kSb, 0, 256}, bias, M, N, nb, n0, n1, dot);
  columns_one_by_one(y, xa, w, bias, M, N, nb, nb / 8 * kSb, n0, n1, dot);
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
QINLINE VI hi4(VI a) { return srl16<4>(a); }
// P_b of the 16 columns (nibble vectors v) against activation block a.
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
QINLINE VI hi4(VI a) { return srl16<4>(a); }
QINLINE VF halves(const uint16_t* h) {
  return _mm256_cvtph_ps(_mm_load_si128(reinterpret_cast<const __m128i*>(h)));
}
// P_b of the 8 columns (nibble vectors v) against activation block a (vpmaddubsw: 16 products of
// at most 15 * 127 an int16 lane over the 8 vectors, 30480 < 32767: exact).
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
  return _mm256_madd_epi16(_mm256_add_epi16(s0, s1), _mm256_set1_epi16(1));
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

using Source = LaneSource<kSb>;

// The first 4 dwords of super-block s of src's columns (w[q] lane c = column c's dword q).
QINLINE void head_of(VI* w, const Source& src, int64_t s) {
  if (src.pg == nullptr) return head_words(w, src.wg + s * kSb, src.off);
  src.load4(w, s, 0);
}

// A super-block's d, dmin and 6-bit words (scale_words: the scales of sub-blocks 0-3 and 4-7, the
// mins of 0-3 and 4-7, byte j % 4) of the W columns.
QINLINE void scale_vectors(VI* u, VF& d, VF& dmin, const Source& src, int64_t s) {
  VI a[4];
  head_of(a, src, s);
  halves_of(d, dmin, a[0]);
  const VI m6 = set1(0x3f3f3f3f), m4 = set1(0x0f0f0f0f), m2 = set1(0x30303030);
  u[0] = vand(a[1], m6);
  u[1] = vor(vand(a[3], m4), vand(srl32(a[1], 2), m2));
  u[2] = vand(a[2], m6);
  u[3] = vor(vand(srl32(a[3], 4), m4), vand(srl32(a[2], 2), m2));
}

// Floats a super-block's scale products take: d * sc_b (rows 0..7) and dmin * m_b (8..15), W each.
constexpr int64_t kScaleFloats = 16 * W;
// Bytes of a laid-out super-block: 4 pairs x 8 nibble vectors, then the scale products.
constexpr int64_t kPacked = 32 * W * 4 + kScaleFloats * 4;

// The scale products of super-block s of the W columns of src, exact.
QINLINE void scales(float* out, const Source& src, int64_t s) {
  VI u[4];
  VF d, dmin;
  scale_vectors(u, d, dmin, src, s);
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
QINLINE void pair_bytes(VI* t, const Source& src, int64_t s, int p) {
  src.load4(t, s, 16 + 32 * p);
  src.load4(t + 4, s, 16 + 32 * p + 16);
}

// R rows (xa, row r at xa + r * nb) of one column group: the weights built from src as they come
// or read from the group's laid-out super-blocks (kLaid: pk).
template <int R, bool kLaid>
QINLINE void tile(float* y, int64_t ldy, const ActBlock* xa, const Source& src, const uint8_t* pk, const float* bias,
                  int64_t nb, int cols) {
  VF acc[R];
  for (int r = 0; r < R; r++) acc[r] = zerof();
  const VI lo = set1(0x0f0f0f0f);
  alignas(64) float sbuf[kLaid ? 1 : kScaleFloats];
  for (int64_t s = 0; s < nb / 8; s++) {
    const float* sc = sbuf;
    if constexpr (kLaid) {
      sc = reinterpret_cast<const float*>(pk + s * kPacked + 32 * W * 4);
    } else {
      scales(sbuf, src, s);
    }
    for (int p = 0; p < 4; p++) {
      VI t[8];
      if constexpr (kLaid) {
        for (int g = 0; g < 8; g++) t[g] = vload(pk + s * kPacked + (8 * p + g) * W * 4);
      } else {
        if constexpr (R <= 2) src.prefetch_next(s, 36 * p, nb / 8);
        pair_bytes(t, src, s, p);
      }
      for (int h = 0; h < 2; h++) {
        VI v[8];
        for (int g = 0; g < 8; g++) v[g] = vand(h == 0 ? t[g] : hi4(t[g]), lo);
        const int j = 2 * p + h;
        const VF dsc = vloadf(sc + j * W), dmn = vloadf(sc + (8 + j) * W);
        for (int r = 0; r < R; r++) {
          const ActBlock& a = xa[r * nb + 8 * s + j];
          acc[r] = fma_sub(dsc, dmn, a, block_ints(v, a), acc[r]);
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
template <int R, bool kLaid>
QINLINE void rows_tail(float* y, int64_t ldy, const ActBlock* xa, const Source& src, const uint8_t* pk,
                       const float* bias, int64_t nb, int cols, int64_t rem) {
  if (rem == R)
    tile<R, kLaid>(y, ldy, xa, src, pk, bias, nb, cols);
  else if constexpr (R > 1)
    rows_tail<R - 1, kLaid>(y, ldy, xa, src, pk, bias, nb, cols, rem);
}

// Columns [n0, n1) (n0 a multiple of 16) of all M rows, W a group; w in ggml's rows or (packed)
// quant.h's Lanes16.
void columns(bool packed, float* y, const ActBlock* xa, const uint8_t* w, const float* bias, int64_t M, int64_t N,
             int64_t nb, int64_t n0, int64_t n1) {
  const int64_t rb = nb / 8 * kSb;
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
      rows_tail<kRows, false>(yg, N, xa, src, nullptr, bg, nb, cols, M);
      continue;
    }
    for (int64_t s = 0; s < nb / 8; s++) {
      uint8_t* ps = pk.data() + s * kPacked;
      for (int p = 0; p < 4; p++) {
        VI t[8];
        pair_bytes(t, src, s, p);
        for (int g = 0; g < 8; g++) vstore(ps + (8 * p + g) * W * 4, t[g]);
      }
      scales(reinterpret_cast<float*>(ps + 32 * W * 4), src, s);
    }
    int64_t m = 0;
    for (; m + kRows <= M; m += kRows) tile<kRows, true>(yg + m * N, N, xa + m * nb, src, pk.data(), bg, nb, cols);
    if (m < M) rows_tail<kRows - 1, true>(yg + m * N, N, xa + m * nb, src, pk.data(), bg, nb, cols, M - m);
  }
}

}  // namespace ATTO_Q4K_CHAIN_NS
}  // namespace ATTO_KERNELS_NS::quant_detail
#if defined(ATTO_Q4K_ZMM)
#pragma GCC diagnostic pop
#endif
#endif  // ATTO_Q4K_CHAIN
