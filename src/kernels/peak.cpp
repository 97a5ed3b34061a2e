// atto/kernels/peak.cpp: the fp32 FMA rate of the cores, the ceiling every GEMM is held to.
//
// `atto bench gemm` reports it beside the sgemm peak: model FLOPs utilisation is measured
// against the sgemm peak (what a large GEMM reaches), and this says how far that is from what
// the hardware issues at most.
#include <omp.h>

#include <chrono>
#include <stdexcept>
#include <vector>

#include "kernels/kernels.h"

namespace ATTO_KERNELS_NS {

namespace {

using Clock = std::chrono::steady_clock;

// Independent accumulators: enough FMA chains to cover the FMA latency on every unit.
constexpr int kChains = 12;
// FMAs per chain between two reads of the clock.
constexpr int64_t kRepeat = 4096;

// One register of the build's vector width. A 16-lane vector is two registers on AVX2 and four on
// ARM64: 12 chains of it would be more than the 16 AVX2 (32 NEON) registers, and the spills, not
// the FMA units, would set the rate (it measured 28 GFLOP/s against the 188 the sgemm reached).
#if defined(__AVX512F__)
typedef float vnative __attribute__((vector_size(64)));
#elif defined(__AVX__)
typedef float vnative __attribute__((vector_size(32)));
#else
typedef float vnative __attribute__((vector_size(16)));
#endif
constexpr int kLanes = static_cast<int>(sizeof(vnative) / sizeof(float));

volatile float g_sink;  // keeps the accumulators (and so the loop) alive
// Read at run time, so that the compiler cannot work the loop out in advance.
volatile float g_mul = 0.9999999f, g_add = 1e-7f;

}  // namespace

std::vector<double> fma_peak_gflops(double seconds) {
  if (!(seconds > 0.0)) throw std::invalid_argument("fma_peak_gflops: seconds must be > 0");
  const int nt = num_threads();
  std::vector<double> gflops(static_cast<size_t>(nt), 0.0);
#pragma omp parallel num_threads(nt)
  {
    vnative acc[kChains];
    for (int c = 0; c < kChains; c++) acc[c] = vnative{} + (1.0f + 1e-3f * static_cast<float>(c));
    const vnative mul = vnative{} + g_mul, add = vnative{} + g_add;  // stays near 1
#pragma omp barrier
    const auto t0 = Clock::now();
    int64_t rounds = 0;
    double elapsed = 0.0;
    do {
      for (int64_t r = 0; r < kRepeat; r++) {
#pragma GCC unroll 12
        for (int c = 0; c < kChains; c++) acc[c] = acc[c] * mul + add;  // contracted to one FMA
      }
      // Opaque to the optimiser: the chains are live and their values unknown.
      for (int c = 0; c < kChains; c++) asm volatile("" : "+m"(acc[c]));
      rounds++;
      elapsed = std::chrono::duration<double>(Clock::now() - t0).count();
    } while (elapsed < seconds);
    float sum = 0.0f;
    for (int c = 0; c < kChains; c++) sum += acc[c][0];
    g_sink = sum;
    const double flop = 2.0 * kLanes * kChains * static_cast<double>(kRepeat) * static_cast<double>(rounds);
    gflops[static_cast<size_t>(omp_get_thread_num())] = flop / elapsed / 1e9;
  }
  return gflops;
}

}  // namespace atto::kernels
