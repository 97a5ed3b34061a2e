// io/gguf and io/ggml_quants: half-precision numbers, ggml's q8_0, q4_0, Q4_K and Q6_K blocks, the
// writer and reader round trip, re-quantizing a file, and damaged files.
#include "io/gguf.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>

#include "support.h"

namespace atto::io {
namespace {

using test::error_of;
using ::testing::HasSubstr;

float bits_to_f32(uint32_t x) {
  float f;
  std::memcpy(&f, &x, 4);
  return f;
}

TEST(Gguf, HalfRoundTripsEveryValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) {
      EXPECT_TRUE(std::isnan(f16_to_f32(f32_to_f16(f))));
      continue;
    }
    EXPECT_EQ(f32_to_f16(f), h) << h;
  }
  EXPECT_EQ(f16_to_f32(0x3c00), 1.0f);
  EXPECT_EQ(f16_to_f32(0x7bff), 65504.0f);
  EXPECT_EQ(f16_to_f32(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(f32_to_f16(65519.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);               // the tie rounds to even: infinity
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // the tie rounds to even: zero
  EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(f32_to_f16(-std::numeric_limits<float>::infinity()), 0xfc00);
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);  // halfway between 1 and the next: even
}

TEST(Gguf, HalfIsTheNearestValue) {
  std::mt19937 rng(3);
  for (int i = 0; i < 200000; ++i) {
    const float f = bits_to_f32(rng());
    if (!std::isfinite(f) || std::fabs(f) >= 65504.0f) continue;
    const uint16_t h = f32_to_f16(f);
    const double err = std::fabs(static_cast<double>(f16_to_f32(h)) - f);
    for (int d : {-1, 1}) {
      const auto n = static_cast<uint16_t>(h + d);
      if ((n & 0x7c00) == 0x7c00 || ((n ^ h) & 0x8000)) continue;  // past infinity or across zero
      EXPECT_LE(err, std::fabs(static_cast<double>(f16_to_f32(n)) - f)) << f;
    }
  }
}

TEST(Gguf, Q8IsWithinHalfAStepAndKeepsZero) {
  std::mt19937 rng(5);
  std::normal_distribution<float> g(0.0f, 2.0f);
  std::vector<float> x(96);
  for (float& v : x) v = g(rng);
  std::fill(x.begin() + 64, x.end(), 0.0f);  // an all-zero block
  const std::vector<uint8_t> q = quantize_q8_0(x);
  ASSERT_EQ(q.size(), 3u * 34u);
  std::vector<float> y(x.size());
  dequantize_q8_0(q.data(), y.data(), y.size());
  for (size_t b = 0; b < 3; ++b) {
    float amax = 0.0f;
    for (size_t i = 0; i < 32; ++i) amax = std::max(amax, std::fabs(x[b * 32 + i]));
    const float step = amax / 127.0f;
    for (size_t i = 0; i < 32; ++i) EXPECT_LE(std::fabs(y[b * 32 + i] - x[b * 32 + i]), 0.5f * step * 1.01f + 1e-7f);
  }
  EXPECT_EQ(y[70], 0.0f);
  EXPECT_THROW(quantize_q8_0(std::vector<float>(33)), Error);
}

// The f16 bits of a block's scale (its first two bytes from `at`).
uint16_t half_bits(const std::vector<uint8_t>& q, size_t at) { return static_cast<uint16_t>(q[at] | (q[at + 1] << 8)); }

// Three q4_0 blocks worked by hand from ggml's quantize_row_q4_0_ref: d = m / -8 for the value m
// of largest magnitude (the first, with its sign), nibble = min(15, trunc(x / d + 8.5)), byte j =
// element j (low nibble) | element j + 16 (high nibble).
TEST(Gguf, Q4BlocksWorkedByHand) {
  std::vector<float> x(96, 0.0f);
  // Block 0: -2, -1.75, ..., 1.75 twice. m = -2 (the first of the two), d = 0.25 (f16 0x3400), x / d
  // = k exactly, nibble k + 8 = j % 16: byte j = 0x11 * j.
  for (int j = 0; j < 32; ++j) x[j] = static_cast<float>(j % 16 - 8) * 0.25f;
  // Block 1: all zero. d = 0 / -8 = -0 (f16 0x8000), 1/d is not taken (0), every nibble 8: 0x88.
  // Block 2: largest magnitude positive: 4 at 3, 1 at 5, -2 at 20. d = 4 / -8 = -0.5 (0xb800);
  // 4 -> trunc(-8 + 8.5) = 0, 1 -> trunc(-2 + 8.5) = 6, -2 -> trunc(4 + 8.5) = 12, 0 -> 8.
  x[64 + 3] = 4.0f;
  x[64 + 5] = 1.0f;
  x[64 + 20] = -2.0f;
  const std::vector<uint8_t> q = quantize_q4_0(x);
  ASSERT_EQ(q.size(), 3u * 18u);
  EXPECT_EQ(half_bits(q, 0), 0x3400);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(q[2 + j], 0x11 * j) << j;
  EXPECT_EQ(half_bits(q, 18), 0x8000);
  for (int j = 0; j < 16; ++j) EXPECT_EQ(q[18 + 2 + j], 0x88) << j;
  EXPECT_EQ(half_bits(q, 36), 0xb800);
  for (int j = 0; j < 16; ++j) {
    const uint8_t want = j == 3 ? 0x80 : j == 4 ? 0xc8 : j == 5 ? 0x86 : 0x88;
    EXPECT_EQ(q[36 + 2 + j], want) << j;
  }
  std::vector<float> y(x.size());
  dequantize_q4_0(q.data(), y.data(), y.size());
  for (size_t i = 0; i < x.size(); ++i) EXPECT_EQ(y[i], x[i]) << i;  // every value above is a multiple of d
  // The value opposite the largest one is 8 d, nibble 16, clamped to 15: 7 d, one step off.
  std::vector<float> two(32, 0.0f);
  two[0] = -3.0f;
  two[1] = 3.0f;
  const std::vector<uint8_t> c = quantize_q4_0(two);
  // d = -3 / -8 = 0.375: element 0 -> 0, element 1 -> min(15, 16), elements 16 and 17 (0) -> 8.
  EXPECT_EQ(half_bits(c, 0), 0x3600);
  EXPECT_EQ(c[2], 0x80);
  EXPECT_EQ(c[3], 0x8f);
  std::vector<float> back(32);
  dequantize_q4_0(c.data(), back.data(), 32);
  EXPECT_EQ(back[0], -3.0f);
  EXPECT_EQ(back[1], 7 * 0.375f);
  EXPECT_THROW(quantize_q4_0(std::vector<float>(48)), Error);
}

// q4_0's error: x / d lies in [-8, 8] (d = m / -8, |m| the largest magnitude). Below 7.5 the
// nibble is x / d rounded half up: within d / 2. From 7.5 to 8 (values towards -m) the nibble 16
// is clamped to 15: within d. The stored d is d rounded to f16, which moves a value by at most
// |q - 8| <= 8 times that rounding.
TEST(Gguf, Q4IsWithinHalfAStepButTheClampedEnd) {
  std::mt19937 rng(7);
  std::normal_distribution<float> g(0.0f, 1.5f);
  std::vector<float> x(32 * 64);
  for (float& v : x) v = g(rng);
  const std::vector<uint8_t> q = quantize_q4_0(x);
  std::vector<float> y(x.size());
  dequantize_q4_0(q.data(), y.data(), y.size());
  int clamped = 0;
  for (size_t b = 0; b < x.size() / 32; ++b) {
    float amax = 0.0f, m = 0.0f;
    for (size_t i = 0; i < 32; ++i)
      if (std::fabs(x[b * 32 + i]) > amax) amax = std::fabs(m = x[b * 32 + i]);
    const float d = m / -8.0f, d16 = f16_to_f32(half_bits(q, b * 18));
    EXPECT_LE(std::fabs(d16 - d), std::fabs(d) * 0x1p-11f);
    const float f16_err = 8.0f * std::fabs(d16 - d) + 1e-6f;
    for (size_t i = 0; i < 32; ++i) {
      const float r = x[b * 32 + i] / d, err = std::fabs(y[b * 32 + i] - x[b * 32 + i]);
      clamped += r > 7.5f;
      EXPECT_LE(err, (r > 7.5f ? 1.0f : 0.5f) * std::fabs(d) + f16_err) << b << " " << i << " x/d " << r;
    }
    EXPECT_EQ(y[b * 32 + std::distance(x.begin() + b * 32, std::find(x.begin() + b * 32, x.end(), m))],
              -8.0f * d16);  // the largest value is nibble 0: exact but for d's rounding
  }
  EXPECT_GT(clamped, 0);  // the normal sample reaches the clamped end
}

uint64_t fnv1a(const std::vector<uint8_t>& b) {
  uint64_t h = 1469598103934665603ull;
  for (uint8_t c : b) h = (h ^ c) * 1099511628211ull;
  return h;
}

// The bytes ggml's quantize_row_q4_0_ref, quantize_row_q4_K_ref and quantize_row_q6_K_ref give
// for 2048 values made of integers (exact on every machine; sub-blocks of eight ranges), as their
// FNV-1a hash: computed once with ggml-quants.c's functions as written (every operation rounded,
// which clang and GCC -ffp-contract=off builds of it give; a build that fuses products into sums
// as FMAs differs in a few Q4_K rows of other data).
TEST(Gguf, QuantizedBytesAreGgmlsReference) {
  std::vector<float> x(2048);
  for (int i = 0; i < 2048; ++i) {
    const int k = (i * 7919 + (i / 256) * 131) % 2001 - 1000;
    x[i] = static_cast<float>(k) / (97.0f + static_cast<float>(i / 32 % 8) * 61.0f);
  }
  const std::vector<uint8_t> q4 = quantize_q4_0(x), k4 = quantize_q4_k(x);
  ASSERT_EQ(q4.size(), 64u * 18u);
  ASSERT_EQ(k4.size(), 8u * 144u);
  EXPECT_EQ((std::vector<uint8_t>(q4.begin(), q4.begin() + 4)), (std::vector<uint8_t>{0x28, 0x3d, 0x50, 0x4f}));
  EXPECT_EQ(fnv1a(q4), 0xe2e98053438e729aull);
  EXPECT_EQ((std::vector<uint8_t>(k4.begin(), k4.begin() + 6)),
            (std::vector<uint8_t>{0x55, 0x25, 0x31, 0x31, 0x7f, 0x27}));
  EXPECT_EQ(fnv1a(k4), 0x644f25d805b8f163ull);
  // Q6_K: ggml's quantize_row_q6_K_ref (ggml-org/ggml d99724f, clang -ffp-contract=off) on the same
  // values; d is the last two bytes of each 210.
  const std::vector<uint8_t> k6 = quantize_q6_k(x);
  ASSERT_EQ(k6.size(), 8u * 210u);
  EXPECT_EQ((std::vector<uint8_t>(k6.begin(), k6.begin() + 4)), (std::vector<uint8_t>{0xe0, 0x1d, 0x4b, 0x78}));
  EXPECT_EQ((std::vector<uint8_t>(k6.begin() + 192, k6.begin() + 198)),
            (std::vector<uint8_t>{0x80, 0x7f, 0xb2, 0x49, 0x37, 0xc8}));
  EXPECT_EQ((std::vector<uint8_t>(k6.begin() + 208, k6.begin() + 210)), (std::vector<uint8_t>{0x28, 0x99}));
  EXPECT_EQ(fnv1a(k6), 0xab6d36311d0576dbull);
}

// Q4_K by hand: a ramp 0..15 in every sub-block is fitted exactly (scale 1, offset 0), so every
// 6-bit scale is 63 (d = 1/63 in f16), every min 0 (dmin 0), and byte l of each 32 holds the ramp
// value of l twice (sub-blocks 2c and 2c+1): 0x11 * (l % 16). A zero super-block is all zero bytes.
TEST(Gguf, Q4KBlocksWorkedByHand) {
  std::vector<float> x(512, 0.0f);
  for (int i = 0; i < 256; ++i) x[i] = static_cast<float>(i % 16);
  const std::vector<uint8_t> q = quantize_q4_k(x);
  ASSERT_EQ(q.size(), 288u);
  EXPECT_EQ(half_bits(q, 0), f32_to_f16(1.0f / 63.0f));
  EXPECT_EQ(half_bits(q, 2), 0u);
  for (int j = 0; j < 4; ++j) {
    EXPECT_EQ(q[4 + j], 63 | (63 >> 4) << 6) << j;  // scale j, and the top bits of scale j + 4
    EXPECT_EQ(q[8 + j], 0) << j;                    // min j, and the top bits of min j + 4
    EXPECT_EQ(q[12 + j], 63 & 0xf) << j;            // low bits of scale and min j + 4
  }
  for (int i = 0; i < 128; ++i) EXPECT_EQ(q[16 + i], 0x11 * (i % 16)) << i;
  for (int i = 144; i < 288; ++i) EXPECT_EQ(q[i], 0) << i;
  std::vector<float> y(512);
  dequantize_q4_k(q.data(), y.data(), 512);
  const float d = f16_to_f32(f32_to_f16(1.0f / 63.0f)) * 63.0f;  // the stored step
  for (int i = 0; i < 512; ++i) EXPECT_EQ(y[i], d * x[i]) << i;
  EXPECT_THROW(quantize_q4_k(std::vector<float>(128)), Error);
}

// On normal weights Q4_K (a fitted scale and offset per 32 values) is closer than q4_0, and no
// value is further than one of its sub-block's steps (range / 15, the range including 0).
TEST(Gguf, Q4KIsCloserThanQ4) {
  std::mt19937 rng(9);
  std::normal_distribution<float> g(0.0f, 0.02f);
  std::vector<float> x(256 * 16);
  for (float& v : x) v = g(rng);
  std::vector<float> a(x.size()), b(x.size());
  const std::vector<uint8_t> q4 = quantize_q4_0(x), k4 = quantize_q4_k(x);
  decode(GgmlType::Q4_0, q4.data(), a.data(), a.size());
  decode(GgmlType::Q4_K, k4.data(), b.data(), b.size());
  double e4 = 0, ek = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    e4 += (a[i] - x[i]) * (a[i] - x[i]);
    ek += (b[i] - x[i]) * (b[i] - x[i]);
  }
  EXPECT_LT(ek, 0.8 * e4);
  for (size_t s = 0; s < x.size() / 32; ++s) {
    const auto [lo, hi] = std::minmax_element(x.begin() + s * 32, x.begin() + s * 32 + 32);
    const float step = (std::max(*hi, 0.0f) - std::min(*lo, 0.0f)) / 15.0f;
    for (size_t i = s * 32; i < s * 32 + 32; ++i) EXPECT_LE(std::fabs(b[i] - x[i]), step) << i;
  }
}

// Q4_K and Q6_K super-blocks packed here from ggml's block layout (ggml-common.h), then read
// through a GGUF file: two super-blocks each, so that a wrong block stride shows.
struct KBlocks {
  std::string q4k, q6k;
  std::vector<float> want4, want6;
};

KBlocks k_blocks() {
  KBlocks k;
  for (int b = 0; b < 2; ++b) {
    // Q4_K: f16 d, f16 dmin, 12 bytes: bytes 0-3 scale j (6 bits) | top 2 bits of scale j+4;
    // bytes 4-7 min j | top bits of min j+4; bytes 8-11 low nibbles of scale and min j+4; then
    // 128 bytes: 32 bytes per 64 values, sub-block 2c in the low nibbles, 2c+1 in the high ones.
    const uint16_t d = b == 0 ? 0x3800 : 0x4000, dmin = b == 0 ? 0x3400 : 0x3c00;  // 0.5, 0.25 | 2, 1
    const int sc[8] = {1, 2, 3, 4, 33, 45, 62, 63}, mn[8] = {0, 5, 10, 63, 1, 17, 32, 48};
    uint8_t blk[144] = {};
    std::memcpy(blk, &d, 2);
    std::memcpy(blk + 2, &dmin, 2);
    for (int j = 0; j < 4; ++j) {
      blk[4 + j] = static_cast<uint8_t>(sc[j] | (sc[j + 4] >> 4) << 6);
      blk[8 + j] = static_cast<uint8_t>(mn[j] | (mn[j + 4] >> 4) << 6);
      blk[12 + j] = static_cast<uint8_t>((sc[j + 4] & 0xf) | (mn[j + 4] & 0xf) << 4);
    }
    for (int i = 0; i < 128; ++i) blk[16 + i] = static_cast<uint8_t>(i * 7 + b * 3);
    for (int e = 0; e < 256; ++e) {
      const int j = e / 32, byte = 16 + (j / 2) * 32 + e % 32;
      const int q = j % 2 == 0 ? blk[byte] & 0xf : blk[byte] >> 4;
      k.want4.push_back(f16_to_f32(d) * static_cast<float>(sc[j]) * static_cast<float>(q) -
                        f16_to_f32(dmin) * static_cast<float>(mn[j]));
    }
    k.q4k.append(reinterpret_cast<const char*>(blk), 144);
    // Q6_K: 128 bytes ql, 64 qh, 16 int8 scales, f16 d. Value e = 128 h + 32 g + l: its low 4 bits
    // in ql[64 h + l] (g = 0), ql[64 h + 32 + l] (1), the high nibbles of those (2, 3); its top 2
    // bits at bit 2g of qh[32 h + l]; its scale is scales[e / 16]; x = d * scale * (q - 32).
    uint8_t q6[210] = {};
    const uint16_t d6 = b == 0 ? 0x3000 : 0x2c00;  // 0.125 | 0.0625
    std::memcpy(q6 + 208, &d6, 2);
    for (int s = 0; s < 16; ++s) q6[192 + s] = static_cast<uint8_t>(static_cast<int8_t>(s * 9 - 70 + b));
    for (int e = 0; e < 256; ++e) {
      const int q = (e * 37 + 5 + b * 11) % 64, h = e / 128, g = e % 128 / 32, l = e % 32;
      uint8_t& lo = q6[64 * h + (g % 2) * 32 + l];
      lo = static_cast<uint8_t>(lo | (g < 2 ? q & 0xf : (q & 0xf) << 4));
      q6[128 + 32 * h + l] = static_cast<uint8_t>(q6[128 + 32 * h + l] | (q >> 4) << (2 * g));
      k.want6.push_back(f16_to_f32(d6) * static_cast<float>(static_cast<int8_t>(q6[192 + e / 16])) *
                        static_cast<float>(q - 32));
    }
    k.q6k.append(reinterpret_cast<const char*>(q6), 210);
  }
  return k;
}

TEST(Gguf, KQuantSuperBlocksReadAsGgmlDefinesThem) {
  const KBlocks k = k_blocks();
  GgufWriter w;
  w.add("general.alignment", GgufValue::u32(32));
  w.add_tensor_bytes("k.q4k", {2, 256}, GgmlType::Q4_K, k.q4k);
  w.add_tensor_bytes("k.q6k", {1, 512}, GgmlType::Q6_K, k.q6k);
  const GgufFile f = parse_gguf(w.bytes(), "k.gguf");
  EXPECT_EQ(f.tensors[0].nbytes, 288u);
  EXPECT_EQ(f.tensors[1].nbytes, 420u);
  EXPECT_EQ(f.tensor_f32("k.q4k"), k.want4);
  EXPECT_EQ(f.tensor_f32("k.q6k"), k.want6);
  EXPECT_EQ(f.tensor_bytes(f.tensors[1]), k.q6k);
  // A few values worked out: block 0's first value is d * 1 * (0 & 0xf) - dmin * 0 = 0; its value
  // 32 (sub-block 1, high nibble of byte 0 = 0) is 0.5 * 2 * 0 - 0.25 * 5.
  EXPECT_EQ(k.want4[0], 0.0f);
  EXPECT_EQ(k.want4[32], -1.25f);
  EXPECT_EQ(k.want6[0], 0.125f * -70.0f * static_cast<float>(5 - 32));
  EXPECT_THAT(error_of([&] {
                w.add_tensor_bytes("short", {1, 256}, GgmlType::Q4_K, k.q4k);
              }),
              HasSubstr("tensor short has 288 bytes, not those of a q4_k tensor"));
  // Q6_K is written too: ggml's quantizer's bytes, which decode back close to the values.
  w.add_tensor("q", {512}, GgmlType::Q6_K, k.want6);
  const GgufFile back = parse_gguf(w.bytes(), "q6.gguf");
  const std::vector<uint8_t> q6 = quantize_q6_k(k.want6);
  EXPECT_EQ(back.tensor_bytes(*back.find("q")), std::string(q6.begin(), q6.end()));
  const std::vector<float> again = back.tensor_f32("q");
  float amax = 0.0f;
  for (float v : k.want6) amax = std::max(amax, std::fabs(v));
  for (size_t i = 0; i < again.size(); ++i) ASSERT_NEAR(again[i], k.want6[i], amax / 40.0f) << i;
}

// A small file: every metadata type, four tensors.
GgufWriter sample_writer() {
  GgufWriter w;
  w.add("general.architecture", GgufValue::string("gpt2"));
  w.add("n.u32", GgufValue::u32(7));
  w.add("n.i32", GgufValue::i32(-3));
  w.add("n.f32", GgufValue::f32(0.5f));
  w.add("n.bool", GgufValue::boolean(true));
  w.add("list.s", GgufValue::string_array({"a", "Ġb", ""}));
  w.add("list.i", GgufValue::i32_array({1, -2, 3}));
  std::vector<float> m(2 * 64), v(5);
  for (size_t i = 0; i < m.size(); ++i) m[i] = std::sin(static_cast<float>(i));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i) - 2.5f;
  w.add_tensor("a.f32", {5}, GgmlType::F32, v);
  w.add_tensor("b.f16", {2, 64}, GgmlType::F16, m);
  w.add_tensor("c.q80", {2, 64}, GgmlType::Q8_0, m);
  w.add_tensor("d.q40", {2, 64}, GgmlType::Q4_0, m);
  return w;
}

