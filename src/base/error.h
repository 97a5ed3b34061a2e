// atto/base/error.h: the one error type of the project (below every layer: tokenize and metrics
// use it without tensors).
//
//   ATTO_CHECK(d_model % n_heads == 0,
//              "d_model ({}) must be divisible by n_heads ({})", d_model, n_heads);
//
// Every check on user input throws atto::Error with a message that names the input
// (file, flag, tensor, shape) and, where there is one, what to do about it. The CLI catches
// it, prints "atto: error: <message>" and exits 1. Nothing here is compiled out in release
// builds: these are checks on inputs, not assertions on internal state.
#pragma once

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <stdexcept>
#include <string>

namespace atto {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& msg) : std::runtime_error(msg) {}
};

// Usage errors (bad flags, bad combinations of options): the CLI exits 2 for these.
class UsageError : public Error {
 public:
  explicit UsageError(const std::string& msg) : Error(msg) {}
};

template <typename... Args>
[[noreturn]] void fail(fmt::format_string<Args...> f, Args&&... args) {
  throw Error(fmt::format(f, std::forward<Args>(args)...));
}

}  // namespace atto

#define ATTO_CHECK(cond, ...)               \
  do {                                      \
    if (!(cond)) ::atto::fail(__VA_ARGS__); \
  } while (0)
