// Tests of gemm, gemm_batched and linear: fast vs naive over swept shapes (1, primes, tile
// boundaries), transposes, leading dimensions, alpha/beta, and bit-identical results for 1 and 2
// threads, including shapes where OpenBLAS's own threading is not deterministic.
//
// Tolerance: |fast - naive| <= 1e-6 * K + 1e-5 for N(0,1) inputs (float accumulation of K
// products of size ~1; a wrong element is off by O(1)).
#include <gtest/gtest.h>

#include <cmath>
#include <initializer_list>
#include <limits>
#include <string>
#include <tuple>
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

void expect_close(const std::vector<float>& got, const std::vector<float>& want, float tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); i++) ASSERT_NEAR(got[i], want[i], tol) << what << " at " << i;
}

// Runs fast (or naive) gemm on the case's operands; C starts from c0.
std::vector<float> run_gemm(const GemmCase& c, bool naive, uint32_t seed) {
  const int64_t lda = (c.ta ? c.M : c.K) + c.pad, ldb = (c.tb ? c.K : c.N) + c.pad;
  const int64_t ldc = c.N + c.pad;
  const std::vector<float> A = randn((c.ta ? c.K : c.M) * lda, seed);
  const std::vector<float> B = randn((c.tb ? c.N : c.K) * ldb, seed + 1);
  std::vector<float> C = randn(c.M * ldc, seed + 2);
  if (c.beta == 0.0f) C.assign(C.size(), std::numeric_limits<float>::quiet_NaN());
  auto f = naive ? gemm_naive : gemm;
  f(c.ta, c.tb, c.M, c.N, c.K, c.alpha, A.data(), lda, B.data(), ldb, c.beta, C.data(), ldc);
  // Padding columns of C must be untouched: compare only the M x N block.
  std::vector<float> block;
  for (int64_t i = 0; i < c.M; i++)
    for (int64_t j = 0; j < c.N; j++) block.push_back(C[i * ldc + j]);
  if (c.pad > 0 && c.beta == 0.0f) {
    for (int64_t i = 0; i < c.M; i++)
      for (int64_t j = c.N; j < ldc; j++) EXPECT_TRUE(std::isnan(C[i * ldc + j])) << name(c);
  }
  return block;
}

TEST(KernelGemm, MatchesNaiveOverSweptShapes) {
  const int64_t sizes[] = {1, 3, 7, 64, 129};
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t M : sizes)
        for (int64_t N : sizes)
          for (int64_t K : sizes) {
            const GemmCase c{ta, tb, M, N, K, (M + N + K) % 3 == 0 ? 5 : 0, 1.0f, 0.0f};
            expect_close(run_gemm(c, false, 1), run_gemm(c, true, 1), 1e-6f * K + 1e-5f, name(c));
          }
}

TEST(KernelGemm, AlphaBetaAndTiledShapes) {
  const GemmCase cases[] = {
      {false, false, 5, 7, 3, 2, 0.5f, 0.0f},       {false, true, 5, 7, 3, 0, 1.0f, 1.0f},
      {true, false, 33, 17, 65, 3, -2.0f, 0.5f},    {true, true, 9, 11, 13, 1, 1.5f, -1.0f},
      {false, true, 257, 130, 67, 0, 1.0f, 1.0f},  // several tiles
      {true, false, 64, 64, 1031, 7, 1.0f, 0.0f},  // weight-gradient shape, tiles over M and N
      {false, false, 300, 45, 129, 0, 0.25f, 2.0f},
  };
  for (const GemmCase& c : cases)
    expect_close(run_gemm(c, false, 7), run_gemm(c, true, 7), 1e-6f * c.K + 1e-5f, name(c));
}

// Products that fit in cache take atto's register-blocked kernel: every panel width (1 to 4
// vectors, partial last vectors), every row tail (blocks of 6, 8, 12, 16 rows, then 4, 2, 1),
// both layouts of each operand, leading-dimension padding and alpha/beta.
TEST(KernelGemm, BlockedKernelCoversPanelWidthsAndRowTails) {
  for (bool ta : {false, true})
    for (bool tb : {false, true})
      for (int64_t M : {5, 12, 13, 20, 49, 51, 100})
        for (int64_t N : {16, 17, 33, 48, 50, 96})
          for (int64_t K : {1, 32, 65}) {
            const GemmCase c{ta, tb, M, N, K, (M + N) % 2 == 0 ? 3 : 0, 0.75f, (K % 2) ? 0.5f : 0.0f};
            expect_close(run_gemm(c, false, 5), run_gemm(c, true, 5), 1e-6f * K + 1e-5f, name(c));
          }
}

