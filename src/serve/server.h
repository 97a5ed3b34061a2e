// atto/serve/server.h: `atto serve`, an OpenAI-compatible HTTP server for a GPT (docs/serve.md).
//
//   serve::ServeOptions o;
//   o.model = "runs/names";                 // a run directory or a GGUF file
//   std::atomic<bool> stop{false};           // SIGTERM sets it: in-flight requests finish
//   serve::run_server(o, stop, [](const std::string& url) { fmt::print("listening on {}\n", url); });
//
// Routes: GET /health (200 when the model is loaded, 503 before), GET /v1/models,
// POST /v1/completions, POST /v1/chat/completions (both with server-sent-event streaming),
// GET /metrics (Prometheus text). Every route but /health needs the API key when one is set.
// Up to `slots` requests are decoded together by continuous batching (serve/engine.h); a
// request's tokens depend only on its own prompt, parameters and seed (the same as `atto
// sample`), never on what else runs. Requests waiting for a slot beyond queue_max get 503.
// Connections are read by an event loop, never by a waiting thread (serve/front.h): a slow or
// idle client cannot hold the server, and /health has threads of its own.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "base/limits.h"  // kMaxThreads: one cap for every command
#include "kernels/kernels.h"

namespace atto::serve {

struct ServeOptions {
  std::string model;
  std::string host = "127.0.0.1";
  int port = 8080;                // 0: any free port (the URL passed to on_ready says which)
  std::string api_key;            // empty: no key
  int slots = 8;                  // requests decoded together (continuous batching)
  int64_t max_tokens_cap = 4096;  // the most tokens one choice may ask for
  int timeout_s = 600;            // a write to a client that does not read its answer
  int threads = 0;                // the model's kernel threads (0 = all cores but one, for HTTP)
  kernels::Precision precision = kernels::Precision::F32;  // bf16: the GPT's products on bf16 weights
  int64_t queue_max = 64;                                  // requests waiting for the model; beyond: 503
  size_t body_limit = 1 << 20;                             // bytes of a request body; beyond: 413
  int request_deadline_s = 15;  // a request's line, headers and body must all arrive within; else 408
  int max_connections = 512;    // open connections (at least slots + queue + 64); beyond: 503
};

// The allowed ranges of the options (docs/serve.md, "Limits"), in one place: the CLI and run_server
// call it. atto::Error naming the flag and its range.
inline constexpr int kMaxSlots = 256;
inline constexpr int64_t kMaxQueue = 1024;
inline constexpr int64_t kMaxTokensCap = 65536;
inline constexpr size_t kMaxBodyLimit = size_t{32} << 20;
void check_options(const ServeOptions& opt);

// Checks the options, loads the model and serves until `stop` becomes true; then stops
// accepting, lets in-flight requests finish, and returns 0. Throws atto::Error when an option is
// out of range, the model does not load or the address cannot be bound.
int run_server(const ServeOptions& opt, const std::atomic<bool>& stop,
               const std::function<void(const std::string& url)>& on_ready);

}  // namespace atto::serve
