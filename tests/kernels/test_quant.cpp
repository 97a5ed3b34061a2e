// The linear layer on q8_0 / q4_0 / Q4_K / Q5_K / Q6_K weights (kernels/quant.h): the kernels against the scalar
// reference bit for bit (every shape class, every level and integer dot product this CPU runs, 1
// and 2 threads), the reference against a double-precision dot of the dequantized values, the
// result against the f32 product within the activations' rounding, the row decoder, and K checks.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "kernels/kernel_support.h"
#include "kernels/kernels.h"

namespace atto::kernels {
namespace {

using test::expect_bit_identical;
using test::randn;
using test::ThreadGuard;

// ---- test-local ggml formats ---------------------------------------------------------------------
// f32 -> f16, round to nearest even; normal halves only (the scales the quantizers below make).
uint16_t to_half(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  const uint32_t sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
  if (ax == 0) return static_cast<uint16_t>(sign);
  EXPECT_TRUE(ax >= 0x38800000u && ax < 0x477ff000u) << "not a normal half: " << f;
  uint32_t h = (ax - 0x38000000u) >> 13;
  const uint32_t rem = ax & 0x1fffu;
  if (rem > 0x1000u || (rem == 0x1000u && (h & 1u))) ++h;
  return static_cast<uint16_t>(sign | h);
}

double from_half(uint16_t h) {
  const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
  const double v = e == 0 ? std::ldexp(m, -24) : std::ldexp(1024 + m, e - 25);
  return (h & 0x8000) != 0 ? -v : v;
}

void put_half(uint8_t* p, uint16_t h) { std::memcpy(p, &h, 2); }
uint16_t get_half(const uint8_t* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return h;
}

// ggml's quantize_row_q8_0_ref / quantize_row_q4_0_ref, one row of K values.
void quantize_ref(uint8_t* o, const float* x, QuantType t, int64_t K) {
  for (int64_t b = 0; b < K / 32; b++) {
    const float* v = x + 32 * b;
    if (t == QuantType::Q8_0) {
      float amax = 0.0f;
      for (int i = 0; i < 32; i++) amax = std::max(amax, std::fabs(v[i]));
      const float d = amax / 127.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
      put_half(o, to_half(d));
      for (int i = 0; i < 32; i++) o[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(std::roundf(v[i] * id)));
      o += 34;
    } else {
      float amax = 0.0f, max = 0.0f;
      for (int i = 0; i < 32; i++)
        if (amax < std::fabs(v[i])) amax = std::fabs(v[i]), max = v[i];
      const float d = max / -8.0f, id = d != 0.0f ? 1.0f / d : 0.0f;
      put_half(o, to_half(d));
      for (int j = 0; j < 16; j++) {
        const int lo = std::min(15, static_cast<int>(v[j] * id + 8.5f)),
                  hi = std::min(15, static_cast<int>(v[16 + j] * id + 8.5f));
        o[2 + j] = static_cast<uint8_t>(lo | (hi << 4));
      }
      o += 18;
    }
  }
}

// W[N, K] as the test sees it: each block's scale and 32 integers.
std::vector<double> dequantize_ref(const std::vector<uint8_t>& w, QuantType t, int64_t N, int64_t K) {
  std::vector<double> out(static_cast<size_t>(N * K));
  const int64_t bs = t == QuantType::Q4_0 ? 18 : 34;
  for (int64_t blk = 0; blk < N * K / 32; blk++) {
    const uint8_t* p = w.data() + blk * bs;
    const double d = from_half(get_half(p));
    for (int i = 0; i < 32; i++) {
      const int q =
          t == QuantType::Q8_0 ? static_cast<int8_t>(p[2 + i]) : (i < 16 ? (p[2 + i] & 15) : (p[2 + i - 16] >> 4)) - 8;
      out[blk * 32 + i] = d * q;
    }
  }
  return out;
}

// N rows of weights: quantized from normal floats, or (raw) random bytes with random finite scales
// (subnormals included) and q8_0's -128 in every block.
std::vector<uint8_t> make_weights(QuantType t, int64_t N, int64_t K, bool raw, uint32_t seed) {
  const int64_t rb = quant_row_bytes(t, K);
  std::vector<uint8_t> w(static_cast<size_t>(N * rb));
  if (!raw) {
    const auto f = randn(N * K, seed, 0.05f);
    for (int64_t n = 0; n < N; n++) quantize_ref(w.data() + n * rb, f.data() + n * K, t, K);
    return w;
  }
  std::mt19937 gen(seed);
  for (auto& b : w) b = static_cast<uint8_t>(gen());
  const int64_t bs = t == QuantType::Q4_0 ? 18 : 34;
  for (int64_t blk = 0; blk < N * K / 32; blk++) {
    uint8_t* p = w.data() + blk * bs;
    put_half(p, static_cast<uint16_t>((gen() & 0x83ffu) | ((gen() % 31) << 10)));  // exponent 0..30
    if (t == QuantType::Q8_0) p[2 + gen() % 32] = 0x80;
  }
  return w;
}

// W (rows) in `layout`.
std::vector<uint8_t> packed_as(const std::vector<uint8_t>& w, QuantType t, QuantLayout layout, int64_t N, int64_t K) {
  std::vector<uint8_t> p(w.size(), 0xEE);
  quant_pack(p.data(), w.data(), t, layout, N, K);
  return p;
}

// linear_quant_forward on W given as rows, packed into `layout` first.
std::vector<float> run_fast(const std::vector<float>& x, const std::vector<uint8_t>& w, QuantType t, const float* bias,
                            int64_t M, int64_t K, int64_t N, QuantLayout layout = QuantLayout::Rows) {
  std::vector<float> y(static_cast<size_t>(M * N), -7.0f);
  const std::vector<uint8_t> wl = packed_as(w, t, layout, N, K);
  linear_quant_forward(y.data(), x.data(), wl.data(), t, layout, bias, M, K, N);
  return y;
}
std::vector<float> run_naive(const std::vector<float>& x, const std::vector<uint8_t>& w, QuantType t, const float* bias,
                             int64_t M, int64_t K, int64_t N) {
  std::vector<float> y(static_cast<size_t>(M * N), -7.0f);
  linear_quant_forward_naive(y.data(), x.data(), w.data(), t, bias, M, K, N);
  return y;
}

// An activation block's documented rounding (quant.h): d = max|x| / 127 over the 32 values at v,
// q = nearbyint(x / d) clamped to [-127, 127], 0 when d = 0.
float act_scale(const float* v) {
  float amax = 0.0f;
  for (int i = 0; i < 32; i++) amax = std::max(amax, std::fabs(v[i]));
  return amax / 127.0f;
}
int64_t act_int(float x, float d) {
  return d != 0.0f ? static_cast<int64_t>(std::nearbyint(std::clamp(x / d, -127.0f, 127.0f))) : 0;
}

const char* type_name(QuantType t) { return t == QuantType::Q4_0 ? "q4_0" : "q8_0"; }

// Sets $ATTO_QUANT_DOT for a scope (unset: nullptr) and puts the previous value back.
struct DotGuard {
  std::optional<std::string> saved;
  explicit DotGuard(const char* v) {
    if (const char* s = std::getenv("ATTO_QUANT_DOT")) saved = s;
    set(v);
  }
  ~DotGuard() { set(saved ? saved->c_str() : nullptr); }
  static void set(const char* v) {
    if (v != nullptr)
      setenv("ATTO_QUANT_DOT", v, 1);
    else
      unsetenv("ATTO_QUANT_DOT");
  }
};

TEST(KernelQuant, MatchesTheNaiveReferenceBitForBit) {
  uint32_t seed = 100;
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0})
    for (int64_t K : {32, 64, 96, 768})
      for (int64_t N : {1, 7, 16, 33, 130})
        for (bool raw : {false, true}) {
          const auto w = make_weights(t, N, K, raw, seed++);
          const auto bias = randn(N, seed++);
          for (int64_t M : {1, 2, 3, 5, 17, 64}) {
            const auto x = randn(M * K, seed++);
            if (M * K * N > 1000000) continue;  // the reference's time (qemu runs this too)
            for (const float* b : {static_cast<const float*>(nullptr), bias.data()}) {
              const std::string what = std::string(type_name(t)) + " M=" + std::to_string(M) +
                                       " K=" + std::to_string(K) + " N=" + std::to_string(N) + (raw ? " raw" : "") +
                                       (b ? " bias" : "");
              expect_bit_identical(run_fast(x, w, t, b, M, K, N), run_naive(x, w, t, b, M, K, N), what);
              if (HasFatalFailure()) return;
            }
          }
        }
}

