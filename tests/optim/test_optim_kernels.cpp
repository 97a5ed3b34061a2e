// Tests of the optimizer kernels (kernels/optim_kernels.cpp): against plain double-precision
// loops of the documented equations, and bit-identical results for 1 and 2 threads.
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "kernels/kernels.h"
#include "tensor/rng.h"
#include "tensor/tensor.h"

namespace atto::kernels {
namespace {

// Sizes: 1, primes, a chunk boundary, and one past the parallel threshold (2^15).
const std::vector<int64_t> kSizes = {1, 7, 4099, 16384, 16385, 100003};

std::vector<float> randn(int64_t n, uint64_t seed, float scale = 1.0f) {
  Rng rng(seed);
  std::vector<float> v = Tensor::randn({n}, rng).to_vector();
  for (float& x : v) x *= scale;
  return v;
}

// Restores the thread count after a test changes it.
struct ThreadGuard {
  int saved = num_threads();
  ~ThreadGuard() { set_num_threads(saved); }
};

TEST(OptimKernels, AdamMatchesEquationsInDouble) {
  for (bool decoupled : {false, true}) {
    const int64_t n = 1001;
    std::vector<float> p = randn(n, 1), g = randn(n, 2), m = randn(n, 3, 0.1f), v = randn(n, 4);
    for (float& x : v) x = x * x * 0.01f;  // v >= 0
    std::vector<double> pd(p.begin(), p.end()), md(m.begin(), m.end()), vd(v.begin(), v.end());
    const double lr = 0.01, b1 = 0.9, b2 = 0.95, eps = 1e-8, wd = 0.1;
    const int64_t t = 5;
    adam_update(p.data(), m.data(), v.data(), g.data(), n, 0.01f, 0.9f, 0.95f, 1e-8f, 0.1f, decoupled, t);
    for (int64_t i = 0; i < n; ++i) {
      double gi = g[i];
      if (!decoupled) gi += wd * pd[i];
      if (decoupled) pd[i] *= 1 - lr * wd;
      md[i] = b1 * md[i] + (1 - b1) * gi;
      vd[i] = b2 * vd[i] + (1 - b2) * gi * gi;
      const double mhat = md[i] / (1 - std::pow(b1, t)), vhat = vd[i] / (1 - std::pow(b2, t));
      pd[i] -= lr * mhat / (std::sqrt(vhat) + eps);
      ASSERT_NEAR(p[i], pd[i], 2e-6 * (1 + std::fabs(pd[i]))) << "i=" << i;
      ASSERT_NEAR(m[i], md[i], 1e-6 * (1 + std::fabs(md[i])));
      ASSERT_NEAR(v[i], vd[i], 1e-6 * (1 + std::fabs(vd[i])));
    }
  }
}

TEST(OptimKernels, SgdMatchesEquationsAndAcceptsNullBuffer) {
  const int64_t n = 257;
  std::vector<float> g = randn(n, 5), p0 = randn(n, 6), b0 = randn(n, 7);
  for (bool nesterov : {false, true}) {
    std::vector<float> p = p0, buf = b0;
    sgd_update(p.data(), buf.data(), g.data(), n, 0.1f, 0.9f, 0.01f, nesterov, false);
    for (int64_t i = 0; i < n; ++i) {
      const double gi = g[i] + 0.01 * p0[i];
      const double bi = 0.9 * b0[i] + gi;
      const double d = nesterov ? gi + 0.9 * bi : bi;
      ASSERT_NEAR(buf[i], bi, 1e-5);
      ASSERT_NEAR(p[i], p0[i] - 0.1 * d, 1e-5);
    }
  }
  std::vector<float> p = p0, buf = b0;
  sgd_update(p.data(), buf.data(), g.data(), n, 0.1f, 0.9f, 0.0f, false, /*first_step=*/true);
  EXPECT_EQ(buf, g) << "first step: buf = g";
  std::vector<float> q = p0;
  sgd_update(q.data(), nullptr, g.data(), n, 0.1f, 0.0f, 0.0f, false, true);
  for (int64_t i = 0; i < n; ++i) ASSERT_NEAR(q[i], p0[i] - 0.1 * g[i], 1e-6);
}

TEST(OptimKernels, SumSquaresAndScale) {
  for (int64_t n : kSizes) {
    std::vector<float> x = randn(n, 8);
    double want = 0;
    for (float v : x) want += static_cast<double>(v) * v;
    EXPECT_NEAR(sum_squares(x.data(), n), want, 1e-12 * want) << "n=" << n;
    std::vector<float> y = x;
    scale_inplace(y.data(), n, 0.5f);
    for (int64_t i = 0; i < n; ++i) ASSERT_EQ(y[i], x[i] * 0.5f);
  }
  EXPECT_EQ(sum_squares(nullptr, 0), 0.0);
}

// Every kernel, for every size, gives the same bits with 1 and with 2 threads.
TEST(OptimKernels, BitIdenticalForOneAndTwoThreads) {
  ThreadGuard guard;
  for (int64_t n : kSizes) {
    struct Result {
      std::vector<float> p, m, v, sp, sb, sc;
      double ss;
    };
    auto run = [&](int threads) {
      set_num_threads(threads);
      Result r{randn(n, 11), randn(n, 12, 0.1f), randn(n, 13, 0.1f), randn(n, 14), randn(n, 15), randn(n, 16), 0.0};
      for (float& x : r.v) x = x * x;
      const std::vector<float> g = randn(n, 17);
      for (int64_t t = 1; t <= 3; ++t)
        adam_update(r.p.data(), r.m.data(), r.v.data(), g.data(), n, 1e-2f, 0.9f, 0.95f, 1e-8f, 0.1f, t % 2 == 0, t);
      sgd_update(r.sp.data(), r.sb.data(), g.data(), n, 0.1f, 0.9f, 0.1f, true, false);
      scale_inplace(r.sc.data(), n, 0.3f);
      r.ss = sum_squares(g.data(), n);
      return r;
    };
    const Result a = run(1), b = run(2);
    EXPECT_EQ(a.p, b.p) << "adam param, n=" << n;
    EXPECT_EQ(a.m, b.m) << "adam m, n=" << n;
    EXPECT_EQ(a.v, b.v) << "adam v, n=" << n;
    EXPECT_EQ(a.sp, b.sp) << "sgd param, n=" << n;
    EXPECT_EQ(a.sb, b.sb) << "sgd buffer, n=" << n;
    EXPECT_EQ(a.sc, b.sc) << "scale, n=" << n;
    EXPECT_EQ(a.ss, b.ss) << "sum_squares, n=" << n;
  }
}

// The many-tensor kernels (one parallel pass over a model's parameters) give each tensor the
// bits of its single-tensor kernel, with its own lr, weight decay and step, for 1 and 2 threads;
// for_each_chunk visits every element of every range exactly once.
TEST(OptimKernels, ManyTensorKernelsEqualOneCallPerTensor) {
  ThreadGuard guard;
  const std::vector<int64_t> sizes = {7, 100003, 1, 4096, 0, 16385, 33};
  const size_t count = sizes.size();
  for (int threads : {1, 2}) {
    set_num_threads(threads);
    for (bool decoupled : {false, true}) {
      std::vector<std::vector<float>> p, m, v, g, p1, m1, v1;
      std::vector<AdamTensor> ts;
      for (size_t i = 0; i < count; ++i) {
        const int64_t n = sizes[i];
        p.push_back(randn(n, 30 + i));
        m.push_back(randn(n, 40 + i, 0.1f));
        v.push_back(randn(n, 50 + i, 0.1f));
        for (float& x : v.back()) x = x * x;
        g.push_back(randn(n, 60 + i));
      }
      p1 = p, m1 = m, v1 = v;
      for (size_t i = 0; i < count; ++i)
        ts.push_back({p[i].data(), m[i].data(), v[i].data(), g[i].data(), sizes[i], 1e-2f * static_cast<float>(i + 1),
                      0.05f * static_cast<float>(i), static_cast<int64_t>(i + 1)});
      adam_update_many(ts.data(), count, 0.9f, 0.95f, 1e-8f, decoupled);
      for (size_t i = 0; i < count; ++i) {
        adam_update(p1[i].data(), m1[i].data(), v1[i].data(), g[i].data(), sizes[i], ts[i].lr, 0.9f, 0.95f, 1e-8f,
                    ts[i].weight_decay, decoupled, ts[i].step);
        EXPECT_EQ(p[i], p1[i]) << "param " << i << ", threads " << threads;
        EXPECT_EQ(m[i], m1[i]) << "m " << i;
        EXPECT_EQ(v[i], v1[i]) << "v " << i;
        if (sizes[i] > 0) {
          EXPECT_NE(p[i], randn(sizes[i], 30 + i)) << "param " << i << " moved";
        }
      }
    }
    std::vector<std::vector<float>> x;
    std::vector<const float*> xp;
    std::vector<float*> xw;
    for (size_t i = 0; i < count; ++i) x.push_back(randn(sizes[i], 70 + i));
    for (auto& t : x) {
      xp.push_back(t.data());
      xw.push_back(t.data());
    }
    std::vector<double> ss(count, -1.0);
    sum_squares_many(ss.data(), xp.data(), sizes.data(), count);
    for (size_t i = 0; i < count; ++i) EXPECT_EQ(ss[i], sum_squares(x[i].data(), sizes[i])) << "sum_squares " << i;
    std::vector<std::vector<float>> y = x;
    scale_inplace_many(xw.data(), sizes.data(), count, 0.3f);
    for (size_t i = 0; i < count; ++i) {
      scale_inplace(y[i].data(), sizes[i], 0.3f);
      EXPECT_EQ(x[i], y[i]) << "scale " << i;
    }
    std::vector<std::vector<int>> seen;
    for (int64_t n : sizes) seen.emplace_back(static_cast<size_t>(n), 0);
    for_each_chunk(sizes.data(), count, 1000, 1, [&](size_t i, int64_t b, int64_t e) {
      ASSERT_LE(e - b, 1000);
      for (int64_t j = b; j < e; ++j) {
        int& c = seen[i][static_cast<size_t>(j)];
#pragma omp atomic
        c += 1;
      }
    });
    for (size_t i = 0; i < count; ++i)
      for (int c : seen[i]) ASSERT_EQ(c, 1) << "range " << i;
  }
}

}  // namespace
}  // namespace atto::kernels
