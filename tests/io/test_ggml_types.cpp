// io/ggml_quants beyond f16, q8_0, q4_0, Q4_K and Q6_K: q4_1, q5_0, q5_1, Q5_K, Q3_K (encoded and
// decoded), Q2_K, iq4_nl and iq4_xs (decoded), bf16, against ggml's reference functions; in GGUF files; the
// type rules of export and re-quantizing.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "io/gguf.h"
#include "io/gguf_recipe.h"
#include "support.h"

namespace atto::io {
namespace {

using test::error_of;
using ::testing::HasSubstr;

uint64_t fnv1a_of(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ b[i]) * 1099511628211ull;
  return h;
}

// The 2048 values of Gguf.QuantizedBytesAreGgmlsReference (integers over eight ranges).
std::vector<float> reference_values() {
  std::vector<float> x(2048);
  for (int i = 0; i < 2048; ++i) {
    const int k = (i * 7919 + (i / 256) * 131) % 2001 - 1000;
    x[i] = static_cast<float>(k) / (97.0f + static_cast<float>(i / 32 % 8) * 61.0f);
  }
  return x;
}

// Blocks of `bs` bytes for 2048 values: bytes of a multiplicative hash, every block's fp16 fields
// at o1 (and o2 >= 0) set to finite scales (0x3000 + b % 97, 0x2c00 + b % 89).
std::vector<uint8_t> hashed_blocks(GgmlType t, size_t bs, int o1, int o2) {
  std::vector<uint8_t> b(ggml_nbytes(t, 2048));
  for (size_t i = 0; i < b.size(); ++i) b[i] = static_cast<uint8_t>(static_cast<uint32_t>(i * 2654435761u) >> 24);
  for (size_t k = 0; k < b.size() / bs; ++k) {
    const uint16_t d = static_cast<uint16_t>(0x3000 + k % 97), m = static_cast<uint16_t>(0x2c00 + k % 89);
    std::memcpy(b.data() + k * bs + o1, &d, 2);
    if (o2 >= 0) std::memcpy(b.data() + k * bs + o2, &m, 2);
  }
  return b;
}

// The hashes below were computed once with ggml-quants.c's functions as written (ggml-org/ggml
// d99724f, clang 14 -O2 -ffp-contract=off): quantize_row_{q4_1,q5_0,q5_1,q5_K,q3_K}_ref on the
// reference values, ggml_compute_fp32_to_bf16 on them times 1.00001, and dequantize_row_{q4_1,
// q5_0,q5_1,q5_K,q2_K,q3_K,iq4_nl,iq4_xs} on hashed_blocks.
TEST(GgmlTypes, EncodedBytesAreGgmlsReference) {
  const std::vector<float> x = reference_values();
  struct Want {
    GgmlType t;
    size_t size;
    std::vector<uint8_t> head;
    uint64_t hash;
  };
  for (const Want& w : {Want{GgmlType::Q4_1, 1280, {0x65, 0x3d, 0x28, 0xc9}, 0x9c739a5f77e1d604ull},
                        Want{GgmlType::Q5_0, 1408, {0x28, 0x39, 0xfe, 0x1f}, 0xdce0f3a2ce2f9fcbull},
                        Want{GgmlType::Q5_1, 1536, {0x38, 0x39, 0x28, 0xc9}, 0xd53d29bedb0ffd2full},
                        Want{GgmlType::Q5_K, 1408, {0x59, 0x21, 0x3a, 0x31}, 0x30a198e1005e3de9ull},
                        Want{GgmlType::Q3_K, 880, {0xb6, 0xb7, 0x37, 0x37}, 0x2094936f1cb2d89cull}}) {
    const std::string q = encode(w.t, x);
    ASSERT_EQ(q.size(), w.size) << to_string(w.t);
    EXPECT_EQ(std::vector<uint8_t>(q.begin(), q.begin() + 4), w.head) << to_string(w.t);
    EXPECT_EQ(fnv1a_of(q.data(), q.size()), w.hash) << to_string(w.t);
  }
  std::vector<float> y(x);
  for (float& v : y) v *= 1.00001f;
  const std::string bf = encode(GgmlType::BF16, y);
  EXPECT_EQ(fnv1a_of(bf.data(), bf.size()), 0x3b603a315108cad7ull);
}

TEST(GgmlTypes, DecodedValuesAreGgmlsReference) {
  struct Want {
    GgmlType t;
    size_t bs;
    int o1, o2;
    uint64_t hash;
    size_t at;
    float value;
  };
  for (const Want& w : {Want{GgmlType::Q4_1, 20, 0, 2, 0x2cef91d52e903c84ull, 17, 0x1.8p-3f},
                        Want{GgmlType::Q5_0, 22, 0, -1, 0xa98b4b743227204eull, 17, -0x1.6p+0f},
                        Want{GgmlType::Q5_1, 24, 0, 2, 0xb3c8d53b189e3cedull, 17, 0x1.1p+0f},
                        Want{GgmlType::Q5_K, 176, 0, 2, 0xf1577ea903f15673ull, 300, 0x1.6e5b8p+5f},
                        Want{GgmlType::Q2_K, 84, 80, 82, 0x45513388be4cba6cull, 300, 0x1.6058p+0f},
                        Want{GgmlType::Q3_K, 110, 108, -1, 0x810da49e6302209cull, 300, 0x1.384ep+2f},
                        Want{GgmlType::IQ4_NL, 18, 0, -1, 0xc98f7039698a2fecull, 17, 0x1.14p+3f},
                        Want{GgmlType::IQ4_XS, 136, 0, -1, 0x179c74742c770295ull, 300, 0x1.1445p+6f}}) {
    const std::vector<uint8_t> b = hashed_blocks(w.t, w.bs, w.o1, w.o2);
    ASSERT_EQ(b.size() % w.bs, 0u) << to_string(w.t);
    std::vector<float> y(2048);
    decode(w.t, b.data(), y.data(), y.size());
    EXPECT_EQ(y[w.at], w.value) << to_string(w.t);
    EXPECT_EQ(fnv1a_of(y.data(), y.size() * 4), w.hash) << to_string(w.t);
  }
}

// q5_0 and iq4_nl as q8_0 blocks and Q3_K as Q6_K super-blocks (how atto computes q5_0, iq4_nl and
// Q3_K matrices): the same values, bit for bit.
TEST(GgmlTypes, ExactConversionsKeepEveryValue) {
  struct Case {
    GgmlType from, to;
    uint64_t bytes;
    int d_at;
    std::string (*convert)(const uint8_t*, uint64_t);
  };
  for (const Case& c : {Case{GgmlType::Q5_0, GgmlType::Q8_0, 22, 0, q5_0_as_q8_0},
                        Case{GgmlType::IQ4_NL, GgmlType::Q8_0, 18, 0, iq4_nl_as_q8_0},
                        Case{GgmlType::Q3_K, GgmlType::Q6_K, 110, 108, q3_k_as_q6_k}}) {
    const std::vector<uint8_t> b = hashed_blocks(c.from, c.bytes, c.d_at, -1);
    const std::string out = c.convert(b.data(), 2048);
    ASSERT_EQ(out.size(), ggml_nbytes(c.to, 2048)) << to_string(c.from);
    std::vector<float> want(2048), got(2048);
    decode(c.from, b.data(), want.data(), want.size());
    decode(c.to, reinterpret_cast<const uint8_t*>(out.data()), got.data(), got.size());
    EXPECT_EQ(got, want) << to_string(c.from);
    EXPECT_NE(std::count(want.begin(), want.end(), 0.0f), 2048) << to_string(c.from);
  }
}

// q5_0 and q5_1 by hand: d = 1 (and m = -2): element j takes nibble j (low) with qh bit j, element
// j + 16 the high nibble with bit j + 16.
TEST(GgmlTypes, FiveBitBlocksWorkedByHand) {
  uint8_t b0[22] = {0x00, 0x3c};  // d = 1.0
  const uint32_t qh = 0x00010001u;  // elements 0 and 16 get their fifth bit
  std::memcpy(b0 + 2, &qh, 4);
  for (int j = 0; j < 16; ++j) b0[6 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  float y[32];
  decode(GgmlType::Q5_0, b0, y, 32);
  EXPECT_EQ(y[0], 0.0f);     // (0 | 16) - 16
  EXPECT_EQ(y[1], -15.0f);   // 1 - 16
  EXPECT_EQ(y[16], 15.0f);   // (15 | 16) - 16
  EXPECT_EQ(y[31], -16.0f);  // 0 - 16
  uint8_t b1[24] = {0x00, 0x3c, 0x00, 0xc0};  // d = 1, m = -2
  std::memcpy(b1 + 4, &qh, 4);
  std::memcpy(b1 + 8, b0 + 6, 16);
  decode(GgmlType::Q5_1, b1, y, 32);
  EXPECT_EQ(y[0], 14.0f);  // 16 - 2
  EXPECT_EQ(y[16], 29.0f);  // 31 - 2
  EXPECT_EQ(y[31], -2.0f);
  // A ramp -16..15 is q5_0's grid at d = 1: encoded and decoded exactly.
  std::vector<float> ramp(32);
  for (int i = 0; i < 32; ++i) ramp[i] = static_cast<float>(i % 2 == 0 ? -16 + i / 2 : 15 - i / 2);
  const std::string q = encode(GgmlType::Q5_0, ramp);
  decode(GgmlType::Q5_0, reinterpret_cast<const uint8_t*>(q.data()), y, 32);
  EXPECT_EQ(std::vector<float>(y, y + 32), ramp);
}

TEST(GgmlTypes, Bf16RoundsToNearestEvenAndKeepsNaNs) {
  const auto bits = [](uint32_t u) {
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  };
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(bits(0x3f808000u)), 0x3f80);  // a tie: to the even neighbour
  EXPECT_EQ(f32_to_bf16(bits(0x3f818000u)), 0x3f82);
  EXPECT_EQ(f32_to_bf16(bits(0x3f808001u)), 0x3f81);
  EXPECT_EQ(f32_to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(f32_to_bf16(bits(0x7f7fffffu)), 0x7f80);  // the largest float rounds to infinity
  EXPECT_EQ(f32_to_bf16(bits(0x7fa00000u)), 0x7fe0);  // a signalling NaN comes back quiet
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = bf16_to_f32(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(f32_to_bf16(f), h) << h;
  }
}

TEST(GgmlTypes, FilesHoldEveryTypeAndTheRulesNameThem) {
  std::vector<float> m(4 * 256);
  for (size_t i = 0; i < m.size(); ++i) m[i] = std::sin(0.37f * static_cast<float>(i)) * 0.2f;
  GgufWriter w;
  const GgmlType types[] = {GgmlType::BF16, GgmlType::Q4_1, GgmlType::Q5_0, GgmlType::Q5_1, GgmlType::Q5_K, GgmlType::Q3_K};
  for (GgmlType t : types) w.add_tensor(std::string("w.") + to_string(t), {4, 256}, t, m);
  const GgufFile f = parse_gguf(w.bytes(), "types.gguf");
  for (GgmlType t : types) {
    const GgufTensorInfo* ti = f.find(std::string("w.") + to_string(t));
    ASSERT_NE(ti, nullptr);
    EXPECT_EQ(ti->type, t);
    EXPECT_EQ(ti->nbytes, ggml_nbytes(t, m.size()));
    const std::vector<float> back = f.tensor_f32(ti->name);
    const float step = t == GgmlType::BF16   ? 2e-3f
                       : t == GgmlType::Q3_K ? 0.4f / 4
                       : t == GgmlType::Q4_1 ? 0.4f / 15
                                             : 0.4f / 31;
    for (size_t i = 0; i < m.size(); ++i) ASSERT_NEAR(back[i], m[i], step) << to_string(t) << " " << i;
  }
  EXPECT_EQ(ggml_file_type(GgmlType::Q5_K), 16u);
  EXPECT_EQ(ggml_file_type(GgmlType::BF16), 32u);
  EXPECT_EQ(stored_type_for(GgmlType::Q5_K, {4, 96}), GgmlType::Q8_0);  // as Q4_K's (llama.cpp: q5_1)
  EXPECT_EQ(stored_type_for(GgmlType::Q5_0, {4, 48}), GgmlType::F16);
  EXPECT_EQ(ggml_file_type(GgmlType::Q3_K), 11u);
  // Q2_K is read, not written; a type atto does not know is named in the error.
  EXPECT_THAT(error_of([&] { (void)encode(GgmlType::Q2_K, m); }), HasSubstr("atto does not write ggml type q2_k"));
  QuantRecipe r;
  EXPECT_FALSE(parse_recipe("q2_k", r));
  ASSERT_TRUE(parse_recipe("q5_k", r));
  EXPECT_EQ(r.type, GgmlType::Q5_K);
  ASSERT_TRUE(parse_recipe("q3_k_m", r));
  EXPECT_EQ(r.type, GgmlType::Q3_K);
  EXPECT_TRUE(r.mix);
  EXPECT_EQ(file_type_of(r), 12u);
  GgufWriter k;
  k.add_tensor_bytes("q2", {1, 256}, GgmlType::Q2_K, std::string(84, '\0'));
  std::string bytes = k.bytes();
  EXPECT_EQ(parse_gguf(bytes, "q2.gguf").tensor_f32("q2"), std::vector<float>(256, 0.0f));
  const size_t at = bytes.find(std::string("q2", 2)) + 2 + 4 + 16;  // name, dimension count, dimensions
  const uint32_t iq2 = 16;
  std::memcpy(bytes.data() + at, &iq2, 4);
  EXPECT_THAT(error_of([&] { (void)parse_gguf(bytes, "iq2.gguf"); }),
              HasSubstr("tensor q2 has ggml type 16 (iq2_xxs), which atto does not read"));
  // Re-quantizing follows the precision order: bf16 to q8_0 is allowed, q4_1 to q8_0 refused, Q3_K
  // to q4_0 refused; every type here to Q3_K allowed.
  const GgufFile k5 = parse_gguf(w.bytes(), "k5.gguf");
  EXPECT_THAT(error_of([&] { (void)requantize_gguf(k5, QuantRecipe(GgmlType::Q8_0), false); }),
              HasSubstr("tensor w.q4_1 is stored as q4_1: re-encoding it as q8_0"));
  EXPECT_THAT(error_of([&] { (void)requantize_gguf(k5, QuantRecipe(GgmlType::Q4_0), false); }),
              HasSubstr("tensor w.q3_k is stored as q3_k: re-encoding it as q4_0"));
  EXPECT_EQ(requantize_gguf(k5, QuantRecipe(GgmlType::Q3_K), false).requantized, 5);
}

}  // namespace
}  // namespace atto::io
