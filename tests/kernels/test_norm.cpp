// Tests of LayerNorm, RMSNorm and softmax: fast vs naive over swept sizes, accumulation and
// nullptr gradients, bit-identical results for 1 and 2 threads, central differences of the
// naive backward, and softmax against a double-precision computation.
//
// Tolerances: forward 1e-5 * (1 + |y|) (rstd amplifies float rounding of the mean/var);
// backward 5e-5 * (1 + |g|) for dinp and 1e-5 * N for the weight/bias sums over N rows.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "kernels/kernel_support.h"
#include "kernels/kernels.h"

namespace atto::kernels {
namespace {

using test::expect_close;
using test::expect_matches_central_differences;
using test::expect_thread_invariant;
using test::randn;

// ---- LayerNorm / RMSNorm -------------------------------------------------------------------

struct NormOut {
  std::vector<float> out, mean, rstd, dinp, dw, db;
};

// rms: RMSNorm instead of LayerNorm. Gradients start from non-zero values (they accumulate).
NormOut run_norm(bool rms, int64_t N, int64_t C, bool naive, bool with_bias = true) {
  const std::vector<float> x = randn(N * C, 1, 2.0f, 0.5f), w = randn(C, 2, 1.0f, 1.0f);
  const std::vector<float> b = randn(C, 3), dout = randn(N * C, 4);
  NormOut r;
  r.out.assign(N * C, 0.0f);
  r.mean.assign(N, 0.0f);
  r.rstd.assign(N, 0.0f);
  r.dinp = randn(N * C, 5);
  r.dw = randn(C, 6);
  r.db = randn(C, 7);
  if (rms) {
    (naive ? rmsnorm_forward_naive : rmsnorm_forward)(r.out.data(), r.rstd.data(), x.data(), w.data(), N, C, 1e-5f);
    (naive ? rmsnorm_backward_naive : rmsnorm_backward)(r.dinp.data(), r.dw.data(), dout.data(), x.data(), w.data(),
                                                        r.rstd.data(), N, C);
  } else {
    const float* bias = with_bias ? b.data() : nullptr;
    float* db = with_bias ? r.db.data() : nullptr;
    (naive ? layernorm_forward_naive : layernorm_forward)(r.out.data(), r.mean.data(), r.rstd.data(), x.data(),
                                                          w.data(), bias, N, C, 1e-5f);
    (naive ? layernorm_backward_naive : layernorm_backward)(r.dinp.data(), r.dw.data(), db, dout.data(), x.data(),
                                                            w.data(), r.mean.data(), r.rstd.data(), N, C);
  }
  return r;
}

TEST(KernelNorm, FastMatchesNaiveOverSweptSizes) {
  for (bool rms : {false, true})
    for (int64_t N : {1, 3, 7, 64, 129, 1031})
      for (int64_t C : {1, 5, 32, 67, 128}) {
        const NormOut f = run_norm(rms, N, C, false), n = run_norm(rms, N, C, true);
        const std::string what =
            std::string(rms ? "rmsnorm" : "layernorm") + " N=" + std::to_string(N) + " C=" + std::to_string(C);
        expect_close(f.out, n.out, 1e-5, 1e-5, "out " + what);
        expect_close(f.mean, n.mean, 1e-5, 1e-5, "mean " + what);
        expect_close(f.rstd, n.rstd, 1e-5, 1e-5, "rstd " + what);
        expect_close(f.dinp, n.dinp, 5e-5, 5e-5, "dinp " + what);
        expect_close(f.dw, n.dw, 1e-5, 1e-5 * N, "dweight " + what);
        expect_close(f.db, n.db, 1e-5, 1e-5 * N, "dbias " + what);
      }
}

TEST(KernelNorm, LayerNormWithoutBiasAndNullGradients) {
  const int64_t N = 5, C = 7;
  const NormOut f = run_norm(false, N, C, false, false), n = run_norm(false, N, C, true, false);
  expect_close(f.out, n.out, 1e-5, 1e-5, "out without bias");
  expect_close(f.db, randn(C, 7), 0, 0, "dbias untouched when nullptr");
  // Each gradient alone equals its value when all are requested.
  const std::vector<float> x = randn(N * C, 1), w = randn(C, 2), dout = randn(N * C, 3);
  std::vector<float> out(N * C), mean(N), rstd(N);
  layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), nullptr, N, C, 1e-5f);
  std::vector<float> dinp(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
  layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(), rstd.data(), N,
                     C);
  std::vector<float> dinp2(N * C, 0.0f), dw2(C, 0.0f), db2(C, 0.0f);
  layernorm_backward(dinp2.data(), nullptr, nullptr, dout.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C);
  layernorm_backward(nullptr, dw2.data(), nullptr, dout.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C);
  layernorm_backward(nullptr, nullptr, db2.data(), dout.data(), x.data(), w.data(), mean.data(), rstd.data(), N, C);
  EXPECT_EQ(dinp2, dinp);
  EXPECT_EQ(dw2, dw);
  EXPECT_EQ(db2, db);
  std::vector<float> rdinp(N * C, 0.0f), rdw(C, 0.0f);
  rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
  rmsnorm_backward(nullptr, rdw.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C);
  rmsnorm_backward(rdinp.data(), nullptr, dout.data(), x.data(), w.data(), rstd.data(), N, C);
  std::vector<float> rdinp2(N * C, 0.0f), rdw2(C, 0.0f);
  rmsnorm_backward(rdinp2.data(), rdw2.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C);
  EXPECT_EQ(rdinp2, rdinp);
  EXPECT_EQ(rdw2, rdw);
}

