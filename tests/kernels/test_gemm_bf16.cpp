// Tests of the bf16 kernels (gemm_bf16.cpp, bf16.cpp): rounding to bf16 against hand-made
// values, each backend this CPU runs against the naive reference (fp32 inputs rounded to bf16,
// exact products summed in double) over swept shapes, transposes, leading dimensions and
// alpha/beta; bit-identical results for 1 and 2 threads and for a row alone or among many rows;
// the precision scope routing gemm and the linear layers; the weight cache.
//
// Tolerance: |fast - naive| <= 2^-22 * (K + 2) * sum_k |a_k b_k| (fp32 sums of K exact products
// of bf16 numbers, against one rounding). An unrounded input is off by ~2^-9 of a term, a wrong
// element by O(1): both far outside it.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "kernels/kernel_support.h"
#include "kernels/kernels.h"

namespace atto::kernels {
namespace {

using test::expect_bit_identical;
using test::GemmCase;
using test::name;
using test::randn;
using test::ThreadGuard;

using test::BackendGuard;

uint32_t bits(float x) {
  uint32_t u;
  std::memcpy(&u, &x, sizeof(u));
  return u;
}
float from_bits(uint32_t u) {
  float x;
  std::memcpy(&x, &u, sizeof(x));
  return x;
}

TEST(Bf16, RoundsToNearestEvenAndKeepsSpecialValues) {
  EXPECT_EQ(to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(to_bf16(-2.0f), 0xc000);
  EXPECT_EQ(to_bf16(from_bits(0x3f808000)), 0x3f80);  // a tie: to the even 0x3f80
  EXPECT_EQ(to_bf16(from_bits(0x3f818000)), 0x3f82);  // a tie: to the even 0x3f82
  EXPECT_EQ(to_bf16(from_bits(0x3f808001)), 0x3f81);  // above the tie: up
  EXPECT_EQ(to_bf16(from_bits(0x3f807fff)), 0x3f80);  // below the tie: down
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::infinity()), 0x7f80);
  EXPECT_EQ(to_bf16(-std::numeric_limits<float>::infinity()), 0xff80);
  EXPECT_EQ(to_bf16(std::numeric_limits<float>::max()), 0x7f80);  // overflows to infinity
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_TRUE(std::isnan(from_bf16(to_bf16(from_bits(0x7f800001)))));  // a NaN whose top half is inf's
  EXPECT_EQ(to_bf16(from_bits(0x00000001)), 0x0000);                   // denormals: zero of their sign
  EXPECT_EQ(to_bf16(from_bits(0x807fffff)), 0x8000);
  for (uint32_t u : {0x3f800000u, 0x40490fdbu, 0xc2f6e979u}) {
    const float x = from_bits(u), r = from_bf16(to_bf16(x));
    EXPECT_LE(std::fabs(r - x), std::ldexp(std::fabs(x), -8)) << x;  // half an ulp of 8 bits
    EXPECT_EQ(bits(r) & 0xffffu, 0u);
  }
}

TEST(Bf16, PackingRoundsAsToBf16AndPlacesEachElement) {
  // Ties, denormals, NaN and infinities among normal values, in both layouts of B and through
  // the vector path where the CPU has it: every element where the layout says, rounded by to_bf16.
  // 1,601 columns: more 16-column blocks (101) than one pass of pack_bf16 takes (48), on one
  // thread and on two (41 x 1601 is large enough for the pass to share its blocks).
  for (const auto& [K, N] : {std::pair<int64_t, int64_t>{37, 21}, {41, 1601}}) {
    std::vector<float> B = randn(K * N, 3);
    const uint32_t specials[] = {0x3f808000u, 0x3f818000u, 0x00000001u, 0x807fffffu, 0x7fc00000u,
                                 0x7f800001u, 0x7f800000u, 0xff7fffffu, 0x3f807fffu};
    for (size_t i = 0; i < B.size(); i += 7) B[i] = from_bits(specials[(i / 7) % 9]);
    const int64_t Kp = (K + 31) / 32 * 32, Np = (N + 31) / 32 * 32;
    // The vector path where there is bf16, then the scalar one (as on a CPU without it), each into
    // a buffer left dirty by another packing (nothing may rely on a cleared buffer).
    for (Bf16Backend backend : {bf16_backend(), Bf16Backend::None}) {
      BackendGuard guard(backend);
      for (const int threads : {1, 2}) {
        ThreadGuard thread_guard;
        set_num_threads(threads);
        for (bool trans : {false, true}) {
          PackedBf16 p;
          p.data.assign(static_cast<size_t>(Kp * Np), 0xdead);
          pack_bf16(p, trans, K, N, B.data(), trans ? K : N);
          ASSERT_EQ(p.Kp, Kp);
          ASSERT_EQ(p.Np, Np);
          for (int64_t k = 0; k < p.Kp; k++)
            for (int64_t n = 0; n < p.Np; n++) {
              const uint16_t got = p.data[static_cast<size_t>(((n / 16 * p.Kp / 2 + k / 2) * 16 + n % 16) * 2 + k % 2)];
              const uint16_t want = k < K && n < N ? to_bf16(trans ? B[n * K + k] : B[k * N + n]) : 0;
              ASSERT_EQ(got, want) << bf16_backend_name(backend) << " trans " << trans << " K " << K << " N " << N
                                   << " threads " << threads << " k " << k << " n " << n;
            }
        }
      }
    }
  }
}

struct Operands {
  int64_t lda, ldb, ldc;
  std::vector<float> A, B, C;
};

Operands operands(const GemmCase& c, uint32_t seed) {
  Operands o;
  o.lda = (c.ta ? c.M : c.K) + c.pad;
  o.ldb = (c.tb ? c.K : c.N) + c.pad;
  o.ldc = c.N + c.pad;
  o.A = randn((c.ta ? c.K : c.M) * o.lda, seed);
  o.B = randn((c.tb ? c.N : c.K) * o.ldb, seed + 1);
  o.C = randn(c.M * o.ldc, seed + 2);
  return o;
}

// The M x N block of C after f; padding columns must keep their values.
template <class F>
std::vector<float> run(const GemmCase& c, Operands o, F f) {
  const std::vector<float> before = o.C;
  f(c.ta, c.tb, c.M, c.N, c.K, c.alpha, o.A.data(), o.lda, o.B.data(), o.ldb, c.beta, o.C.data(), o.ldc);
  std::vector<float> block;
  for (int64_t i = 0; i < c.M; i++) {
    for (int64_t j = 0; j < c.N; j++) block.push_back(o.C[i * o.ldc + j]);
    for (int64_t j = c.N; j < o.ldc; j++) EXPECT_EQ(bits(o.C[i * o.ldc + j]), bits(before[i * o.ldc + j])) << name(c);
  }
  return block;
}

std::vector<float> abs_of(std::vector<float> v) {
  for (float& x : v) x = std::fabs(x);
  return v;
}

TEST(GemmBf16, EveryBackendMatchesTheNaiveReference) {
  const std::vector<GemmCase> cases = {
      {false, false, 1, 1, 1, 0, 1.0f, 0.0f},      {false, true, 1, 100, 384, 0, 1.0f, 0.0f},
      {false, true, 7, 33, 31, 3, 1.0f, 0.0f},     {false, false, 17, 16, 32, 0, 0.5f, 1.0f},
      {true, false, 33, 47, 65, 1, 1.0f, 1.0f},    {true, true, 64, 64, 64, 0, 2.0f, -0.5f},
      {false, true, 100, 65, 128, 5, 1.0f, 0.0f},  {true, false, 48, 96, 200, 0, 1.0f, 0.0f},
      {false, false, 31, 17, 1000, 2, 1.0f, 1.0f}, {false, true, 130, 70, 33, 0, 1.0f, 0.0f},
      // A dweight's shape (K long, B 1.7 MB): row blocks taken in groups (3 of 129 KB, the last
      // group partial, the last block partial).
      {true, false, 150, 400, 2000, 0, 1.0f, 1.0f},
  };
  for (Bf16Backend b : test::bf16_backends()) {
    BackendGuard guard(b);
    for (const GemmCase& c : cases) {
      const Operands o = operands(c, 11);
      const std::vector<float> fast = run(c, o, gemm_bf16), ref = run(c, o, gemm_bf16_naive);
      Operands a = o;
      a.A = abs_of(a.A);
      a.B = abs_of(a.B);
      const GemmCase abs_case{c.ta, c.tb, c.M, c.N, c.K, c.pad, std::fabs(c.alpha), 0.0f};
      const std::vector<float> mag = run(abs_case, a, gemm_bf16_naive);
      const double tol = std::ldexp(1.0, -22) * static_cast<double>(c.K + 2);
      for (size_t i = 0; i < fast.size(); i++)
        ASSERT_NEAR(fast[i], ref[i], tol * mag[i] + 1e-30) << bf16_backend_name(b) << " " << name(c) << " at " << i;
    }
  }
}

TEST(GemmBf16, RoundsItsInputs) {
  // Against fp32 inputs (gemm_naive) a bf16 product is off by far more than the tolerance above.
  for (Bf16Backend b : test::bf16_backends()) {
    BackendGuard guard(b);
    const GemmCase c{false, true, 8, 8, 256, 0, 1.0f, 0.0f};
    const Operands o = operands(c, 5);
    const std::vector<float> fast = run(c, o, gemm_bf16), fp32 = run(c, o, gemm_naive);
    double worst = 0.0;
    for (size_t i = 0; i < fast.size(); i++) worst = std::max(worst, std::fabs(double{fast[i]} - fp32[i]));
    EXPECT_GT(worst, 1e-3) << bf16_backend_name(b);
  }
}

TEST(GemmBf16, SameBitsForAnyThreadCountAndAnyRowsBeside) {
  for (Bf16Backend b : test::bf16_backends()) {
    BackendGuard guard(b);
    const int64_t M = 67, N = 200, K = 300;
    const std::vector<float> A = randn(M * K, 1), B = randn(N * K, 2);
    test::expect_thread_invariant(
        [&] {
          std::vector<float> C(M * N);
          gemm_bf16(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, C.data(), N);
          return C;
        },
        std::string("gemm_bf16 ") + bf16_backend_name(b));
    std::vector<float> all(M * N), some(20 * N), one(N);
    gemm_bf16(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, all.data(), N);
    gemm_bf16(false, true, 20, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, some.data(), N);
    expect_bit_identical(some, std::vector<float>(all.begin(), all.begin() + 20 * N),
                         std::string("20 rows vs the first 20 of 67, ") + bf16_backend_name(b));
    // A few rows take vdpbf16ps even where there is AMX; under a RowStableScope every row count
    // does, so a row alone and among 67 agree.
    const RowStableScope stable;
    gemm_bf16(false, true, M, N, K, 1.0f, A.data(), K, B.data(), K, 0.0f, all.data(), N);
    for (int64_t m : {0, 16, 33, 66}) {
      gemm_bf16(false, true, 1, N, K, 1.0f, A.data() + m * K, K, B.data(), K, 0.0f, one.data(), N);
      expect_bit_identical(one, std::vector<float>(all.begin() + m * N, all.begin() + (m + 1) * N),
                           std::string("row alone vs among 67, ") + bf16_backend_name(b));
    }
  }
}

// A long K with B past 16 MB (GPT-2's head input gradient, smaller) is swept in parts of K, each
// continuing the sums of the last: the bits of one pass, as a row alone (one pass) shows.
TEST(GemmBf16, PartsOfALongKGiveTheBitsOfOnePass) {
  const int64_t M = 21, N = 768, K = 11000;  // B 11,008 x 768 bf16: 16.9 MB; 3 row blocks
  const std::vector<float> A = randn(M * K, 3), B = randn(K * N, 4);
  for (Bf16Backend b : test::bf16_backends()) {
    BackendGuard guard(b);
    const RowStableScope stable;  // vdpbf16ps for every row count
    std::vector<float> all(M * N, 1.0f), one(N, 1.0f);
    gemm_bf16(false, false, M, N, K, 1.0f, A.data(), K, B.data(), N, 0.0f, all.data(), N);
    for (int64_t m : {0, 9, 20}) {
      gemm_bf16(false, false, 1, N, K, 1.0f, A.data() + m * K, K, B.data(), N, 0.0f, one.data(), N);
      expect_bit_identical(one, std::vector<float>(all.begin() + m * N, all.begin() + (m + 1) * N),
                           "row " + std::to_string(m) + " alone vs among 21, " + bf16_backend_name(b));
    }
  }
}

TEST(GemmBf16, PrecisionScopeRoutesGemmAndLinearLayers) {
  if (test::bf16_backends().empty()) GTEST_SKIP() << "no bf16 on this CPU";
  const int64_t N = 40, C = 48, OC = 72;
  const std::vector<float> x = randn(N * C, 1), w = randn(OC * C, 2), bias = randn(OC, 3), g = randn(N * OC, 4);
  std::vector<float> want(N * OC), got(N * OC), fp32(N * OC);
  gemm_bf16(false, true, N, OC, C, 1.0f, x.data(), C, w.data(), C, 0.0f, want.data(), OC);
  linear_forward(fp32.data(), x.data(), w.data(), nullptr, N, C, OC);
  Bf16WeightCache cache;
  {
    const PrecisionScope scope(Precision::BF16, &cache);
    EXPECT_EQ(current_precision(), Precision::BF16);
    linear_forward(got.data(), x.data(), w.data(), nullptr, N, C, OC);
    expect_bit_identical(got, want, "linear_forward under bf16");
    EXPECT_GT(cache.bytes(), 0u);  // the weight was packed into the cache
    gemm(false, true, N, OC, C, 1.0f, x.data(), C, w.data(), C, 0.0f, got.data(), OC);
    expect_bit_identical(got, want, "gemm under bf16");
    // linear_backward's GEMMs: dinp = g @ w, dweight = g^T @ x.
    std::vector<float> dx(N * C, 0.0f), dw(OC * C, 0.0f), db(OC, 0.0f), dx_ref(N * C), dw_ref(OC * C);
    linear_backward(dx.data(), dw.data(), db.data(), g.data(), x.data(), w.data(), N, C, OC);
    gemm_bf16(false, false, N, C, OC, 1.0f, g.data(), OC, w.data(), C, 0.0f, dx_ref.data(), C);
    gemm_bf16(true, false, OC, C, N, 1.0f, g.data(), OC, x.data(), C, 0.0f, dw_ref.data(), C);
    expect_bit_identical(dx, dx_ref, "dinp under bf16");
    expect_bit_identical(dw, dw_ref, "dweight under bf16");
  }
  EXPECT_EQ(current_precision(), Precision::F32);
  std::vector<float> after(N * OC);
  linear_forward(after.data(), x.data(), w.data(), nullptr, N, C, OC);
  expect_bit_identical(after, fp32, "fp32 again after the scope");
}

// The bf16 linear layers with a bias, a residual and GELU: out starts as (residual +) bias and
// the GEMM sums onto it; with GELU the GEMM's sums come first, then GELU (erf) of them plus the
// bias, with its slope (one pass over the output). The same bits as those steps taken one by
// one, on every backend, for row counts on the vdpbf16ps path (a few rows), whole and partial
// AMX blocks, and partial column panels.
TEST(GemmBf16, LinearLayersAddBiasResidualAndGelu) {
  for (Bf16Backend b : test::bf16_backends()) {
    BackendGuard guard(b);
    for (const int64_t N : {1, 5, 32, 40, 100}) {
      for (const auto& [C, OC] : {std::pair<int64_t, int64_t>{48, 72}, {33, 17}, {64, 96}}) {
        const std::string what = std::string(bf16_backend_name(b)) + " N " + std::to_string(N) + " C " +
                                 std::to_string(C) + " OC " + std::to_string(OC);
        const std::vector<float> x = randn(N * C, 1), w = randn(OC * C, 2), bias = randn(OC, 3), res = randn(N * OC, 4);
        // The sums start from the bias, the residual, or their sum (C = init, then C += A B).
        std::vector<float> with_bias(N * OC), with_res(N * OC), res_only = res, gelu(N * OC), slope(N * OC);
        for (int64_t n = 0; n < N; n++)
          for (int64_t o = 0; o < OC; o++) {
            with_bias[n * OC + o] = bias[o];
            with_res[n * OC + o] = res[n * OC + o] + bias[o];
          }
        gemm_bf16(false, true, N, OC, C, 1.0f, x.data(), C, w.data(), C, 1.0f, with_bias.data(), OC);
        gemm_bf16(false, true, N, OC, C, 1.0f, x.data(), C, w.data(), C, 1.0f, with_res.data(), OC);
        gemm_bf16(false, true, N, OC, C, 1.0f, x.data(), C, w.data(), C, 1.0f, res_only.data(), OC);
        std::vector<float> pre(N * OC);  // GELU's input: the sums, then the bias
        gemm_bf16(false, true, N, OC, C, 1.0f, x.data(), C, w.data(), C, 0.0f, pre.data(), OC);
        for (int64_t n = 0; n < N; n++)
          for (int64_t o = 0; o < OC; o++) pre[n * OC + o] += bias[o];
        gelu_erf_forward_slope(gelu.data(), slope.data(), pre.data(), N * OC);
        const PrecisionScope scope(Precision::BF16);
        std::vector<float> got(N * OC, 7.0f), got_slope(N * OC, 7.0f);
        linear_forward(got.data(), x.data(), w.data(), bias.data(), N, C, OC);
        expect_bit_identical(got, with_bias, "linear_forward with bias, " + what);
        linear_residual_forward(got.data(), res.data(), x.data(), w.data(), bias.data(), N, C, OC);
        expect_bit_identical(got, with_res, "linear_residual_forward, " + what);
        linear_residual_forward(got.data(), res.data(), x.data(), w.data(), nullptr, N, C, OC);
        expect_bit_identical(got, res_only, "linear_residual_forward without a bias, " + what);
        std::vector<float> in_place = res;  // out over its own residual
        linear_residual_forward(in_place.data(), in_place.data(), x.data(), w.data(), nullptr, N, C, OC);
        expect_bit_identical(in_place, res_only, "linear_residual_forward in place, " + what);
        linear_gelu_forward(got.data(), got_slope.data(), x.data(), w.data(), bias.data(), N, C, OC);
        expect_bit_identical(got, gelu, "linear_gelu_forward, " + what);
        expect_bit_identical(got_slope, slope, "linear_gelu_forward's slope, " + what);
        linear_gelu_forward(got.data(), nullptr, x.data(), w.data(), bias.data(), N, C, OC);
        expect_bit_identical(got, gelu, "linear_gelu_forward without a slope, " + what);
      }
    }
  }
}

// linear_backward under bf16 rounds dout once for both products and sums dbias in the same
// pass (linear_gelu_backward also multiplies by GELU's slope there): the same bits as the GEMMs
// and bias_add_backward one by one, accumulating into nonzero gradients or overwriting them, on
// every backend, for odd row counts (a row without a pair), rows on the vdpbf16ps path, partial
// column groups and padding.
TEST(GemmBf16, LinearBackwardMatchesTheSeparatePasses) {
  for (Bf16Backend b : test::bf16_backends()) {
    BackendGuard guard(b);
    for (const int64_t N : {1, 7, 33, 100, 300}) {  // 300 x 250: the pass runs on both threads
      // OC 1601: 101 groups of 16 columns, more than one pass of pack_dout takes (24) on one
      // thread and on each of two.
      for (const auto& [C, OC] :
           {std::pair<int64_t, int64_t>{48, 72}, {33, 17}, {64, 96}, {40, 250}, {24, 1601}}) {
        for (const bool overwrite : {false, true}) {
          const std::string what = std::string(bf16_backend_name(b)) + " N " + std::to_string(N) + " C " +
                                   std::to_string(C) + " OC " + std::to_string(OC) + (overwrite ? " overwrite" : "");
          const std::vector<float> x = randn(N * C, 1), w = randn(OC * C, 2), g = randn(N * OC, 3);
          const std::vector<float> dx0 = randn(N * C, 4), dw0 = randn(OC * C, 5), db0 = randn(OC, 6);
          std::vector<float> dx_ref = dx0, dw_ref = dw0, db_ref = db0;
          const float beta = overwrite ? 0.0f : 1.0f;
          gemm_bf16(false, false, N, C, OC, 1.0f, g.data(), OC, w.data(), C, beta, dx_ref.data(), C);
          gemm_bf16(true, false, OC, C, N, 1.0f, g.data(), OC, x.data(), C, beta, dw_ref.data(), C);
          bias_add_backward(nullptr, db_ref.data(), g.data(), N, OC);
          test::expect_thread_invariant(
              [&] {
                std::vector<float> dx = dx0, dw = dw0, db = db0;
                const PrecisionScope scope(Precision::BF16);
                linear_backward_ex(dx.data(), dw.data(), db.data(), g.data(), x.data(), w.data(), N, C, OC, overwrite,
                                overwrite);
                expect_bit_identical(dx, dx_ref, "dinp, " + what);
                expect_bit_identical(dw, dw_ref, "dweight, " + what);
                expect_bit_identical(db, db_ref, "dbias, " + what);
                dx.insert(dx.end(), dw.begin(), dw.end());
                return dx;
              },
              "linear_backward under bf16, " + what);
          // Each output alone (the others null) gets the same bits.
          std::vector<float> dx = dx0, dw = dw0, db = db0;
          const PrecisionScope scope(Precision::BF16);
          linear_backward_ex(dx.data(), nullptr, nullptr, g.data(), x.data(), w.data(), N, C, OC, overwrite, overwrite);
          linear_backward_ex(nullptr, dw.data(), nullptr, g.data(), x.data(), w.data(), N, C, OC, overwrite, overwrite);
          linear_backward_ex(nullptr, nullptr, db.data(), g.data(), x.data(), w.data(), N, C, OC, overwrite, overwrite);
          expect_bit_identical(dx, dx_ref, "dinp alone, " + what);
          expect_bit_identical(dw, dw_ref, "dweight alone, " + what);
          expect_bit_identical(db, db_ref, "dbias alone, " + what);
          // linear_gelu_backward: of g * slope, which bf16 takes as it rounds and never stores.
          const std::vector<float> slope = randn(N * OC, 7);
          std::vector<float> gs(N * OC), gx_ref = dx0, gw_ref = dw0, gb_ref = db0;
          gelu_erf_backward_slope(gs.data(), g.data(), slope.data(), N * OC, /*accumulate=*/false);
          linear_backward_ex(gx_ref.data(), gw_ref.data(), gb_ref.data(), gs.data(), x.data(), w.data(), N, C, OC, overwrite,
                          overwrite);
          std::vector<float> gx = dx0, gw = dw0, gb = db0, sl = slope;
          linear_gelu_backward(gx.data(), gw.data(), gb.data(), g.data(), sl.data(), x.data(), w.data(), N, C, OC,
                               overwrite, overwrite);
          expect_bit_identical(gx, gx_ref, "linear_gelu_backward dinp, " + what);
          expect_bit_identical(gw, gw_ref, "linear_gelu_backward dweight, " + what);
          expect_bit_identical(gb, gb_ref, "linear_gelu_backward dbias, " + what);
        }
      }
    }
  }
}

TEST(GemmBf16, RunShardsCarriesThePrecisionToItsThreads) {
  if (test::bf16_backends().empty()) GTEST_SKIP() << "no bf16 on this CPU";
  ThreadGuard threads;
  set_num_threads(2);
  const PrecisionScope scope(Precision::BF16);
  std::vector<int> seen(2, -1);
  run_shards(2, [&](int s) { seen[static_cast<size_t>(s)] = current_precision() == Precision::BF16; });
  EXPECT_EQ(seen, (std::vector<int>{1, 1}));
}

TEST(GemmBf16, WeightCachePacksEachWeightOnceUntilCleared) {
  if (test::bf16_backends().empty()) GTEST_SKIP() << "no bf16 on this CPU";
  std::vector<float> w = randn(64 * 32, 9);
  Bf16WeightCache cache;
  const PackedBf16& a = cache.get(true, 32, 64, w.data(), 32);
  const PackedBf16& b = cache.get(true, 32, 64, w.data(), 32);
  EXPECT_EQ(&a, &b);
  EXPECT_EQ(cache.bytes(), size_t{32 * 64 * 2});
  cache.get(false, 64, 32, w.data(), 32);  // the other layout is another copy
  EXPECT_EQ(cache.bytes(), size_t{2 * 32 * 64 * 2});
  cache.clear();
  EXPECT_EQ(cache.bytes(), 0u);
}

// refresh(data, n) packs again exactly the copies of weights inside [data, data + n): a weight
// the optimizer just changed (both of its layouts, and a copy of a part of it) gets the new bits,
// another weight's copy keeps its old ones until its own refresh.
TEST(GemmBf16, WeightCacheRefreshesTheCopiesOfOneWeight) {
  if (test::bf16_backends().empty()) GTEST_SKIP() << "no bf16 on this CPU";
  std::vector<float> w = randn(64 * 32, 9), v = randn(64 * 32, 10);
  Bf16WeightCache cache;
  const PackedBf16& wt = cache.get(true, 32, 64, w.data(), 32);
  const PackedBf16& wn = cache.get(false, 64, 32, w.data(), 32);
  const PackedBf16& wpart = cache.get(true, 32, 16, w.data() + 16 * 32, 32);  // rows 16-31 of w
  const PackedBf16& vt = cache.get(true, 32, 64, v.data(), 32);
  const auto v_before = vt.data;
  for (float& x : w) x = -2.0f * x + 1.0f;
  for (float& x : v) x += 3.0f;
  cache.refresh(w.data(), static_cast<int64_t>(w.size()));
  auto fresh = [](bool trans, int64_t K, int64_t N, const float* p) {
    PackedBf16 out;
    pack_bf16(out, trans, K, N, p, 32);
    return out.data;
  };
  EXPECT_TRUE(wt.data == fresh(true, 32, 64, w.data())) << "w^T not packed again";
  EXPECT_TRUE(wn.data == fresh(false, 64, 32, w.data())) << "w not packed again";
  EXPECT_TRUE(wpart.data == fresh(true, 32, 16, w.data() + 16 * 32)) << "a part of w not packed again";
  EXPECT_TRUE(vt.data == v_before) << "v's copy changed with w's refresh";
  cache.refresh(v.data(), static_cast<int64_t>(v.size()));
  EXPECT_TRUE(vt.data == fresh(true, 32, 64, v.data())) << "v not packed again";
  EXPECT_FALSE(cache.empty());
  cache.clear();
  EXPECT_TRUE(cache.empty());
}

TEST(GemmBf16, NoBackendIsAClearError) {
  // As on a CPU without AVX512_BF16 or AMX: bf16 is refused with what to do instead.
  const Bf16Backend saved = set_bf16_backend(Bf16Backend::None);
  try {
    require_bf16("--precision bf16");
    ADD_FAILURE() << "require_bf16 did not throw";
  } catch (const std::runtime_error& e) {
    const std::string what = e.what();
    EXPECT_NE(what.find("--precision bf16"), std::string::npos) << what;
    EXPECT_NE(what.find("use --precision fp32"), std::string::npos) << what;
  }
  EXPECT_THROW(PrecisionScope(Precision::BF16), std::runtime_error);
  set_bf16_backend(saved);
  if (!bf16_supported(Bf16Backend::Amx)) {
    EXPECT_THROW(set_bf16_backend(Bf16Backend::Amx), std::runtime_error);
  }
}

TEST(GemmBf16, PeakIsPositiveOnEveryBackend) {
  ThreadGuard threads;
  set_num_threads(1);
  for (Bf16Backend b : test::bf16_backends()) {
    BackendGuard guard(b);
    const std::vector<double> g = bf16_peak_gflops(0.02);
    ASSERT_EQ(g.size(), 1u);
    EXPECT_GT(g[0], 1.0) << bf16_backend_name(b);
  }
}

}  // namespace
}  // namespace atto::kernels
