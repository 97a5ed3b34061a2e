// oneDNN's bf16 matmul, the reference that `atto bench gemm --precision bf16 --shape M,N,K` is
// compared with (bench/onednn/run.sh; Debian's libdnnl-dev, a benchmark-only dependency that atto
// does not link). C[M, N] (f32) = A[M, K] B[N, K]^T with A and B in bf16: B given as atto's linear
// layers hold it ([N, K] row-major) and reordered once, before timing, into the layout oneDNN
// picks (its best case: atto packs B and rounds A on every call). Prints one JSON line.
//
//   g++ -O2 -std=c++17 bench/onednn/matmul_bf16.cpp -ldnnl -o /tmp/onednn_matmul_bf16
//   OMP_NUM_THREADS=2 /tmp/onednn_matmul_bf16 4096 768 3072 [timed calls]
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <vector>

#include "dnnl.hpp"

namespace {

using dnnl::memory;
using tag = memory::format_tag;
using dt = memory::data_type;

// Rounds f32 to bf16 (nearest even), as the bf16 units read their inputs.
uint16_t to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  u += 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>(u >> 16);
}

void fill(memory& m, size_t n, uint32_t seed) {
  std::mt19937 gen(seed);
  std::normal_distribution<float> dist;
  auto* p = static_cast<uint16_t*>(m.get_data_handle());
  for (size_t i = 0; i < n; ++i) p[i] = to_bf16(dist(gen));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 4) {
    std::fprintf(stderr, "usage: %s M N K [timed calls]\n", argv[0]);
    return 2;
  }
  const memory::dim M = std::atol(argv[1]), N = std::atol(argv[2]), K = std::atol(argv[3]);
  const int steps = argc > 4 ? std::atoi(argv[4]) : 10;
  if (M <= 0 || N <= 0 || K <= 0 || steps <= 0) {
    std::fprintf(stderr, "M, N, K and the calls must be positive\n");
    return 2;
  }
  dnnl::engine eng(dnnl::engine::kind::cpu, 0);
  dnnl::stream s(eng);
  const memory::desc a_md({M, K}, dt::bf16, tag::ab), c_md({M, N}, dt::f32, tag::ab);
  const memory::desc b_given({K, N}, dt::bf16, tag::ba), b_any({K, N}, dt::bf16, tag::any);
  const dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a_md, b_any, c_md), eng);
  memory a(a_md, eng), b0(b_given, eng), b(pd.weights_desc(), eng), c(c_md, eng);
  fill(a, static_cast<size_t>(M * K), 1);
  fill(b0, static_cast<size_t>(N * K), 2);
  dnnl::reorder(b0, b).execute(s, b0, b);
  dnnl::matmul mm(pd);
  std::vector<double> ms;
  for (int i = 0; i < 2 + steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    mm.execute(s, {{DNNL_ARG_SRC, a}, {DNNL_ARG_WEIGHTS, b}, {DNNL_ARG_DST, c}});
    s.wait();
    const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    if (i >= 2) ms.push_back(t);
  }
  std::sort(ms.begin(), ms.end());
  const double flop = 2.0 * static_cast<double>(M) * static_cast<double>(N) * static_cast<double>(K);
  std::printf("{\"m\": %ld, \"n\": %ld, \"k\": %ld, \"median_gflops\": %.2f, \"best_gflops\": %.2f, \"impl\": \"%s\"}\n",
              static_cast<long>(M), static_cast<long>(N), static_cast<long>(K), flop / (ms[ms.size() / 2] * 1e6),
              flop / (ms.front() * 1e6), pd.impl_info_str());
  return 0;
}
