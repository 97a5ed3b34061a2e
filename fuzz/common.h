// Shared pieces of atto's libFuzzer targets (fuzz/fuzz_<reader>.cpp; docs/robustness.md).
//
// A target feeds the fuzzer's bytes to one reader. The reader may reject them: atto::Error (its
// "what is wrong, where" errors) and, for the JSON readers, nlohmann's parse errors are the
// expected outcome and are caught here. Anything else is a finding: a crash, an AddressSanitizer
// or UndefinedBehaviorSanitizer report, a leak, a timeout, memory past libFuzzer's -rss_limit_mb
// or -malloc_limit_mb, or any other exception (std::out_of_range, std::bad_alloc, ...: a check
// that is missing), which libFuzzer reports as a crash.
#pragma once

#include <nlohmann/json.hpp>

#include <unistd.h>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>

#include "base/error.h"

namespace atto::fuzz {

template <class F>
void expect_errors(F&& f) {
  try {
    f();
  } catch (const atto::Error&) {
  } catch (const nlohmann::json::exception&) {
  }
}

inline std::string bytes(const uint8_t* data, size_t size) { return {reinterpret_cast<const char*>(data), size}; }

// A file holding `contents` for readers that take a path, in /dev/shm when it exists (one per
// process and name, rewritten each run).
inline std::string temp_file(const std::string& contents, const char* name) {
  static const std::string dir = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  const std::string path = dir + "/atto-fuzz-" + std::to_string(getpid()) + "-" + name;
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (f == nullptr) __builtin_trap();
  if (!contents.empty() && std::fwrite(contents.data(), 1, contents.size(), f) != contents.size()) __builtin_trap();
  std::fclose(f);
  return path;
}

// The input cut at its first NUL byte into two parts (readers of two files).
inline std::pair<std::string, std::string> split_at_nul(const std::string& s) {
  const size_t at = s.find('\0');
  if (at == std::string::npos) return {s, ""};
  return {s.substr(0, at), s.substr(at + 1)};
}

}  // namespace atto::fuzz
