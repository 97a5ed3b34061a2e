// atto/io/ggml_quants_q5.cpp: the ggml types of ggml_quants.h beyond f16, q8_0, q4_0, Q4_K and
// Q6_K, which llama.cpp's files carry: q4_1, q5_0, q5_1, Q5_K and Q3_K (read and written), Q2_K,
// iq4_nl and iq4_xs (read), bf16. Each function follows the ggml-quants.c function it names, operation for
// operation (ggml_quants_impl.h turns off contraction into FMAs, as ggml's reference builds).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "io/ggml_quants.h"
#include "io/ggml_quants_impl.h"

namespace atto::io {

using namespace quant_detail;  // NOLINT(build/namespaces): the files' shared parts

namespace {

constexpr uint64_t kQK32 = 32, kQKK256 = 256;
constexpr uint64_t kQ41Bytes = 20, kQ50Bytes = 22, kQ51Bytes = 24;
constexpr uint64_t kQ2KBytes = 84, kQ3KBytes = 110, kQ5KBytes = 176;

// C's (uint8_t) conversion of t in [0, 256) (the range ggml's rounding gives), defined for the
// rest: below 0 and NaN give 0, 256 and above 255.
uint8_t trunc_u8(float t) {
  if (!(t > 0.0f)) return 0;
  return t >= 255.0f ? 255 : static_cast<uint8_t>(t);
}

uint32_t read_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// n values in blocks of 32 (in_bytes each, the f16 d first) as q8_0 blocks of the same values:
// the same d, value(block, j) the int8 of value j.
template <class Value>
std::string as_q8_0(const uint8_t* blocks, uint64_t n, uint64_t in_bytes, Value value) {
  std::string out(n / kQK32 * 34, '\0');
  for (uint64_t b = 0; b < n / kQK32; ++b) {
    const uint8_t* o = blocks + b * in_bytes;
    char* q = out.data() + b * 34;
    std::memcpy(q, o, 2);  // d
    for (int j = 0; j < 32; ++j) q[2 + j] = static_cast<char>(value(o, j));
  }
  return out;
}

// q4_1 and q5_1 (nbits 4 or 5) as ggml's quantize_row_q4_1_ref / quantize_row_q5_1_ref: d =
// (max - min) / (2^nbits - 1), m = min, q = trunc((x - min) / d + 0.5) (q4_1: at most 15).
std::vector<uint8_t> quantize_min_offset(std::span<const float> x, int nbits) {
  const uint64_t bytes = nbits == 4 ? kQ41Bytes : kQ51Bytes;
  ATTO_CHECK(x.size() % kQK32 == 0, "q{}_1 needs a multiple of 32 values, got {}", nbits, x.size());
  std::vector<uint8_t> out(x.size() / kQK32 * bytes);
  for (size_t b = 0; b < x.size() / kQK32; ++b) {
    const float* v = x.data() + b * kQK32;
    float min = FLT_MAX, max = -FLT_MAX;
    for (uint64_t j = 0; j < kQK32; ++j) {
      if (v[j] < min) min = v[j];
      if (v[j] > max) max = v[j];
    }
    const float d = (max - min) / static_cast<float>((1 << nbits) - 1), id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t* o = out.data() + b * bytes;
    put_half(o, d);
    put_half(o + 2, min);
    uint8_t* qs = o + (nbits == 4 ? 4 : 8);
    uint32_t qh = 0;
    for (uint64_t j = 0; j < kQK32 / 2; ++j) {
      uint8_t xi0 = trunc_u8((v[j] - min) * id + 0.5f), xi1 = trunc_u8((v[j + 16] - min) * id + 0.5f);
      if (nbits == 4) xi0 = std::min<uint8_t>(15, xi0), xi1 = std::min<uint8_t>(15, xi1);
      qs[j] = static_cast<uint8_t>((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
      qh |= ((xi0 & 0x10u) >> 4) << j;
      qh |= ((xi1 & 0x10u) >> 4) << (j + 16);
    }
    if (nbits == 5) std::memcpy(o + 4, &qh, 4);
  }
  return out;
}

// Value j's q (0..15 or 0..31) of a q4_1 or q5_1 block o: its nibble (low for j < 16), its fifth bit
// (q5_1) from qh, as ggml's dequantize_row_q4_1 / _q5_1.
int min_offset_q(const uint8_t* o, int j, int nbits) {
  const uint32_t qh = nbits == 4 ? 0 : read_u32(o + 4);
  const uint8_t* qs = o + (nbits == 4 ? 4 : 8);
  return j < 16 ? (qs[j] & 0x0F) | static_cast<int>(((qh >> j) << 4) & 0x10)
                : (qs[j - 16] >> 4) | static_cast<int>((qh >> (j - 16 + 12)) & 0x10);
}

// q4_1 and q5_1's values: q * d + m.
void dequantize_min_offset(const uint8_t* blocks, float* out, uint64_t n, int nbits) {
  const uint64_t bytes = nbits == 4 ? kQ41Bytes : kQ51Bytes;
  for (uint64_t b = 0; b < n / kQK32; ++b) {
    const uint8_t* o = blocks + b * bytes;
    const float d = half_at(o), m = half_at(o + 2);
    for (int j = 0; j < 32; ++j) out[b * kQK32 + j] = static_cast<float>(min_offset_q(o, j, nbits)) * d + m;
  }
}

}  // namespace

// ============================================================================================
// bf16
// ============================================================================================
uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((u >> 16) | 64);  // NaN: made quiet
  return static_cast<uint16_t>((u + (0x7fffu + ((u >> 16) & 1u))) >> 16);
}

float bf16_to_f32(uint16_t h) {
  const uint32_t u = uint32_t{h} << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// ============================================================================================
// q4_1, q5_0, q5_1
// ============================================================================================
std::vector<uint8_t> quantize_q4_1(std::span<const float> x) { return quantize_min_offset(x, 4); }
std::vector<uint8_t> quantize_q5_1(std::span<const float> x) { return quantize_min_offset(x, 5); }
void dequantize_q4_1(const uint8_t* blocks, float* out, uint64_t n) { dequantize_min_offset(blocks, out, n, 4); }
void dequantize_q5_1(const uint8_t* blocks, float* out, uint64_t n) { dequantize_min_offset(blocks, out, n, 5); }

// As ggml's quantize_row_q5_0_ref: q4_0's rule with 5 bits (d = m / -16, q = min(31, trunc(x / d
// + 16.5))).
std::vector<uint8_t> quantize_q5_0(std::span<const float> x) {
  ATTO_CHECK(x.size() % kQK32 == 0, "q5_0 needs a multiple of 32 values, got {}", x.size());
  std::vector<uint8_t> out(x.size() / kQK32 * kQ50Bytes);
  for (size_t b = 0; b < x.size() / kQK32; ++b) {
    const float* v = x.data() + b * kQK32;
    float amax = 0.0f, max = 0.0f;
    for (uint64_t j = 0; j < kQK32; ++j)
      if (amax < std::fabs(v[j])) amax = std::fabs(v[j]), max = v[j];
    const float d = max / -16.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t* o = out.data() + b * kQ50Bytes;
    put_half(o, d);
    uint32_t qh = 0;
    for (uint64_t j = 0; j < kQK32 / 2; ++j) {
      const uint8_t xi0 = std::min<uint8_t>(31, trunc_u8(v[j] * id + 16.5f));
      const uint8_t xi1 = std::min<uint8_t>(31, trunc_u8(v[j + 16] * id + 16.5f));
      o[6 + j] = static_cast<uint8_t>((xi0 & 0x0F) | ((xi1 & 0x0F) << 4));
      qh |= ((xi0 & 0x10u) >> 4) << j;
      qh |= ((xi1 & 0x10u) >> 4) << (j + 16);
    }
    std::memcpy(o + 2, &qh, 4);
  }
  return out;
}

// As ggml's dequantize_row_q5_0.
void dequantize_q5_0(const uint8_t* blocks, float* out, uint64_t n) {
  for (uint64_t b = 0; b < n / kQK32; ++b) {
    const uint8_t* o = blocks + b * kQ50Bytes;
    const float d = half_at(o);
    const uint32_t qh = read_u32(o + 2);
    float* y = out + b * kQK32;
    for (uint64_t j = 0; j < kQK32 / 2; ++j) {
      const int x0 = ((o[6 + j] & 0x0F) | static_cast<int>(((qh >> j) << 4) & 0x10)) - 16;
      const int x1 = ((o[6 + j] >> 4) | static_cast<int>((qh >> (j + 12)) & 0x10)) - 16;
      y[j] = static_cast<float>(x0) * d;
      y[j + 16] = static_cast<float>(x1) * d;
    }
  }
}

std::string q5_0_as_q8_0(const uint8_t* blocks, uint64_t n) {
  return as_q8_0(blocks, n, kQ50Bytes, [](const uint8_t* o, int j) {
    const uint32_t qh = read_u32(o + 2);
    return j < 16 ? ((o[6 + j] & 0x0F) | static_cast<int>(((qh >> j) << 4) & 0x10)) - 16
                  : ((o[6 + j - 16] >> 4) | static_cast<int>((qh >> (j - 16 + 12)) & 0x10)) - 16;
  });
}

std::string min_offset_as_u8m(const uint8_t* blocks, uint64_t n, int nbits) {
  const uint64_t bytes = nbits == 4 ? kQ41Bytes : kQ51Bytes;
  std::string out(n / kQK32 * 36, '\0');
  for (uint64_t b = 0; b < n / kQK32; ++b) {
    const uint8_t* o = blocks + b * bytes;
    char* u = out.data() + b * 36;
    std::memcpy(u, o, 4);  // d, m
    for (int j = 0; j < 32; ++j) u[4 + j] = static_cast<char>(min_offset_q(o, j, nbits));
  }
  return out;
}

// ============================================================================================
// K-quants: Q5_K, Q3_K, Q2_K
// ============================================================================================
// As ggml's quantize_row_q5_K_ref: Q4_K's fit with quants 0..31, the fifth bits in qh.
std::vector<uint8_t> quantize_q5_k(std::span<const float> xs) {
  ATTO_CHECK(xs.size() % kQKK256 == 0, "q5_k needs a multiple of 256 values, got {}", xs.size());
  std::vector<uint8_t> out(xs.size() / kQKK256 * kQ5KBytes);
  for (size_t b = 0; b < xs.size() / kQKK256; ++b) {
    const float* x = xs.data() + b * kQKK256;
    uint8_t* blk = out.data() + b * kQ5KBytes;
    uint8_t L[256];
    k_scales(x, blk, L, 31, -0.5f, 15);
    k_requant(x, blk, L, 31);
    uint8_t* qh = blk + 16;
    uint8_t* ql = blk + 48;
    uint8_t m1 = 1, m2 = 2;
    for (int n = 0; n < 256; n += 64, ql += 32) {
      for (int j = 0; j < 32; ++j) {
        int l1 = L[n + j], l2 = L[n + j + 32];
        if (l1 > 15) l1 -= 16, qh[j] = static_cast<uint8_t>(qh[j] | m1);
        if (l2 > 15) l2 -= 16, qh[j] = static_cast<uint8_t>(qh[j] | m2);
        ql[j] = static_cast<uint8_t>(l1 | (l2 << 4));
      }
      m1 = static_cast<uint8_t>(m1 << 2), m2 = static_cast<uint8_t>(m2 << 2);
    }
  }
  return out;
}

// As ggml's dequantize_row_q5_K.
void dequantize_q5_k(const uint8_t* blocks, float* out, uint64_t n) {
  for (uint64_t b = 0; b < n / kQKK256; ++b) {
    const uint8_t* blk = blocks + b * kQ5KBytes;
    const float d = half_at(blk), dmin = half_at(blk + 2);
    const uint8_t* qh = blk + 16;
    const uint8_t* ql = blk + 48;
    float* y = out + b * kQKK256;
    uint8_t u1 = 1, u2 = 2;
    for (int is = 0; is < 8; is += 2, ql += 32) {
      uint8_t sc, m;
      scale_min_k4(is, blk + 4, sc, m);
      const float d1 = d * sc, m1 = dmin * m;
      scale_min_k4(is + 1, blk + 4, sc, m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>((ql[l] & 0xF) + ((qh[l] & u1) != 0 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>((ql[l] >> 4) + ((qh[l] & u2) != 0 ? 16 : 0)) - m2;
      u1 = static_cast<uint8_t>(u1 << 2), u2 = static_cast<uint8_t>(u2 << 2);
    }
  }
}

// As ggml's dequantize_row_q2_K: per 128 values, 32 bytes of quants read at shifts 0, 2, 4, 6,
// sixteen values a scale byte (low nibble the scale, high the min).
void dequantize_q2_k(const uint8_t* blocks, float* out, uint64_t n) {
  for (uint64_t b = 0; b < n / kQKK256; ++b) {
    const uint8_t* blk = blocks + b * kQ2KBytes;
    const uint8_t* scales = blk;
    const uint8_t* q = blk + 16;
    const float d = half_at(blk + 80), dmin = half_at(blk + 82);
    float* y = out + b * kQKK256;
    int is = 0;
    for (int n128 = 0; n128 < 2; ++n128, q += 32)
      for (int shift = 0; shift < 8; shift += 2)
        for (int half = 0; half < 2; ++half) {
          const uint8_t sc = scales[is++];
          const float dl = d * static_cast<float>(sc & 0xF), ml = dmin * static_cast<float>(sc >> 4);
          for (int l = 0; l < 16; ++l) *y++ = dl * static_cast<float>((q[l + 16 * half] >> shift) & 3) - ml;
        }
  }
}

namespace {

// One Q3_K super-block as integers, as ggml's dequantize_row_q3_K reads it: the sixteen 6-bit
// scales unpacked from 12 bytes (low nibbles in bytes 0-7, top bit pairs in bytes 8-11) less 32;
// per 128 values 32 bytes of 2-bit quants at shifts 0, 2, 4, 6, each 4 less unless its bit in the
// high-bit mask is set. Value i is d * scales[i / 16] * q[i].
void q3_k_integers(const uint8_t* blk, int8_t scales[16], int8_t q[256]) {
  constexpr uint32_t kmask1 = 0x03030303u, kmask2 = 0x0f0f0f0fu;
  const uint8_t* hm = blk;
  const uint8_t* qs = blk + 32;
  uint32_t aux[4];
  std::memcpy(aux, blk + 96, 12);
  const uint32_t tmp = aux[2];
  aux[2] = ((aux[0] >> 4) & kmask2) | (((tmp >> 4) & kmask1) << 4);
  aux[3] = ((aux[1] >> 4) & kmask2) | (((tmp >> 6) & kmask1) << 4);
  aux[0] = (aux[0] & kmask2) | (((tmp >> 0) & kmask1) << 4);
  aux[1] = (aux[1] & kmask2) | (((tmp >> 2) & kmask1) << 4);
  std::memcpy(scales, aux, 16);
  for (int i = 0; i < 16; ++i) scales[i] = static_cast<int8_t>(scales[i] - 32);
  uint8_t m = 1;
  for (int n128 = 0; n128 < 2; ++n128, qs += 32)
    for (int shift = 0; shift < 8; shift += 2, m = static_cast<uint8_t>(m << 1))
      for (int l = 0; l < 32; ++l) *q++ = static_cast<int8_t>(((qs[l] >> shift) & 3) - ((hm[l] & m) != 0 ? 0 : 4));
}

// ggml's make_q3_quants(16, 4, x, L, true): the 16 values as scale * l, l in -4..3, starting from
// the scale -4 / max (max the value of largest |x|) and moving one l at a time while that raises
// sum(w x l)^2 / sum(w l^2) (w = x^2), at most 5 passes; L = l + 4. An all-zero sub-block gives
// L = 0 and scale 0.
float make_q3_quants16(const float* x, int8_t* L) {
  constexpr int nmax = 4;
  float max = 0, amax = 0;
  for (int i = 0; i < 16; ++i) {
    const float ax = std::fabs(x[i]);
    if (ax > amax) amax = ax, max = x[i];
  }
  if (amax < 1e-15f) {
    std::memset(L, 0, 16);
    return 0.0f;
  }
  const float iscale = static_cast<float>(-nmax) / max;
  float sumlx = 0, suml2 = 0;
  for (int i = 0; i < 16; ++i) {
    const int l = std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
    L[i] = static_cast<int8_t>(l);
    const float w = x[i] * x[i];
    sumlx += w * x[i] * static_cast<float>(l);
    suml2 += w * static_cast<float>(l) * static_cast<float>(l);
  }
  for (int itry = 0; itry < 5; ++itry) {
    int n_changed = 0;
    for (int i = 0; i < 16; ++i) {
      const float w = x[i] * x[i];
      float slx = sumlx - w * x[i] * static_cast<float>(L[i]);
      if (!(slx > 0)) continue;
      float sl2 = suml2 - w * static_cast<float>(L[i]) * static_cast<float>(L[i]);
      const int new_l = std::max(-nmax, std::min(nmax - 1, nearest_int(x[i] * sl2 / slx)));
      if (new_l == L[i]) continue;
      slx += w * x[i] * static_cast<float>(new_l);
      sl2 += w * static_cast<float>(new_l) * static_cast<float>(new_l);
      if (sl2 > 0 && slx * slx * suml2 > sumlx * sumlx * sl2) {
        L[i] = static_cast<int8_t>(new_l), sumlx = slx, suml2 = sl2;
        ++n_changed;
      }
    }
    if (n_changed == 0) break;
  }
  for (int i = 0; i < 16; ++i) L[i] = static_cast<int8_t>(L[i] + nmax);
  return suml2 > 0.0f ? sumlx / suml2 : 0.0f;
}

// Q3_K's scale j (6 bits, stored + 32) from its 12 bytes: the low nibble in byte j (j < 8) or the
// high nibble of byte j - 8, the top two bits in byte 8 + j % 4 at bit 2 * (j / 4).
int q3_k_scale(const uint8_t* scales, int j) {
  const int low = j < 8 ? scales[j] & 0xF : scales[j - 8] >> 4;
  return (low | (((scales[8 + j % 4] >> (2 * (j / 4))) & 3) << 4)) - 32;
}

}  // namespace

// As ggml's quantize_row_q3_K_ref: each sub-block of 16 fitted by make_q3_quants, the sixteen
// scales as 6-bit multiples of d = max_scale / -32, the quants again against the rounded scales
// (clamped to -4..3), their third bits in the high-bit mask (bit b of byte m for value 32 b + m),
// their low two bits four to a byte.
std::vector<uint8_t> quantize_q3_k(std::span<const float> xs) {
  ATTO_CHECK(xs.size() % kQKK256 == 0, "q3_k needs a multiple of 256 values, got {}", xs.size());
  std::vector<uint8_t> out(xs.size() / kQKK256 * kQ3KBytes, 0);
  for (size_t b = 0; b < xs.size() / kQKK256; ++b) {
    const float* x = xs.data() + b * kQKK256;
    uint8_t* blk = out.data() + b * kQ3KBytes;
    uint8_t* hmask = blk;
    uint8_t* qs = blk + 32;
    uint8_t* scales = blk + 96;
    int8_t L[256];
    float sub[16], max_scale = 0, amax = 0;
    for (int j = 0; j < 16; ++j) {
      sub[j] = make_q3_quants16(x + 16 * j, L + 16 * j);
      if (std::fabs(sub[j]) > amax) amax = std::fabs(sub[j]), max_scale = sub[j];
    }
    if (max_scale != 0.0f) {
      const float iscale = -32.0f / max_scale;
      for (int j = 0; j < 16; ++j) {
        const int l = std::max(-32, std::min(31, static_cast<int>(static_cast<int8_t>(nearest_int(iscale * sub[j]))))) + 32;
        if (j < 8)
          scales[j] = static_cast<uint8_t>(l & 0xF);
        else
          scales[j - 8] = static_cast<uint8_t>(scales[j - 8] | ((l & 0xF) << 4));
        scales[8 + j % 4] = static_cast<uint8_t>(scales[8 + j % 4] | ((l >> 4) << (2 * (j / 4))));
      }
      put_half(blk + 108, 1 / iscale);
    } else {
      put_half(blk + 108, 0.0f);
    }
    for (int j = 0; j < 16; ++j) {
      const float d = half_at(blk + 108) * static_cast<float>(q3_k_scale(scales, j));
      if (d == 0.0f) continue;
      for (int i = 0; i < 16; ++i)
        L[16 * j + i] = static_cast<int8_t>(std::max(-4, std::min(3, nearest_int(x[16 * j + i] / d))) + 4);
    }
    for (int j = 0; j < 256; ++j)
      if (L[j] > 3) hmask[j % 32] = static_cast<uint8_t>(hmask[j % 32] | (1 << (j / 32))), L[j] = static_cast<int8_t>(L[j] - 4);
    for (int j = 0; j < 256; j += 128)
      for (int l = 0; l < 32; ++l)
        qs[j / 4 + l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 2) | (L[j + l + 64] << 4) | (L[j + l + 96] << 6));
  }
  return out;
}

// As ggml's dequantize_row_q3_K: value i of a super-block d * (scales[i / 16] * q[i]), the scale's
// product with d first.
void dequantize_q3_k(const uint8_t* blocks, float* out, uint64_t n) {
  for (uint64_t b = 0; b < n / kQKK256; ++b) {
    const uint8_t* blk = blocks + b * kQ3KBytes;
    int8_t scales[16], q[256];
    q3_k_integers(blk, scales, q);
    const float d_all = half_at(blk + 108);
    float* y = out + b * kQKK256;
    for (int i = 0; i < 256; ++i) y[i] = d_all * static_cast<float>(scales[i / 16]) * static_cast<float>(q[i]);
  }
}

std::string q3_k_as_q6_k(const uint8_t* blocks, uint64_t n) {
  std::string out(n / kQKK256 * kQ6KBytes, '\0');
  for (uint64_t b = 0; b < n / kQKK256; ++b) {
    const uint8_t* blk = blocks + b * kQ3KBytes;
    auto* o = reinterpret_cast<uint8_t*>(out.data() + b * kQ6KBytes);
    int8_t scales[16], q[256];
    q3_k_integers(blk, scales, q);
    for (int8_t& v : q) v = static_cast<int8_t>(v + 32);  // Q6_K's quants are stored + 32
    q6_k_quants(q, o);
    std::memcpy(o + 192, scales, 16);
    std::memcpy(o + 208, blk + 108, 2);  // d
  }
  return out;
}

// ============================================================================================
// Non-linear 4-bit: iq4_nl, iq4_xs
// ============================================================================================
namespace {

// ggml's kvalues_iq4nl: the sixteen levels of a non-linear 4-bit quant.
constexpr int8_t kIq4nlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10, 1, 13, 25, 38, 53, 69, 89, 113};
constexpr uint64_t kIq4NlBytes = 18, kIq4XsBytes = 136;

// An iq4_xs super-block's sub-block ib (of 8): dl = d * (ls - 32), the 6-bit ls's low nibble in
// scales_l (two a byte) and its top bits in scales_h (two a sub-block), as ggml computes it (exact:
// 17 bits); its 32 int8 levels in q.
float iq4_xs_sub_block(const uint8_t* blk, int ib, int8_t* q) {
  const uint32_t scales_h = static_cast<uint32_t>(blk[2] | (blk[3] << 8));
  const int ls = ((blk[4 + ib / 2] >> (4 * (ib % 2))) & 0xF) | (((scales_h >> (2 * ib)) & 3) << 4);
  const uint8_t* qs = blk + 8 + 16 * ib;
  for (int j = 0; j < 16; ++j) q[j] = kIq4nlValues[qs[j] & 0xF], q[j + 16] = kIq4nlValues[qs[j] >> 4];
  return half_at(blk) * static_cast<float>(ls - 32);
}

}  // namespace

// As ggml's dequantize_row_iq4_nl: d * kvalues[nibble], byte j holding values j and j + 16.
void dequantize_iq4_nl(const uint8_t* blocks, float* out, uint64_t n) {
  for (uint64_t b = 0; b < n / kQK32; ++b) {
    const uint8_t* blk = blocks + b * kIq4NlBytes;
    const float d = half_at(blk);
    float* y = out + b * kQK32;
    for (int j = 0; j < 16; ++j) {
      y[j] = d * static_cast<float>(kIq4nlValues[blk[2 + j] & 0xF]);
      y[j + 16] = d * static_cast<float>(kIq4nlValues[blk[2 + j] >> 4]);
    }
  }
}


// As ggml's dequantize_row_iq4_xs: per sub-block of 32, iq4_nl's levels times dl.
void dequantize_iq4_xs(const uint8_t* blocks, float* out, uint64_t n) {
  for (uint64_t b = 0; b < n / kQKK256; ++b)
    for (int ib = 0; ib < 8; ++ib) {
      int8_t q[32];
      const float dl = iq4_xs_sub_block(blocks + b * kIq4XsBytes, ib, q);
      for (int j = 0; j < 32; ++j) out[b * kQKK256 + 32 * ib + j] = dl * static_cast<float>(q[j]);
    }
}

std::string iq4_xs_as_q8f(const uint8_t* blocks, uint64_t n) {
  std::string out(n / kQK32 * 36, '\0');
  for (uint64_t b = 0; b < n / kQK32; ++b) {
    int8_t q[32];
    const float dl = iq4_xs_sub_block(blocks + b / 8 * kIq4XsBytes, static_cast<int>(b % 8), q);
    std::memcpy(out.data() + b * 36, q, 32);
    std::memcpy(out.data() + b * 36 + 32, &dl, 4);
  }
  return out;
}

std::string iq4_nl_as_q8_0(const uint8_t* blocks, uint64_t n) {
  return as_q8_0(blocks, n, kIq4NlBytes,
                 [](const uint8_t* o, int j) { return kIq4nlValues[j < 16 ? o[2 + j] & 0xF : o[2 + j - 16] >> 4]; });
}

}  // namespace atto::io
