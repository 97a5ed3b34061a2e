#include "io/ggml_quants.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/error.h"
#include "io/ggml_quants_impl.h"

namespace atto::io {

using namespace quant_detail;  // NOLINT(build/namespaces): the files' shared parts

namespace {

constexpr uint64_t kQK = 32;  // q4_0 and q8_0 block
constexpr uint64_t kQ8Bytes = 34, kQ4Bytes = 18;
constexpr uint64_t kQKK = 256;  // K-quant super-block
constexpr uint64_t kQ4KBytes = 144;

}  // namespace

void quant_detail::scale_min_k4(int j, const uint8_t* q, uint8_t& sc, uint8_t& m) {
  if (j < 4) {
    sc = q[j] & 63;
    m = q[j + 4] & 63;
  } else {
    sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// ============================================================================================
// Types
// ============================================================================================
namespace {

// What atto knows of each type it reads: values and bytes a block, llama.cpp's general.file_type
// of a file of it, its place in the precision order, whether atto writes it.
struct TypeInfo {
  GgmlType type;
  uint64_t block, bytes;
  uint32_t file_type;
  int precision;
  bool writable;
};
constexpr TypeInfo kTypes[] = {
    {GgmlType::F32, 1, 4, 0, 14, true},           {GgmlType::F16, 1, 2, 1, 13, true},
    {GgmlType::BF16, 1, 2, 32, 12, true},         {GgmlType::Q8_0, kQK, kQ8Bytes, 7, 11, true},
    {GgmlType::Q6_K, kQKK, kQ6KBytes, 18, 10, true}, {GgmlType::Q5_K, kQKK, 176, 16, 9, true},
    {GgmlType::Q5_1, kQK, 24, 9, 8, true},        {GgmlType::Q5_0, kQK, 22, 8, 7, true},
    {GgmlType::Q4_K, kQKK, kQ4KBytes, 14, 6, true}, {GgmlType::IQ4_NL, kQK, 18, 25, 5, false},
    {GgmlType::IQ4_XS, kQKK, 136, 30, 4, false},  {GgmlType::Q4_1, kQK, 20, 3, 3, true},
    {GgmlType::Q4_0, kQK, kQ4Bytes, 2, 2, true},  {GgmlType::Q3_K, kQKK, 110, 11, 1, true},
    {GgmlType::Q2_K, kQKK, 84, 10, 0, false},
};

const TypeInfo* info_of(uint32_t t) {
  for (const TypeInfo& i : kTypes)
    if (static_cast<uint32_t>(i.type) == t) return &i;
  return nullptr;
}
const TypeInfo& info(GgmlType t) {
  const TypeInfo* i = info_of(static_cast<uint32_t>(t));
  ATTO_CHECK(i != nullptr, "ggml type {} is not one atto reads", static_cast<uint32_t>(t));
  return *i;
}

}  // namespace

const char* ggml_type_name(uint32_t t) {
  static const char* names[] = {"f32",     "f16",    "q4_0",    "q4_1",  "q4_2",   "q4_3",  "q5_0",  "q5_1",
                                "q8_0",    "q8_1",   "q2_k",    "q3_k",  "q4_k",   "q5_k",  "q6_k",  "q8_k",
                                "iq2_xxs", "iq2_xs", "iq3_xxs", "iq1_s", "iq4_nl", "iq3_s", "iq2_s", "iq4_xs",
                                "i8",      "i16",    "i32",     "i64",   "f64",    "iq1_m", "bf16",  "unknown",
                                "unknown", "unknown", "tq1_0",  "tq2_0", "unknown", "unknown", "unknown", "mxfp4"};
  return t < sizeof(names) / sizeof(names[0]) ? names[t] : "unknown";
}

const char* to_string(GgmlType t) { return ggml_type_name(static_cast<uint32_t>(t)); }

bool ggml_type_readable(uint32_t t) { return info_of(t) != nullptr; }

bool ggml_type_writable(GgmlType t) { return info(t).writable; }

uint64_t ggml_block_size(GgmlType t) { return info(t).block; }

uint64_t ggml_nbytes(GgmlType t, uint64_t n) { return n / info(t).block * info(t).bytes; }

namespace {
bool quant_super_block(GgmlType t) { return ggml_block_size(t) == kQKK; }
}  // namespace

GgmlType stored_type_for(GgmlType want, const std::vector<int64_t>& shape) {
  if (shape.size() < 2 || want == GgmlType::F32) return GgmlType::F32;
  const int64_t row = shape.back();
  if (row % static_cast<int64_t>(ggml_block_size(want)) == 0) return want;
  // llama.cpp's llama-quantize takes q5_0 for a Q4_K matrix whose rows do not fill super-blocks of
  // 256, q5_1 for a Q5_K one and q8_0 for a Q6_K one; atto takes q8_0 for all three (it computes
  // q8_0 as integers, q5_0 and q5_1 in floats).
  if (quant_super_block(want) && row % static_cast<int64_t>(kQK) == 0) return GgmlType::Q8_0;
  return GgmlType::F16;
}

uint32_t integer_type_for(GgmlType t) {
  switch (t) {
    case GgmlType::Q5_0:
    case GgmlType::IQ4_NL: return static_cast<uint32_t>(GgmlType::Q8_0);
    case GgmlType::Q3_K: return static_cast<uint32_t>(GgmlType::Q6_K);
    case GgmlType::Q4_1:
    case GgmlType::Q5_1: return kU8M;
    case GgmlType::IQ4_XS: return kQ8F;
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K: return static_cast<uint32_t>(t);
    default: return static_cast<uint32_t>(GgmlType::F32);
  }
}

std::string as_integer_blocks(GgmlType t, std::string bytes, uint64_t n) {
  ATTO_CHECK(bytes.size() == ggml_nbytes(t, n), "{} bytes are not {} {} values", bytes.size(), n, to_string(t));
  const auto* b = reinterpret_cast<const uint8_t*>(bytes.data());
  if (t == GgmlType::Q5_0) return q5_0_as_q8_0(b, n);
  if (t == GgmlType::IQ4_NL) return iq4_nl_as_q8_0(b, n);
  if (t == GgmlType::Q3_K) return q3_k_as_q6_k(b, n);
  if (t == GgmlType::Q4_1 || t == GgmlType::Q5_1) return min_offset_as_u8m(b, n, t == GgmlType::Q4_1 ? 4 : 5);
  if (t == GgmlType::IQ4_XS) return iq4_xs_as_q8f(b, n);
  return bytes;
}

uint32_t ggml_file_type(GgmlType t) { return info(t).file_type; }

int ggml_type_precision(GgmlType t) { return info(t).precision; }

// ============================================================================================
// f16
// ============================================================================================
uint16_t f32_to_f16(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u;
  x &= 0x7fffffffu;
  if (x >= 0x7f800000u) return static_cast<uint16_t>(sign | (x > 0x7f800000u ? 0x7e00u : 0x7c00u));  // NaN, Inf
  if (x >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // >= 65520 rounds to Inf
  if (x < 0x38800000u) {                                               // below 2^-14: a half subnormal (or zero)
    if (x < 0x33000000u) return static_cast<uint16_t>(sign);           // <= 2^-25 rounds to zero
    const uint32_t e = x >> 23, m = (x & 0x7fffffu) | 0x800000u, shift = 126 - e;
    uint32_t h = m >> shift;
    const uint32_t rem = m & ((1u << shift) - 1), half = 1u << (shift - 1);
    if (rem > half || (rem == half && (h & 1u))) ++h;
    return static_cast<uint16_t>(sign | h);
  }
  uint32_t h = (x - 0x38000000u) >> 13;  // rebias the exponent (127 -> 15), keep 10 mantissa bits
  const uint32_t rem = x & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;  // a carry rolls into the exponent
  return static_cast<uint16_t>(sign | h);
}

float f16_to_f32(uint16_t h) {
  const uint32_t sign = (uint32_t{h} & 0x8000u) << 16, e = (h >> 10) & 0x1fu, m = h & 0x3ffu;
  uint32_t x;
  if (e == 0) {
    const float v = std::ldexp(static_cast<float>(m), -24);  // zero or subnormal, exact
    return sign ? -v : v;
  }
  x = sign | (e == 31 ? 0x7f800000u | (m << 13) : ((e + 112) << 23) | (m << 13));
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

// ============================================================================================
// q8_0 and q4_0
// ============================================================================================
std::vector<uint8_t> quantize_q8_0(std::span<const float> x) {
  ATTO_CHECK(x.size() % kQK == 0, "q8_0 needs a multiple of 32 values, got {}", x.size());
  std::vector<uint8_t> out(x.size() / kQK * kQ8Bytes);
  for (size_t b = 0; b < x.size() / kQK; ++b) {
    const float* v = x.data() + b * kQK;
    float amax = 0.0f;
    for (size_t i = 0; i < kQK; ++i) amax = std::max(amax, std::fabs(v[i]));
    const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t* o = out.data() + b * kQ8Bytes;
    put_half(o, d);
    for (size_t i = 0; i < kQK; ++i) o[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(std::roundf(v[i] * id)));
  }
  return out;
}

void dequantize_q8_0(const uint8_t* blocks, float* out, uint64_t n) {
  for (uint64_t b = 0; b < n / kQK; ++b) {
    const uint8_t* o = blocks + b * kQ8Bytes;
    const float d = half_at(o);
    for (uint64_t i = 0; i < kQK; ++i) out[b * kQK + i] = static_cast<float>(static_cast<int8_t>(o[2 + i])) * d;
  }
}

namespace {

// ggml's MIN(15, (int8_t)(v + 8.5f)) for v = x / d in [-8, 8]: the truncation of 0.5 .. 16.5.
// Written without the float-to-int8 conversion, which C++ leaves undefined for a NaN weight
// (that gives 15 here).
uint8_t q4_0_nibble(float v) {
  const float t = v + 8.5f;
  if (!(t < 15.0f)) return 15;
  return t > 0.0f ? static_cast<uint8_t>(t) : 0;
}

}  // namespace

std::vector<uint8_t> quantize_q4_0(std::span<const float> x) {
  ATTO_CHECK(x.size() % kQK == 0, "q4_0 needs a multiple of 32 values, got {}", x.size());
  std::vector<uint8_t> out(x.size() / kQK * kQ4Bytes);
  for (size_t b = 0; b < x.size() / kQK; ++b) {
    const float* v = x.data() + b * kQK;
    float amax = 0.0f, max = 0.0f;  // the largest magnitude, and that value with its sign (the first)
    for (size_t i = 0; i < kQK; ++i) {
      if (amax < std::fabs(v[i])) {
        amax = std::fabs(v[i]);
        max = v[i];
      }
    }
    const float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
    uint8_t* o = out.data() + b * kQ4Bytes;
    put_half(o, d);
    for (size_t j = 0; j < kQK / 2; ++j) {
      const float x0 = v[j] * id, x1 = v[kQK / 2 + j] * id;
      o[2 + j] = static_cast<uint8_t>(q4_0_nibble(x0) | (q4_0_nibble(x1) << 4));
    }
  }
  return out;
}

// As ggml's dequantize_row_q4_0.
void dequantize_q4_0(const uint8_t* blocks, float* out, uint64_t n) {
  for (uint64_t b = 0; b < n / kQK; ++b) {
    const uint8_t* o = blocks + b * kQ4Bytes;
    const float d = half_at(o);
    float* y = out + b * kQK;
    for (uint64_t j = 0; j < kQK / 2; ++j) {
      y[j] = static_cast<float>((o[2 + j] & 0x0F) - 8) * d;
      y[j + kQK / 2] = static_cast<float>((o[2 + j] >> 4) - 8) * d;
    }
  }
}

// ============================================================================================
// K-quants
// ============================================================================================
// As ggml's dequantize_row_q4_K: per 64 values, two sub-blocks of 32 share 32 bytes of nibbles.
void dequantize_q4_k(const uint8_t* blocks, float* out, uint64_t n) {
  for (uint64_t b = 0; b < n / kQKK; ++b) {
    const uint8_t* blk = blocks + b * kQ4KBytes;
    const float d = half_at(blk), dmin = half_at(blk + 2);
    const uint8_t* scales = blk + 4;
    const uint8_t* q = blk + 16;
    float* y = out + b * kQKK;
    for (int is = 0; is < 8; is += 2, q += 32) {
      uint8_t sc, m;
      scale_min_k4(is, scales, sc, m);
      const float d1 = d * sc, m1 = dmin * m;
      scale_min_k4(is + 1, scales, sc, m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * static_cast<float>(q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * static_cast<float>(q[l] >> 4) - m2;
    }
  }
}

// As ggml's dequantize_row_q6_K: per 128 values, 64 bytes of ql, 32 of qh and 8 scales; value l
// of the four runs of 32 takes ql's low/high nibbles and qh's bit pairs 0-1, 2-3, 4-5, 6-7.
void dequantize_q6_k(const uint8_t* blocks, float* out, uint64_t n) {
  for (uint64_t b = 0; b < n / kQKK; ++b) {
    const uint8_t* ql = blocks + b * kQ6KBytes;
    const uint8_t* qh = ql + 128;
    const auto* sc = reinterpret_cast<const int8_t*>(ql + 192);
    const float d = half_at(ql + 208);
    float* y = out + b * kQKK;
    for (int half = 0; half < 2; ++half, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int q1 = ((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int q2 = ((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int q3 = ((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int q4 = ((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l] = d * static_cast<float>(sc[is]) * static_cast<float>(q1);
        y[l + 32] = d * static_cast<float>(sc[is + 2]) * static_cast<float>(q2);
        y[l + 64] = d * static_cast<float>(sc[is + 4]) * static_cast<float>(q3);
        y[l + 96] = d * static_cast<float>(sc[is + 6]) * static_cast<float>(q4);
      }
    }
  }
}

namespace {

// One step of make_qkx2_quants' search: the quants (0..nmax) of x at `iscale` from `min` (into
// Laux), the weighted least-squares scale and offset for them (offset <= 0), and their weighted
// squared error; false when the quants do not determine a scale (D <= 0).
bool qkx2_try(const float* x, const float* w, float sum_w, float sum_x, float iscale, float min, int nmax,
              uint8_t* Laux, float& scale, float& offset, float& error) {
  float sum_l = 0, sum_l2 = 0, sum_xl = 0;
  for (int i = 0; i < 32; ++i) {
    const int l = std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - min))));
    Laux[i] = static_cast<uint8_t>(l);
    sum_l += w[i] * static_cast<float>(l);
    sum_l2 += w[i] * static_cast<float>(l) * static_cast<float>(l);
    sum_xl += w[i] * static_cast<float>(l) * x[i];
  }
  const float D = sum_w * sum_l2 - sum_l * sum_l;
  if (!(D > 0)) return false;
  scale = (sum_w * sum_xl - sum_x * sum_l) / D;
  offset = (sum_l2 * sum_x - sum_l * sum_xl) / D;
  if (offset > 0) {
    offset = 0;
    scale = sum_xl / sum_l2;
  }
  error = 0;
  for (int i = 0; i < 32; ++i) {
    const float diff = scale * static_cast<float>(Laux[i]) + offset - x[i];
    error += w[i] * (diff * diff);
  }
  return true;
}

// ggml's make_qkx2_quants(32, nmax, x, weights, L, &the_min, Laux, rmin, 0.1, nstep, false):
// quants L (0..nmax) of 32 values as scale * L - the_min, the scale searched over nstep + 1 steps
// of the quant range (nmax + rmin upwards by 0.1) for the least weighted squared error. Returns
// the scale.
float make_qkx2_quants(const float* x, const float* w, uint8_t* L, float& the_min, int nmax, float rmin, int nstep) {
  float min = x[0], max = x[0], sum_w = w[0], sum_x = sum_w * x[0];
  for (int i = 1; i < 32; ++i) {
    if (x[i] < min) min = x[i];
    if (x[i] > max) max = x[i];
    sum_w += w[i];
    sum_x += w[i] * x[i];
  }
  if (min > 0) min = 0;
  if (max == min) {
    std::fill(L, L + 32, 0);
    the_min = -min;
    return 0.0f;
  }
  float iscale = static_cast<float>(nmax) / (max - min), scale = 1 / iscale, best_error = 0;
  for (int i = 0; i < 32; ++i) {
    L[i] = static_cast<uint8_t>(std::max(0, std::min(nmax, nearest_int(iscale * (x[i] - min)))));
    const float diff = scale * static_cast<float>(L[i]) + min - x[i];
    best_error += w[i] * (diff * diff);
  }
  uint8_t Laux[32];
  for (int is = 0; is <= nstep; ++is) {
    iscale = (rmin + 0.1f * static_cast<float>(is) + static_cast<float>(nmax)) / (max - min);
    float this_scale, this_min, error;
    if (qkx2_try(x, w, sum_w, sum_x, iscale, min, nmax, Laux, this_scale, this_min, error) && error < best_error) {
      std::copy(Laux, Laux + 32, L);
      best_error = error;
      scale = this_scale;
      min = this_min;
    }
  }
  the_min = -min;
  return scale;
}

}  // namespace

void quant_detail::k_scales(const float* x, uint8_t* blk, uint8_t* L, int nmax, float rmin, int nstep) {
  float scales[8], mins[8], weights[32], max_scale = 0, max_min = 0;
  for (int j = 0; j < 8; ++j) {
    float sum_x2 = 0;
    for (int l = 0; l < 32; ++l) sum_x2 += x[32 * j + l] * x[32 * j + l];
    const float av_x = std::sqrt(sum_x2 / 32);
    for (int l = 0; l < 32; ++l) weights[l] = av_x + std::fabs(x[32 * j + l]);
    scales[j] = make_qkx2_quants(x + 32 * j, weights, L + 32 * j, mins[j], nmax, rmin, nstep);
    max_scale = std::max(max_scale, scales[j]);
    max_min = std::max(max_min, mins[j]);
  }
  const float inv_scale = max_scale > 0 ? 63.0f / max_scale : 0.0f, inv_min = max_min > 0 ? 63.0f / max_min : 0.0f;
  uint8_t* sc = blk + 4;
  for (int j = 0; j < 8; ++j) {
    const uint8_t ls = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_scale * scales[j])));
    const uint8_t lm = std::min<uint8_t>(63, static_cast<uint8_t>(nearest_int(inv_min * mins[j])));
    if (j < 4) {
      sc[j] = ls;
      sc[j + 4] = lm;
    } else {
      sc[j + 4] = static_cast<uint8_t>((ls & 0xF) | ((lm & 0xF) << 4));
      sc[j - 4] = static_cast<uint8_t>(sc[j - 4] | ((ls >> 4) << 6));
      sc[j] = static_cast<uint8_t>(sc[j] | ((lm >> 4) << 6));
    }
  }
  put_half(blk, max_scale / 63.0f);
  put_half(blk + 2, max_min / 63.0f);
}

void quant_detail::k_requant(const float* x, const uint8_t* blk, uint8_t* L, int nmax) {
  for (int j = 0; j < 8; ++j) {
    uint8_t sc, m;
    scale_min_k4(j, blk + 4, sc, m);
    const float d = half_at(blk) * sc;
    if (d == 0.0f) continue;
    const float dm = half_at(blk + 2) * m;
    for (int i = 0; i < 32; ++i)
      L[32 * j + i] = static_cast<uint8_t>(std::max(0, std::min(nmax, nearest_int((x[32 * j + i] + dm) / d))));
  }
}

namespace {

// ggml's make_qx_quants(16, 32, x, L, 1, NULL): 6-bit quants L (0..63, the value l + 32) of 16
// values as scale * l, weighted by x^2, the scale searched over 19 steps around 32 / max for the
// largest sum(w x l)^2 / sum(w l^2). Returns the scale (negative when the largest |x| is).
float make_qx_quants16(const float* x, int8_t* L) {
  constexpr int nmax = 32;
  float max = 0, amax = 0;
  for (int i = 0; i < 16; ++i)
    if (std::fabs(x[i]) > amax) amax = std::fabs(x[i]), max = x[i];
  if (amax < 1e-15f) {  // ggml's GROUP_MAX_EPS: all (nearly) zero
    std::fill(L, L + 16, int8_t{0});
    return 0.0f;
  }
  const auto quant = [&](float iscale, int i) {
    return std::max(-nmax, std::min(nmax - 1, nearest_int(iscale * x[i])));
  };
  float iscale = -static_cast<float>(nmax) / max, sumlx = 0, suml2 = 0;
  for (int i = 0; i < 16; ++i) {
    const int l = quant(iscale, i);
    L[i] = static_cast<int8_t>(l + nmax);
    const float w = x[i] * x[i], fl = static_cast<float>(l);
    sumlx += w * x[i] * fl;
    suml2 += w * fl * fl;
  }
  float scale = suml2 != 0 ? sumlx / suml2 : 0.0f, best = scale * sumlx;
  for (int is = -9; is <= 9; ++is) {
    if (is == 0) continue;
    iscale = -(static_cast<float>(nmax) + 0.1f * static_cast<float>(is)) / max;
    sumlx = suml2 = 0;
    for (int i = 0; i < 16; ++i) {
      const float w = x[i] * x[i], fl = static_cast<float>(quant(iscale, i));
      sumlx += w * x[i] * fl;
      suml2 += w * fl * fl;
    }
    if (suml2 > 0 && sumlx * sumlx > best * suml2) {
      for (int i = 0; i < 16; ++i) L[i] = static_cast<int8_t>(quant(iscale, i) + nmax);
      scale = sumlx / suml2;
      best = scale * sumlx;
    }
  }
  return scale;
}

}  // namespace

void quant_detail::q6_k_quants(const int8_t* L, uint8_t* blk) {
  uint8_t* ql = blk;
  uint8_t* qh = blk + 128;
  for (int j = 0; j < 256; j += 128, ql += 64, qh += 32)
    for (int l = 0; l < 32; ++l) {
      const int q1 = L[j + l], q2 = L[j + l + 32], q3 = L[j + l + 64], q4 = L[j + l + 96];
      ql[l] = static_cast<uint8_t>((q1 & 0xF) | ((q3 & 0xF) << 4));
      ql[l + 32] = static_cast<uint8_t>((q2 & 0xF) | ((q4 & 0xF) << 4));
      qh[l] = static_cast<uint8_t>((q1 >> 4) | ((q2 >> 4) << 2) | ((q3 >> 4) << 4) | ((q4 >> 4) << 6));
    }
}

// As ggml's quantize_row_q6_K_ref.
std::vector<uint8_t> quantize_q6_k(std::span<const float> xs) {
  ATTO_CHECK(xs.size() % kQKK == 0, "q6_k needs a multiple of 256 values, got {}", xs.size());
  std::vector<uint8_t> out(xs.size() / kQKK * kQ6KBytes, 0);
  for (size_t b = 0; b < xs.size() / kQKK; ++b) {
    const float* x = xs.data() + b * kQKK;
    uint8_t* blk = out.data() + b * kQ6KBytes;
    int8_t L[256];
    float scales[16], max_scale = 0, max_abs_scale = 0;
    for (int ib = 0; ib < 16; ++ib) {
      scales[ib] = make_qx_quants16(x + 16 * ib, L + 16 * ib);
      if (std::fabs(scales[ib]) > max_abs_scale) max_abs_scale = std::fabs(scales[ib]), max_scale = scales[ib];
    }
    if (max_abs_scale < 1e-15f) continue;  // all zero (d = +0 too)
    const float iscale = -128.0f / max_scale;
    put_half(blk + 208, 1 / iscale);
    auto* sc = reinterpret_cast<int8_t*>(blk + 192);
    for (int ib = 0; ib < 16; ++ib) sc[ib] = static_cast<int8_t>(std::min(127, nearest_int(iscale * scales[ib])));
    for (int j = 0; j < 16; ++j) {
      const float d = half_at(blk + 208) * static_cast<float>(sc[j]);
      if (d == 0.0f) continue;
      for (int i = 0; i < 16; ++i)
        L[16 * j + i] = static_cast<int8_t>(std::max(-32, std::min(31, nearest_int(x[16 * j + i] / d))) + 32);
    }
    q6_k_quants(L, blk);
  }
  return out;
}

// As ggml's quantize_row_q4_K_ref.
std::vector<uint8_t> quantize_q4_k(std::span<const float> xs) {
  ATTO_CHECK(xs.size() % kQKK == 0, "q4_k needs a multiple of 256 values, got {}", xs.size());
  std::vector<uint8_t> out(xs.size() / kQKK * kQ4KBytes);
  for (size_t b = 0; b < xs.size() / kQKK; ++b) {
    const float* x = xs.data() + b * kQKK;
    uint8_t* blk = out.data() + b * kQ4KBytes;
    uint8_t L[256];
    k_scales(x, blk, L, 15, -1.0f, 20);
    k_requant(x, blk, L, 15);
    uint8_t* q = blk + 16;
    for (int j = 0; j < 256; j += 64, q += 32)
      for (int l = 0; l < 32; ++l) q[l] = static_cast<uint8_t>(L[j + l] | (L[j + l + 32] << 4));
  }
  return out;
}

// ============================================================================================
// Any type
// ============================================================================================
std::string encode(GgmlType t, std::span<const float> x) {
  ATTO_CHECK(ggml_type_writable(t), "atto does not write ggml type {}", to_string(t));
  ATTO_CHECK(x.size() % ggml_block_size(t) == 0, "{} needs a multiple of {} values, got {}", to_string(t),
             ggml_block_size(t), x.size());
  std::string out;
  if (t == GgmlType::F32) {
    out.assign(reinterpret_cast<const char*>(x.data()), x.size() * 4);
  } else if (t == GgmlType::F16 || t == GgmlType::BF16) {
    out.resize(x.size() * 2);
    for (size_t i = 0; i < x.size(); ++i) {
      const uint16_t h = t == GgmlType::F16 ? f32_to_f16(x[i]) : f32_to_bf16(x[i]);
      std::memcpy(out.data() + 2 * i, &h, 2);
    }
  } else {
    std::vector<uint8_t> (*quantize)(std::span<const float>) = nullptr;
    switch (t) {
      case GgmlType::Q8_0: quantize = quantize_q8_0; break;
      case GgmlType::Q4_0: quantize = quantize_q4_0; break;
      case GgmlType::Q4_1: quantize = quantize_q4_1; break;
      case GgmlType::Q5_0: quantize = quantize_q5_0; break;
      case GgmlType::Q5_1: quantize = quantize_q5_1; break;
      case GgmlType::Q4_K: quantize = quantize_q4_k; break;
      case GgmlType::Q3_K: quantize = quantize_q3_k; break;
      case GgmlType::Q5_K: quantize = quantize_q5_k; break;
      case GgmlType::Q6_K: quantize = quantize_q6_k; break;
      default: ATTO_CHECK(false, "atto does not write ggml type {}", to_string(t));
    }
    const std::vector<uint8_t> q = quantize(x);
    out.assign(q.begin(), q.end());
  }
  return out;
}

void decode(GgmlType t, const uint8_t* src, float* out, uint64_t n) {
  switch (t) {
    case GgmlType::F32: std::memcpy(out, src, n * 4); return;
    case GgmlType::F16:
      for (uint64_t i = 0; i < n; ++i) out[i] = half_at(src + 2 * i);
      return;
    case GgmlType::BF16:
      for (uint64_t i = 0; i < n; ++i) {
        uint16_t h;
        std::memcpy(&h, src + 2 * i, 2);
        out[i] = bf16_to_f32(h);
      }
      return;
    case GgmlType::Q4_0: dequantize_q4_0(src, out, n); return;
    case GgmlType::Q4_1: dequantize_q4_1(src, out, n); return;
    case GgmlType::Q5_0: dequantize_q5_0(src, out, n); return;
    case GgmlType::Q5_1: dequantize_q5_1(src, out, n); return;
    case GgmlType::Q8_0: dequantize_q8_0(src, out, n); return;
    case GgmlType::Q2_K: dequantize_q2_k(src, out, n); return;
    case GgmlType::Q3_K: dequantize_q3_k(src, out, n); return;
    case GgmlType::Q4_K: dequantize_q4_k(src, out, n); return;
    case GgmlType::Q5_K: dequantize_q5_k(src, out, n); return;
    case GgmlType::Q6_K: dequantize_q6_k(src, out, n); return;
    case GgmlType::IQ4_NL: dequantize_iq4_nl(src, out, n); return;
    case GgmlType::IQ4_XS: dequantize_iq4_xs(src, out, n); return;
  }
  ATTO_CHECK(false, "ggml type {} is not one atto reads", static_cast<uint32_t>(t));
}

}  // namespace atto::io