// Zero activation rows (scale 0), a row with a zero block, large, tiny and subnormal inputs (a
// subnormal scale, where q is clamped to 127), and a NaN (its row's outputs are NaN).
TEST(KernelQuant, EdgeActivationsMatchTheReference) {
  const int64_t M = 7, K = 96, N = 9;
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0}) {
    const auto w = make_weights(t, N, K, false, 7);
    auto x = randn(M * K, 8);
    for (int64_t k = 0; k < K; k++) x[k] = 0.0f;        // row 0: all zero
    for (int64_t k = 32; k < 64; k++) x[K + k] = 0.0f;  // row 1: its second block zero
    for (int64_t k = 0; k < K; k++) x[2 * K + k] *= 1e30f, x[3 * K + k] *= 1e-30f, x[4 * K + k] *= 1e-43f;
    x[6 * K + 40] = std::nanf("");
    const auto y = run_fast(x, w, t, nullptr, M, K, N);
    expect_bit_identical(y, run_naive(x, w, t, nullptr, M, K, N), type_name(t));
    for (int64_t n = 0; n < N; n++) {
      EXPECT_EQ(y[n], 0.0f);
      EXPECT_TRUE(std::isnan(y[6 * N + n])) << n;
      EXPECT_TRUE(std::isfinite(y[4 * N + n])) << n;
    }
  }
}

// The reference against sum_b sum_i w_deq * (q * d) in double: the activations quantized here
// by the documented formula; the float chain is within a few roundings of the sum of |terms|.
TEST(KernelQuant, NaiveMatchesADoubleDotOfTheDequantizedValues) {
  const int64_t M = 3, K = 768, N = 40;
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0}) {
    const auto w = make_weights(t, N, K, false, 11);
    const auto wd = dequantize_ref(w, t, N, K);
    const auto x = randn(M * K, 12), bias = randn(N, 13);
    std::vector<double> xd(x.size());
    for (int64_t blk = 0; blk < M * K / 32; blk++) {
      float amax = 0.0f;
      for (int i = 0; i < 32; i++) amax = std::max(amax, std::fabs(x[blk * 32 + i]));
      const float d = amax / 127.0f;
      for (int i = 0; i < 32; i++) xd[blk * 32 + i] = std::nearbyint(x[blk * 32 + i] / d) * double{d};
    }
    const auto y = run_naive(x, w, t, bias.data(), M, K, N);
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < N; n++) {
        double want = bias[n], mag = std::fabs(bias[n]);
        for (int64_t k = 0; k < K; k++) {
          want += wd[n * K + k] * xd[m * K + k];
          mag += std::fabs(wd[n * K + k] * xd[m * K + k]);
        }
        ASSERT_NEAR(y[m * N + n], want, 3e-6 * mag) << type_name(t) << " m=" << m << " n=" << n;
      }
  }
}

// The kernel against x W_deq^T in double with x unquantized: off by at most the activations'
// rounding (|x - q d| <= d / 2 per value, d = max|x| / 127 a block) times |w|, plus float's.
TEST(KernelQuant, CloseToTheF32ProductOfTheDequantizedWeights) {
  const int64_t M = 4, K = 768, N = 64;
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0}) {
    const auto w = make_weights(t, N, K, false, 21);
    const auto wd = dequantize_ref(w, t, N, K);
    const auto x = randn(M * K, 22);
    const auto y = run_fast(x, w, t, nullptr, M, K, N);
    double err2 = 0.0, ref2 = 0.0;
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < N; n++) {
        double want = 0.0, bound = 0.0, mag = 0.0;
        for (int64_t b = 0; b < K / 32; b++) {
          double amax = 0.0, wabs = 0.0;
          for (int i = 0; i < 32; i++) {
            const int64_t k = 32 * b + i;
            want += wd[n * K + k] * x[m * K + k];
            mag += std::fabs(wd[n * K + k] * x[m * K + k]);
            amax = std::max(amax, std::fabs(double{x[m * K + k]}));
            wabs += std::fabs(wd[n * K + k]);
          }
          bound += amax / 254.0 * wabs;
        }
        ASSERT_NEAR(y[m * N + n], want, 1.01 * bound + 1e-5 * mag) << type_name(t) << " m=" << m << " n=" << n;
        err2 += (y[m * N + n] - want) * (y[m * N + n] - want);
        ref2 += want * want;
      }
    EXPECT_LT(std::sqrt(err2 / ref2), 0.02) << type_name(t);  // int8 activations: ~0.5% typical
  }
}

// (M = 17 and 9 groups of 16 columns: a prompt's groups handed out a few at a time.)
TEST(KernelQuant, OneAndTwoThreadsGiveTheSameBits) {
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_K, QuantType::Q6_K})
    for (int64_t M : {1, 2, 17}) {
      const int64_t K = 768, N = 130;
      const auto w = make_weights(t, N, K, t == QuantType::Q8_0 || t == QuantType::Q4_0, 31);
      const auto x = randn(M * K, 32), bias = randn(N, 33);
      const std::string what = std::string(type_name(t)) + " M=" + std::to_string(M);
      test::expect_thread_invariant([&] { return run_fast(x, w, t, bias.data(), M, K, N); }, what);
      expect_bit_identical(run_fast(x, w, t, bias.data(), M, K, N), run_naive(x, w, t, bias.data(), M, K, N), what);
    }
}

// Every integer dot product this CPU runs at the chosen level ($ATTO_QUANT_DOT), and in a
// portable build every level's table too: the reference's bits.
TEST(KernelQuant, EveryLevelAndDotProductGivesTheReferenceBits) {
  const int64_t K = 96, N = 33;
  int ran = 0;
  for (const char* dot : {"avx512vnni", "avxvnni", "avx2", "neon", "scalar"}) {
    DotGuard guard(dot);
    for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0})
      for (int64_t M : {1, 3, 6}) {
        const auto w = make_weights(t, N, K, true, 41);
        const auto x = randn(M * K, 42), bias = randn(N, 43);
        const auto want = run_naive(x, w, t, bias.data(), M, K, N);
        std::vector<float> got(static_cast<size_t>(M * N));
        try {
          linear_quant_forward(got.data(), x.data(), w.data(), t, QuantLayout::Rows, bias.data(), M, K, N);
        } catch (const std::runtime_error&) {
          continue;  // this CPU (or level) has no such dot product
        }
        EXPECT_STREQ(quant_kernel_name(), dot);
        expect_bit_identical(got, want, std::string(dot) + " " + type_name(t) + " M=" + std::to_string(M));
        ran++;
#if defined(ATTO_DISPATCH)
        std::vector<std::pair<const char*, const KernelTable*>> tables = {{"avx2", &atto_kernel_table_isa_avx2}};
        if (cpu_features().avx512) tables.emplace_back("avx512", &atto_kernel_table_isa_avx512);
        for (const auto& [level, table] : tables) {
          try {
            table->linear_quant_forward(got.data(), x.data(), w.data(), t, QuantLayout::Rows, bias.data(), M, K, N);
          } catch (const std::runtime_error&) {
            continue;
          }
          EXPECT_STREQ(table->quant_kernel_name(), dot);
          expect_bit_identical(got, want, std::string(level) + " level, " + dot + " " + type_name(t));
          std::vector<float> naive(got.size());
          table->linear_quant_forward_naive(naive.data(), x.data(), w.data(), t, bias.data(), M, K, N);
          expect_bit_identical(naive, want, std::string(level) + " level's naive");
        }
#endif
      }
  }
  EXPECT_GE(ran, 12);  // scalar and at least one SIMD form (or neon) on every CPU atto runs on
}

// q4_0 and q8_0 at every dot product this CPU runs, on 1 and 2 threads, on rows and on the Lanes16
// packing: column groups with tails (16 on zmm, 8 on ymm), row tiles with tails (6 or 4 rows;
// decoding's 1..3 rows build the weights as they go), K from one block to 96. The raw weights hold
// q8_0's -128 and q4_0's 0 and 15 nibbles (the signed and unsigned extremes).
// Every dot product this CPU runs, on rows and on Lanes16, gives y (the reference's outputs) for x
// and w.
void expect_every_dot_product_gives(const std::vector<float>& y, const std::vector<float>& x,
                                    const std::vector<uint8_t>& w, QuantType t, int64_t M, int64_t K, int64_t N) {
  for (const char* dot : {"avx512vnni", "avxvnni", "avx2", "neon", "scalar"}) {
    DotGuard guard(dot);
    try {
      quant_kernel_name();
    } catch (const std::runtime_error&) {
      continue;
    }
    for (const QuantLayout layout : {QuantLayout::Rows, QuantLayout::Lanes16})
      expect_bit_identical(run_fast(x, w, t, nullptr, M, K, N, layout), y, dot);
  }
}

// The reference on the weights w (N rows of K values) and random activations (M rows, from seed)
// is documented(x, w, m, n, K) at every output.
template <class Documented>
void expect_documented_on_random(const std::vector<uint8_t>& w, QuantType t, int64_t M, int64_t K, int64_t N,
                                 uint32_t seed, const Documented& documented) {
  const auto x = randn(M * K, seed);
  const auto y = run_naive(x, w, t, nullptr, M, K, N);
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) EXPECT_EQ(y[m * N + n], documented(x, w, m, n, K)) << "random m=" << m << " n=" << n;
}