TEST(Gguf, WriterAndReaderRoundTrip) {
  const std::string bytes = sample_writer().bytes();
  EXPECT_EQ(bytes.size() % 32, 0u);
  const GgufFile f = parse_gguf(bytes, "t.gguf");
  EXPECT_EQ(f.version, 3u);
  EXPECT_EQ(f.get("general.architecture").as_string("arch"), "gpt2");
  EXPECT_EQ(f.get("n.u32").as_uint("u32"), 7u);
  EXPECT_EQ(f.get("n.i32").as_number("i32"), -3.0);
  EXPECT_EQ(f.get("n.f32").as_number("f32"), 0.5);
  EXPECT_EQ(f.get("n.bool").number, 1.0);
  EXPECT_EQ(f.get("list.s").as_strings("s"), (std::vector<std::string>{"a", "Ġb", ""}));
  EXPECT_EQ(f.get("list.i").as_numbers("i"), (std::vector<double>{1, -2, 3}));
  EXPECT_THAT(error_of([&] { f.get("n.i32").as_uint("the count"); }), HasSubstr("the count must not be negative"));
  EXPECT_THAT(error_of([&] { f.get("missing"); }), HasSubstr("t.gguf: the GGUF metadata has no key missing"));
  ASSERT_EQ(f.tensors.size(), 4u);
  EXPECT_EQ(f.keys.front(), "general.architecture");
  EXPECT_EQ(f.keys.back(), "list.i");
  EXPECT_EQ(f.tensors[1].shape, (std::vector<int64_t>{2, 64}));
  for (const GgufTensorInfo& t : f.tensors) EXPECT_EQ(t.offset % 32, 0u);
  EXPECT_EQ(f.tensor_f32("a.f32"), (std::vector<float>{-2.5f, -1.5f, -0.5f, 0.5f, 1.5f}));
  const std::vector<float> h = f.tensor_f32("b.f16", {2, 64});
  for (size_t i = 0; i < h.size(); ++i) EXPECT_NEAR(h[i], std::sin(static_cast<float>(i)), 1e-3);
  const std::vector<float> q = f.tensor_f32("c.q80");
  for (size_t i = 0; i < q.size(); ++i) EXPECT_NEAR(q[i], std::sin(static_cast<float>(i)), 1.0 / 127);
  // q4_0: the bytes quantize_q4_0 makes, 4 blocks of 18; the values within a step (|d| <= 1/8).
  EXPECT_EQ(f.tensors[3].nbytes, 72u);
  std::vector<float> m(2 * 64);
  for (size_t i = 0; i < m.size(); ++i) m[i] = std::sin(static_cast<float>(i));
  const std::vector<uint8_t> q4 = quantize_q4_0(m);
  EXPECT_EQ(f.tensor_bytes(f.tensors[3]), std::string(q4.begin(), q4.end()));
  const std::vector<float> q4v = f.tensor_f32("d.q40", {2, 64});
  for (size_t i = 0; i < q4v.size(); ++i) EXPECT_NEAR(q4v[i], m[i], 1.0 / 8 + 1e-3) << i;
  EXPECT_THAT(error_of([&] { f.tensor_f32("b.f16", {64, 2}); }), HasSubstr("has shape [2, 64], expected [64, 2]"));
}