// Large products (and K past 2048) stay on OpenBLAS's tiled path.
TEST(KernelGemm, LargeProductsMatchNaive) {
  const GemmCase cases[] = {
      {false, true, 1040, 1024, 520, 0, 1.0f, 0.0f},  // M*N*K past the blocked kernel's bound
      {true, false, 40, 36, 2100, 2, 1.0f, 1.0f},     // K past 2048
  };
  for (const GemmCase& c : cases)
    expect_close(run_gemm(c, false, 9), run_gemm(c, true, 9), 1e-6f * c.K + 1e-5f, name(c));
}

TEST(KernelGemm, ZeroKScalesC) {
  std::vector<float> C = {1.0f, std::numeric_limits<float>::quiet_NaN(), 3.0f, 4.0f};
  gemm(false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 0.0f, C.data(), 2);
  EXPECT_EQ(C, std::vector<float>(4, 0.0f));
  C = {1.0f, 2.0f, 3.0f, 4.0f};
  gemm(false, false, 2, 2, 0, 1.0f, nullptr, 1, nullptr, 2, 2.0f, C.data(), 2);
  EXPECT_EQ(C, (std::vector<float>{2.0f, 4.0f, 6.0f, 8.0f}));
}

// OpenBLAS 0.3.21 threaded sgemm differs from its single-threaded result for e.g. K = 1031
// or 777 (e.g. 33 x 33 x 1031, 513 x 65 x 777; see gemm.cpp); atto's gemm must not.
TEST(KernelGemm, BitIdenticalForOneAndTwoThreads) {
  ThreadGuard guard;
  const GemmCase cases[] = {
      {false, true, 128, 128, 128, 0, 1.0f, 0.0f},
      {false, true, 384, 384, 384, 0, 1.0f, 0.0f},
      {false, true, 512, 64, 64, 0, 1.0f, 1.0f},
      {true, false, 64, 64, 1031, 0, 1.0f, 1.0f},
      {true, true, 513, 65, 777, 0, 1.0f, 0.0f},
      {false, false, 257, 67, 1031, 0, 1.0f, 0.0f},
      {true, false, 129, 250, 777, 3, 1.0f, 0.5f},
      {false, true, 33, 33, 1031, 0, 1.0f, 0.0f},     // one tile: OpenBLAS must stay serial
      {false, true, 1040, 1024, 520, 0, 1.0f, 0.0f},  // OpenBLAS tiles
      {true, false, 96, 130, 1024, 0, 1.0f, 1.0f},    // blocked kernel, tasks over both threads
      {true, false, 100, 300, 1030, 2, 0.5f, 1.0f},   // a weight gradient past 4 panels: packed
  };
  for (const GemmCase& c : cases) {
    set_num_threads(1);
    const std::vector<float> one = run_gemm(c, false, 3);
    set_num_threads(2);
    const std::vector<float> two = run_gemm(c, false, 3);
    expect_bit_identical(one, two, name(c));
  }
}

// A weight gradient's layout (op(A) = A^T: packed with op(B) past 4 panels) gives the bits of the
// same product with A^T written out beforehand: every element is one in-order sum either way
// (these products, under 2^29 with K <= 2,048, take the blocked kernel at every level).
TEST(KernelGemm, TransposedAGivesTheBitsOfItsTransposeWrittenOut) {
  ThreadGuard guard;
  set_num_threads(2);
  for (const auto& [M, N, K] : {std::tuple<int64_t, int64_t, int64_t>{100, 300, 1030}, {50, 1536, 1024},
                                {13, 520, 1100}, {200, 384, 384}}) {
    const std::vector<float> At = randn(K * M, 3), B = randn(K * N, 4);  // A^T is [K, M]
    std::vector<float> A(static_cast<size_t>(M * K));
    for (int64_t i = 0; i < M; i++)
      for (int64_t k = 0; k < K; k++) A[i * K + k] = At[k * M + i];
    std::vector<float> by_t = randn(M * N, 5), by_a = by_t;
    gemm(true, false, M, N, K, 0.5f, At.data(), M, B.data(), N, 1.0f, by_t.data(), N);
    gemm(false, false, M, N, K, 0.5f, A.data(), K, B.data(), N, 1.0f, by_a.data(), N);
    expect_bit_identical(by_t, by_a, "M " + std::to_string(M) + " N " + std::to_string(N) + " K " + std::to_string(K));
  }
}

