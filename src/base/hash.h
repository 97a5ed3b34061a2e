#pragma once
// FNV-1a, 64 bits: the one fingerprint atto compares (training data, prepared corpora, resolved
// configurations, ranks' weights). It tells accidental differences apart; it is no defence
// against an adversary.

#include <cstddef>
#include <cstdint>

namespace atto {

inline constexpr uint64_t kFnv1a64Offset = 1469598103934665603ull;  // 0xcbf29ce484222325

// Continues the hash `h` over n bytes (start with kFnv1a64Offset).
inline uint64_t fnv1a64(const void* data, size_t n, uint64_t h = kFnv1a64Offset) {
  const auto* p = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;  // 0x100000001b3
  return h;
}

}  // namespace atto