// Every prefix of a valid file that cuts into its data is an error (never a crash, never a huge
// allocation); the padding after the last tensor is not needed.
TEST(Gguf, EveryTruncationIsAnError) {
  const std::string bytes = sample_writer().bytes();
  const GgufFile f = parse_gguf(bytes, "whole.gguf");
  uint64_t end = 0;
  for (const GgufTensorInfo& t : f.tensors) end = std::max(end, f.data_start_ + t.offset + t.nbytes);
  EXPECT_NO_THROW(parse_gguf(bytes.substr(0, end), "no padding"));
  for (size_t n = 0; n < end; ++n) {
    const std::string msg = error_of([&] { parse_gguf(bytes.substr(0, n), "cut.gguf"); });
    EXPECT_THAT(msg, HasSubstr("cut.gguf")) << n;
  }
}

// Overwrites the 8 bytes at `pos` with v.
std::string patched(std::string b, size_t pos, uint64_t v, size_t width = 8) {
  std::memcpy(b.data() + pos, &v, width);
  return b;
}

size_t find(const std::string& b, const std::string& s) {
  const size_t p = b.find(s);
  EXPECT_NE(p, std::string::npos) << s;
  return p;
}

TEST(Gguf, DamagedFieldsAreErrorsNamingThem) {
  const std::string b = sample_writer().bytes();
  auto err = [](const std::string& bytes) { return error_of([&] { parse_gguf(bytes, "bad.gguf"); }); };
  EXPECT_THAT(err("GGML" + b.substr(4)), HasSubstr("not a GGUF file"));
  EXPECT_THAT(err(patched(b, 4, 1, 4)), HasSubstr("GGUF version 1 is not supported"));
  EXPECT_THAT(err(patched(b, 4, 0x03000000, 4)), HasSubstr("big-endian"));
  EXPECT_THAT(err(patched(b, 8, uint64_t{1} << 60)), HasSubstr("claims 1152921504606846976 tensors"));
  EXPECT_THAT(err(patched(b, 16, uint64_t{1} << 60)), HasSubstr("metadata entries, more than the file can hold"));
  // The first key's length.
  EXPECT_THAT(err(patched(b, 24, uint64_t{1} << 50)), HasSubstr("truncated GGUF file"));
  // An array's length and element type.
  const size_t list = find(b, "list.i") + 6;  // then type (4), element type (4), count (8)
  EXPECT_THAT(err(patched(b, list + 8, uint64_t{1} << 40)), HasSubstr("more than the"));
  EXPECT_THAT(err(patched(b, list + 4, 9, 4)), HasSubstr("array of arrays"));
  EXPECT_THAT(err(patched(b, list, 13, 4)), HasSubstr("unknown value type 13"));
  // A tensor's dimension count, dimension, type and offset.
  const size_t info = find(b, "b.f16") + 5;  // n_dims (4), ne0, ne1 (8 each), type (4), offset (8)
  EXPECT_THAT(err(patched(b, info, 5, 4)), HasSubstr("has 5 dimensions"));
  EXPECT_THAT(err(patched(b, info + 4, 0)), HasSubstr("invalid dimension 0"));
  EXPECT_THAT(err(patched(b, info + 12, uint64_t{1} << 40)), HasSubstr("truncated GGUF file: tensor b.f16"));
  EXPECT_THAT(err(patched(b, info + 20, 21, 4)), HasSubstr("ggml type 21 (iq3_s), which atto does not read"));
  EXPECT_THAT(err(patched(b, info + 24, 8)), HasSubstr("offset 8, not a multiple of the alignment 32"));
  EXPECT_THAT(err(patched(b, info + 24, 0)), HasSubstr("overlap"));
  // Duplicates.
  std::string dup = b;
  const size_t k = find(dup, "n.i32");
  dup.replace(k, 5, "n.u32");
  EXPECT_THAT(err(dup), HasSubstr("metadata key n.u32 appears twice"));
  std::string dupt = b;
  dupt.replace(find(dupt, "c.q80"), 5, "b.f16");
  EXPECT_THAT(err(dupt), HasSubstr("tensor b.f16 appears twice"));
}

