// atto/kernels/prefetch.h: asking for rows ahead in passes that walk down a large activation
// (internal to src/kernels).
//
// Such passes read each row a slice at a time (up to 3 KiB of a linear layer's gradient, or one
// attention head's 256 bytes of a row of q, k, v, out and their gradients), a row's width apart:
// every row is a new page, and the hardware prefetchers, which follow a stream within a 4 KiB
// page, do not see the next row coming. A cold activation (the forward's, read back by the
// backward from memory) was read at a third of the memory's rate. The passes ask for the slice
// kPrefetchRows rows ahead (or, 16 rows at a time, the next 16) themselves. Cold data, one AMD
// Zen 5 core, the same bits: pack_dout on (d)'s four gradients a layer 1.70 against 2.53 ms (2 to
// 16 rows ahead within 4% of each other), pack_bf16's B[k][n] of its four inputs 0.51 against
// 0.60 ms, (d)'s bf16 attention (24 heads of 256 tokens) forward 1.20 against 1.32 ms and
// backward 2.52 against 2.84 with its packs, rows of q and rows of out, dq, dk, dv prefetched.
#pragma once

#include "kernels/isa.h"
#include <cstdint>

namespace ATTO_KERNELS_NS {

constexpr int64_t kPrefetchRows = 8;

// The cache lines of p[0, n) towards L1 (for writing: `write`). A hint: no bits change.
inline void prefetch_run(const float* p, int64_t n, bool write = false) {
  for (int64_t c = 0; c < n; c += 16) {  // 16 floats a 64-byte line
    if (write) {
      __builtin_prefetch(p + c, 1, 3);
    } else {
      __builtin_prefetch(p + c, 0, 3);
    }
  }
}

}  // namespace atto::kernels
