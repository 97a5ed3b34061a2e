// Micro-benchmarks of LayerNorm forward and backward at transformer shapes.
//
//   OMP_NUM_THREADS=2 build/bench/bench_micro --benchmark_filter=LayerNorm --benchmark_min_time=0.1
//
// bytes/s counts the arrays streamed once: forward reads x, writes out (2 N C floats);
// backward reads dout, x and reads+writes dinp (4 N C floats).
#include <benchmark/benchmark.h>

#include <random>
#include <vector>

#include "kernels/kernels.h"

namespace {

std::vector<float> randn(int64_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  std::vector<float> v(static_cast<size_t>(n));
  for (float& x : v) x = dist(gen);
  return v;
}

void norm_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"N", "C"});
  b->Args({512, 64});  // one shard of (b)
  b->Args({1024, 384});
  b->Args({4096, 768});
  b->UseRealTime();
}

void BM_LayerNormForward(benchmark::State& state) {
  const int64_t N = state.range(0), C = state.range(1);
  const auto x = randn(N * C, 1), w = randn(C, 2), b = randn(C, 3);
  std::vector<float> out(N * C), mean(N), rstd(N);
  for (auto _ : state) {
    atto::kernels::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5f);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * 2 * N * C * 4);
}

void BM_LayerNormBackward(benchmark::State& state) {
  const int64_t N = state.range(0), C = state.range(1);
  const auto x = randn(N * C, 1), w = randn(C, 2), b = randn(C, 3), dout = randn(N * C, 4);
  std::vector<float> out(N * C), mean(N), rstd(N), dinp(N * C), dw(C), db(C);
  atto::kernels::layernorm_forward(out.data(), mean.data(), rstd.data(), x.data(), w.data(), b.data(), N, C, 1e-5f);
  for (auto _ : state) {
    atto::kernels::layernorm_backward(dinp.data(), dw.data(), db.data(), dout.data(), x.data(), w.data(), mean.data(),
                                      rstd.data(), N, C);
    benchmark::DoNotOptimize(dinp.data());
  }
  state.SetBytesProcessed(state.iterations() * 4 * N * C * 4);
}

void BM_RmsNormForward(benchmark::State& state) {
  const int64_t N = state.range(0), C = state.range(1);
  const auto x = randn(N * C, 1), w = randn(C, 2);
  std::vector<float> out(N * C), rstd(N);
  for (auto _ : state) {
    atto::kernels::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetBytesProcessed(state.iterations() * 2 * N * C * 4);
}

void BM_RmsNormBackward(benchmark::State& state) {
  const int64_t N = state.range(0), C = state.range(1);
  const auto x = randn(N * C, 1), w = randn(C, 2), dout = randn(N * C, 4);
  std::vector<float> out(N * C), rstd(N), dinp(N * C), dw(C);
  atto::kernels::rmsnorm_forward(out.data(), rstd.data(), x.data(), w.data(), N, C, 1e-5f);
  for (auto _ : state) {
    atto::kernels::rmsnorm_backward(dinp.data(), dw.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C);
    benchmark::DoNotOptimize(dinp.data());
  }
  state.SetBytesProcessed(state.iterations() * 3 * N * C * 4);
}

BENCHMARK(BM_LayerNormForward)->Apply(norm_args);
BENCHMARK(BM_LayerNormBackward)->Apply(norm_args);
BENCHMARK(BM_RmsNormForward)->Apply(norm_args);
BENCHMARK(BM_RmsNormBackward)->Apply(norm_args);

}  // namespace
