// atto/kernels/embedding.cpp: row gather and its deterministic scatter-add.
#include <omp.h>

#include <algorithm>
#include <cstring>

#include "kernels/kernels.h"
#include "kernels/parallel.h"

namespace ATTO_KERNELS_NS {

// out[n, :] = weight[ids[n], :]
void embedding_forward(float* out, const int32_t* ids, const float* weight, int64_t N, int64_t C, int64_t V) {
  const bool par = N > 1 && N * C >= (1 << 16);
  parallel_for(N, par, [&](int64_t n) {
    std::memcpy(out + n * C, weight + static_cast<int64_t>(ids[n]) * C, sizeof(float) * C);
  });
}

// dweight[ids[n], :] += dout[n, :]. Each dweight element receives its terms in order of n,
// whatever the split: threads own either column blocks (wide C) or ranges of vocabulary rows.
void embedding_backward(float* dweight, const float* dout, const int32_t* ids, int64_t N, int64_t C, int64_t V) {
  constexpr int64_t kCols = 64;
  const bool par = N * C >= (1 << 16);
  if (C >= 2 * kCols) {
    const int64_t nblocks = (C + kCols - 1) / kCols;
    parallel_for(nblocks, par, [&](int64_t blk) {
      const int64_t c0 = blk * kCols, c1 = std::min(C, c0 + kCols);
      for (int64_t n = 0; n < N; n++) {
        float* dw = dweight + static_cast<int64_t>(ids[n]) * C;
        const float* d = dout + n * C;
        for (int64_t c = c0; c < c1; c++) dw[c] += d[c];
      }
    });
    return;
  }
  // Narrow rows: each thread scans all ids and adds the rows of its vocabulary range. The
  // per-element order (n ascending) does not depend on the ranges, so neither does the result.
  const int64_t nblocks = par ? std::min<int64_t>(omp_get_max_threads(), V) : 1;
  const int64_t vb = (V + nblocks - 1) / nblocks;  // vocabulary rows per block
  parallel_for(nblocks, par, [&](int64_t blk) {
    const int64_t v0 = blk * vb, v1 = std::min(V, v0 + vb);
    for (int64_t n = 0; n < N; n++) {
      const int64_t id = ids[n];
      if (id < v0 || id >= v1) continue;
      float* dw = dweight + id * C;
      const float* d = dout + n * C;
      for (int64_t c = 0; c < C; c++) dw[c] += d[c];
    }
  });
}

}  // namespace atto::kernels
