// io/gguf: half-precision and q8_0 numbers, the writer and reader round trip, and damaged files.
#include "io/gguf.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

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

// A small file: every metadata type, three tensors.
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
  ASSERT_EQ(f.tensors.size(), 3u);
  EXPECT_EQ(f.tensors[1].shape, (std::vector<int64_t>{2, 64}));
  for (const GgufTensorInfo& t : f.tensors) EXPECT_EQ(t.offset % 32, 0u);
  EXPECT_EQ(f.tensor_f32("a.f32"), (std::vector<float>{-2.5f, -1.5f, -0.5f, 0.5f, 1.5f}));
  const std::vector<float> h = f.tensor_f32("b.f16", {2, 64});
  for (size_t i = 0; i < h.size(); ++i) EXPECT_NEAR(h[i], std::sin(static_cast<float>(i)), 1e-3);
  const std::vector<float> q = f.tensor_f32("c.q80");
  for (size_t i = 0; i < q.size(); ++i) EXPECT_NEAR(q[i], std::sin(static_cast<float>(i)), 1.0 / 127);
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
  EXPECT_THAT(err(patched(b, info + 20, 12, 4)), HasSubstr("ggml type 12 (q4_k), which atto does not read"));
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