TEST(KernelNorm, BackwardAccumulates) {
  for (bool rms : {false, true}) {
    const int64_t N = 33, C = 19;
    const std::vector<float> x = randn(N * C, 1), w = randn(C, 2), dout = randn(N * C, 3);
    std::vector<float> out(N * C), mean(N), rstd(N);
    std::vector<float> dinp(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
    for (int rep = 0; rep < 2; rep++) {
      if (rms) {
        rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
        rmsnorm_backward(dinp.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C);
      } else {
        layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), w.data(), N, C, 1e-5f);
        layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(), rstd.data(),
                           N, C);
      }
      if (rep == 0) continue;
      std::vector<float> dinp1(N * C, 0.0f), dw1(C, 0.0f), db1(C, 0.0f);
      if (rms) {
        rmsnorm_backward(dinp1.data(), dw1.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C);
      } else {
        layernorm_backward(dinp1.data(), dw1.data(), db1.data(), dout.data(), x.data(), w.data(), mean.data(),
                           rstd.data(), N, C);
      }
      for (int64_t i = 0; i < N * C; i++) ASSERT_FLOAT_EQ(dinp[i], 2 * dinp1[i]);
      for (int64_t c = 0; c < C; c++) ASSERT_FLOAT_EQ(dw[c], 2 * dw1[c]);
      for (int64_t c = 0; c < C; c++) ASSERT_FLOAT_EQ(db[c], 2 * db1[c]);
    }
  }
}

TEST(KernelNorm, BitIdenticalForOneAndTwoThreads) {
  for (bool rms : {false, true}) {
    expect_thread_invariant(
        [&] {
          NormOut r = run_norm(rms, 1031, 67, false);
          for (auto* v : {&r.mean, &r.rstd, &r.dinp, &r.dw, &r.db}) r.out.insert(r.out.end(), v->begin(), v->end());
          return r.out;
        },
        rms ? "rmsnorm" : "layernorm");
  }
}

// Central differences of L = sum(out * g) through the naive forward, in double.
TEST(KernelNorm, NaiveBackwardMatchesCentralDifferences) {
  for (bool rms : {false, true}) {
    const int64_t N = 3, C = 6;
    std::vector<float> x = randn(N * C, 1), w = randn(C, 2, 0.5f, 1.0f), b = randn(C, 3);
    const std::vector<float> g = randn(N * C, 4);
    auto loss = [&]() {
      std::vector<float> out(N * C), mean(N), rstd(N);
      if (rms) {
        rmsnorm_forward_naive(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
      } else {
        layernorm_forward_naive(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5f);
      }
      double l = 0.0;
      for (int64_t i = 0; i < N * C; i++) l += static_cast<double>(out[i]) * g[i];
      return l;
    };
    std::vector<float> out(N * C), mean(N), rstd(N);
    std::vector<float> dx(N * C, 0.0f), dw(C, 0.0f), db(C, 0.0f);
    if (rms) {
      rmsnorm_forward_naive(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
      rmsnorm_backward_naive(dx.data(), dw.data(), g.data(), x.data(), w.data(), rstd.data(), N, C);
    } else {
      layernorm_forward_naive(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5f);
      layernorm_backward_naive(dx.data(), dw.data(), db.data(), g.data(), x.data(), w.data(), mean.data(), rstd.data(),
                               N, C);
    }
    const std::string what = rms ? "rmsnorm " : "layernorm ";
    expect_matches_central_differences(x, dx, loss, what + "dinp");
    expect_matches_central_differences(w, dw, loss, what + "dweight");
    if (!rms) expect_matches_central_differences(b, db, loss, what + "dbias");
  }
}

// ---- Softmax ---------------------------------------------------------------------------------

TEST(KernelSoftmax, MatchesDoubleAndBackwardFormula) {
  for (int64_t N : {1, 3, 7, 64, 129})
    for (int64_t C : {1, 5, 32, 67, 128}) {
      const std::vector<float> x = randn(N * C, 1, 4.0f), dout = randn(N * C, 2);
      std::vector<float> out(N * C), dinp = randn(N * C, 3);
      const std::vector<float> dinp0 = dinp;
      softmax_forward(out.data(), x.data(), N, C);
      softmax_backward(dinp.data(), dout.data(), out.data(), N, C);
      for (int64_t n = 0; n < N; n++) {
        double m = x[n * C];
        for (int64_t c = 0; c < C; c++) m = std::max(m, static_cast<double>(x[n * C + c]));
        double s = 0.0, dot = 0.0;
        for (int64_t c = 0; c < C; c++) s += std::exp(x[n * C + c] - m);
        for (int64_t c = 0; c < C; c++) dot += dout[n * C + c] * std::exp(x[n * C + c] - m) / s;
        for (int64_t c = 0; c < C; c++) {
          const double p = std::exp(x[n * C + c] - m) / s;
          ASSERT_NEAR(out[n * C + c], p, 1e-6 * (1 + p)) << "N=" << N << " C=" << C;
          const double want = dinp0[n * C + c] + p * (dout[n * C + c] - dot);
          ASSERT_NEAR(dinp[n * C + c], want, 2e-6 * (1 + std::fabs(want)));
        }
      }
    }
}

TEST(KernelSoftmax, BitIdenticalForOneAndTwoThreads) {
  const int64_t N = 1031, C = 67;
  const std::vector<float> x = randn(N * C, 1, 3.0f), dout = randn(N * C, 2);
  expect_thread_invariant(
      [&] {
        std::vector<float> out(N * C), dinp(N * C, 0.0f);
        softmax_forward(out.data(), x.data(), N, C);
        softmax_backward(dinp.data(), dout.data(), out.data(), N, C);
        out.insert(out.end(), dinp.begin(), dinp.end());
        return out;
      },
      "softmax");
}

}  // namespace
}  // namespace atto::kernels
