// Micro-benchmarks of the fused attention, q/k/v inside one [B, T, 3C] buffer as the model uses
// them: the four GPT shapes of the speed issue's configurations (a) to (d), and longer ones.
//
//   OMP_NUM_THREADS=2 build/bench/bench_micro --benchmark_filter=Attention --benchmark_min_time=0.1
//
// FLOP/s counts the visible (unmasked) score entries: forward 4*HS flops per entry (QK^T and
// PV), backward 10*HS (S recomputed, dP, dV, dK, dQ); forward+backward 14*HS.
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

struct Setup {
  atto::kernels::AttentionDims d;
  std::vector<float> qkv, dqkv, out, dout, lse;
  int64_t C;
  explicit Setup(const benchmark::State& state) {
    d.B = state.range(0);
    d.NH = state.range(1);
    d.Tq = d.Tk = state.range(2);
    d.HS = state.range(3);
    d.causal = state.range(4) != 0;
    C = d.NH * d.HS;
    d.ldq = d.ldk = d.ldv = 3 * C;
    qkv = randn(d.B * d.Tq * 3 * C, 1);
    dqkv.assign(qkv.size(), 0.0f);
    out.assign(d.B * d.Tq * C, 0.0f);
    dout = randn(out.size(), 2);
    lse.assign(d.B * d.NH * d.Tq, 0.0f);
  }
  double visible() const {
    const double T = static_cast<double>(d.Tq);
    return static_cast<double>(d.B * d.NH) * (d.causal ? T * (T + 1) / 2 : T * T);
  }
  void forward() {
    atto::kernels::attention_forward(out.data(), lse.data(), qkv.data(), qkv.data() + C, qkv.data() + 2 * C, nullptr,
                                     d);
  }
  void backward() {
    atto::kernels::attention_backward(dqkv.data(), dqkv.data() + C, dqkv.data() + 2 * C, dout.data(), out.data(),
                                      lse.data(), qkv.data(), qkv.data() + C, qkv.data() + 2 * C, nullptr, d);
  }
};

void attention_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"B", "NH", "T", "HS", "causal"});
  b->Args({64, 4, 16, 8, 1});   // (a)
  b->Args({32, 4, 32, 16, 1});  // (b)
  b->Args({12, 4, 64, 32, 1});  // (c)
  b->Args({8, 6, 256, 64, 1});  // (d)
  b->Args({1, 4, 1024, 64, 1});
  b->Args({1, 4, 1024, 64, 0});
  b->UseRealTime();
}

void BM_AttentionForward(benchmark::State& state) {
  Setup s(state);
  for (auto _ : state) {
    s.forward();
    benchmark::DoNotOptimize(s.out.data());
  }
  state.counters["FLOP/s"] = benchmark::Counter(4.0 * static_cast<double>(s.d.HS) * s.visible(),
                                                benchmark::Counter::kIsIterationInvariantRate);
}

void BM_AttentionForwardBackward(benchmark::State& state) {
  Setup s(state);
  for (auto _ : state) {
    s.forward();
    s.backward();
    benchmark::DoNotOptimize(s.dqkv.data());
  }
  state.counters["FLOP/s"] = benchmark::Counter(14.0 * static_cast<double>(s.d.HS) * s.visible(),
                                                benchmark::Counter::kIsIterationInvariantRate);
}

BENCHMARK(BM_AttentionForward)->Apply(attention_args);
BENCHMARK(BM_AttentionForwardBackward)->Apply(attention_args);

}  // namespace
