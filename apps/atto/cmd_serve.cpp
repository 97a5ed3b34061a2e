// atto serve: an OpenAI-compatible HTTP server for a trained GPT (docs/serve.md).
#include <atomic>
#include <csignal>
#include <fstream>

#include <fmt/format.h>

#include "base/error.h"
#include "commands.h"
#include "run/run_config.h"
#include "serve/server.h"

namespace atto::cli {

namespace {

// SIGTERM and SIGINT: stop accepting, finish the requests in flight, exit 0.
std::atomic<bool> g_stop{false};
extern "C" void on_stop_signal(int) { g_stop = true; }

struct ServeFlags {
  serve::ServeOptions opt;
  std::string api_key_file;
  std::string precision = "fp32";
};

int run_serve(ServeFlags f) {
  if (!f.api_key_file.empty()) {
    std::ifstream in(f.api_key_file);
    if (!in) throw UsageError(fmt::format("--api-key-file {}: cannot read it", f.api_key_file));
    std::getline(in, f.opt.api_key);
    if (f.opt.api_key.empty())
      throw UsageError(fmt::format("--api-key-file {}: the first line is empty", f.api_key_file));
  }
  if (f.opt.port < 0 || f.opt.port > 65535)
    throw UsageError(fmt::format("--port must be in [0, 65535], got {}", f.opt.port));
  if (f.opt.slots < 1) throw UsageError(fmt::format("--slots must be at least 1, got {}", f.opt.slots));
  if (f.opt.max_tokens_cap < 1) throw UsageError("--max-tokens-cap must be at least 1");
  if (f.opt.timeout_s < 1) throw UsageError("--timeout must be at least 1 second");
  f.opt.precision = parse_precision(f.precision);  // the engine checks that the CPU runs it
  g_stop = false;
  auto prev_term = std::signal(SIGTERM, on_stop_signal);
  auto prev_int = std::signal(SIGINT, on_stop_signal);
  const int rc = serve::run_server(f.opt, g_stop, [&](const std::string& url) {
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
  app->add_option("--api-key", o.api_key, "Require 'Authorization: Bearer KEY' on every route but /health");
  app->add_option("--api-key-file", f->api_key_file, "Read the API key from the first line of this file");
  app->add_option("--slots", o.slots, "Requests decoded together (continuous batching); more wait in the queue")
      ->capture_default_str();
  app->add_option("--max-tokens-cap", o.max_tokens_cap, "The most tokens a request may ask for per choice")
      ->capture_default_str();
  app->add_option("--timeout", o.timeout_s, "Socket read/write timeout, seconds")->capture_default_str();
  app->add_option("--threads", o.threads,
                  "The model's kernel threads; 0 = all cores but one (left for the HTTP threads)")
      ->capture_default_str();
  app->add_option("--precision", f->precision,
                  "fp32, or bf16: the GPT's matrix products on bf16 weights (AMX or AVX512_BF16), fp32 sums")
      ->capture_default_str();
  app->add_option("--queue", o.queue_max, "Requests that may wait for the model; more get 503")->capture_default_str();
  app->add_option("--body-limit", o.body_limit, "Largest request body in bytes; larger get 413")->capture_default_str();
  return {app, [f] { return run_serve(*f); }};
}

}  // namespace atto::cli