TEST(KernelQuant, Q4Q8EveryDotProductAndTailGivesTheReferenceBits) {
  ThreadGuard threads;
  uint32_t seed = 300;
  int ran = 0;
  for (const char* dot : {"avx512vnni", "avxvnni", "avx2", "neon", "scalar"}) {
    DotGuard guard(dot);
    try {
      quant_kernel_name();
    } catch (const std::runtime_error&) {
      continue;  // this CPU (or level) has no such dot product
    }
    ran++;
    for (const QuantType t : {QuantType::Q4_0, QuantType::Q8_0})
      for (int64_t K : {32, 64, 3072})
        for (int64_t N : {1, 7, 17, 40}) {
          const auto w = make_weights(t, N, K, true, seed++);
          const auto bias = randn(N, seed++);
          for (int64_t M : {1, 2, 3, 7, 13}) {
            if (K == 3072 && N * M > 100) continue;  // the reference's time (ASan, qemu)
            const auto x = randn(M * K, seed++);
            const float* b = M % 2 == 1 ? bias.data() : nullptr;
            const auto want = run_naive(x, w, t, b, M, K, N);
            for (int nt : {1, 2})
              for (const QuantLayout layout : {QuantLayout::Rows, QuantLayout::Lanes16}) {
                set_num_threads(nt);
                expect_bit_identical(run_fast(x, w, t, b, M, K, N, layout), want,
                                     std::string(dot) + " " + type_name(t) + " M=" + std::to_string(M) +
                                         " K=" + std::to_string(K) + " N=" + std::to_string(N) +
                                         " threads=" + std::to_string(nt) +
                                         (layout == QuantLayout::Lanes16 ? " lanes16" : ""));
                if (HasFatalFailure()) return;
              }
          }
        }
  }
  EXPECT_GE(ran, 2);
}

// Output (m, n) of q8_0 or q4_0 (xs: rows of kk values, ws: rows of blocks) in quant.h's order,
// recomputed: per block p_b = sum w_int * q exactly (in 64 bits; q4_0's w_int = nibble - 8), s =
// dw * dx rounded once to float (the product of two floats is exact in double), acc = fmaf(s,
// p_b, acc).
float documented_b32(QuantType t, const std::vector<float>& xs, const std::vector<uint8_t>& ws, int64_t m, int64_t n,
                     int64_t kk) {
  const int64_t bs = t == QuantType::Q8_0 ? 34 : 18;
  float acc = 0.0f;
  for (int64_t b = 0; b < kk / 32; b++) {
    const float* v = xs.data() + m * kk + 32 * b;
    const float dx = act_scale(v);
    const uint8_t* blk = ws.data() + (n * kk / 32 + b) * bs;
    int64_t p = 0;
    for (int i = 0; i < 32; i++) {
      const int w = t == QuantType::Q8_0 ? static_cast<int8_t>(blk[2 + i])
                                         : (i < 16 ? (blk[2 + i] & 15) : (blk[2 + i - 16] >> 4)) - 8;
      p += int64_t{w} * act_int(v[i], dx);
    }
    const float s = static_cast<float>(from_half(get_half(blk)) * double{dx});
    acc = std::fma(s, static_cast<float>(p), acc);
  }
  return acc;
}

// q4_0's documented order, recomputed here: per block p_b = sum (nibble - 8) * q exactly (in
// 64 bits), s = dw * dx rounded once to float (the product of two floats is exact in double),
// acc = fmaf(s, p_b, acc). Hand-made blocks with nibbles 0 and 15 against q = -127 and 127 (the
// extremes of p_b: 8 * 127 * 32 = 32512 and 7 * 127 * 32), then random bytes and scales.
TEST(KernelQuant, Q4ReferenceFollowsTheDocumentedOrder) {
  const int64_t K = 128, nb = K / 32;
  std::vector<uint8_t> w(static_cast<size_t>(3 * nb * 18));
  const uint16_t scales[4] = {0x3800, 0xBC00, 0x4000, 0x3400};  // 0.5, -1, 2, 0.25
  for (int64_t b = 0; b < nb; b++) {
    uint8_t* p0 = w.data() + b * 18;             // row 0: all nibbles 0 (-8)
    uint8_t* p1 = w.data() + (nb + b) * 18;      // row 1: all 15 (7)
    uint8_t* p2 = w.data() + (2 * nb + b) * 18;  // row 2: 0 and 15 alternating, and 8 (0)
    put_half(p0, scales[b]), put_half(p1, scales[(b + 1) % 4]), put_half(p2, scales[(b + 2) % 4]);
    for (int j = 0; j < 16; j++) {
      p0[2 + j] = 0x00, p1[2 + j] = 0xFF;
      p2[2 + j] = static_cast<uint8_t>(j % 3 == 0 ? 0xF0 : j % 3 == 1 ? 0x0F : 0x88);
    }
  }
  // Row 0 of x: every value 127 (q = 127, d = 1); row 1: -127; row 2: 127 and -127 mixed with
  // small integers; row 3: halves (d = 0.5, q = 2x).
  const int64_t M = 4, N = 3;
  std::vector<float> x(static_cast<size_t>(M * K));
  for (int64_t k = 0; k < K; k++) {
    x[k] = 127.0f, x[K + k] = -127.0f;
    x[2 * K + k] = k % 5 == 0 ? 127.0f : k % 5 == 1 ? -127.0f : static_cast<float>(k % 7) - 3.0f;
    x[3 * K + k] = k % 4 == 0 ? 63.5f : static_cast<float>(k % 9) * 0.5f - 2.0f;
  }
  const auto documented = [](auto&&... a) { return documented_b32(QuantType::Q4_0, a...); };
  const auto y = run_naive(x, w, QuantType::Q4_0, nullptr, M, K, N);
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) EXPECT_EQ(y[m * N + n], documented(x, w, m, n, K)) << "m=" << m << " n=" << n;
  // The hand-made extremes, exactly: row 0 of x against rows 0 and 1 of w, each block
  // 32 * 127 * (-8) and 32 * 127 * 7 times its scale.
  EXPECT_EQ(y[0], -32512.0f * (0.5f - 1.0f + 2.0f + 0.25f));
  EXPECT_EQ(y[1], 28448.0f * (-1.0f + 2.0f + 0.25f + 0.5f));
  EXPECT_EQ(y[N + 1], -28448.0f * (-1.0f + 2.0f + 0.25f + 0.5f));
  // Random bytes and scales (subnormal ones too), random activations.
  const int64_t M2 = 5, K2 = 256, N2 = 9;
  const auto w2 = make_weights(QuantType::Q4_0, N2, K2, true, 61);
  const auto x2 = randn(M2 * K2, 62);
  const auto y2 = run_naive(x2, w2, QuantType::Q4_0, nullptr, M2, K2, N2);
  for (int64_t m = 0; m < M2; m++)
    for (int64_t n = 0; n < N2; n++)
      EXPECT_EQ(y2[m * N2 + n], documented(x2, w2, m, n, K2)) << "random m=" << m << " n=" << n;
}

// q8_0's documented order, recomputed here: per block p_b = sum w * q exactly (in 64 bits), s =
// dw * dx rounded once to float, acc = fmaf(s, p_b, acc). Hand-made blocks of -128 and of 127
// against q = -127 and 127 (the extremes of p_b: 32 * 128 * 127 = 520192, exact in float; the
// kernels take -128 as 0 after flipping the sign bit, or as |w| = 128 with AVX2), then random bytes
// and scales; every dot product this CPU runs gives the same bits on the extremes.
TEST(KernelQuant, Q8ReferenceFollowsTheDocumentedOrder) {
  const int64_t K = 128, nb = K / 32, N = 3;
  std::vector<uint8_t> w(static_cast<size_t>(N * nb * 34));
  const uint16_t scales[4] = {0x3800, 0xBC00, 0x4000, 0x3400};  // 0.5, -1, 2, 0.25
  for (int64_t b = 0; b < nb; b++) {
    uint8_t* p0 = w.data() + b * 34;             // row 0: all -128
    uint8_t* p1 = w.data() + (nb + b) * 34;      // row 1: all 127
    uint8_t* p2 = w.data() + (2 * nb + b) * 34;  // row 2: -128, 127, 0 and -1 mixed
    put_half(p0, scales[b]), put_half(p1, scales[(b + 1) % 4]), put_half(p2, scales[(b + 2) % 4]);
    for (int i = 0; i < 32; i++) {
      p0[2 + i] = 0x80, p1[2 + i] = 0x7F;
      p2[2 + i] = static_cast<uint8_t>(i % 4 == 0 ? 0x80 : i % 4 == 1 ? 0x7F : i % 4 == 2 ? 0x00 : 0xFF);
    }
  }
  const int64_t M = 3;
  std::vector<float> x(static_cast<size_t>(M * K));
  for (int64_t k = 0; k < K; k++) {
    x[k] = 127.0f, x[K + k] = -127.0f;
    x[2 * K + k] = k % 5 == 0 ? 127.0f : k % 5 == 1 ? -127.0f : static_cast<float>(k % 7) - 3.0f;
  }
  const auto documented = [](auto&&... a) { return documented_b32(QuantType::Q8_0, a...); };
  const auto y = run_naive(x, w, QuantType::Q8_0, nullptr, M, K, N);
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) EXPECT_EQ(y[m * N + n], documented(x, w, m, n, K)) << "m=" << m << " n=" << n;
  EXPECT_EQ(y[0], -520192.0f * (0.5f - 1.0f + 2.0f + 0.25f));
  EXPECT_EQ(y[1], 516128.0f * (-1.0f + 2.0f + 0.25f + 0.5f));
  EXPECT_EQ(y[N], 520192.0f * (0.5f - 1.0f + 2.0f + 0.25f));
  expect_every_dot_product_gives(y, x, w, QuantType::Q8_0, M, K, N);
  expect_documented_on_random(make_weights(QuantType::Q8_0, 9, 256, true, 63), QuantType::Q8_0, 5, 256, 9, 64,
                              documented);
}