TEST(KernelGemm, BatchedMatchesLoopOfNaive) {
  ThreadGuard guard;
  // 24 x 64^3 takes the parallel-over-batch path (each matrix one serial call).
  for (int64_t batch : {1, 3, 8, 24}) {
    for (int64_t S : {1, 5, 32, 64, 67}) {  // M = N = K = S; matrices padded apart by 3 floats
      const int64_t stride = S * S + 3;
      const std::vector<float> A = randn(batch * stride, 11), B = randn(batch * stride, 12);
      std::vector<float> C = randn(batch * stride, 13), Cn = C;
      for (int threads : {1, 2}) {
        set_num_threads(threads);
        std::vector<float> Cf = C;
        gemm_batched(batch, false, true, S, S, S, 1.0f, A.data(), S, stride, B.data(), S, stride, 0.5f, Cf.data(), S,
                     stride);
        if (threads == 1) {
          for (int64_t i = 0; i < batch; i++)
            gemm_naive(false, true, S, S, S, 1.0f, A.data() + i * stride, S, B.data() + i * stride, S, 0.5f,
                       Cn.data() + i * stride, S);
          expect_close(Cf, Cn, 1e-6f * S + 1e-5f, "batched S=" + std::to_string(S));
        } else {
          std::vector<float> C1 = C;
          set_num_threads(1);
          gemm_batched(batch, false, true, S, S, S, 1.0f, A.data(), S, stride, B.data(), S, stride, 0.5f, C1.data(), S,
                       stride);
          expect_bit_identical(C1, Cf, "batched threads S=" + std::to_string(S));
        }
      }
    }
  }
}

// ---- Linear --------------------------------------------------------------------------------

struct LinearOut {
  std::vector<float> out, dinp, dweight, dbias;
};

LinearOut run_linear(int64_t N, int64_t C, int64_t OC, bool with_bias, bool naive) {
  const std::vector<float> inp = randn(N * C, 21), w = randn(OC * C, 22), b = randn(OC, 23);
  const std::vector<float> dout = randn(N * OC, 24);
  LinearOut r;
  r.out.assign(N * OC, std::numeric_limits<float>::quiet_NaN());
  r.dinp = randn(N * C, 25);  // backward accumulates onto existing values
  r.dweight = randn(OC * C, 26);
  r.dbias = randn(OC, 27);
  const float* bias = with_bias ? b.data() : nullptr;
  float* dbias = with_bias ? r.dbias.data() : nullptr;
  if (naive) {
    linear_forward_naive(r.out.data(), inp.data(), w.data(), bias, N, C, OC);
    linear_backward_naive(r.dinp.data(), r.dweight.data(), dbias, dout.data(), inp.data(), w.data(), N, C, OC);
  } else {
    linear_forward(r.out.data(), inp.data(), w.data(), bias, N, C, OC);
    linear_backward(r.dinp.data(), r.dweight.data(), dbias, dout.data(), inp.data(), w.data(), N, C, OC);
  }
  return r;
}

// Forward and backward against the naive kernels over every (N, C, OC, bias) combination; out's
// tolerance grows by out_tol_per_c per summed product.
void expect_linear_matches_naive(std::initializer_list<int64_t> Ns, std::initializer_list<int64_t> Cs,
                                 std::initializer_list<int64_t> OCs, float out_tol_per_c) {
  for (int64_t N : Ns)
    for (int64_t C : Cs)
      for (int64_t OC : OCs)
        for (bool with_bias : {false, true}) {
          const LinearOut f = run_linear(N, C, OC, with_bias, false);
          const LinearOut n = run_linear(N, C, OC, with_bias, true);
          const std::string what = "N=" + std::to_string(N) + " C=" + std::to_string(C) + " OC=" + std::to_string(OC) +
                                   " bias=" + std::to_string(with_bias);
          expect_close(f.out, n.out, out_tol_per_c * C + 1e-5f, "out " + what);
          expect_close(f.dinp, n.dinp, 1e-6f * OC + 1e-5f, "dinp " + what);
          expect_close(f.dweight, n.dweight, 1e-6f * N + 1e-5f, "dweight " + what);
          expect_close(f.dbias, n.dbias, 1e-6f * N + 1e-5f, "dbias " + what);
        }
}

