// atto serve: an OpenAI-compatible HTTP server for a trained GPT (docs/serve.md).
#include <atomic>
#include <csignal>

#include <fmt/format.h>

#include "base/error.h"
#include "base/files.h"
#include "base/json.h"
#include "commands.h"
#include "run/run_config.h"
#include "serve/server.h"

namespace atto::cli {

namespace {

// SIGTERM and SIGINT: stop accepting, finish the requests in flight, exit 0.
std::atomic<bool> g_serve_stop{false};
extern "C" void on_serve_stop_signal(int) { g_serve_stop = true; }

struct ServeFlags {
  serve::ServeOptions opt;
  std::string api_key_file;
  std::string precision = "fp32";
  bool api_key_given = false;  // --api-key "" would serve without a key: refused
};

// The key: the first line of the file (a regular file of at most 64 KiB, read by files::read),
// without its line end; refused when empty.
std::string read_key_file(const std::string& path) {
  const std::string text = files::read(path, files::kSecretCap, "--api-key-file");
  std::string key = text.substr(0, text.find('\n'));
  if (!key.empty() && key.back() == '\r') key.pop_back();
  if (key.empty())
    throw UsageError(text.empty() ? fmt::format("--api-key-file {}: the file is empty", path)
                                  : fmt::format("--api-key-file {}: the first line is empty", path));
  return key;
}

int run_serve(ServeFlags f) {
  if (f.api_key_given && !f.api_key_file.empty()) throw UsageError("--api-key and --api-key-file: give one of them");
  if (f.api_key_given && f.opt.api_key.empty())
    throw UsageError("--api-key is empty: give a key, or leave out --api-key to serve without one");
  if (!f.api_key_file.empty()) f.opt.api_key = read_key_file(f.api_key_file);
  try {
    serve::check_options(f.opt);  // the ranges of every option, before the model loads
  } catch (const Error& e) {
    throw UsageError(e.what());
  }
  f.opt.precision = parse_precision(f.precision);  // the engine checks that the CPU runs it
  g_serve_stop = false;
  auto prev_term = std::signal(SIGTERM, on_serve_stop_signal);
  auto prev_int = std::signal(SIGINT, on_serve_stop_signal);
  const int rc = serve::run_server(f.opt, g_serve_stop, [&](const std::string& url) {
    const bool bf16 = f.opt.precision == kernels::Precision::BF16;
    fmt::print("atto serve: {} on {} (OpenAI API at {}/v1){}{}\n", f.opt.model, url, url,
               f.opt.api_key.empty() ? "" : "; API key required",
               bf16 ? "; " + kernels::precision_label(kernels::Precision::BF16) : "");
    std::fflush(stdout);
  });
  std::signal(SIGTERM, prev_term);
  std::signal(SIGINT, prev_int);
  return rc;
}

}  // namespace

Command add_serve(CLI::App& root) {
  CLI::App* app = root.add_subcommand("serve", "Serve a trained GPT over HTTP with the OpenAI API");
  auto f = std::make_shared<ServeFlags>();
  serve::ServeOptions& o = f->opt;
  app->add_option("--model", o.model, "Run directory or GGUF file of a trained GPT")->required();
  app->add_option("--host", o.host, "Address to listen on (loopback by default)")->capture_default_str();
  app->add_option("--port", o.port, "Port; 0 = any free port (printed)")->capture_default_str();
  app->add_option("--api-key", o.api_key, "Require 'Authorization: Bearer KEY' on every route but /health")
      ->each([f](const std::string&) { f->api_key_given = true; });
  app->add_option("--api-key-file", f->api_key_file,
                  "Read the API key from the first line of this file (at most 64 KiB)");
  app->add_option("--slots", o.slots, "Requests decoded together (continuous batching), 1-256; more wait in the queue")
      ->capture_default_str();
  app->add_option("--max-tokens-cap", o.max_tokens_cap, "The most tokens a request may ask for per choice")
      ->capture_default_str();
  app->add_option("--timeout", o.timeout_s, "Seconds a write may wait for a client that does not read; 1-3600")
      ->capture_default_str();
  app->add_option("--threads", o.threads,
                  "The model's kernel threads; 0 = all cores but one (left for the HTTP threads)")
      ->capture_default_str();
  app->add_option("--precision", f->precision,
                  "fp32, or bf16: the GPT's matrix products on bf16 weights (AMX or AVX512_BF16), fp32 sums")
      ->capture_default_str();
  app->add_option("--queue", o.queue_max, "Requests that may wait for the model, 0-1024; more get 503")
      ->capture_default_str();
  app->add_option("--body-limit", o.body_limit, "Largest request body in bytes (1 KiB-32 MiB); larger get 413")
      ->capture_default_str();
  return {app, [f] { return run_serve(*f); }};
}

}  // namespace atto::cli