// ---- Q4_K -----------------------------------------------------------------------------------------
// A super-block's 12 scale bytes from eight 6-bit scales and mins (the inverse of ggml's
// get_scale_min_k4).
void put_scales_k4(uint8_t* q, const int* sc, const int* m) {
  for (int j = 0; j < 4; j++) {
    q[j] = static_cast<uint8_t>((sc[j] & 63) | ((sc[j + 4] >> 4) << 6));
    q[j + 4] = static_cast<uint8_t>((m[j] & 63) | ((m[j + 4] >> 4) << 6));
    q[j + 8] = static_cast<uint8_t>((sc[j + 4] & 15) | ((m[j + 4] & 15) << 4));
  }
}
// ggml's get_scale_min_k4, written out again.
void scale_min_k4(int j, const uint8_t* q, int& sc, int& m) {
  if (j < 4) {
    sc = q[j] & 63, m = q[j + 4] & 63;
  } else {
    sc = (q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4), m = (q[j + 4] >> 4) | ((q[j] >> 6) << 4);
  }
}
// Value i (< 32) of sub-block j of the super-block at blk.
int nibble_k4(const uint8_t* blk, int j, int i) {
  const uint8_t b = blk[16 + 32 * (j / 2) + i];
  return j % 2 == 0 ? b & 15 : b >> 4;
}

// N rows of random Q4_K super-blocks: random nibbles and 6-bit scales and mins, random finite d and
// dmin (subnormal and negative ones too).
std::vector<uint8_t> make_q4k(int64_t N, int64_t K, uint32_t seed) {
  std::vector<uint8_t> w(static_cast<size_t>(quant_row_bytes(QuantType::Q4_K, K) * N));
  std::mt19937 gen(seed);
  for (auto& b : w) b = static_cast<uint8_t>(gen());
  for (size_t s = 0; s < w.size(); s += 144) {
    put_half(w.data() + s, static_cast<uint16_t>((gen() & 0x83ffu) | ((gen() % 31) << 10)));
    put_half(w.data() + s + 2, static_cast<uint16_t>((gen() & 0x83ffu) | ((gen() % 31) << 10)));
  }
  return w;
}

// A super-block type at every dot product this CPU runs, on 1 and 2 threads: column groups with
// tails (16 on zmm, 8 on ymm), row tiles with tails (6 or 4 rows; decoding's rows build the
// weights as they go), K of 1, 2 and 12 super-blocks, with and without a bias; prints the dot
// products it ran. make(N, K, seed) gives N random rows.
template <class Make>
void every_dot_product_gives_the_reference_bits(QuantType t, const char* name, uint32_t seed, const Make& make) {
  ThreadGuard threads;
  int ran = 0;
  std::string kinds;
  for (const char* dot : {"avx512vnni", "avxvnni", "avx2", "neon", "scalar"}) {
    DotGuard guard(dot);
    try {
      quant_kernel_name();
    } catch (const std::runtime_error&) {
      continue;  // this CPU (or level) has no such dot product
    }
    ran++;
    kinds += std::string(" ") + dot;
    for (int64_t K : {256, 512, 3072})
      for (int64_t N : {1, 7, 17, 40}) {
        const auto w = make(N, K, seed++);
        const auto bias = randn(N, seed++);
        for (int64_t M : {1, 2, 3, 7, 13})
          for (const bool with_bias : {false, true}) {
            if (K == 3072 && N * M > 120) continue;  // the reference's time (ASan, qemu); K = 512 has them
            const auto x = randn(M * K, seed++);
            const float* b = with_bias ? bias.data() : nullptr;
            const auto want = run_naive(x, w, t, b, M, K, N);
            for (int nt : {1, 2})
              for (const QuantLayout layout : {QuantLayout::Rows, QuantLayout::Lanes16}) {
                set_num_threads(nt);
                expect_bit_identical(run_fast(x, w, t, b, M, K, N, layout), want,
                                     std::string(name) + " " + dot + " M=" + std::to_string(M) + " K=" +
                                         std::to_string(K) + " N=" + std::to_string(N) + " threads=" +
                                         std::to_string(nt) + (with_bias ? " bias" : "") +
                                         (layout == QuantLayout::Lanes16 ? " lanes16" : ""));
                if (::testing::Test::HasFatalFailure()) return;
              }
          }
      }
  }
  std::printf("%s: dot products run:%s\n", name, kinds.c_str());
  EXPECT_GE(ran, 2);
}

TEST(KernelQuant, Q4KEveryDotProductAndTailGivesTheReferenceBits) {
  every_dot_product_gives_the_reference_bits(QuantType::Q4_K, "q4_k", 700, make_q4k);
}

// Q4_K's documented order, recomputed here: per sub-block P_b = sum nibble * q and S_b = sum q
// exactly (64 bits), dsc = d * sc and dmn = dmin * m (exact in float), acc = fmaf(dsc * dx, P_b,
// acc), acc = fmaf(-(dmn * dx), S_b, acc). Hand-made super-blocks at the extremes (nibbles 0 and
// 15, scales and mins 0 and 63, q = +-127) with exact expected sums, then random ones.
TEST(KernelQuant, Q4KReferenceFollowsTheDocumentedOrder) {
  const int64_t K = 256, N = 4;
  std::vector<uint8_t> w(static_cast<size_t>(N * 144));
  const int s63[8] = {63, 63, 63, 63, 63, 63, 63, 63}, s0[8] = {}, alt[8] = {63, 0, 63, 0, 0, 63, 0, 63};
  // Row 0: d = 1, dmin = 1, scales 63, mins 0, nibbles 15. Row 1: scales 0, mins 63, nibbles 15.
  // Row 2: scales and mins 63, nibbles 0. Row 3: d = 0.5, dmin = 2, scales alternating 63/0, mins
  // the other way round, sub-block j's nibbles 15 (j even) or 0 (odd).
  const uint16_t d[4] = {0x3C00, 0x3C00, 0x3C00, 0x3800}, dmin[4] = {0x3C00, 0x3C00, 0x3C00, 0x4000};
  const int* scs[4] = {s63, s0, s63, alt};
  const int mins3[8] = {0, 63, 0, 63, 63, 0, 63, 0};
  const int* mns[4] = {s0, s63, s63, mins3};
  for (int n = 0; n < N; n++) {
    uint8_t* blk = w.data() + n * 144;
    put_half(blk, d[n]), put_half(blk + 2, dmin[n]);
    put_scales_k4(blk + 4, scs[n], mns[n]);
    for (int j = 0; j < 8; j++)
      for (int i = 0; i < 32; i++) {
        const int v = n == 2 ? 0 : n == 3 ? (j % 2 == 0 ? 15 : 0) : 15;
        uint8_t& b = blk[16 + 32 * (j / 2) + i];
        b = static_cast<uint8_t>(j % 2 == 0 ? (b & 0xF0) | v : (b & 0x0F) | (v << 4));
      }
  }
  // x rows: all 127 (q = 127, dx = 1); all -127; +-127 by sub-block and small integers; random.
  const int64_t M = 4;
  std::vector<float> x(static_cast<size_t>(M * K));
  const auto r = randn(K, 71);
  for (int64_t k = 0; k < K; k++) {
    x[k] = 127.0f, x[K + k] = -127.0f;
    x[2 * K + k] = k % 32 == 0 ? ((k / 32) % 2 == 0 ? 127.0f : -127.0f) : static_cast<float>(k % 7) - 3.0f;
    x[3 * K + k] = r[k];
  }
  auto documented = [](const std::vector<float>& xs, const std::vector<uint8_t>& ws, int64_t m, int64_t n, int64_t kk) {
    float acc = 0.0f;
    for (int64_t b = 0; b < kk / 32; b++) {
      const float* v = xs.data() + m * kk + 32 * b;
      const float dx = act_scale(v);
      const uint8_t* blk = ws.data() + (n * kk / 256 + b / 8) * 144;
      const int j = static_cast<int>(b % 8);
      int64_t p = 0, s = 0;
      for (int i = 0; i < 32; i++) {
        const int64_t q = act_int(v[i], dx);
        p += nibble_k4(blk, j, i) * q, s += q;
      }
      int sc, mn;
      scale_min_k4(j, blk + 4, sc, mn);
      const float dsc = static_cast<float>(from_half(get_half(blk)) * sc);
      const float dmn = static_cast<float>(from_half(get_half(blk + 2)) * mn);
      acc = std::fma(static_cast<float>(double{dsc} * dx), static_cast<float>(p), acc);
      acc = std::fma(-static_cast<float>(double{dmn} * dx), static_cast<float>(s), acc);
    }
    return acc;
  };
  const auto y = run_naive(x, w, QuantType::Q4_K, nullptr, M, K, N);
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) EXPECT_EQ(y[m * N + n], documented(x, w, m, n, K)) << "m=" << m << " n=" << n;
  // Exactly, x = 127 everywhere (P = 32 * 127 * nibble, S = 4064): row 0, 8 sub-blocks of
  // 63 * 60960; row 1, 8 of -63 * 4064; row 2 the same (its P = 0); row 3, two sub-blocks of
  // 0.5 * 63 * 60960 (sub-blocks 0 and 2) and four of -2 * 63 * 4064 (1, 3, 4, 6; 5 and 7 add 0).
  EXPECT_EQ(y[0], 8.0f * 63.0f * 60960.0f);
  EXPECT_EQ(y[1], -8.0f * 63.0f * 4064.0f);
  EXPECT_EQ(y[2], -8.0f * 63.0f * 4064.0f);
  EXPECT_EQ(y[3], 2.0f * 31.5f * 60960.0f - 4.0f * 126.0f * 4064.0f);
  // x = -127: row 0 -8 * 63 * 60960, row 1 +8 * 63 * 4064.
  EXPECT_EQ(y[N + 0], -8.0f * 63.0f * 60960.0f);
  EXPECT_EQ(y[N + 1], 8.0f * 63.0f * 4064.0f);
  // Random super-blocks (subnormal and negative d and dmin), random activations.
  const int64_t M2 = 5, K2 = 512, N2 = 9;
  const auto w2 = make_q4k(N2, K2, 73);
  const auto x2 = randn(M2 * K2, 74);
  const auto y2 = run_naive(x2, w2, QuantType::Q4_K, nullptr, M2, K2, N2);
  for (int64_t m = 0; m < M2; m++)
    for (int64_t n = 0; n < N2; n++)
      EXPECT_EQ(y2[m * N2 + n], documented(x2, w2, m, n, K2)) << "random m=" << m << " n=" << n;
}

