// Micro-benchmarks of pointwise kernels and the fused softmax / cross-entropy rows.
//
//   OMP_NUM_THREADS=2 build/bench/bench_micro --benchmark_filter='Gelu|Softmax|CrossEntropy'
//
// items/s counts elements (N*C or N*V).
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

constexpr int64_t kElems = 4096 * 768;  // e.g. B*T = 4096 rows of C = 768

template <auto F>  // a kernel: a function, or (portable builds) the object that dispatches it
void BM_Unary(benchmark::State& state) {
  const auto x = randn(kElems, 1);
  std::vector<float> out(kElems);
  for (auto _ : state) {
    F(out.data(), x.data(), kElems);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * kElems);
}

template <auto F>
void BM_UnaryBackward(benchmark::State& state) {
  const auto x = randn(kElems, 1), dout = randn(kElems, 2);
  std::vector<float> dinp(kElems);
  for (auto _ : state) {
    F(dinp.data(), dout.data(), x.data(), kElems);
    benchmark::DoNotOptimize(dinp.data());
  }
  state.SetItemsProcessed(state.iterations() * kElems);
}

BENCHMARK(BM_Unary<atto::kernels::gelu_tanh_forward>)->Name("BM_GeluTanhForward")->UseRealTime();
BENCHMARK(BM_UnaryBackward<atto::kernels::gelu_tanh_backward>)->Name("BM_GeluTanhBackward")->UseRealTime();
BENCHMARK(BM_Unary<atto::kernels::gelu_erf_forward>)->Name("BM_GeluErfForward")->UseRealTime();
BENCHMARK(BM_UnaryBackward<atto::kernels::gelu_erf_backward>)->Name("BM_GeluErfBackward")->UseRealTime();

void BM_SoftmaxForward(benchmark::State& state) {
  const int64_t N = 4096, C = state.range(0);
  const auto x = randn(N * C, 1);
  std::vector<float> out(N * C);
  for (auto _ : state) {
    atto::kernels::softmax_forward(out.data(), x.data(), N, C);
    benchmark::DoNotOptimize(out.data());
  }
  state.SetItemsProcessed(state.iterations() * N * C);
}
BENCHMARK(BM_SoftmaxForward)->Arg(256)->UseRealTime();

// Forward + backward of the loss over N = 4096 rows of V logits.
void BM_CrossEntropy(benchmark::State& state) {
  const int64_t N = 4096, V = state.range(0);
  const auto logits = randn(N * V, 1);
  std::vector<int32_t> targets(N);
  for (int64_t n = 0; n < N; n++) targets[n] = static_cast<int32_t>((n * 7) % V);
  std::vector<float> losses(N), lse(N), dloss(N, 1.0f / N), dlogits(N * V);
  for (auto _ : state) {
    atto::kernels::cross_entropy_forward(losses.data(), lse.data(), logits.data(), targets.data(), N, V, -1, 0.0f);
    atto::kernels::cross_entropy_backward(dlogits.data(), dloss.data(), logits.data(), lse.data(), targets.data(), N, V,
                                          -1, 0.0f);
    benchmark::DoNotOptimize(dlogits.data());
  }
  state.SetItemsProcessed(state.iterations() * N * V);
}
BENCHMARK(BM_CrossEntropy)->Arg(65)->Arg(8192)->UseRealTime();

}  // namespace