// A block-quantized tensor whose rows do not fill whole blocks is refused, naming the file, the
// tensor, its type and its row length, before its bytes are counted.
TEST(Gguf, BlockTypesNeedWholeBlocksARow) {
  const KBlocks k = k_blocks();
  GgufWriter w;
  std::vector<float> m(64, 0.5f);
  w.add_tensor("a.q40", {2, 32}, GgmlType::Q4_0, m);
  w.add_tensor_bytes("b.q4k", {2, 256}, GgmlType::Q4_K, k.q4k);
  w.add_tensor_bytes("c.q6k", {2, 256}, GgmlType::Q6_K, k.q6k);
  const std::string b = w.bytes();
  EXPECT_NO_THROW(parse_gguf(b, "ok.gguf"));
  auto err = [](const std::string& bytes) { return error_of([&] { parse_gguf(bytes, "rows.gguf"); }); };
  // Each tensor's ne0 (the row length) and ne1 swapped for another split of the same values.
  const size_t a = find(b, "a.q40") + 5 + 4, kq = find(b, "b.q4k") + 5 + 4, k6 = find(b, "c.q6k") + 5 + 4;
  EXPECT_THAT(
      err(patched(patched(b, a, 16), a + 8, 4)),
      HasSubstr("rows.gguf: tensor a.q40 of type q4_0 has rows of 16 values, not a multiple of its block of 32"));
  EXPECT_THAT(
      err(patched(patched(b, kq, 128), kq + 8, 4)),
      HasSubstr("rows.gguf: tensor b.q4k of type q4_k has rows of 128 values, not a multiple of its block of 256"));
  EXPECT_THAT(
      err(patched(patched(b, k6, 64), k6 + 8, 8)),
      HasSubstr("rows.gguf: tensor c.q6k of type q6_k has rows of 64 values, not a multiple of its block of 256"));
  // The same shapes in the writer.
  EXPECT_THAT(error_of([&] {
                w.add_tensor("w", {4, 16}, GgmlType::Q4_0, m);
              }),
              HasSubstr("q4_0 tensor w has rows of 16 values, not a multiple of 32"));
  EXPECT_THAT(error_of([&] {
                w.add_tensor_bytes("w", {4, 128}, GgmlType::Q4_K, k.q4k);
              }),
              HasSubstr("not those of a q4_k tensor of its shape"));
}