// dequantize_rows on Q4_K: ggml's dequantize_row_q4_K (as io's decoder: d1 * q - m1 in float), bit
// for bit, for rows picked by id.
TEST(KernelQuant, Q4KDequantizeRowsIsGgmlsDecoder) {
  const int64_t N = 5, K = 512;
  const auto w = make_q4k(N, K, 81);
  const std::vector<int32_t> ids = {4, 0, 4, 2};
  std::vector<float> got(ids.size() * K);
  dequantize_rows(got.data(), w.data(), QuantType::Q4_K, QuantLayout::Rows, N, K, ids.data(), static_cast<int64_t>(ids.size()));
  for (size_t r = 0; r < ids.size(); r++)
    for (int64_t s = 0; s < K / 256; s++) {
      const uint8_t* blk = w.data() + (ids[r] * K / 256 + s) * 144;
      const float d = static_cast<float>(from_half(get_half(blk))),
                  dmin = static_cast<float>(from_half(get_half(blk + 2)));
      for (int j = 0; j < 8; j++) {
        int sc, mn;
        scale_min_k4(j, blk + 4, sc, mn);
        const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(mn);
        for (int i = 0; i < 32; i++) {
          const volatile float prod = d1 * static_cast<float>(nibble_k4(blk, j, i));  // (no fused multiply-add)
          ASSERT_EQ(got[r * K + s * 256 + 32 * j + i], prod - m1)
              << "r=" << r << " s=" << s << " j=" << j << " i=" << i;
        }
      }
    }
}

// ---- Q5_K -----------------------------------------------------------------------------------------
// Value i (< 32) of sub-block j of the Q5_K super-block at blk: its nibble plus 16 for bit j of
// qh byte i.
int value_k5(const uint8_t* blk, int j, int i) {
  const uint8_t b = blk[48 + 32 * (j / 2) + i];
  return (j % 2 == 0 ? b & 15 : b >> 4) + ((blk[16 + i] >> j) & 1) * 16;
}

// N rows of random Q5_K super-blocks (random bytes, finite random d and dmin, subnormal and
// negative ones too).
std::vector<uint8_t> make_q5k(int64_t N, int64_t K, uint32_t seed) {
  std::vector<uint8_t> w(static_cast<size_t>(quant_row_bytes(QuantType::Q5_K, K) * N));
  std::mt19937 gen(seed);
  for (auto& b : w) b = static_cast<uint8_t>(gen());
  for (size_t s = 0; s < w.size(); s += 176) {
    put_half(w.data() + s, static_cast<uint16_t>((gen() & 0x83ffu) | ((gen() % 31) << 10)));
    put_half(w.data() + s + 2, static_cast<uint16_t>((gen() & 0x83ffu) | ((gen() % 31) << 10)));
  }
  return w;
}

TEST(KernelQuant, Q5KEveryDotProductAndTailGivesTheReferenceBits) {
  every_dot_product_gives_the_reference_bits(QuantType::Q5_K, "q5_k", 1100, make_q5k);
}

// Q5_K's documented order (Q4_K's with the 5-bit values), recomputed; the largest values (31
// everywhere: nibbles 15, every qh bit set) against q = +-127 with exact expected sums (P = 32 *
// 127 * 31 = 125984 a sub-block: vpmaddubsw's int16 lanes would overflow summed as Q4_K's are).
TEST(KernelQuant, Q5KReferenceFollowsTheDocumentedOrder) {
  auto documented = [](const std::vector<float>& xs, const std::vector<uint8_t>& ws, int64_t m, int64_t n, int64_t kk) {
    float acc = 0.0f;
    for (int64_t b = 0; b < kk / 32; b++) {
      const float* v = xs.data() + m * kk + 32 * b;
      const float dx = act_scale(v);
      const uint8_t* blk = ws.data() + (n * kk / 256 + b / 8) * 176;
      const int j = static_cast<int>(b % 8);
      int64_t p = 0, s = 0;
      for (int i = 0; i < 32; i++) {
        const int64_t q = act_int(v[i], dx);
        p += value_k5(blk, j, i) * q, s += q;
      }
      int sc, mn;
      scale_min_k4(j, blk + 4, sc, mn);
      const float dsc = static_cast<float>(from_half(get_half(blk)) * sc);
      const float dmn = static_cast<float>(from_half(get_half(blk + 2)) * mn);
      acc = std::fma(static_cast<float>(double{dsc} * dx), static_cast<float>(p), acc);
      acc = std::fma(-static_cast<float>(double{dmn} * dx), static_cast<float>(s), acc);
    }
    return acc;
  };
  const int64_t K = 256, N = 2, M = 2;
  std::vector<uint8_t> w(static_cast<size_t>(N * 176), 0xFF);  // nibbles 15 and every fifth bit: 31
  const int s63[8] = {63, 63, 63, 63, 63, 63, 63, 63}, s0[8] = {};
  for (int n = 0; n < N; n++) {
    put_half(w.data() + n * 176, 0x3C00), put_half(w.data() + n * 176 + 2, 0x3C00);  // d = dmin = 1
    put_scales_k4(w.data() + n * 176 + 4, s63, n == 0 ? s0 : s63);
  }
  std::vector<float> x(static_cast<size_t>(M * K));
  for (int64_t k = 0; k < K; k++) x[k] = 127.0f, x[K + k] = -127.0f;
  for (const QuantLayout layout : {QuantLayout::Rows, QuantLayout::Lanes16}) {
    const auto fast = run_fast(x, w, QuantType::Q5_K, nullptr, M, K, N, layout);
    EXPECT_EQ(fast[0], 8.0f * 63.0f * 125984.0f);
    EXPECT_EQ(fast[1], 8.0f * (63.0f * 125984.0f - 63.0f * 4064.0f));
    EXPECT_EQ(fast[N], -8.0f * 63.0f * 125984.0f);
  }
  const int64_t M2 = 5, K2 = 512, N2 = 9;
  const auto w2 = make_q5k(N2, K2, 113);
  const auto x2 = randn(M2 * K2, 114);
  const auto y2 = run_naive(x2, w2, QuantType::Q5_K, nullptr, M2, K2, N2);
  for (int64_t m = 0; m < M2; m++)
    for (int64_t n = 0; n < N2; n++)
      EXPECT_EQ(y2[m * N2 + n], documented(x2, w2, m, n, K2)) << "random m=" << m << " n=" << n;
}

// dequantize_rows on Q5_K: ggml's dequantize_row_q5_K ((d * sc) * value - dmin * m), bit for bit.
TEST(KernelQuant, Q5KDequantizeRowsIsGgmlsDecoder) {
  const int64_t N = 5, K = 512;
  const auto w = make_q5k(N, K, 115);
  const std::vector<int32_t> ids = {4, 0, 4, 2};
  std::vector<float> got(ids.size() * K);
  dequantize_rows(got.data(), w.data(), QuantType::Q5_K, QuantLayout::Rows, N, K, ids.data(),
                  static_cast<int64_t>(ids.size()));
  for (size_t r = 0; r < ids.size(); r++)
    for (int64_t s = 0; s < K / 256; s++) {
      const uint8_t* blk = w.data() + (ids[r] * K / 256 + s) * 176;
      const float d = static_cast<float>(from_half(get_half(blk))),
                  dmin = static_cast<float>(from_half(get_half(blk + 2)));
      for (int j = 0; j < 8; j++) {
        int sc, mn;
        scale_min_k4(j, blk + 4, sc, mn);
        const float d1 = d * static_cast<float>(sc), m1 = dmin * static_cast<float>(mn);
        for (int i = 0; i < 32; i++) {
          const volatile float prod = d1 * static_cast<float>(value_k5(blk, j, i));  // (no fused multiply-add)
          ASSERT_EQ(got[r * K + s * 256 + 32 * j + i], prod - m1)
              << "r=" << r << " s=" << s << " j=" << j << " i=" << i;
        }
      }
    }
}