TEST(KernelLinear, MatchesNaiveOverSweptShapes) {
  expect_linear_matches_naive({1, 3, 7, 64, 129}, {1, 5, 32, 67}, {1, 5, 32, 67}, 1e-6f);
}

// N <= 8 rows (one token per sequence while decoding) take a matrix-vector path: checked over
// widths with and without a 16-lane tail, and output counts with and without a 4-row tail,
// including shapes big enough to be split over threads.
TEST(KernelLinear, FewRowsMatchNaive) {
  expect_linear_matches_naive({1, 2, 3, 5, 8, 9}, {16, 17, 384, 1536}, {3, 65, 1152}, 2e-6f);
}

// A row's outputs do not depend on how many rows come with it (batched decoding gives each
// sequence the bits it gets alone), nor on the thread count.
TEST(KernelLinear, FewRowsAreIndependentOfBatchAndThreads) {
  ThreadGuard guard;
  const int64_t C = 384, OC = 1152;
  const int64_t N = 7;
  const std::vector<float> inp = randn(N * C, 31), w = randn(OC * C, 32), b = randn(OC, 33);
  set_num_threads(2);
  std::vector<float> all(N * OC);
  linear_forward(all.data(), inp.data(), w.data(), b.data(), N, C, OC);
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (int64_t n = 0; n < N; n++) {
      std::vector<float> one(OC);
      linear_forward(one.data(), inp.data() + n * C, w.data(), b.data(), 1, C, OC);
      const std::vector<float> row(all.begin() + n * OC, all.begin() + (n + 1) * OC);
      expect_bit_identical(one, row, "row " + std::to_string(n) + " threads " + std::to_string(threads));
    }
  }
}

// Under a RowStableScope any number of rows takes the matrix-vector path (a server's decode
// batch of 64 sequences): each row is the bits it gets alone, through the plain, GELU and
// residual variants alike, for 1 and 2 threads; and the outputs are right.
TEST(KernelLinear, RowStableScopeMakesEveryRowCountGiveTheRowsBits) {
  ThreadGuard guard;
  const int64_t C = 136, OC = 200, N = 67;  // a 16-lane tail in C, a partial weight block in OC
  const std::vector<float> inp = randn(N * C, 41), w = randn(OC * C, 42), b = randn(OC, 43), res = randn(N * OC, 44);
  std::vector<float> naive(N * OC);
  linear_forward_naive(naive.data(), inp.data(), w.data(), b.data(), N, C, OC);
  std::vector<float> alone(N * OC), alone_gelu(N * OC), alone_res(N * OC);
  for (int64_t n = 0; n < N; n++) {  // one row at a time: the few-rows path, with or without the scope
    linear_forward(alone.data() + n * OC, inp.data() + n * C, w.data(), b.data(), 1, C, OC);
    linear_gelu_forward(alone_gelu.data() + n * OC, nullptr, inp.data() + n * C, w.data(), b.data(), 1, C, OC);
    linear_residual_forward(alone_res.data() + n * OC, res.data() + n * OC, inp.data() + n * C, w.data(), b.data(), 1,
                            C, OC);
  }
  expect_close(alone, naive, 2e-6f * C + 1e-5f, "one row against naive");
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    RowStableScope scope;
    for (int64_t rows : {N, int64_t{9}, int64_t{33}}) {
      std::vector<float> all(rows * OC), gelu(rows * OC), resid(rows * OC);
      linear_forward(all.data(), inp.data(), w.data(), b.data(), rows, C, OC);
      linear_gelu_forward(gelu.data(), nullptr, inp.data(), w.data(), b.data(), rows, C, OC);
      linear_residual_forward(resid.data(), res.data(), inp.data(), w.data(), b.data(), rows, C, OC);
      const std::string what = std::to_string(rows) + " rows, threads " + std::to_string(threads);
      const auto head = [&](const std::vector<float>& v) {
        return std::vector<float>(v.begin(), v.begin() + rows * OC);
      };
      expect_bit_identical(all, head(alone), "linear " + what);
      expect_bit_identical(gelu, head(alone_gelu), "linear+gelu " + what);
      expect_bit_identical(resid, head(alone_res), "linear+residual " + what);
    }
  }
  // Without the scope, so many rows take the GEMM: the same values, not necessarily the same bits.
  std::vector<float> gemm_path(N * OC);
  linear_forward(gemm_path.data(), inp.data(), w.data(), b.data(), N, C, OC);
  expect_close(gemm_path, alone, 2e-6f * C + 1e-5f, "GEMM path");
}

