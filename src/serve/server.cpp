#include "serve/server.h"

#include <httplib.h>

#include <sys/resource.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <semaphore>
#include <thread>

#include <fmt/format.h>

#include "base/error.h"
#include "base/json.h"
#include "serve/engine.h"
#include "serve/front.h"
#include "tokenize/utf8.h"

namespace atto::serve {

namespace {

using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct Metrics {
  std::atomic<int64_t> requests{0}, errors{0}, tokens_in{0}, tokens_out{0}, waiting{0};
  std::atomic<int64_t> ttft_count{0}, ttft_us{0};
  // Prometheus text; a GPT's queue, batch and token counts come from its engine.
  std::string text(const Engine* e) const {
    return fmt::format(
        "# TYPE atto_requests_total counter\natto_requests_total {}\n"
        "# TYPE atto_request_errors_total counter\natto_request_errors_total {}\n"
        "# TYPE atto_requests_cancelled_total counter\natto_requests_cancelled_total {}\n"
        "# TYPE atto_prompt_tokens_total counter\natto_prompt_tokens_total {}\n"
        "# TYPE atto_generated_tokens_total counter\natto_generated_tokens_total {}\n"
        "# TYPE atto_queue_length gauge\natto_queue_length {}\n"
        "# TYPE atto_requests_running gauge\natto_requests_running {}\n"
        "# TYPE atto_decode_steps_total counter\natto_decode_steps_total {}\n"
        "# TYPE atto_decode_rows_total counter\natto_decode_rows_total {}\n"
        "# TYPE atto_time_to_first_token_seconds summary\natto_time_to_first_token_seconds_count {}\n"
        "atto_time_to_first_token_seconds_sum {:.6f}\n",
        requests.load(), errors.load(), e ? e->cancelled() : 0, tokens_in.load(),
        e ? e->generated() : tokens_out.load(), e ? e->waiting() : waiting.load(), e ? e->running() : 0,
        e ? e->decode_steps() : 0, e ? e->decode_rows() : 0, ttft_count.load(),
        static_cast<double>(ttft_us.load()) / 1e6);
  }
};

struct State {
  const ServeOptions& opt;
  std::unique_ptr<Engine> engine;          // a GPT
  std::unique_ptr<Translator> translator;  // or a seq2seq model
  std::atomic<bool> ready{false};
  Metrics metrics;
  Limits limits;
  // Bodies parsed at once: a parsed body takes up to ~30 times its bytes (a 1 MiB body of
  // empty objects: ~30 MiB), and up to slots + queue + 4 threads may hold one.
  std::counting_semaphore<4> parsing{4};
};

// JSON text; bytes that are not UTF-8 (a byte-level BPE token may be part of a character, and a
// model may sample bytes that never make one) become U+FFFD instead of an exception.
std::string dump(const json& j) { return j.dump(-1, ' ', false, json::error_handler_t::replace); }

void send_json(httplib::Response& res, int status, const json& j) {
  res.status = status;
  res.set_content(dump(j), "application/json");
}

void send_error(State& s, httplib::Response& res, const RequestError& e) {
  s.metrics.errors++;
  send_json(res, e.status, error_body(e.status, e.what(), e.param, e.code));
}

// The key compared in time that does not depend on where the first difference is.
bool authorized(const State& s, const httplib::Request& req) {
  if (s.opt.api_key.empty()) return true;
  const std::string got = req.get_header_value("Authorization"), want = "Bearer " + s.opt.api_key;
  unsigned char diff = got.size() == want.size() ? 0 : 1;
  for (size_t i = 0; i < want.size(); ++i) diff |= static_cast<unsigned char>(want[i] ^ (i < got.size() ? got[i] : 0));
  return diff == 0;
}

// f(the parsed body), at most 4 at once (State::parsing); the body's JSON is freed before the
// request waits for the model. A body that does not parse (syntax, nesting deeper than 64) is 400.
template <class F>
auto with_body(State& s, const httplib::Request& req, F&& f) {
  s.parsing.acquire();
  struct Release {
    State& s;
    ~Release() { s.parsing.release(); }
  } release{s};
  json body;
  try {
    body = ::atto::json_util::parse(req.body, "the request body");
  } catch (const Error& e) {
    throw RequestError(400, e.what(), "", "invalid_json");
  }
  return f(body);
}

json logprobs_json(const std::vector<TokenLogprob>& lps, bool chat) {
  if (chat) {
    json content = json::array();
    for (const TokenLogprob& t : lps) {
      json top = json::array();
      for (const auto& [tok, lp] : t.top) top.push_back({{"token", tok}, {"logprob", lp}});
      content.push_back({{"token", t.token}, {"logprob", t.logprob}, {"top_logprobs", top}});
    }
    return {{"content", content}};
  }
  json tokens = json::array(), values = json::array(), tops = json::array(), offsets = json::array();
  for (const TokenLogprob& t : lps) {
    tokens.push_back(t.token);
    values.push_back(t.logprob);
    json top = json::object();
    for (const auto& [tok, lp] : t.top) top[tok] = lp;
    tops.push_back(top);
    offsets.push_back(t.text_offset);
  }
  return {{"tokens", tokens}, {"token_logprobs", values}, {"top_logprobs", tops}, {"text_offset", offsets}};
}

json choice_json(const Completion& c, int64_t index, const Choice& ch, const std::string& prompt) {
  const char* finish = ch.stopped ? "stop" : "length";
  json lp = c.logprobs >= 0 ? logprobs_json(ch.logprobs, c.chat) : json();
  if (c.chat)
    return {{"index", index},
            {"message", {{"role", "assistant"}, {"content", ch.text}}},
            {"logprobs", lp},
            {"finish_reason", finish}};
  if (c.echo && lp.is_object())
    for (auto& o : lp["text_offset"]) o = o.get<int64_t>() + static_cast<int64_t>(utf8::count(prompt));
  return {{"index", index}, {"text", c.echo ? prompt + ch.text : ch.text}, {"logprobs", lp}, {"finish_reason", finish}};
}

std::string new_id(const char* prefix) {
  static std::atomic<uint64_t> next{1};
  return fmt::format("{}-{}", prefix, next++);
}

uint64_t seed_of(const Completion& c) {
  if (c.seed) return *c.seed;
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

// One SSE event.
bool sse(httplib::DataSink& sink, const json& j) {
  const std::string s = "data: " + dump(j) + "\n\n";
  return sink.write(s.data(), s.size());
}

json chunk_json(const Completion& c, const std::string& id, int64_t created, const std::string& model, int64_t index,
                const std::string& piece, const TokenLogprob* lp, const char* finish) {
  json choice = {{"index", index},
                 {"logprobs", lp ? logprobs_json({*lp}, c.chat) : json()},
                 {"finish_reason", finish ? json(finish) : json()}};
  if (c.chat) {
    choice["delta"] = finish ? json::object() : json{{"content", piece}};
  } else {
    choice["text"] = piece;
  }
  return {{"id", id},
          {"object", c.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", created},
          {"model", model},
          {"choices", json::array({choice})}};
}

// A waiting slot for the model: 503 when too many requests already wait.
struct QueueTicket {
  explicit QueueTicket(State& s) : s_(s) {
    if (s_.metrics.waiting.fetch_add(1) >= s_.opt.queue_max) {
      s_.metrics.waiting--;
      throw RequestError(503, "the server is busy: too many requests are waiting; retry later", "", "server_busy");
    }
  }
  ~QueueTicket() { s_.metrics.waiting--; }
  State& s_;
};

void stream_completion(State& s, httplib::Response& res, Completion c, std::vector<PreparedPrompt> prompts) {
  const std::string id = new_id(c.chat ? "chatcmpl" : "cmpl");
  const auto created = static_cast<int64_t>(std::time(nullptr));
  res.set_chunked_content_provider("text/event-stream", [&s, c, prompts, id, created](size_t, httplib::DataSink& sink) {
    const std::string& model = s.engine->id();
    const auto t0 = Clock::now();
    bool first = true, alive = true;
    int64_t completion_tokens = 0, prompt_tokens = 0;
    for (size_t p = 0; p < prompts.size() && alive; ++p) {
      const int64_t base = static_cast<int64_t>(p) * c.n;
      if (c.chat)
        for (int64_t i = 0; i < c.n; ++i) {
          json role = chunk_json(c, id, created, model, base + i, "", nullptr, nullptr);
          role["choices"][0]["delta"] = {{"role", "assistant"}, {"content", ""}};
          alive = alive && sse(sink, role);
        }
      const auto choices = s.engine->generate(
          prompts[p], c, seed_of(c), [&](int64_t i, const std::string& piece, const TokenLogprob* lp) {
            if (first && !piece.empty()) {
              first = false;
              s.metrics.ttft_count++;
              s.metrics.ttft_us += std::chrono::duration_cast<std::chrono::microseconds>(Clock::now() - t0).count();
            }
            if (piece.empty() && !lp) return alive;
            alive = alive && sse(sink, chunk_json(c, id, created, model, base + i, piece, lp, nullptr));
            return alive;
          });
      prompt_tokens += prompts[p].tokens;
      for (size_t i = 0; i < choices.size() && alive; ++i) {
        completion_tokens += choices[i].tokens;
        const char* finish = choices[i].stopped ? "stop" : "length";
        alive = sse(sink, chunk_json(c, id, created, model, base + static_cast<int64_t>(i), "", nullptr, finish));
      }
    }
    s.metrics.tokens_in += prompt_tokens;
    s.metrics.tokens_out += completion_tokens;
    if (alive && c.include_usage)
      alive = sse(sink, {{"id", id},
                         {"object", c.chat ? "chat.completion.chunk" : "text_completion"},
                         {"created", created},
                         {"model", model},
                         {"choices", json::array()},
                         {"usage",
                          {{"prompt_tokens", prompt_tokens},
                           {"completion_tokens", completion_tokens},
                           {"total_tokens", prompt_tokens + completion_tokens}}}});
    if (alive) sink.write("data: [DONE]\n\n", 14);
    sink.done();
    return true;
  });
}

// The GPT engine; a seq2seq model's server answers its routes 400.
Engine& gpt_engine(State& s) {
  if (!s.engine)
    throw RequestError(400, "this model is an encoder-decoder (seq2seq): use POST /v1/translations", "", "wrong_route");
  return *s.engine;
}

void handle_completion(State& s, const httplib::Request& req, httplib::Response& res, bool chat) {
  gpt_engine(s);
  const Completion c = with_body(s, req, [&](const json& body) { return parse_completion(body, s.limits, chat); });
  s.engine->check_sampler(c.sampler);
  std::vector<PreparedPrompt> prompts;
  for (const std::string& p : c.prompts) prompts.push_back(s.engine->prepare(p, chat ? "messages" : "prompt"));
  for (const std::vector<int32_t>& ids : c.prompt_ids) prompts.push_back(s.engine->prepare_ids(ids));
  if (c.stream) return stream_completion(s, res, c, std::move(prompts));
  json choices = json::array();
  int64_t completion_tokens = 0, prompt_tokens = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto out = s.engine->generate(prompts[p], c, seed_of(c),
                                        [](int64_t, const std::string&, const TokenLogprob*) { return true; });
    prompt_tokens += prompts[p].tokens;
    for (size_t i = 0; i < out.size(); ++i) {
      choices.push_back(choice_json(c, static_cast<int64_t>(p) * c.n + static_cast<int64_t>(i), out[i], prompts[p].text));
      completion_tokens += out[i].tokens;
    }
  }
  s.metrics.tokens_in += prompt_tokens;
  s.metrics.tokens_out += completion_tokens;
  send_json(res, 200,
            {{"id", new_id(chat ? "chatcmpl" : "cmpl")},
             {"object", chat ? "chat.completion" : "text_completion"},
             {"created", static_cast<int64_t>(std::time(nullptr))},
             {"model", s.engine->id()},
             {"choices", choices},
             {"usage",
              {{"prompt_tokens", prompt_tokens},
               {"completion_tokens", completion_tokens},
               {"total_tokens", prompt_tokens + completion_tokens}}}});
}

void handle_translation(State& s, const httplib::Request& req, httplib::Response& res) {
  if (!s.translator)
    throw RequestError(400, "this model is a GPT: use /v1/completions or /v1/chat/completions", "", "wrong_route");
  const Translation t = with_body(s, req, [&](const json& body) { return parse_translation(body, s.limits); });
  QueueTicket ticket(s);
  const auto out = s.translator->translate(t.sources, t.decode);
  json data = json::array();
  for (size_t i = 0; i < out.size(); ++i) {
    json hyps = json::array();
    for (const auto& [text, score] : out[i]) hyps.push_back({{"text", text}, {"score", score}});
    data.push_back({{"index", i}, {"translations", hyps}});
  }
  send_json(res, 200, {{"object", "list"}, {"model", s.translator->id()}, {"data", data}});
}

// Wraps a route: the API key, readiness, request errors and anything else as JSON errors.
httplib::Server::Handler guarded(State& s, std::function<void(const httplib::Request&, httplib::Response&)> f) {
  return [&s, f](const httplib::Request& req, httplib::Response& res) {
    s.metrics.requests++;
    try {
      if (!authorized(s, req))
        throw RequestError(401, "missing or wrong API key: send 'Authorization: Bearer KEY'", "", "invalid_api_key");
      if (!s.ready) throw RequestError(503, "the model is still loading", "", "loading");
      f(req, res);
    } catch (const RequestError& e) {
      send_error(s, res, e);
    } catch (const std::exception& e) {
      send_error(s, res, RequestError(500, e.what(), "", "internal_error"));
    }
  };
}

// llama.cpp server's token routes (GPT models).
void add_token_routes(httplib::Server& srv, State& s) {
  srv.Post("/tokenize", guarded(s, [&s](const httplib::Request& q, httplib::Response& r) {
             const TokenizeRequest t = with_body(s, q, [](const json& body) { return parse_tokenize(body); });
             send_json(r, 200, gpt_engine(s).tokenize(t));
           }));
  srv.Post("/detokenize", guarded(s, [&s](const httplib::Request& q, httplib::Response& r) {
             const std::vector<int32_t> ids = with_body(s, q, [](const json& body) { return parse_detokenize(body); });
             send_json(r, 200, {{"content", gpt_engine(s).detokenize(ids)}});
           }));
}

void add_routes(httplib::Server& srv, State& s) {
  srv.Get("/health", [&s](const httplib::Request&, httplib::Response& res) {
    send_json(res, s.ready ? 200 : 503, {{"status", s.ready ? "ok" : "loading"}});
  });
  srv.Get(
      "/v1/models", guarded(s, [&s](const httplib::Request&, httplib::Response& res) {
        send_json(
            res, 200,
            {{"object", "list"},
             {"data", json::array({{{"id", s.limits.model_id},
                                    {"object", "model"},
                                    {"created", 0},
                                    {"owned_by", "atto"},
                                    {"context_length", s.engine ? s.engine->context() : s.translator->context()}}})}});
      }));
  srv.Post("/v1/completions",
           guarded(s, [&s](const httplib::Request& q, httplib::Response& r) { handle_completion(s, q, r, false); }));
  srv.Post("/v1/chat/completions",
           guarded(s, [&s](const httplib::Request& q, httplib::Response& r) { handle_completion(s, q, r, true); }));
  srv.Post("/v1/translations",
           guarded(s, [&s](const httplib::Request& q, httplib::Response& r) { handle_translation(s, q, r); }));
  add_token_routes(srv, s);
  srv.Get("/metrics", guarded(s, [&s](const httplib::Request&, httplib::Response& res) {
            res.set_content(s.metrics.text(s.engine.get()), "text/plain; version=0.0.4");
          }));
  // httplib's own errors (404 route, 413 body) as OpenAI JSON errors.
  // (httplib reads at most 8192 bytes of a form-urlencoded body, curl -d's default type.)
  srv.set_error_handler([&s](const httplib::Request& req, httplib::Response& res) {
    if (!res.body.empty()) return;
    if (res.status == 404) {  // a route of this server asked with another method: 405 with Allow
      static const std::pair<const char*, const char*> kRoutes[] = {
          {"/health", "GET"},          {"/v1/models", "GET"},         {"/metrics", "GET"},
          {"/v1/completions", "POST"}, {"/v1/chat/completions", "POST"}, {"/v1/translations", "POST"},
          {"/tokenize", "POST"},       {"/detokenize", "POST"}};
      for (const auto& [path, method] : kRoutes)
        if (req.path == path) {
          res.status = 405;
          res.set_header("Allow", method);
          s.metrics.errors++;
          send_json(res, 405,
                    error_body(405, fmt::format("{} takes {} requests, not {}", path, method,
                                                json_util::excerpt(json(req.method)))));
          return;
        }
    }
    const bool form = req.get_header_value("Content-Type").starts_with("application/x-www-form-urlencoded");
    const std::string msg = res.status == 413 && form
                                ? "a form-urlencoded body of more than 8192 bytes: send Content-Type: application/json"
                            : res.status == 413 ? fmt::format("the request body exceeds {} bytes", s.opt.body_limit)
                            : res.status == 404 ? "no such route"
                                                : fmt::format("HTTP error {}", res.status);
    s.metrics.errors++;
    send_json(res, res.status, error_body(res.status, msg));
  });
}

// --threads 0: every core but one. Each streamed token also costs an HTTP thread's JSON and
// write; with all cores on the model's kernels, their spinning workers and the HTTP threads
// fight over the cores (64 streams on 2 cores: 7,800 tokens/s with 2 kernel threads, 12,900 with 1).
int model_threads(int requested) {
  if (requested > 0) return requested;
  return std::max(1, static_cast<int>(std::thread::hardware_concurrency()) - 1);
}

// The engine (GPT) or translator (seq2seq) of opt.model; its id is its run directory's or
// file's name ("runs/names/" -> "names").
void load_model(State& s, const ServeOptions& opt) {
  std::filesystem::path p(opt.model);
  if (p.filename().empty()) p = p.parent_path();
  if (load_run_config(opt.model).task == Task::Seq2Seq)
    s.translator = std::make_unique<Translator>(load_seq2seq_run(opt.model), p.stem().string(), opt.threads);
  else
    s.engine = std::make_unique<Engine>(load_run(opt.model, WeightStorage::Quantized), p.stem().string(),
                                        EngineOptions{.threads = model_threads(opt.threads),
                                                      .precision = opt.precision,
                                                      .slots = std::max(1, opt.slots),
                                                      .queue_max = opt.queue_max});
}

}  // namespace

void check_options(const ServeOptions& o) {
  auto in = [](auto v, auto lo, auto hi) { return v >= lo && v <= hi; };
  ATTO_CHECK(in(o.port, 0, 65535), "--port must be in [0, 65535], got {}", o.port);
  ATTO_CHECK(in(o.slots, 1, kMaxSlots), "--slots must be in [1, {}], got {}", kMaxSlots, o.slots);
  ATTO_CHECK(in(o.queue_max, 0, kMaxQueue), "--queue must be in [0, {}], got {}", kMaxQueue, o.queue_max);
  ATTO_CHECK(in(o.threads, 0, kMaxThreads), "--threads must be in [0, {}] (0 = all cores but one), got {}", kMaxThreads,
             o.threads);
  ATTO_CHECK(in(o.max_tokens_cap, 1, kMaxTokensCap), "--max-tokens-cap must be in [1, {}], got {}", kMaxTokensCap,
             o.max_tokens_cap);
  ATTO_CHECK(in(o.timeout_s, 1, 3600), "--timeout must be in [1, 3600] seconds, got {}", o.timeout_s);
  ATTO_CHECK(in(o.body_limit, size_t{1024}, kMaxBodyLimit), "--body-limit must be in [1024, {}] bytes, got {}",
             kMaxBodyLimit, o.body_limit);
  ATTO_CHECK(in(o.request_deadline_s, 1, 600), "the request deadline must be in [1, 600] seconds, got {}",
             o.request_deadline_s);
  ATTO_CHECK(in(o.max_connections, 16, 65536), "the connection cap must be in [16, 65536], got {}", o.max_connections);
  ATTO_CHECK(o.api_key.size() <= 4096, "--api-key: at most 4096 characters, got {}", o.api_key.size());
  for (char c : o.api_key)
    ATTO_CHECK(c > ' ' && c < 127,
               "--api-key: only printable ASCII without spaces may be in a key (it is sent in an "
               "HTTP header), got {}",
               ::atto::json_util::printable(o.api_key, 40));
}

namespace {

// The front's limits for these options: a thread for every slot, every waiting request and 4
// more (503s, /metrics); at least 64 connections beyond those threads. More connections than the
// process may open files: its soft limit is raised to its hard one.
FrontLimits front_limits(const ServeOptions& o) {
  FrontLimits L;
  L.workers = o.slots + static_cast<int>(o.queue_max) + 4;
  L.max_connections = std::max(o.max_connections, L.workers + 64);
  L.request_deadline_s = o.request_deadline_s;
  L.body_limit = o.body_limit;
  L.write_timeout_s = o.timeout_s;
  rlimit r{};
  if (getrlimit(RLIMIT_NOFILE, &r) == 0 && r.rlim_cur < r.rlim_max) {
    r.rlim_cur = r.rlim_max;
    setrlimit(RLIMIT_NOFILE, &r);
  }
  return L;
}

}  // namespace

int run_server(const ServeOptions& opt, const std::atomic<bool>& stop,
               const std::function<void(const std::string& url)>& on_ready) {
  check_options(opt);
  State s{opt, nullptr, nullptr, {}, {}, {}};
  Router srv;
  // Only what httplib writes into its answers: connections are read and kept by the front.
  const FrontLimits limits = front_limits(opt);
  srv.set_keep_alive_timeout(limits.idle_s);
  srv.set_keep_alive_max_count(100000);
  srv.set_payload_max_length(opt.body_limit);
  add_routes(srv, s);
  Front front(srv, limits);
  const int port = front.bind(opt.host, opt.port);
  front.start();       // /health answers 503 "loading" while the model loads
  load_model(s, opt);  // on an error, ~Front stops the front
  s.limits = {.max_tokens_cap = opt.max_tokens_cap,
              .default_max_tokens = 16,
              .max_n = 16,
              .model_id = s.engine ? s.engine->id() : s.translator->id()};
  s.ready = true;
  on_ready(fmt::format("http://{}:{}", opt.host, port));
  while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  front.stop();  // stops accepting; the threads finish their requests first
  return 0;
}

}  // namespace atto::serve