TEST(KernelQuant, SuperBlockTypesNeedWholeSuperBlocks) {
  EXPECT_EQ(quant_row_bytes(QuantType::Q4_K, 512), 288);
  EXPECT_EQ(quant_row_bytes(QuantType::Q6_K, 512), 420);
  std::vector<float> x(2 * 512, 1.0f), y(4, 0.0f);
  std::vector<uint8_t> w(4 * 420, 0);
  const int32_t id = 0;
  for (QuantType t : {QuantType::Q4_K, QuantType::Q5_K, QuantType::Q6_K}) {
    for (int64_t K : {32, 224, 288, -256, 1}) {
      EXPECT_THROW(linear_quant_forward(y.data(), x.data(), w.data(), t, QuantLayout::Rows, nullptr, 1, K, 2), std::invalid_argument);
      EXPECT_THROW(linear_quant_forward_naive(y.data(), x.data(), w.data(), t, nullptr, 1, K, 2),
                   std::invalid_argument);
      EXPECT_THROW(dequantize_rows(y.data(), w.data(), t, QuantLayout::Rows, 2, K, &id, 1), std::invalid_argument);
    }
    try {
      linear_quant_forward(y.data(), x.data(), w.data(), t, QuantLayout::Rows, nullptr, 1, 32, 2);
      ADD_FAILURE() << "K = 32 accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("multiple of 256"), std::string::npos) << e.what();
    }
  }
}

// ---- Q6_K -----------------------------------------------------------------------------------------
// The 256 six-bit values (0..63) of the Q6_K super-block at blk, in ggml's dequantize_row_q6_K
// loop: per half of 128, value l of the four runs of 32 from ql's low or high nibbles and qh's bit
// pairs.
std::vector<int> values_k6(const uint8_t* blk) {
  std::vector<int> u(256);
  const uint8_t* ql = blk;
  const uint8_t* qh = blk + 128;
  for (int n = 0; n < 256; n += 128, ql += 64, qh += 32)
    for (int l = 0; l < 32; l++) {
      u[n + l] = (ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4);
      u[n + l + 32] = (ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4);
      u[n + l + 64] = (ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4);
      u[n + l + 96] = (ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4);
    }
  return u;
}
int scale_k6(const uint8_t* blk, int i) { return static_cast<int8_t>(blk[192 + i]); }

// N rows of random Q6_K super-blocks: random 6-bit values and int8 scales (-128 in every one), a
// random finite d (subnormal and negative ones too).
std::vector<uint8_t> make_q6k(int64_t N, int64_t K, uint32_t seed) {
  std::vector<uint8_t> w(static_cast<size_t>(quant_row_bytes(QuantType::Q6_K, K) * N));
  std::mt19937 gen(seed);
  for (auto& b : w) b = static_cast<uint8_t>(gen());
  for (size_t s = 0; s < w.size(); s += 210) {
    w[s + 192 + gen() % 16] = 0x80;
    put_half(w.data() + s + 208, static_cast<uint16_t>((gen() & 0x83ffu) | ((gen() % 31) << 10)));
  }
  return w;
}

TEST(KernelQuant, Q6KEveryDotProductAndTailGivesTheReferenceBits) {
  every_dot_product_gives_the_reference_bits(QuantType::Q6_K, "q6_k", 900, make_q6k);
}

// Q6_K's documented order, recomputed here from ggml's value layout: per activation block b (sub-
// blocks 2j, 2j + 1) P_i = sum (u - 32) * q exactly, Q_b = sc_2j P_2j + sc_2j+1 P_2j+1, acc =
// fmaf(d * dx, Q_b, acc). Hand-made super-blocks at the extremes (u = 63 and 0, scales -128 and
// 127, q = +-127) with exact expected sums, then random ones.
TEST(KernelQuant, Q6KReferenceFollowsTheDocumentedOrder) {
  const int64_t K = 256, N = 3;
  std::vector<uint8_t> w(static_cast<size_t>(N * 210));
  // Row 0: d = 1, every scale -128, every u 63 (q = 31). Row 1: d = 1, scales 127, u 0 (q = -32).
  // Row 2: d = 0.5, scales alternating 127 / -128 by sub-block, u 63.
  for (int n = 0; n < N; n++) {
    uint8_t* blk = w.data() + n * 210;
    std::memset(blk, n == 1 ? 0x00 : 0xFF, 192);
    for (int i = 0; i < 16; i++)
      blk[192 + i] = static_cast<uint8_t>(n == 0 ? 0x80 : n == 1 ? 0x7F : (i % 2 == 0 ? 0x7F : 0x80));
    put_half(blk + 208, n == 2 ? 0x3800 : 0x3C00);
  }
  const int64_t M = 3;
  std::vector<float> x(static_cast<size_t>(M * K));
  const auto r = randn(K, 91);
  for (int64_t k = 0; k < K; k++) x[k] = 127.0f, x[K + k] = -127.0f, x[2 * K + k] = r[k];
  auto documented = [](const std::vector<float>& xs, const std::vector<uint8_t>& ws, int64_t m, int64_t n, int64_t kk) {
    float acc = 0.0f;
    for (int64_t b = 0; b < kk / 32; b++) {
      const float* v = xs.data() + m * kk + 32 * b;
      const float dx = act_scale(v);
      const uint8_t* blk = ws.data() + (n * kk / 256 + b / 8) * 210;
      const std::vector<int> u = values_k6(blk);
      const int j = static_cast<int>(b % 8);
      int64_t p[2] = {0, 0};
      for (int i = 0; i < 32; i++) {
        const int64_t q = act_int(v[i], dx);
        p[i / 16] += (u[32 * j + i] - 32) * q;
      }
      const int64_t qb = scale_k6(blk, 2 * j) * p[0] + scale_k6(blk, 2 * j + 1) * p[1];
      const float d = static_cast<float>(from_half(get_half(blk + 208)));
      acc = std::fma(static_cast<float>(double{d} * dx), static_cast<float>(qb), acc);
    }
    return acc;
  };
  const auto y = run_naive(x, w, QuantType::Q6_K, nullptr, M, K, N);
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) EXPECT_EQ(y[m * N + n], documented(x, w, m, n, K)) << "m=" << m << " n=" << n;
  // Exactly, x = 127 (q = 127, dx = 1): row 0, 8 blocks of -128 * 2 * (16 * 31 * 127); row 1, 8
  // of 127 * 2 * (16 * -32 * 127); row 2, 8 of 0.5 * (127 - 128) * 16 * 31 * 127.
  EXPECT_EQ(y[0], 8.0f * -128.0f * 2.0f * 62992.0f);
  EXPECT_EQ(y[1], 8.0f * 127.0f * 2.0f * -65024.0f);
  EXPECT_EQ(y[2], 8.0f * 0.5f * -62992.0f);
  EXPECT_EQ(y[N + 0], 8.0f * 128.0f * 2.0f * 62992.0f);  // x = -127
  EXPECT_EQ(y[N + 1], 8.0f * 127.0f * 2.0f * 65024.0f);
  // Random super-blocks (subnormal and negative d, scale -128), random activations; the kernels too.
  const int64_t M2 = 5, K2 = 512, N2 = 9;
  const auto w2 = make_q6k(N2, K2, 93);
  const auto x2 = randn(M2 * K2, 94);
  const auto y2 = run_naive(x2, w2, QuantType::Q6_K, nullptr, M2, K2, N2);
  for (int64_t m = 0; m < M2; m++)
    for (int64_t n = 0; n < N2; n++)
      EXPECT_EQ(y2[m * N2 + n], documented(x2, w2, m, n, K2)) << "random m=" << m << " n=" << n;
  expect_bit_identical(run_fast(x2, w2, QuantType::Q6_K, nullptr, M2, K2, N2), y2, "q6_k kernel");
}

// dequantize_rows on Q6_K: ggml's dequantize_row_q6_K (as io's decoder: d * sc * (u - 32) in
// float, left to right), bit for bit, for rows picked by id.
TEST(KernelQuant, Q6KDequantizeRowsIsGgmlsDecoder) {
  const int64_t N = 5, K = 512;
  const auto w = make_q6k(N, K, 95);
  const std::vector<int32_t> ids = {4, 0, 4, 2};
  std::vector<float> got(ids.size() * K);
  dequantize_rows(got.data(), w.data(), QuantType::Q6_K, QuantLayout::Rows, N, K, ids.data(), static_cast<int64_t>(ids.size()));
  for (size_t r = 0; r < ids.size(); r++)
    for (int64_t s = 0; s < K / 256; s++) {
      const uint8_t* blk = w.data() + (ids[r] * K / 256 + s) * 210;
      const float d = static_cast<float>(from_half(get_half(blk + 208)));
      const std::vector<int> u = values_k6(blk);
      for (int v = 0; v < 256; v++)
        ASSERT_EQ(got[r * K + s * 256 + v],
                  d * static_cast<float>(scale_k6(blk, v / 16)) * static_cast<float>(u[v] - 32))
            << "r=" << r << " s=" << s << " v=" << v;
    }
}