TEST(KernelLinear, BackwardAccumulatesAndSkipsNull) {
  const int64_t N = 9, C = 6, OC = 5;
  const std::vector<float> inp = randn(N * C, 1), w = randn(OC * C, 2), dout = randn(N * OC, 3);
  std::vector<float> dinp1(N * C, 0.0f), dw1(OC * C, 0.0f), db1(OC, 0.0f);
  linear_backward(dinp1.data(), dw1.data(), db1.data(), dout.data(), inp.data(), w.data(), N, C, OC);
  std::vector<float> dinp2(N * C, 0.0f), dw2(OC * C, 0.0f), db2(OC, 0.0f);
  for (int rep = 0; rep < 2; rep++)
    linear_backward(dinp2.data(), dw2.data(), db2.data(), dout.data(), inp.data(), w.data(), N, C, OC);
  for (size_t i = 0; i < dinp1.size(); i++) EXPECT_FLOAT_EQ(dinp2[i], 2 * dinp1[i]);
  for (size_t i = 0; i < dw1.size(); i++) EXPECT_FLOAT_EQ(dw2[i], 2 * dw1[i]);
  for (size_t i = 0; i < db1.size(); i++) EXPECT_FLOAT_EQ(db2[i], 2 * db1[i]);
  // Only dweight wanted: the others are nullptr and must not be touched (no crash).
  std::vector<float> dw3(OC * C, 0.0f);
  linear_backward(nullptr, dw3.data(), nullptr, dout.data(), inp.data(), w.data(), N, C, OC);
  expect_bit_identical(dw3, dw1, "dweight alone");
  std::vector<float> db3(OC, 0.0f);
  linear_backward(nullptr, nullptr, db3.data(), dout.data(), inp.data(), w.data(), N, C, OC);
  expect_bit_identical(db3, db1, "dbias alone");
}

TEST(KernelLinear, BitIdenticalForOneAndTwoThreads) {
  ThreadGuard guard;
  for (auto [N, C, OC] : {std::tuple<int64_t, int64_t, int64_t>{1031, 64, 192}, {256, 96, 65}, {777, 129, 67}}) {
    set_num_threads(1);
    const LinearOut one = run_linear(N, C, OC, true, false);
    set_num_threads(2);
    const LinearOut two = run_linear(N, C, OC, true, false);
    const std::string what = "N=" + std::to_string(N);
    expect_bit_identical(one.out, two.out, "out " + what);
    expect_bit_identical(one.dinp, two.dinp, "dinp " + what);
    expect_bit_identical(one.dweight, two.dweight, "dweight " + what);
    expect_bit_identical(one.dbias, two.dbias, "dbias " + what);
  }
}

}  // namespace
}  // namespace atto::kernels

