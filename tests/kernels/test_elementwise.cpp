// Tests of the elementwise kernels (activations and their derivatives, GELU's slope form,
// SwiGLU, add and bias add, dropout): against double-precision formulas (derivatives also against
// central differences of the formula), plain loops, the counter-based dropout mask, and
// bit-identical results for 1 and 2 threads.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "kernels/kernel_support.h"
#include "kernels/kernels.h"
#include "tensor/rng.h"

namespace atto::kernels {
namespace {

using test::expect_bit_identical;
using test::expect_thread_invariant;
using test::randn;

// Inputs covering saturation, zero and the usual range; sizes around the 16-lane tails.
std::vector<float> activation_inputs(int64_t n) {
  std::vector<float> x = randn(n, 5, 3.0f);
  const float special[] = {0.0f, -0.0f, 1e-7f, -30.0f, 30.0f, -100.0f, 100.0f, 5.0f, -5.0f};
  for (size_t i = 0; i < std::size(special) && i < x.size(); i++) x[i] = special[i];
  return x;
}

// ---- Activations against double formulas ---------------------------------------------------

using Fwd = void (*)(float*, const float*, int64_t);
using Bwd = void (*)(float*, const float*, const float*, int64_t);

struct Activation {
  const char* name;
  Fwd fwd;
  Bwd bwd;
  std::function<double(double)> ref;
};

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

const Activation kActivations[] = {
    {"relu", relu_forward, relu_backward, [](double x) { return x > 0 ? x : 0.0; }},
    {"gelu_tanh", gelu_tanh_forward, gelu_tanh_backward,
     [](double x) { return 0.5 * x * (1 + std::tanh(std::sqrt(2 / M_PI) * (x + 0.044715 * x * x * x))); }},
    {"gelu_erf", gelu_erf_forward, gelu_erf_backward,
     [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }},
    {"silu", silu_forward, silu_backward, [](double x) { return x * sigmoid(x); }},
};

TEST(KernelActivation, ForwardAndDerivativeMatchFormula) {
  for (const Activation& a : kActivations) {
    for (int64_t n : {1, 5, 16, 17, 67, 100003}) {
      const std::vector<float> x = activation_inputs(n), dout = randn(n, 6);
      std::vector<float> out(n), dinp = randn(n, 7);
      const std::vector<float> dinp0 = dinp;
      a.fwd(out.data(), x.data(), n);
      a.bwd(dinp.data(), dout.data(), x.data(), n);
      for (int64_t i = 0; i < n; i++) {
        const double xi = x[i], y = a.ref(xi);
        ASSERT_NEAR(out[i], y, 2e-6 * (1 + std::fabs(y))) << a.name << " x=" << xi;
        if (std::string(a.name) == "relu" && std::fabs(xi) < 1e-3) continue;  // kink
        const double h = 1e-4;
        const double deriv = (a.ref(xi + h) - a.ref(xi - h)) / (2 * h);
        const double want = dinp0[i] + dout[i] * deriv;
        ASSERT_NEAR(dinp[i], want, 1e-5 * (1 + std::fabs(want))) << a.name << " x=" << xi;
      }
    }
  }
}

// GELU's Phi(x) on a dense grid: the absolute error bound the kernel's comment states (2e-7,
// plus float rounding of x * Phi), monotone, and 0 / x at the ends. A wrong coefficient of the
// rational erf shows up here as an error far above the bound.
TEST(KernelActivation, GeluErfPhiWithinStatedBoundOnDenseGrid) {
  std::vector<float> x;
  for (int i = -100000; i <= 100000; i++) x.push_back(static_cast<float>(i) * 1e-4f);
  const int64_t n = static_cast<int64_t>(x.size());
  std::vector<float> out(x.size());
  gelu_erf_forward(out.data(), x.data(), n);
  double worst = 0.0;
  for (int64_t i = 0; i < n; i++) {
    const double xi = x[i], phi = 0.5 * std::erfc(-xi / std::sqrt(2.0));
    const double err = std::fabs(out[i] - xi * phi);
    worst = std::max(worst, err / std::max(1.0, std::fabs(xi)));
    ASSERT_LE(err, 2e-7 * std::fabs(xi) + 6e-8 * std::fabs(xi * phi) + 1e-30) << "x=" << xi;
  }
  EXPECT_GT(worst, 0.0);  // the grid did reach the approximation (not an exact copy of erfc)
  const float ends[] = {-1e4f, -40.0f, 40.0f, 1e4f};
  float got[4];
  gelu_erf_forward(got, ends, 4);
  EXPECT_EQ(got[0], 0.0f);
  EXPECT_EQ(got[1], 0.0f);
  EXPECT_EQ(got[2], 40.0f);
  EXPECT_EQ(got[3], 1e4f);
}

// The GELU backward the autograd op uses, in both modes: accumulating (as the formula) and
// overwriting (equal to accumulating into zeros, whatever dinp held), deep tails included.
TEST(KernelActivation, GeluErfBackwardOverwriteMatchesFormula) {
  for (int64_t n : {1, 5, 16, 17, 67, 100003}) {
    std::vector<float> x = activation_inputs(n);
    for (size_t i = 9; i < x.size() && i < 40; i++) x[i] = -14.0f + 0.5f * static_cast<float>(i - 9);
    const std::vector<float> dout = randn(n, 6);
    std::vector<float> d_acc = randn(n, 7), d_over(n, NAN), d_zero(n, 0.0f);
    const std::vector<float> dinp0 = d_acc;
    gelu_erf_backward_ex(d_acc.data(), dout.data(), x.data(), n, true);
    gelu_erf_backward_ex(d_over.data(), dout.data(), x.data(), n, false);
    gelu_erf_backward(d_zero.data(), dout.data(), x.data(), n);
    for (int64_t i = 0; i < n; i++) {
      const double xi = x[i];
      const double deriv =
          0.5 * (1 + std::erf(xi / std::sqrt(2.0))) + xi * std::exp(-0.5 * xi * xi) / std::sqrt(2 * M_PI);
      const double want = dinp0[i] + dout[i] * deriv;
      ASSERT_NEAR(d_acc[i], want, 1e-5 * (1 + std::fabs(want))) << "x=" << xi;
      ASSERT_EQ(d_over[i], d_zero[i]) << "x=" << xi;
    }
  }
}

// GELU keeping its slope (what linear_gelu's backward multiplies by): the same bits as
// gelu_erf_forward and as gelu_erf_backward's factor, in place or not, with or without the slope;
// the backward's multiply in both modes; and the block form a GEMM epilogue calls.
TEST(KernelActivation, GeluErfSlopeIsTheBackwardsFactorBitForBit) {
  for (int64_t n : {1, 5, 16, 17, 67, 100003}) {
    std::vector<float> x = activation_inputs(n);
    for (size_t i = 9; i < x.size() && i < 40; i++) x[i] = -14.0f + 0.5f * static_cast<float>(i - 9);
    std::vector<float> y(n), want_y(n), slope(n), want_slope(n, 0.0f), ones(n, 1.0f);
    gelu_erf_forward(want_y.data(), x.data(), n);
    gelu_erf_backward_ex(want_slope.data(), ones.data(), x.data(), n, false);
    gelu_erf_forward_slope(y.data(), slope.data(), x.data(), n);
    ASSERT_EQ(0, std::memcmp(y.data(), want_y.data(), sizeof(float) * n)) << "n=" << n;
    ASSERT_EQ(0, std::memcmp(slope.data(), want_slope.data(), sizeof(float) * n)) << "n=" << n;
    std::vector<float> inplace = x;
    gelu_erf_forward_slope(inplace.data(), nullptr, inplace.data(), n);
    ASSERT_EQ(0, std::memcmp(inplace.data(), want_y.data(), sizeof(float) * n)) << "n=" << n;

    // Overwriting (what linear_gelu's backward does) is gelu_erf_backward's bits; accumulating
    // may round differently (the compiler fuses the old kernel's multiply and add).
    const std::vector<float> dout = randn(n, 6), dinp0 = randn(n, 7);
    std::vector<float> d_acc = dinp0, d_over(n, NAN), want_over(n, NAN), want_acc = dinp0;
    gelu_erf_backward_ex(want_over.data(), dout.data(), x.data(), n, false);
    gelu_erf_backward_ex(want_acc.data(), dout.data(), x.data(), n, true);
    gelu_erf_backward_slope(d_acc.data(), dout.data(), slope.data(), n, true);
    gelu_erf_backward_slope(d_over.data(), dout.data(), slope.data(), n, false);
    ASSERT_EQ(0, std::memcmp(d_over.data(), want_over.data(), sizeof(float) * n)) << "n=" << n;
    for (int64_t i = 0; i < n; i++)
      ASSERT_NEAR(d_acc[i], want_acc[i], 1e-6f * (1.0f + std::fabs(want_acc[i]))) << "x=" << x[i];
  }
  // A 5 x 19 block inside rows of 23 floats: only the block changes.
  const int64_t rows = 5, cols = 19, ld = 23;
  std::vector<float> m = activation_inputs(rows * ld), ms(rows * ld, -7.0f);
  const std::vector<float> m0 = m;
  gelu_erf_slope_rows(m.data(), ms.data(), ld, rows, cols);
  for (int64_t r = 0; r < rows; r++)
    for (int64_t c = 0; c < ld; c++) {
      const size_t i = static_cast<size_t>(r * ld + c);
      float y = m0[i], sl = -7.0f;
      if (c < cols) gelu_erf_forward_slope(&y, &sl, &m0[i], 1);
      ASSERT_EQ(m[i], y) << r << "," << c;
      ASSERT_EQ(ms[i], sl) << r << "," << c;
    }
}

TEST(KernelActivation, SwigluMatchesFormulaAndSkipsNull) {
  const int64_t n = 1001;
  const std::vector<float> g = activation_inputs(n), u = randn(n, 8), dout = randn(n, 9);
  std::vector<float> out(n), dg(n, 1.0f), du(n, -1.0f);
  swiglu_forward(out.data(), g.data(), u.data(), n);
  swiglu_backward(dg.data(), du.data(), dout.data(), g.data(), u.data(), n);
  for (int64_t i = 0; i < n; i++) {
    const double gi = g[i], s = sigmoid(gi);
    ASSERT_NEAR(out[i], gi * s * u[i], 2e-6 * (1 + std::fabs(gi * s * u[i])));
    const double dgi = 1.0 + dout[i] * u[i] * s * (1 + gi * (1 - s));
    ASSERT_NEAR(dg[i], dgi, 1e-5 * (1 + std::fabs(dgi)));
    const double dui = -1.0 + dout[i] * gi * s;
    ASSERT_NEAR(du[i], dui, 1e-5 * (1 + std::fabs(dui)));
  }
  std::vector<float> du2(n, -1.0f);
  swiglu_backward(nullptr, du2.data(), dout.data(), g.data(), u.data(), n);
  expect_bit_identical(du2, du, "dup with dgate == nullptr");
}

TEST(KernelActivation, BitIdenticalForOneAndTwoThreads) {
  const int64_t n = 100003;  // odd, past the parallel threshold
  const std::vector<float> x = activation_inputs(n), dout = randn(n, 10);
  for (const Activation& a : kActivations) {
    expect_thread_invariant(
        [&] {
          std::vector<float> out(n), dinp(n, 0.5f);
          a.fwd(out.data(), x.data(), n);
          a.bwd(dinp.data(), dout.data(), x.data(), n);
          out.insert(out.end(), dinp.begin(), dinp.end());
          return out;
        },
        a.name);
  }
  expect_thread_invariant(
      [&] {
        std::vector<float> out(n), dg(n, 0.0f), du(n, 0.0f);
        swiglu_forward(out.data(), x.data(), dout.data(), n);
        swiglu_backward(dg.data(), du.data(), x.data(), x.data(), dout.data(), n);
        out.insert(out.end(), dg.begin(), dg.end());
        out.insert(out.end(), du.begin(), du.end());
        return out;
      },
      "swiglu");
}

// ---- Add and bias --------------------------------------------------------------------------

TEST(KernelBias, AddAndBiasMatchLoops) {
  for (int64_t N : {1, 3, 7, 64, 129}) {
    for (int64_t C : {1, 5, 32, 67, 128}) {
      const std::vector<float> a = randn(N * C, 1), b = randn(N * C, 2), bias = randn(C, 3);
      std::vector<float> out(N * C);
      add_forward(out.data(), a.data(), b.data(), N * C);
      for (int64_t i = 0; i < N * C; i++) ASSERT_EQ(out[i], a[i] + b[i]);
      bias_add_forward(out.data(), a.data(), bias.data(), N, C);
      for (int64_t i = 0; i < N * C; i++) ASSERT_EQ(out[i], a[i] + bias[i % C]);
      std::vector<float> dinp = randn(N * C, 4), dbias = randn(C, 5);
      const std::vector<float> dinp0 = dinp, dbias0 = dbias;
      bias_add_backward(dinp.data(), dbias.data(), b.data(), N, C);
      for (int64_t i = 0; i < N * C; i++) ASSERT_EQ(dinp[i], dinp0[i] + b[i]);
      for (int64_t c = 0; c < C; c++) {  // rows summed in order, then added
        float s = 0.0f;
        for (int64_t n = 0; n < N; n++) s += b[n * C + c];
        ASSERT_EQ(dbias[c], dbias0[c] + s) << "N=" << N << " C=" << C << " c=" << c;
      }
    }
  }
}

TEST(KernelBias, BitIdenticalForOneAndTwoThreads) {
  const int64_t N = 1031, C = 129;
  const std::vector<float> x = randn(N * C, 1), bias = randn(C, 2);
  expect_thread_invariant(
      [&] {
        std::vector<float> out(N * C), dinp(N * C, 0.0f), dbias(C, 0.0f);
        bias_add_forward(out.data(), x.data(), bias.data(), N, C);
        bias_add_backward(dinp.data(), dbias.data(), x.data(), N, C);
        out.insert(out.end(), dbias.begin(), dbias.end());
        return out;
      },
      "bias_add");
}

// ---- Dropout --------------------------------------------------------------------------------

TEST(KernelDropout, KeepsFractionScalesAndBackwardMatchesMask) {
  const int64_t n = 100000;
  const std::vector<float> x = randn(n, 1), dout = randn(n, 2);
  for (float p : {0.1f, 0.5f, 0.9f}) {
    std::vector<float> out(n), dinp(n, 0.0f);
    dropout_forward(out.data(), x.data(), n, p, 1234, 0);
    dropout_backward(dinp.data(), dout.data(), n, p, 1234, 0);
    int64_t kept = 0;
    for (int64_t i = 0; i < n; i++) {
      const bool keep = counter_uniform(1234, static_cast<uint64_t>(i)) >= p;
      kept += keep;
      ASSERT_EQ(out[i], keep ? x[i] / (1.0f - p) : 0.0f) << "p=" << p << " i=" << i;
      ASSERT_EQ(dinp[i], keep ? dout[i] / (1.0f - p) : 0.0f) << "p=" << p << " i=" << i;
    }
    // Binomial(n, 1-p): sd <= 160; allow 5 sd.
    EXPECT_NEAR(static_cast<double>(kept), n * (1.0 - p), 800.0) << "p=" << p;
  }
  // Another seed gives another mask.
  std::vector<float> a(n), b(n);
  dropout_forward(a.data(), x.data(), n, 0.5f, 1, 0);
  dropout_forward(b.data(), x.data(), n, 0.5f, 2, 0);
  EXPECT_NE(a, b);
}

TEST(KernelDropout, ZeroIsIdentityAndThreadInvariant) {
  const int64_t n = 70001;
  const std::vector<float> x = randn(n, 3);
  std::vector<float> out(n), dinp(n, 1.0f);
  dropout_forward(out.data(), x.data(), n, 0.0f, 99, 0);
  expect_bit_identical(out, x, "dropout p=0");
  dropout_backward(dinp.data(), x.data(), n, 0.0f, 99, 0);
  for (int64_t i = 0; i < n; i++) ASSERT_EQ(dinp[i], 1.0f + x[i]);
  expect_thread_invariant(
      [&] {
        std::vector<float> o(n), d(n, 0.0f);
        dropout_forward(o.data(), x.data(), n, 0.3f, 7, 0);
        dropout_backward(d.data(), x.data(), n, 0.3f, 7, 0);
        o.insert(o.end(), d.begin(), d.end());
        return o;
      },
      "dropout");
}

}  // namespace
}  // namespace atto::kernels