// The Lanes16 packing (every type): the same bytes regrouped (every byte of the rows kept, the rows
// past the last group of 16 where they were), each row read back by dequantize_rows as from the
// rows; the layout the kernels want on this CPU; a layout that does not exist is refused.
// All N rows of W (ggml's rows) dequantized.
std::vector<float> all_rows(const std::vector<uint8_t>& w, QuantType t, int64_t N, int64_t K) {
  std::vector<int32_t> ids(static_cast<size_t>(N));
  for (int64_t n = 0; n < N; n++) ids[n] = static_cast<int32_t>(n);
  std::vector<float> wd(static_cast<size_t>(N * K));
  dequantize_rows(wd.data(), w.data(), t, QuantLayout::Rows, N, K, ids.data(), N);
  return wd;
}

// ---- U8M (how atto keeps q4_1 and q5_1) ------------------------------------------------------------
// N rows of random U8M blocks: random finite scales and mins (subnormal ones too), values 0..31.
std::vector<uint8_t> make_u8m(int64_t N, int64_t K, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> w(static_cast<size_t>(N * quant_row_bytes(QuantType::U8M, K)));
  for (size_t b = 0; b < w.size(); b += 36) {
    put_half(w.data() + b, static_cast<uint16_t>((gen() & 0x83ffu) | ((gen() % 31) << 10)));
    put_half(w.data() + b + 2, static_cast<uint16_t>((gen() & 0x83ffu) | ((gen() % 31) << 10)));
    for (int i = 0; i < 32; i++) w[b + 4 + i] = static_cast<uint8_t>(gen() % 32);
  }
  return w;
}

TEST(KernelQuant, U8MEveryDotProductAndTailGivesTheReferenceBits) {
  every_dot_product_gives_the_reference_bits(QuantType::U8M, "u8m", 900, make_u8m);
}

// Output (m, n) of U8M in quant.h's order, recomputed: per block p_b = sum q * x_int and S_b = sum
// x_int exactly (64 bits), dw * dx and dm * dx rounded once to float (exact in double first), acc =
// fmaf(dw dx, p_b, acc), then acc = fmaf(dm dx, S_b, acc).
float documented_u8m(const std::vector<float>& xs, const std::vector<uint8_t>& ws, int64_t m, int64_t n, int64_t kk) {
  float acc = 0.0f;
  for (int64_t b = 0; b < kk / 32; b++) {
    const float* v = xs.data() + m * kk + 32 * b;
    const float dx = act_scale(v);
    const uint8_t* blk = ws.data() + (n * kk / 32 + b) * 36;
    int64_t p = 0, sum = 0;
    for (int i = 0; i < 32; i++) p += int64_t{blk[4 + i]} * act_int(v[i], dx), sum += act_int(v[i], dx);
    acc = std::fma(static_cast<float>(from_half(get_half(blk)) * double{dx}), static_cast<float>(p), acc);
    acc = std::fma(static_cast<float>(from_half(get_half(blk + 2)) * double{dx}), static_cast<float>(sum), acc);
  }
  return acc;
}

// U8M's documented order: hand-made blocks at the extremes (every value 31 or 0 against q = +-127:
// p_b = 31 * 127 * 32 = 125984, S_b = +-4064), then random blocks; every dot product this CPU runs,
// on rows and Lanes16, gives the reference's bits; dequantize_rows gives q * d + m.
TEST(KernelQuant, U8MReferenceFollowsTheDocumentedOrder) {
  const int64_t K = 128, nb = K / 32, N = 3, M = 3;
  std::vector<uint8_t> w(static_cast<size_t>(N * nb * 36));
  const uint16_t scales[4] = {0x3800, 0xBC00, 0x4000, 0x3400};  // 0.5, -1, 2, 0.25
  for (int64_t b = 0; b < nb; b++)
    for (int64_t r = 0; r < N; r++) {
      uint8_t* p = w.data() + (r * nb + b) * 36;
      put_half(p, scales[(b + r) % 4]), put_half(p + 2, scales[(b + r + 1) % 4]);
      for (int i = 0; i < 32; i++) p[4 + i] = static_cast<uint8_t>(r == 0 ? 31 : r == 1 ? 0 : (i * 7) % 32);
    }
  std::vector<float> x(static_cast<size_t>(M * K));
  for (int64_t k = 0; k < K; k++) {
    x[k] = 127.0f, x[K + k] = -127.0f;
    x[2 * K + k] = k % 5 == 0 ? 127.0f : k % 5 == 1 ? -127.0f : static_cast<float>(k % 7) - 3.0f;
  }
  const auto y = run_naive(x, w, QuantType::U8M, nullptr, M, K, N);
  for (int64_t m = 0; m < M; m++)
    for (int64_t n = 0; n < N; n++) EXPECT_EQ(y[m * N + n], documented_u8m(x, w, m, n, K)) << "m=" << m << " n=" << n;
  EXPECT_EQ(y[0], 125984.0f * 1.75f + 4064.0f * 1.75f);  // d: 0.5, -1, 2, 0.25; m: -1, 2, 0.25, 0.5
  EXPECT_EQ(y[1], 4064.0f * 1.75f);  // all 0: the mins alone (2, 0.25, 0.5, -1)
  expect_every_dot_product_gives(y, x, w, QuantType::U8M, M, K, N);
  const int64_t K2 = 256, N2 = 9;
  const auto w2 = make_u8m(N2, K2, 65);
  expect_documented_on_random(w2, QuantType::U8M, 5, K2, N2, 66, documented_u8m);
  // Dequantized: q * d + m, as ggml's q4_1 and q5_1.
  const std::vector<float> wd = all_rows(w2, QuantType::U8M, N2, K2);
  for (int64_t i = 0; i < N2 * K2; i++) {
    const uint8_t* blk = w2.data() + i / 32 * 36;
    const float d = static_cast<float>(from_half(get_half(blk))), mn = static_cast<float>(from_half(get_half(blk + 2)));
    ASSERT_EQ(wd[i], static_cast<float>(blk[4 + i % 32]) * d + mn) << i;
  }
}

// ---- Q8F (how atto keeps iq4_xs) ---------------------------------------------------------------------
// N rows of random Q8F blocks: random bytes (-128 included) and random finite f32 scales.
std::vector<uint8_t> make_q8f(int64_t N, int64_t K, uint32_t seed) {
  std::mt19937 gen(seed);
  std::vector<uint8_t> w(static_cast<size_t>(N * quant_row_bytes(QuantType::Q8F, K)));
  for (auto& b : w) b = static_cast<uint8_t>(gen());
  for (size_t b = 0; b < w.size(); b += 36) {
    const float d = std::ldexp(static_cast<float>(gen() % 2001) - 1000.0f, -static_cast<int>(gen() % 40));
    std::memcpy(w.data() + b + 32, &d, 4);
  }
  return w;
}

TEST(KernelQuant, Q8FEveryDotProductAndTailGivesTheReferenceBits) {
  every_dot_product_gives_the_reference_bits(QuantType::Q8F, "q8f", 1100, make_q8f);
}

// Q8F's documented order: q8_0's, the scale an f32: per block p_b = sum q * x_int exactly, s = d *
// dx rounded once to float, acc = fmaf(s, p_b, acc); every dot product gives the reference's bits,
// and dequantize_rows gives q * d.
TEST(KernelQuant, Q8FReferenceFollowsTheDocumentedOrder) {
  const auto documented = [](const std::vector<float>& xs, const std::vector<uint8_t>& ws, int64_t m, int64_t n,
                             int64_t kk) {
    float acc = 0.0f;
    for (int64_t b = 0; b < kk / 32; b++) {
      const float* v = xs.data() + m * kk + 32 * b;
      const float dx = act_scale(v);
      const uint8_t* blk = ws.data() + (n * kk / 32 + b) * 36;
      int64_t p = 0;
      for (int i = 0; i < 32; i++) p += int64_t{static_cast<int8_t>(blk[i])} * act_int(v[i], dx);
      float d;
      std::memcpy(&d, blk + 32, 4);
      acc = std::fma(static_cast<float>(double{d} * double{dx}), static_cast<float>(p), acc);
    }
    return acc;
  };
  const int64_t M = 5, K = 256, N = 9;
  const auto w = make_q8f(N, K, 67);
  expect_documented_on_random(w, QuantType::Q8F, M, K, N, 68, documented);
  const auto x = randn(M * K, 69);
  expect_every_dot_product_gives(run_naive(x, w, QuantType::Q8F, nullptr, M, K, N), x, w, QuantType::Q8F, M, K, N);
  const std::vector<float> wd = all_rows(w, QuantType::Q8F, N, K);
  for (int64_t i = 0; i < N * K; i++) {
    const uint8_t* blk = w.data() + i / 32 * 36;
    float d;
    std::memcpy(&d, blk + 32, 4);
    ASSERT_EQ(wd[i], static_cast<float>(static_cast<int8_t>(blk[i % 32])) * d) << i;
  }
}

