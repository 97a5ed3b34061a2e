// kernels/rope.cpp: rotary position embeddings against the formula in double, the backward as the
// forward's adjoint, positions that continue across calls, and the same bits on 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/kernel_support.h"

namespace atto::kernels {
namespace {

using test::randn;

// The definition, in double: pair (2i, 2i+1) of each Q and K head turned by p * base^(-2i/HS).
std::vector<double> naive_rope(const std::vector<float>& x, int64_t B, int64_t T, int64_t C, int64_t NH,
                               int64_t offset, double base) {
  const int64_t HS = C / NH;
  std::vector<double> y(x.begin(), x.end());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t t = 0; t < T; ++t)
      for (int64_t h = 0; h < 2 * NH; ++h)
        for (int64_t i = 0; i < HS / 2; ++i) {
          const double a = static_cast<double>(offset + t) * std::pow(base, -2.0 * i / HS);
          const size_t j = static_cast<size_t>((b * T + t) * 3 * C + h * HS + 2 * i);
          y[j] = x[j] * std::cos(a) - x[j + 1] * std::sin(a);
          y[j + 1] = x[j] * std::sin(a) + x[j + 1] * std::cos(a);
        }
  return y;
}

TEST(Rope, MatchesTheFormula) {
  const int64_t B = 2, T = 5, C = 16, NH = 2;
  const std::vector<float> x = randn(B * T * 3 * C, 1);
  std::vector<float> y(x.size());
  rope_forward(y.data(), x.data(), B, T, C, NH, 3, 10000.0f);
  const std::vector<double> ref = naive_rope(x, B, T, C, NH, 3, 10000.0);
  for (size_t i = 0; i < y.size(); ++i) EXPECT_NEAR(y[i], ref[i], 2e-6) << i;
  for (int64_t r = 0; r < B * T; ++r)  // V untouched
    for (int64_t j = 2 * C; j < 3 * C; ++j) EXPECT_EQ(y[r * 3 * C + j], x[r * 3 * C + j]);
}

TEST(Rope, BackwardIsTheAdjointAndAccumulates) {
  const int64_t B = 1, T = 4, C = 8, NH = 2;
  const std::vector<float> x = randn(B * T * 3 * C, 2), g = randn(B * T * 3 * C, 3);
  std::vector<float> y(x.size()), dx(x.size());
  rope_forward(y.data(), x.data(), B, T, C, NH, 7, 500.0f);
  rope_backward(dx.data(), g.data(), B, T, C, NH, 7, 500.0f, false);
  double lhs = 0, rhs = 0;  // <rope(x), g> = <x, rope^T(g)>
  for (size_t i = 0; i < x.size(); ++i) lhs += static_cast<double>(y[i]) * g[i], rhs += static_cast<double>(x[i]) * dx[i];
  EXPECT_NEAR(lhs, rhs, 1e-4);
  std::vector<float> acc(x.size(), 1.0f);
  rope_backward(acc.data(), g.data(), B, T, C, NH, 7, 500.0f, true);
  for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(acc[i], 1.0f + dx[i], 1e-6);  // the add may fuse
}

TEST(Rope, OffsetContinuesThePositions) {
  const int64_t T = 6, C = 8, NH = 1;
  const std::vector<float> x = randn(T * 3 * C, 4);
  std::vector<float> whole(x.size()), tail(3 * 3 * C);
  rope_forward(whole.data(), x.data(), 1, T, C, NH, 0, 10000.0f);
  rope_forward(tail.data(), x.data() + 3 * 3 * C, 1, 3, C, NH, 3, 10000.0f);
  for (size_t i = 0; i < tail.size(); ++i) EXPECT_EQ(tail[i], whole[3 * 3 * C + i]);
}

TEST(Rope, SameBitsOnOneAndTwoThreads) {
  test::ThreadGuard guard;
  const int64_t B = 4, T = 64, C = 64, NH = 4;
  const std::vector<float> x = randn(B * T * 3 * C, 5);
  std::vector<float> a(x.size()), b(x.size());
  set_num_threads(1);
  rope_forward(a.data(), x.data(), B, T, C, NH, 0, 10000.0f);
  set_num_threads(2);
  rope_forward(b.data(), x.data(), B, T, C, NH, 0, 10000.0f);
  test::expect_bit_identical(a, b, "rope");
}

}  // namespace
}  // namespace atto::kernels
