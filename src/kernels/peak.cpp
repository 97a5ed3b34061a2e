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
#include "kernels/simd.h"

namespace ATTO_KERNELS_NS {

namespace {

using Clock = std::chrono::steady_clock;

// Independent accumulators: enough FMA chains to cover the FMA latency on every unit.
constexpr int kChains = 12;
// FMAs per chain between two reads of the clock.
constexpr int64_t kRepeat = 4096;

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
    using simd::vf16;
    vf16 acc[kChains];
    for (int c = 0; c < kChains; c++) acc[c] = simd::splat(1.0f + 1e-3f * static_cast<float>(c));
    const vf16 mul = simd::splat(g_mul), add = simd::splat(g_add);  // stays near 1
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
    const double flop = 2.0 * 16.0 * kChains * static_cast<double>(kRepeat) * static_cast<double>(rounds);
    gflops[static_cast<size_t>(omp_get_thread_num())] = flop / elapsed / 1e9;
  }
  return gflops;
}

}  // namespace atto::kernels