// requantize_gguf: metadata in order (file type updated), 1-D tensors and matrices already of the
// type copied, the others re-encoded from their values; no re-encoding to a more precise type.
TEST(Gguf, RequantizeKeepsTheFileAndReencodesItsMatrices) {
  const GgufFile in = parse_gguf(sample_writer().bytes(), "in.gguf");
  GgufRequantized r = requantize_gguf(in, GgmlType::Q4_0, false);
  EXPECT_EQ(r.requantized, 2);  // b.f16, c.q80
  EXPECT_EQ(r.copied, 2);       // a.f32 (1-D), d.q40
  const GgufFile out = parse_gguf(r.writer.bytes(), "out.gguf");
  EXPECT_EQ(out.keys, in.keys);
  for (const std::string& k : in.keys) EXPECT_EQ(out.get(k).number, in.get(k).number) << k;
  ASSERT_EQ(out.tensors.size(), 4u);
  EXPECT_EQ(out.tensors[0].type, GgmlType::F32);
  EXPECT_EQ(out.tensor_bytes(out.tensors[0]), in.tensor_bytes(in.tensors[0]));
  for (size_t i = 1; i < 4; ++i) EXPECT_EQ(out.tensors[i].type, GgmlType::Q4_0) << i;
  const std::vector<uint8_t> from_f16 = quantize_q4_0(in.tensor_f32("b.f16"));
  EXPECT_EQ(out.tensor_bytes(out.tensors[1]), std::string(from_f16.begin(), from_f16.end()));
  EXPECT_EQ(out.tensor_bytes(out.tensors[3]), in.tensor_bytes(in.tensors[3]));
  // With general.file_type present, it becomes the new type's (MOSTLY_Q8_0 = 7).
  GgufWriter w;
  w.add("general.file_type", GgufValue::u32(0));
  w.add_tensor("m", {2, 32}, GgmlType::Q4_0, std::vector<float>(64, 1.0f));
  const GgufFile q4 = parse_gguf(w.bytes(), "q4.gguf");
  EXPECT_THAT(error_of([&] { requantize_gguf(q4, GgmlType::Q8_0, false); }),
              HasSubstr("q4.gguf: tensor m is stored as q4_0: re-encoding it as q8_0 would not make it better"));
  EXPECT_THROW(requantize_gguf(q4, GgmlType::F16, false), Error);
  const GgufFile up = parse_gguf(requantize_gguf(q4, GgmlType::Q8_0, true).writer.bytes(), "up.gguf");
  EXPECT_EQ(up.get("general.file_type").as_uint("file type"), 7u);
  EXPECT_EQ(up.tensors[0].type, GgmlType::Q8_0);
  EXPECT_EQ(up.tensor_bytes(up.tensors[0]), encode(GgmlType::Q8_0, q4.tensor_f32("m")));
  // q6_k asked for rows of 32: q8_0, as llama-quantize falls back.
  const GgufFile six = parse_gguf(requantize_gguf(q4, GgmlType::Q6_K, true).writer.bytes(), "six.gguf");
  EXPECT_EQ(six.tensors[0].type, GgmlType::Q8_0);
}

