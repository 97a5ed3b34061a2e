// atto/base/memory.h: where large buffers come from (tensor storage, the kernels' scratch and
// packed operands). Header-only, so that the kernels, which link nothing of atto's, use it too.
#pragma once

#include <sys/mman.h>

#include <cstddef>
#include <cstdlib>

namespace atto {

// alloc_buffer(bytes) is 64-byte aligned (a cache line: an AVX-512 vector or an AMX tile row
// that straddles two lines costs two loads). From kHugeBytes up it is placed on a 2 MiB boundary
// and madvise'd MADV_HUGEPAGE, so that the kernel backs it with transparent huge pages where it
// gives them only on request (Debian's default, "madvise"): passes that walk down the rows of a
// large activation touch a new 4 KiB page per row, and a 2 MiB page covers 512 of them with one
// TLB entry (on (d)'s shapes, in-process against 4 KiB pages: 2-7% less time for the bf16 linear
// layers, GELU and LayerNorm, 7-10% for pack_dout). nullptr when out of memory; std::free it.
inline constexpr size_t kHugeBytes = size_t{4} << 20;

inline void* alloc_buffer(size_t bytes) {
  constexpr size_t kHugePage = size_t{2} << 20;
  if (bytes > (size_t{1} << 48)) return nullptr;  // 256 TiB: more than any machine maps; nothing wraps below
  bytes = (bytes + 63) / 64 * 64;
  if (bytes < kHugeBytes) return std::aligned_alloc(64, bytes);
  bytes = (bytes + kHugePage - 1) / kHugePage * kHugePage;
  void* p = std::aligned_alloc(kHugePage, bytes);
  // Advice only: where the kernel has no transparent huge pages it fails and changes nothing.
  if (p != nullptr) madvise(p, bytes, MADV_HUGEPAGE);
  return p;
}

}  // namespace atto
