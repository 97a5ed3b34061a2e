// atto/base/limits.h: numeric limits on what a user asks for that every entry point shares (the
// CLI, the C API, the server), so that one flag means the same range everywhere.
//
//   atto::check_threads(f.threads, "--threads");   // throws atto::Error outside [0, kMaxThreads]
#pragma once

#include <string_view>

#include "base/error.h"

namespace atto {

// Worker threads: 0 = all cores. More than this is never faster on any machine atto runs on, and
// each thread reserves its stack: thousands of them exhaust a memory limit before any work starts.
inline constexpr int kMaxThreads = 256;

inline void check_threads(long long n, std::string_view name) {
  ATTO_CHECK(n >= 0 && n <= kMaxThreads, "{} must be in [0, {}] (0 = all cores), got {}", name, kMaxThreads, n);
}

}  // namespace atto