namespace atto::kernels {
namespace {

// linear_gelu_forward on every path (matrix-vector rows, the register-blocked GEMM with GELU in
// its epilogue, OpenBLAS tiles) is bitwise linear_forward then gelu_erf_forward_slope, and
// within float rounding of a double-precision GELU of the naive product.
TEST(KernelLinear, LinearGeluIsLinearThenGeluBitForBit) {
  ThreadGuard guard;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const auto& [N, C, OC] : {std::tuple<int64_t, int64_t, int64_t>{3, 17, 40},
                                   {8, 64, 256},
                                   {9, 64, 256},
                                   {100, 37, 70},
                                   {512, 64, 256},
                                   {97, 130, 129},
                                   {256, 384, 1536},   // blocked at every level, over both threads
                                   {300, 2056, 64}}) {  // K > 2048: OpenBLAS at every level
      const std::vector<float> inp = randn(N * C, 1), w = randn(OC * C, 2), b = randn(OC, 3);
      for (const float* bias : {static_cast<const float*>(nullptr), b.data()}) {
        const std::string what = "N=" + std::to_string(N) + " C=" + std::to_string(C) + " OC=" + std::to_string(OC) +
                                 (bias ? " bias" : "") + " threads=" + std::to_string(threads);
        std::vector<float> want(N * OC), want_slope(N * OC), pre(N * OC);
        linear_forward(pre.data(), inp.data(), w.data(), bias, N, C, OC);
        gelu_erf_forward_slope(want.data(), want_slope.data(), pre.data(), N * OC);
        std::vector<float> out(N * OC, NAN), slope(N * OC, NAN), out_only(N * OC, NAN);
        linear_gelu_forward(out.data(), slope.data(), inp.data(), w.data(), bias, N, C, OC);
        linear_gelu_forward(out_only.data(), nullptr, inp.data(), w.data(), bias, N, C, OC);
        expect_bit_identical(out, want, what + " out");
        expect_bit_identical(slope, want_slope, what + " slope");
        expect_bit_identical(out_only, want, what + " out without slope");
        if (N * C * OC > (1 << 22)) continue;  // the naive product of the largest is slow
        std::vector<float> naive(N * OC);
        linear_forward_naive(naive.data(), inp.data(), w.data(), bias, N, C, OC);
        for (int64_t i = 0; i < N * OC; i++) {
          const double x = naive[i], y = 0.5 * x * (1 + std::erf(x / std::sqrt(2.0)));
          ASSERT_NEAR(out[i], y, 1e-6 * C + 1e-5 * (1 + std::fabs(y))) << what << " at " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace atto::kernels

namespace atto::kernels {
namespace {

// linear_residual_forward on every path (matrix-vector rows, the register-blocked GEMM with the
// residual added in its epilogue, OpenBLAS tiles) is bitwise linear_forward then add_forward.
TEST(KernelLinear, LinearResidualIsLinearThenAddBitForBit) {
  ThreadGuard guard;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (const auto& [N, C, OC] : {std::tuple<int64_t, int64_t, int64_t>{3, 17, 40},
                                   {8, 64, 64},
                                   {9, 64, 64},
                                   {100, 37, 70},
                                   {512, 256, 64},
                                   {97, 130, 129},
                                   {256, 1536, 384},   // blocked at every level, over both threads
                                   {300, 2056, 64}}) {  // K > 2048: OpenBLAS at every level
      const std::vector<float> inp = randn(N * C, 4), w = randn(OC * C, 5), b = randn(OC, 6), res = randn(N * OC, 7);
      for (const float* bias : {static_cast<const float*>(nullptr), b.data()}) {
        const std::string what = "N=" + std::to_string(N) + " C=" + std::to_string(C) + " OC=" + std::to_string(OC) +
                                 (bias ? " bias" : "") + " threads=" + std::to_string(threads);
        std::vector<float> want(N * OC), out(N * OC, NAN);
        linear_forward(want.data(), inp.data(), w.data(), bias, N, C, OC);
        add_forward(want.data(), res.data(), want.data(), N * OC);
        linear_residual_forward(out.data(), res.data(), inp.data(), w.data(), bias, N, C, OC);
        expect_bit_identical(out, want, what);
      }
    }
  }
}

// The FMA ceiling `atto bench gemm` reports: one figure per thread, each a real rate. The upper
// bound (10 TFLOP/s per thread, ~30x any CPU core) catches a loop the compiler worked out in
// advance, which "measured" 50 TFLOP/s per thread before the chains were made opaque. The lower
// bound (1 MFLOP/s) only says the rate is not zero: under qemu-aarch64, with another test
// beside it, a thread measured 0.07 GFLOP/s.
TEST(FmaPeak, OneRealRatePerThread) {
  ThreadGuard guard;
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    const std::vector<double> g = fma_peak_gflops(0.02);
    ASSERT_EQ(g.size(), static_cast<size_t>(threads));
    for (double x : g) {
      EXPECT_TRUE(std::isfinite(x));
      EXPECT_GT(x, 1e-3) << "GFLOP/s";
      EXPECT_LT(x, 1e4) << "GFLOP/s";
    }
  }
  EXPECT_THROW(fma_peak_gflops(0.0), std::exception);
}

}  // namespace
}  // namespace atto::kernels
