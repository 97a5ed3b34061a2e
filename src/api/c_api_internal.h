// atto/api/c_api_internal.h: what the C API's source files share (c_api.cpp, c_api_weights.cpp):
// the handles' definitions and `guarded`, which runs an entry point's body, turning exceptions
// into a status and the thread's last-error message: nothing is thrown across the C boundary.
#pragma once

#include <fmt/format.h>

#include <new>
#include <optional>
#include <string>
#include <vector>

#include "atto/atto.h"
#include "base/error.h"
#include "run/run_dir.h"

// Loaded once, never changed afterwards: contexts on other threads read it at the same time.
struct atto_model {
  atto::Task task = atto::Task::Gpt;
  std::optional<atto::LoadedModel> gpt;
  std::optional<atto::LoadedSeq2Seq> s2s;
};

struct atto_context {
  const atto_model* model = nullptr;
  int32_t threads = 0;
};

namespace atto::capi {

// The message of the thread's last failed call (atto_last_error).
inline thread_local std::string g_last_error;

// A failure with a status of its own (the other errors map by type).
struct StatusError : Error {
  StatusError(atto_status s, const std::string& msg) : Error(msg), status(s) {}
  atto_status status;
};

[[noreturn]] inline void fail_with(atto_status s, const std::string& msg) { throw StatusError(s, msg); }

template <typename F>
atto_status guarded(F&& body) {
  try {
    body();
    return ATTO_OK;
  } catch (const StatusError& e) {
    g_last_error = e.what();
    return e.status;
  } catch (const UsageError& e) {
    g_last_error = e.what();
    return ATTO_ERR_INVALID_ARGUMENT;
  } catch (const Error& e) {
    g_last_error = e.what();
    return ATTO_ERR_BAD_INPUT;
  } catch (const std::bad_alloc&) {
    g_last_error = "out of memory";
    return ATTO_ERR_INTERNAL;
  } catch (const std::exception& e) {
    g_last_error = e.what();
    return ATTO_ERR_INTERNAL;
  } catch (...) {
    g_last_error = "unknown error";
    return ATTO_ERR_INTERNAL;
  }
}

template <typename T>
T& need(T* p, const char* what) {
  if (!p) fail_with(ATTO_ERR_INVALID_ARGUMENT, fmt::format("{} is NULL", what));
  return *p;
}

inline const char* need_str(const char* s, const char* what) {
  if (!s) fail_with(ATTO_ERR_INVALID_ARGUMENT, fmt::format("{} is NULL", what));
  return s;
}

}  // namespace atto::capi