TEST(KernelQuant, Lanes16PackingKeepsEveryRow) {
  for (const QuantType t :
       {QuantType::Q8_0, QuantType::Q4_0, QuantType::U8M, QuantType::Q8F, QuantType::Q4_K, QuantType::Q5_K,
        QuantType::Q6_K})
    for (int64_t N : {1, 16, 37}) {
      const int64_t K = 512;
      const auto w = t == QuantType::Q4_K   ? make_q4k(N, K, 99)
                     : t == QuantType::Q5_K ? make_q5k(N, K, 99)
                     : t == QuantType::Q6_K ? make_q6k(N, K, 99)
                     : t == QuantType::U8M  ? make_u8m(N, K, 99)
                     : t == QuantType::Q8F  ? make_q8f(N, K, 99)
                                            : make_weights(t, N, K, true, 99);
      const auto p = packed_as(w, t, QuantLayout::Lanes16, N, K);
      const std::string what = std::string(t == QuantType::Q4_K   ? "q4_k"
                                           : t == QuantType::Q5_K ? "q5_k"
                                           : t == QuantType::Q6_K ? "q6_k"
                                           : t == QuantType::U8M  ? "u8m"
                                           : t == QuantType::Q8F  ? "q8f"
                                                                  : type_name(t)) +
                               " N=" + std::to_string(N);
      auto sorted_w = w, sorted_p = p;
      std::sort(sorted_w.begin(), sorted_w.end()), std::sort(sorted_p.begin(), sorted_p.end());
      EXPECT_EQ(sorted_p, sorted_w) << what;
      const int64_t tail = N / 16 * 16 * quant_row_bytes(t, K);
      EXPECT_TRUE(std::equal(w.begin() + tail, w.end(), p.begin() + tail)) << what;
      if (N >= 16) {
        EXPECT_NE(p, w) << what;
      }
      std::vector<int32_t> ids(static_cast<size_t>(N));
      for (int64_t n = 0; n < N; n++) ids[n] = static_cast<int32_t>(N - 1 - n);
      std::vector<float> a(static_cast<size_t>(N * K)), b(a.size());
      dequantize_rows(a.data(), w.data(), t, QuantLayout::Rows, N, K, ids.data(), N);
      dequantize_rows(b.data(), p.data(), t, QuantLayout::Lanes16, N, K, ids.data(), N);
      expect_bit_identical(b, a, "lanes16 rows " + what);
    }
  for (const QuantType t : {QuantType::Q8_0, QuantType::Q4_0, QuantType::Q4_K, QuantType::Q5_K, QuantType::Q6_K}) {
#if defined(__x86_64__)
    EXPECT_EQ(quant_layout_for(t), QuantLayout::Lanes16);
#else
    EXPECT_EQ(quant_layout_for(t), QuantLayout::Rows);
#endif
  }
  std::vector<uint8_t> w(2 * 34 * 16), o(w.size());
  std::vector<float> x(512), y(2);
  const auto bad = static_cast<QuantLayout>(7);
  EXPECT_THROW(quant_pack(o.data(), w.data(), QuantType::Q8_0, bad, 2, 512), std::invalid_argument);
  EXPECT_THROW(linear_quant_forward(y.data(), x.data(), w.data(), QuantType::Q8_0, bad, nullptr, 1, 512, 2),
               std::invalid_argument);
}

// Q6_K and Q4_K against the f32 product of their dequantized weights: within the activations'
// rounding (|x - dx q| <= dx / 2 per value), which a wrong value or scale layout would exceed.
TEST(KernelQuant, SuperBlocksCloseToTheF32ProductOfTheDequantizedWeights) {
  const int64_t M = 4, K = 512, N = 21;
  const auto x = randn(M * K, 97);
  for (QuantType t : {QuantType::Q4_K, QuantType::Q5_K, QuantType::Q6_K}) {
    const auto w = t == QuantType::Q4_K ? make_q4k(N, K, 98) : t == QuantType::Q5_K ? make_q5k(N, K, 98) : make_q6k(N, K, 98);
    std::vector<int32_t> ids(N);
    for (int64_t n = 0; n < N; n++) ids[n] = static_cast<int32_t>(n);
    std::vector<float> wd(static_cast<size_t>(N * K));
    dequantize_rows(wd.data(), w.data(), t, QuantLayout::Rows, N, K, ids.data(), N);
    const auto y = run_fast(x, w, t, nullptr, M, K, N);
    for (int64_t m = 0; m < M; m++)
      for (int64_t n = 0; n < N; n++) {
        double exact = 0, bound = 0;
        for (int64_t b = 0; b < K / 32; b++) {
          float amax = 0.0f;
          for (int i = 0; i < 32; i++) amax = std::max(amax, std::fabs(x[m * K + 32 * b + i]));
          for (int i = 0; i < 32; i++) {
            const double wv = wd[n * K + 32 * b + i];
            exact += wv * x[m * K + 32 * b + i];
            bound += std::fabs(wv) * (amax / 127.0 / 2 + 1e-6 * std::fabs(x[m * K + 32 * b + i]));
          }
        }
        EXPECT_NEAR(y[m * N + n], exact, bound * 1.01 + 1e-30)
            << (t == QuantType::Q4_K ? "q4_k" : t == QuantType::Q5_K ? "q5_k" : "q6_k") << " m=" << m << " n=" << n;
      }
  }
}

TEST(KernelQuant, NamesItsDotProduct) {
  const std::string name = quant_kernel_name();
  EXPECT_TRUE(name == "avx512vnni" || name == "avxvnni" || name == "avx2" || name == "neon" || name == "scalar")
      << name;
#if defined(__x86_64__)
  EXPECT_NE(name, "scalar");
#endif
  DotGuard guard("scalar");
  EXPECT_STREQ(quant_kernel_name(), "scalar");
  DotGuard::set("no-such-dot");
  EXPECT_THROW(quant_kernel_name(), std::runtime_error);
}

TEST(KernelQuant, DequantizeRowsDecodesTheBlocks) {
  // A hand-worked q4_0 block: d = 0.5, low nibbles 0..15 -> -4.0 .. 3.5, high 15..0 -> 3.5 .. -4.0.
  uint8_t q4[18];
  put_half(q4, 0x3800);  // 0.5
  for (int j = 0; j < 16; j++) q4[2 + j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  // A q8_0 block: d = 0.25, q = -128, -127, ..., with 127 last.
  uint8_t q8[34];
  put_half(q8, 0x3400);  // 0.25
  for (int i = 0; i < 32; i++) q8[2 + i] = static_cast<uint8_t>(static_cast<int8_t>(i == 31 ? 127 : -128 + 8 * i));
  const int32_t id0 = 0;
  std::vector<float> out(32);
  dequantize_rows(out.data(), q4, QuantType::Q4_0, QuantLayout::Rows, 1, 32, &id0, 1);
  for (int j = 0; j < 16; j++) {
    EXPECT_EQ(out[j], -4.0f + 0.5f * j) << j;
    EXPECT_EQ(out[16 + j], 3.5f - 0.5f * j) << j;
  }
  dequantize_rows(out.data(), q8, QuantType::Q8_0, QuantLayout::Rows, 1, 32, &id0, 1);
  for (int i = 0; i < 32; i++) EXPECT_EQ(out[i], 0.25f * (i == 31 ? 127 : -128 + 8 * i)) << i;
  // Rows picked by id (repeats, any order) against the test's decode, subnormal scales included.
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0}) {
    const int64_t N = 11, K = 96;
    const auto w = make_weights(t, N, K, true, 51);
    const auto wd = dequantize_ref(w, t, N, K);
    const std::vector<int32_t> ids = {3, 0, 10, 3, 7};
    std::vector<float> got(ids.size() * K);
    dequantize_rows(got.data(), w.data(), t, QuantLayout::Rows, N, K, ids.data(), static_cast<int64_t>(ids.size()));
    for (size_t r = 0; r < ids.size(); r++)
      for (int64_t k = 0; k < K; k++)
        ASSERT_EQ(got[r * K + k], static_cast<float>(wd[ids[r] * K + k])) << type_name(t) << " r=" << r << " k=" << k;
  }
}

TEST(KernelQuant, RefusesKNotAMultipleOf32) {
  EXPECT_EQ(quant_row_bytes(QuantType::Q4_0, 64), 36);
  EXPECT_EQ(quant_row_bytes(QuantType::Q8_0, 64), 68);
  EXPECT_EQ(quant_row_bytes(QuantType::U8M, 64), 72);
  std::vector<float> x(2 * 64, 1.0f), y(4, 0.0f);
  std::vector<uint8_t> w(4 * 68, 0);
  const int32_t id = 0;
  for (QuantType t : {QuantType::Q8_0, QuantType::Q4_0})
    for (int64_t K : {33, 31, 1, -32}) {
      EXPECT_THROW(linear_quant_forward(y.data(), x.data(), w.data(), t, QuantLayout::Rows, nullptr, 1, K, 2), std::invalid_argument);
      EXPECT_THROW(linear_quant_forward_naive(y.data(), x.data(), w.data(), t, nullptr, 1, K, 2),
                   std::invalid_argument);
      EXPECT_THROW(dequantize_rows(y.data(), w.data(), t, QuantLayout::Rows, 2, K, &id, 1), std::invalid_argument);
    }
  EXPECT_THROW(linear_quant_forward(y.data(), x.data(), w.data(), static_cast<QuantType>(1), QuantLayout::Rows, nullptr, 1, 32, 2),
               std::invalid_argument);
}

}  // namespace
}  // namespace atto::kernels
