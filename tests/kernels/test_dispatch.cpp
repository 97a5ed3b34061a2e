// Run-time dispatch (kernels/isa.h, dispatch.h): the level the kernels run at, and, in a portable
// build, every level's table that this CPU can run computing what the naive references compute,
// bit-identical for 1 and 2 threads within the level. (The whole suite runs at each forced level
// in scripts/test at ATTO_CPU=avx2 besides the best.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "kernels/kernel_support.h"
#include "kernels/kernels.h"

namespace atto::kernels {
namespace {

using test::expect_close;
using test::randn;
using test::ThreadGuard;

TEST(CpuLevel, IsTheBestUnlessAttoCpuLowersIt) {
  const char* env = std::getenv("ATTO_CPU");
  const CpuLevel l = cpu_level();
  if (env != nullptr && *env != '\0') {
    EXPECT_EQ(std::string(cpu_level_name(l)), env);
  } else {
    EXPECT_EQ(l, best_cpu_level());
  }
#if defined(ATTO_DISPATCH)
  EXPECT_NE(l, CpuLevel::Native);
  const CpuFeatures& f = cpu_features();
  // The best level follows the features, each level needing the one below.
  EXPECT_EQ(best_cpu_level() >= CpuLevel::Avx2, f.avx2);
  EXPECT_EQ(best_cpu_level() >= CpuLevel::Avx512, f.avx512);
  EXPECT_EQ(best_cpu_level() >= CpuLevel::Avx512Bf16, f.avx512_bf16);
  if (f.avx512) {
    EXPECT_TRUE(f.avx2);
  }
#else
  EXPECT_EQ(l, CpuLevel::Native);
#endif
  EXPECT_THAT(kernels_description(), ::testing::HasSubstr(std::string("kernels: ") + cpu_level_name(l)));
}

TEST(CpuLevel, Bf16NeedsALevelThatHasIt) {
  const CpuLevel l = cpu_level();
  if (l != CpuLevel::Native && l < CpuLevel::Avx512Bf16) {
    EXPECT_EQ(bf16_backend(), Bf16Backend::None);
    EXPECT_FALSE(bf16_supported(Bf16Backend::Avx512Bf16));
    EXPECT_FALSE(bf16_supported(Bf16Backend::Amx));
  }
  if (l == CpuLevel::Avx512Bf16) {
    EXPECT_FALSE(bf16_supported(Bf16Backend::Amx));
  }
}

#if defined(ATTO_DISPATCH)
// The tables this CPU can run, with their names.
std::vector<std::pair<const char*, const KernelTable*>> runnable_tables() {
  std::vector<std::pair<const char*, const KernelTable*>> t = {{"avx2", &atto_kernel_table_isa_avx2}};
  if (cpu_features().avx512) t.emplace_back("avx512", &atto_kernel_table_isa_avx512);
  return t;
}

// f(table) at 1 and at 2 threads: the same bits.
std::vector<float> thread_invariant(const std::function<std::vector<float>()>& f, const std::string& what) {
  ThreadGuard guard;
  set_num_threads(1);
  const std::vector<float> one = f();
  set_num_threads(2);
  const std::vector<float> two = f();
  test::expect_bit_identical(one, two, what + ": 1 thread against 2");
  return one;
}

TEST(KernelTables, EveryLevelMatchesTheNaiveReferences) {
  const int64_t M = 37, N = 53, K = 71;
  const auto A = randn(M * K, 1), B = randn(N * K, 2), C0 = randn(M * N, 3);
  const auto x = randn(M * N, 4), w = randn(N, 5), b = randn(N, 6);
  for (const auto& [name, t] : runnable_tables()) {
    SCOPED_TRACE(name);
    const std::string n = name;
    // GEMM (the blocked kernel and its packing), beta = 1.
    auto got = thread_invariant(
        [&, t = t] {
          std::vector<float> c = C0;
          t->gemm(false, true, M, N, K, 0.5f, A.data(), K, B.data(), K, 1.0f, c.data(), N);
          return c;
        },
        n + " gemm");
    std::vector<float> want = C0;
    t->gemm_naive(false, true, M, N, K, 0.5f, A.data(), K, B.data(), K, 1.0f, want.data(), N);
    expect_close(got, want, 1e-5, 1e-4, n + " gemm");
    // LayerNorm forward.
    std::vector<float> mean(M), rstd(M), want_out(M * N);
    got = thread_invariant(
        [&, t = t] {
          std::vector<float> out(M * N), mu(M), rs(M);
          t->layernorm_forward(out.data(), mu.data(), rs.data(), x.data(), w.data(), b.data(), M, N, 1e-5f);
          return out;
        },
        n + " layernorm");
    t->layernorm_forward_naive(want_out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), M, N, 1e-5f);
    expect_close(got, want_out, 1e-5, 1e-5, n + " layernorm");
    // The lane-wise kernels, LayerNorm, decoding's dot products and the reductions built on
    // exp_shift_sum, sum_of and max_of compute at each level's own vector width with the same
    // operations per lane (simd::vn) and the same 16-lane sum tree: the avx2 level's bits.
    const auto same_as_avx2 = [&](const char* what, const std::function<void(const KernelTable&, float*)>& f) {
      std::vector<float> mine(M * N, 0.25f), ref(M * N, 0.25f);
      f(*t, mine.data());
      f(atto_kernel_table_isa_avx2, ref.data());
      test::expect_bit_identical(mine, ref, n + " " + what + " against the avx2 level's");
    };
    same_as_avx2("softmax", [&](const KernelTable& k, float* o) { k.softmax_forward(o, x.data(), M, N); });
    same_as_avx2("gelu_erf", [&](const KernelTable& k, float* o) { k.gelu_erf_forward(o, x.data(), M * N); });
    same_as_avx2("gelu_erf_backward",
                 [&](const KernelTable& k, float* o) { k.gelu_erf_backward_ex(o, C0.data(), x.data(), M * N, true); });
    same_as_avx2("gelu_tanh_backward",
                 [&](const KernelTable& k, float* o) { k.gelu_tanh_backward(o, C0.data(), x.data(), M * N); });
    // LayerNorm's forward and its weight and bias gradients (its dinp is not compared: GCC fuses
    // that expression's multiply-adds differently at the two widths, an ulp apart).
    same_as_avx2("layernorm", [&](const KernelTable& k, float* o) {
      std::vector<float> mu(M), rs(M);
      k.layernorm_forward(o, mu.data(), rs.data(), x.data(), w.data(), b.data(), M, N, 1e-5f);
      k.layernorm_backward(nullptr, o, o + N, C0.data(), x.data(), w.data(), mu.data(), rs.data(), M, N);
    });
    same_as_avx2("decoding's matrix-vector product", [&](const KernelTable& k, float* o) {
      for (int64_t rows = 1; rows <= 3; rows++)  // rows x K inputs against M weight rows of K
        k.linear_forward(o + 120 * (rows - 1), B.data(), A.data(), b.data(), rows, K, M);
    });
    same_as_avx2("silu", [&](const KernelTable& k, float* o) { k.silu_forward(o, x.data(), M * N); });
    same_as_avx2("sums", [&](const KernelTable& k, float* o) {
      for (int64_t r = 0; r < M; r++) {  // lengths from 1 to 53: full and partial 16-lane blocks
        const float* row = x.data() + r * N;
        const int64_t len = 1 + r * (N - 1) / (M - 1);
        o[3 * r] = k.sum_of(row, len);
        o[3 * r + 1] = k.max_of(row, len);
        o[3 * r + 2] = k.exp_shift_sum(nullptr, row, len, 0.5f);
      }
    });
  }
}

// Head size 16 and 29 keys take the tiny path (query rows in lanes) at every level; it computes
// at the native width, each lane the same operations in the same order, so every level gives the
// avx2 table's bits (the other paths may differ across levels by rounding).
TEST(KernelTables, EveryLevelsAttentionMatchesTheNaiveOne) {
  AttentionDims d;
  d.B = 2, d.NH = 3, d.Tq = 29, d.Tk = 29, d.HS = 16, d.causal = true;
  const int64_t n = d.B * d.Tq * d.NH * d.HS;
  const auto q = randn(n, 7), k = randn(n, 8), v = randn(n, 9), dout = randn(n, 10);
  std::vector<float> first[5];  // the first table's out, lse, dq, dk, dv
  for (const auto& [name, t] : runnable_tables()) {
    SCOPED_TRACE(name);
    std::vector<float> out(n), lse(d.B * d.NH * d.Tq), want(n), want_lse(d.B * d.NH * d.Tq);
    t->attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), nullptr, d);
    t->attention_forward_naive(want.data(), want_lse.data(), q.data(), k.data(), v.data(), nullptr, d);
    expect_close(out, want, 1e-4, 1e-5, std::string(name) + " attention forward");
    std::vector<float> dq(n), dk(n), dv(n), wq(n), wk(n), wv(n);
    t->attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), out.data(), lse.data(), q.data(), k.data(),
                          v.data(), nullptr, d);
    t->attention_backward_naive(wq.data(), wk.data(), wv.data(), dout.data(), want.data(), want_lse.data(), q.data(),
                                k.data(), v.data(), nullptr, d);
    expect_close(dq, wq, 1e-4, 1e-4, std::string(name) + " attention dq");
    expect_close(dk, wk, 1e-4, 1e-4, std::string(name) + " attention dk");
    expect_close(dv, wv, 1e-4, 1e-4, std::string(name) + " attention dv");
    const std::vector<float>* got[5] = {&out, &lse, &dq, &dk, &dv};
    for (int i = 0; i < 5; i++) {
      if (first[i].empty()) first[i] = *got[i];
      EXPECT_EQ(*got[i], first[i]) << name << ": output " << i << " differs from the first level's bits";
    }
  }
  // Decoding rows (Tq <= 4: the decode path) over a longer cache, head size 72 (a 64-column block
  // and a tail): the weighted sum is one chain per column at every width, the same bits too.
  AttentionDims e;
  e.B = 2, e.NH = 2, e.Tq = 3, e.Tk = 41, e.HS = 72, e.causal = true;
  const int64_t nq = e.B * e.Tq * e.NH * e.HS, nk = e.B * e.Tk * e.NH * e.HS;
  const auto q2 = randn(nq, 11), k2 = randn(nk, 12), v2 = randn(nk, 13);
  std::vector<float> first_out;
  for (const auto& [name, t] : runnable_tables()) {
    std::vector<float> out(nq), lse(e.B * e.NH * e.Tq), want(nq), want_lse(e.B * e.NH * e.Tq);
    t->attention_forward(out.data(), lse.data(), q2.data(), k2.data(), v2.data(), nullptr, e);
    t->attention_forward_naive(want.data(), want_lse.data(), q2.data(), k2.data(), v2.data(), nullptr, e);
    expect_close(out, want, 1e-4, 1e-5, std::string(name) + " decode attention");
    if (first_out.empty()) first_out = out;
    EXPECT_EQ(out, first_out) << name << ": decode attention differs from the first level's bits";
  }
}

TEST(KernelTables, TheNamesCallTheChosenLevelsTable) {
  const CpuLevel l = cpu_level();
  const KernelTable* want = l == CpuLevel::Avx2 ? &atto_kernel_table_isa_avx2 : &atto_kernel_table_isa_avx512;
  EXPECT_EQ(&kernel_table(), want);
  // kernels::gemm converts to a plain function pointer (tests and tables of kernels take them).
  void (*f)(float*, const float*, int64_t) = relu_forward;
  std::vector<float> x = {-1.0f, 2.0f}, y(2);
  f(y.data(), x.data(), 2);
  EXPECT_EQ(y, (std::vector<float>{0.0f, 2.0f}));
}
#endif

}  // namespace
}  // namespace atto::kernels