// llama.cpp's Q4_K_M mix (llama_tensor_get_type) on a llama-layout file of 8 layers: the output
// matrix Q6_K; attn_v and ffn_down Q6_K in layers 0, 3, 6 and 7 (use_more_bits: the first and last
// eighth and every third between), Q4_K in the others; every other matrix Q4_K, a matrix whose rows
// do not fill 256 values q8_0 (or f16 below 32), 1-D tensors and learned positions as they are. A
// tied head (no output.weight) puts Q6_K on token_embd; gpt2's fused attn_qkv is Q5_K. Q5_K_M and
// Q3_K_M likewise.
TEST(Gguf, KMixesAreLlamaCppsChoice) {
  std::vector<std::string> names = {"token_embd.weight"};
  for (int i = 0; i < 8; ++i)
    for (const char* t : {"attn_norm.weight", "attn_q.weight", "attn_k.weight", "attn_v.weight", "attn_output.weight",
                          "ffn_norm.weight", "ffn_gate.weight", "ffn_up.weight", "ffn_down.weight"})
      names.push_back("blk." + std::to_string(i) + "." + t);
  names.push_back("output_norm.weight");
  names.push_back("output.weight");
  QuantRecipe mix;
  ASSERT_TRUE(parse_recipe("q4_k_m", mix));
  EXPECT_EQ(to_string(mix), "q4_k_m");
  EXPECT_EQ(file_type_of(mix), 15u);
  const TypePlan plan(mix, names);
  const std::vector<int64_t> m = {512, 256}, narrow = {512, 64}, tiny = {512, 16}, vec = {256};
  EXPECT_EQ(plan.type_of("output.weight", m, GgmlType::F32), GgmlType::Q6_K);
  EXPECT_EQ(plan.type_of("output.weight", narrow, GgmlType::F32), GgmlType::Q8_0);
  EXPECT_EQ(plan.type_of("token_embd.weight", m, GgmlType::F32), GgmlType::Q4_K);
  for (int i = 0; i < 8; ++i) {
    const bool more = i == 0 || i == 3 || i == 6 || i == 7;
    const std::string b = "blk." + std::to_string(i) + ".";
    EXPECT_EQ(plan.type_of(b + "attn_v.weight", m, GgmlType::F32), more ? GgmlType::Q6_K : GgmlType::Q4_K) << i;
    EXPECT_EQ(plan.type_of(b + "ffn_down.weight", m, GgmlType::F32), more ? GgmlType::Q6_K : GgmlType::Q4_K) << i;
    EXPECT_EQ(plan.type_of(b + "attn_q.weight", m, GgmlType::F32), GgmlType::Q4_K) << i;
    EXPECT_EQ(plan.type_of(b + "ffn_up.weight", narrow, GgmlType::F32), GgmlType::Q8_0) << i;
    EXPECT_EQ(plan.type_of(b + "ffn_down.weight", tiny, GgmlType::F32), GgmlType::F16) << i;
    EXPECT_EQ(plan.type_of(b + "attn_norm.weight", vec, GgmlType::F16), GgmlType::F16) << i;
  }
  // A tied head and the gpt2 layout.
  const TypePlan tied(mix, {"token_embd.weight", "position_embd.weight", "blk.0.attn_qkv.weight",
                            "blk.0.attn_qkv.bias", "blk.0.ffn_down.weight", "blk.0.ffn_down.bias"});
  EXPECT_EQ(tied.type_of("token_embd.weight", m, GgmlType::F32), GgmlType::Q6_K);
  EXPECT_EQ(tied.type_of("position_embd.weight", m, GgmlType::F32), GgmlType::F32);
  EXPECT_EQ(tied.type_of("position_embd.weight", m, GgmlType::Q8_0), GgmlType::Q8_0);
  EXPECT_EQ(tied.type_of("blk.0.attn_qkv.weight", m, GgmlType::F32), GgmlType::Q5_K);  // as llama.cpp
  EXPECT_EQ(tied.type_of("blk.0.ffn_down.weight", m, GgmlType::F32), GgmlType::Q6_K);  // layer 0 of 1
  // One type for every matrix: stored_type_for's rule, positions included.
  const TypePlan q4(QuantRecipe(GgmlType::Q4_0), names);
  EXPECT_EQ(q4.type_of("blk.3.ffn_down.weight", m, GgmlType::F32), GgmlType::Q4_0);
  EXPECT_EQ(tied.type_of("blk.0.attn_qkv.bias", vec, GgmlType::F32), GgmlType::F32);
  QuantRecipe r;
  EXPECT_FALSE(parse_recipe("q2_k", r));  // read, not written
  EXPECT_FALSE(parse_recipe("q6_k_m", r));
  EXPECT_TRUE(parse_recipe("q6_k", r) && r.type == GgmlType::Q6_K && !r.mix);
  // Q3_K_M on 32 layers: attn_v Q5_K in layers 0 and 1, Q4_K after; ffn_down Q5_K in the first
  // sixteenth (layers 0 and 1), Q4_K after; attn_output and the fused attn_qkv Q4_K; the output
  // Q6_K; the rest Q3_K (q8_0 for rows short of 256); file type 12.
  ASSERT_TRUE(parse_recipe("q3_k_m", r));
  EXPECT_EQ(to_string(r), "q3_k_m");
  EXPECT_EQ(file_type_of(r), 12u);
  std::vector<std::string> names32 = {"token_embd.weight"};
  for (int i = 0; i < 32; ++i)
    for (const char* t : {"attn_q.weight", "attn_v.weight", "attn_output.weight", "ffn_up.weight", "ffn_down.weight"})
      names32.push_back("blk." + std::to_string(i) + "." + t);
  names32.push_back("output.weight");
  const TypePlan k3(r, names32), tied3(r, {"token_embd.weight", "blk.0.attn_qkv.weight"});
  for (int i = 0; i < 32; ++i) {
    const std::string b = "blk." + std::to_string(i) + ".";
    const GgmlType more = i < 2 ? GgmlType::Q5_K : GgmlType::Q4_K;
    EXPECT_EQ(k3.type_of(b + "attn_v.weight", m, GgmlType::F32), more) << i;
    EXPECT_EQ(k3.type_of(b + "ffn_down.weight", m, GgmlType::F32), more) << i;
    EXPECT_EQ(k3.type_of(b + "attn_output.weight", m, GgmlType::F32), GgmlType::Q4_K) << i;
    EXPECT_EQ(k3.type_of(b + "attn_q.weight", m, GgmlType::F32), GgmlType::Q3_K) << i;
    EXPECT_EQ(k3.type_of(b + "ffn_up.weight", narrow, GgmlType::F32), GgmlType::Q8_0) << i;
  }
  EXPECT_EQ(k3.type_of("output.weight", m, GgmlType::F32), GgmlType::Q6_K);
  EXPECT_EQ(k3.type_of("token_embd.weight", m, GgmlType::F32), GgmlType::Q3_K);
  EXPECT_EQ(tied3.type_of("token_embd.weight", m, GgmlType::F32), GgmlType::Q6_K);
  EXPECT_EQ(tied3.type_of("blk.0.attn_qkv.weight", m, GgmlType::F32), GgmlType::Q4_K);
  // Q5_K_M: Q5_K for Q4_K, the fused attn_qkv Q6_K; file type 17.
  ASSERT_TRUE(parse_recipe("q5_k_m", r));
  EXPECT_EQ(to_string(r), "q5_k_m");
  EXPECT_EQ(file_type_of(r), 17u);
  const TypePlan k5(r, names), tied5(r, {"token_embd.weight", "blk.0.attn_qkv.weight"});
  EXPECT_EQ(k5.type_of("blk.1.attn_v.weight", m, GgmlType::F32), GgmlType::Q5_K);
  EXPECT_EQ(k5.type_of("blk.0.attn_v.weight", m, GgmlType::F32), GgmlType::Q6_K);
  EXPECT_EQ(k5.type_of("blk.1.ffn_up.weight", narrow, GgmlType::F32), GgmlType::Q8_0);  // llama.cpp: q5_1
  EXPECT_EQ(tied5.type_of("blk.0.attn_qkv.weight", m, GgmlType::F32), GgmlType::Q6_K);
  // Re-quantizing a file to the mix sets general.file_type and each tensor's type.
  GgufWriter w;
  w.add("general.file_type", GgufValue::u32(0));
  std::vector<float> big(512 * 256);
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>((i * 7919) % 1000) / 1000.0f - 0.5f;
  w.add_tensor("blk.0.ffn_down.weight", m, GgmlType::F32, big);
  w.add_tensor("blk.0.ffn_up.weight", m, GgmlType::F32, big);
  w.add_tensor("output.weight", m, GgmlType::F32, big);
  const GgufFile out = parse_gguf(requantize_gguf(parse_gguf(w.bytes(), "f.gguf"), mix, false).writer.bytes(), "m");
  EXPECT_EQ(out.get("general.file_type").as_uint("file type"), 15u);
  EXPECT_EQ(out.find("blk.0.ffn_down.weight")->type, GgmlType::Q6_K);
  EXPECT_EQ(out.find("blk.0.ffn_up.weight")->type, GgmlType::Q4_K);
  EXPECT_EQ(out.find("output.weight")->type, GgmlType::Q6_K);
}

TEST(Gguf, WriterRefusesWhatItCannotStore) {
  GgufWriter w;
  w.add("k", GgufValue::u32(1));
  EXPECT_THROW(w.add("k", GgufValue::u32(2)), Error);
  EXPECT_THAT(error_of([&] {
                w.add_tensor("w", {2, 48}, GgmlType::Q8_0, std::vector<float>(96));
              }),
              HasSubstr("not a multiple of 32"));
  EXPECT_THROW(w.add_tensor("w", {2, 3}, GgmlType::F32, std::vector<float>(5)), Error);
}

}  // namespace
}  // namespace atto::io
