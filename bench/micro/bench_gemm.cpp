// Micro-benchmarks of gemm and linear: atto's deterministic tiled gemm against a direct
// cblas_sgemm call (OpenBLAS threading itself), and the linear layer at transformer shapes.
//
//   OMP_NUM_THREADS=2 build/bench/bench_micro --benchmark_filter=Gemm --benchmark_min_time=0.1
//
// FLOP/s counts 2*M*N*K per GEMM.
#include <benchmark/benchmark.h>
#include <cblas.h>

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

void set_flops(benchmark::State& state, double flops) {
  state.counters["FLOP/s"] = benchmark::Counter(flops, benchmark::Counter::kIsIterationInvariantRate);
}

// C[S, S] = A[S, S] @ B[S, S]^T (the linear-layer orientation).
void BM_GemmAtto(benchmark::State& state) {
  const int64_t S = state.range(0);
  const auto A = randn(S * S, 1), B = randn(S * S, 2);
  std::vector<float> C(S * S);
  for (auto _ : state) {
    atto::kernels::gemm(false, true, S, S, S, 1.0f, A.data(), S, B.data(), S, 0.0f, C.data(), S);
    benchmark::DoNotOptimize(C.data());
  }
  set_flops(state, 2.0 * S * S * S);
}

void BM_GemmCblas(benchmark::State& state) {
  const int S = static_cast<int>(state.range(0));
  const auto A = randn(S * S, 1), B = randn(S * S, 2);
  std::vector<float> C(S * S);
  for (auto _ : state) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, S, S, S, 1.0f, A.data(), S, B.data(), S, 0.0f, C.data(), S);
    benchmark::DoNotOptimize(C.data());
  }
  set_flops(state, 2.0 * S * S * S);
}

BENCHMARK(BM_GemmAtto)->RangeMultiplier(2)->Range(64, 2048)->UseRealTime();
BENCHMARK(BM_GemmCblas)->RangeMultiplier(2)->Range(64, 2048)->UseRealTime();

// Linear at GPT-ish shapes: N = B*T rows, C -> OC.
void linear_args(benchmark::internal::Benchmark* b) {
  b->ArgNames({"N", "C", "OC"});
  for (int64_t C : {384, 768}) {
    b->Args({1024, C, 3 * C});  // qkv
    b->Args({1024, C, 4 * C});  // fc
    b->Args({1024, 4 * C, C});  // proj
  }
  b->Args({1024, 384, 65});  // char-level lm head
  // One shard of (b) (d_model 64, 16 sequences of 32): run with OMP_NUM_THREADS=1 to see a
  // shard's per-core speed.
  for (const auto& s :
       {std::vector<int64_t>{512, 64, 192}, {512, 64, 64}, {512, 64, 256}, {512, 256, 64}, {512, 64, 65}})
    b->Args(s);
  b->UseRealTime();
}

void BM_LinearForward(benchmark::State& state) {
  const int64_t N = state.range(0), C = state.range(1), OC = state.range(2);
  const auto inp = randn(N * C, 1), w = randn(OC * C, 2), b = randn(OC, 3);
  std::vector<float> out(N * OC);
  for (auto _ : state) {
    atto::kernels::linear_forward(out.data(), inp.data(), w.data(), b.data(), N, C, OC);
    benchmark::DoNotOptimize(out.data());
  }
  set_flops(state, 2.0 * N * C * OC);
}

void BM_LinearBackward(benchmark::State& state) {
  const int64_t N = state.range(0), C = state.range(1), OC = state.range(2);
  const auto inp = randn(N * C, 1), w = randn(OC * C, 2), dout = randn(N * OC, 3);
  std::vector<float> dinp(N * C), dw(OC * C), db(OC);
  for (auto _ : state) {
    atto::kernels::linear_backward(dinp.data(), dw.data(), db.data(), dout.data(), inp.data(), w.data(), N, C, OC);
    benchmark::DoNotOptimize(dinp.data());
  }
  set_flops(state, 4.0 * N * C * OC);
}

// The backward's two products apart: part 0 the input gradient dinp[N, C] = dout @ weight (NN),
// part 1 the weight gradient dweight[OC, C] += dout^T @ inp (TN, K = N rows).
void BM_LinearBackwardPart(benchmark::State& state) {
  const int64_t N = state.range(0), C = state.range(1), OC = state.range(2);
  const bool weight = state.range(3) != 0;
  const auto inp = randn(N * C, 1), w = randn(OC * C, 2), dout = randn(N * OC, 3);
  std::vector<float> dinp(N * C), dw(OC * C);
  for (auto _ : state) {
    atto::kernels::linear_backward(weight ? nullptr : dinp.data(), weight ? dw.data() : nullptr, nullptr, dout.data(),
                                   inp.data(), w.data(), N, C, OC);
    benchmark::DoNotOptimize(weight ? dw.data() : dinp.data());
  }
  set_flops(state, 2.0 * N * C * OC);
}

BENCHMARK(BM_LinearForward)->Apply(linear_args);
BENCHMARK(BM_LinearBackward)->Apply(linear_args);
BENCHMARK(BM_LinearBackwardPart)
    ->ArgNames({"N", "C", "OC", "dweight"})
    ->ArgsProduct({{1024, 2048}, {384}, {1152, 1536}, {0, 1}})
    ->Args({1024, 1536, 384, 0})
    ->Args({1024, 1536, 384, 1})
    ->Args({2048, 1536, 384, 0})
    ->Args({2048, 1536, 384, 1})
    ->Args({384, 512, 128, 1})  // (c)'s fc2, one shard
    ->Args({384, 128, 512, 1})  // (c)'s fc1
    ->UseRealTime();

}  // namespace

namespace {

// A feed-forward's first layer with GELU (erf), forward and GELU's backward. mode 0: linear_forward,
// gelu_erf_forward, and gelu_erf_backward recomputing Phi and phi from the pre-activation;
// mode 1: linear_gelu_forward (GELU and its slope in the GEMM's epilogue), and the backward's
// multiply by the slope.
void BM_LinearGelu(benchmark::State& state) {
  const int64_t N = state.range(0), C = state.range(1), OC = state.range(2);
  const bool fused = state.range(3) != 0;
  const auto inp = randn(N * C, 1), w = randn(OC * C, 2), dout = randn(N * OC, 3);
  std::vector<float> out(N * OC), pre(N * OC), slope(N * OC), dpre(N * OC);
  for (auto _ : state) {
    if (fused) {
      atto::kernels::linear_gelu_forward(out.data(), slope.data(), inp.data(), w.data(), nullptr, N, C, OC);
      atto::kernels::gelu_erf_backward_slope(dpre.data(), dout.data(), slope.data(), N * OC, false);
    } else {
      atto::kernels::linear_forward(pre.data(), inp.data(), w.data(), nullptr, N, C, OC);
      atto::kernels::gelu_erf_forward(out.data(), pre.data(), N * OC);
      atto::kernels::gelu_erf_backward_ex(dpre.data(), dout.data(), pre.data(), N * OC, false);
    }
    benchmark::DoNotOptimize(out.data());
    benchmark::DoNotOptimize(dpre.data());
  }
  set_flops(state, 2.0 * N * C * OC);
}
BENCHMARK(BM_LinearGelu)
    ->ArgNames({"N", "C", "OC", "fused"})
    ->Args({512, 64, 256, 0})
    ->Args({512, 64, 256, 1})
    ->Args({1024, 384, 1536, 0})
    ->Args({1024, 384, 1536, 1})
    ->UseRealTime();

}  // namespace
