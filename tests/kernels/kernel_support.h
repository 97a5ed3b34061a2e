// What the kernel tests share: seeded normal inputs, a guard that restores the thread count,
// and the comparisons (bit for bit, bit for bit across 1 and 2 threads, within a tolerance,
// against central differences).
// One copy here (each tests/kernels/test_*.cpp had its own).
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "kernels/kernels.h"

namespace atto::kernels::test {

// n draws of N(mean, scale^2), in order, from std::mt19937(seed): the same seed gives the same
// data in every test.
inline std::vector<float> randn(int64_t n, uint32_t seed, float scale = 1.0f, float mean = 0.0f) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist(mean, scale);
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

// Restores the thread count a test found when it leaves (tests change it with set_num_threads).
struct ThreadGuard {
  int saved = num_threads();
  ~ThreadGuard() { set_num_threads(saved); }
};

// Sets a bf16 backend for a test and puts the previous one back.
struct BackendGuard {
  Bf16Backend saved = bf16_backend();
  explicit BackendGuard(Bf16Backend b) { set_bf16_backend(b); }
  ~BackendGuard() { set_bf16_backend(saved); }
};

// The bf16 backends this CPU runs (none, one or both).
inline std::vector<Bf16Backend> bf16_backends() {
  std::vector<Bf16Backend> b;
  for (Bf16Backend x : {Bf16Backend::Amx, Bf16Backend::Avx512Bf16})
    if (bf16_supported(x)) b.push_back(x);
  return b;
}

inline void expect_bit_identical(const std::vector<float>& a, const std::vector<float>& b, const std::string& what) {
  ASSERT_EQ(a.size(), b.size()) << what;
  for (size_t i = 0; i < a.size(); i++)
    ASSERT_EQ(std::memcmp(&a[i], &b[i], sizeof(float)), 0)
        << what << " differs at " << i << ": " << a[i] << " vs " << b[i];
}

// Runs f with 1 thread and with 2 threads; the returned buffers must be bit-identical.
inline void expect_thread_invariant(const std::function<std::vector<float>()>& f, const std::string& what) {
  ThreadGuard guard;
  set_num_threads(1);
  const std::vector<float> one = f();
  set_num_threads(2);
  const std::vector<float> two = f();
  expect_bit_identical(one, two, what);
}

// |got - want| <= atol + rtol * |want| element by element; an infinite want must be matched
// exactly, and got may not be NaN.
inline void expect_close(const std::vector<float>& got, const std::vector<float>& want, double rtol, double atol,
                         const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); i++) {
    if (std::isinf(want[i]) && got[i] == want[i]) continue;
    ASSERT_FALSE(std::isnan(got[i])) << what << " NaN at " << i;
    ASSERT_NEAR(got[i], want[i], atol + rtol * std::fabs(want[i])) << what << " at " << i;
  }
}

// Each grad[i] against the central difference (loss(param[i] + h) - loss(param[i] - h)) / 2h,
// h = 1e-2, of a loss computed in double: |grad[i] - fd| <= 2e-3 (1 + |fd|). param is changed
// in place (loss must read it) and restored after each element.
inline void expect_matches_central_differences(std::vector<float>& param, const std::vector<float>& grad,
                                               const std::function<double()>& loss, const std::string& what) {
  for (size_t i = 0; i < param.size(); i++) {
    const float saved = param[i], h = 1e-2f;
    param[i] = saved + h;
    const double up = loss();
    param[i] = saved - h;
    const double down = loss();
    param[i] = saved;
    const double fd = (up - down) / (2.0 * h);
    EXPECT_NEAR(grad[i], fd, 2e-3 * (1 + std::fabs(fd))) << what << "[" << i << "]";
  }
}

// One gemm case of the sweeps: C = alpha op(A) op(B) + beta C, each operand's leading dimension
// pad columns wider than its rows.
struct GemmCase {
  bool ta, tb;
  int64_t M, N, K;
  int64_t pad;
  float alpha, beta;
};

inline std::string name(const GemmCase& c) {
  return "tA=" + std::to_string(c.ta) + " tB=" + std::to_string(c.tb) + " M=" + std::to_string(c.M) +
         " N=" + std::to_string(c.N) + " K=" + std::to_string(c.K) + " pad=" + std::to_string(c.pad) +
         " alpha=" + std::to_string(c.alpha) + " beta=" + std::to_string(c.beta);
}

}  // namespace atto::kernels::test
