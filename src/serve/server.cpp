#include "serve/server.h"

#include <httplib.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <chrono>
#include <filesystem>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "base/error.h"
#include "serve/engine.h"
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

bool authorized(const State& s, const httplib::Request& req) {
  if (s.opt.api_key.empty()) return true;
  return req.get_header_value("Authorization") == "Bearer " + s.opt.api_key;
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

void handle_completion(State& s, const httplib::Request& req, httplib::Response& res, bool chat) {
  json body;
  try {
    body = json::parse(req.body);
  } catch (const json::exception& e) {
    throw RequestError(400, fmt::format("the request body is not valid JSON: {}", e.what()), "", "invalid_json");
  }
  if (!s.engine)
    throw RequestError(400, "this model is an encoder-decoder (seq2seq): use POST /v1/translations", "", "wrong_route");
  const Completion c = parse_completion(body, s.limits, chat);
  std::vector<PreparedPrompt> prompts;
  for (const std::string& p : c.prompts) prompts.push_back(s.engine->prepare(p, chat ? "messages" : "prompt"));
  if (c.stream) return stream_completion(s, res, c, std::move(prompts));
  json choices = json::array();
  int64_t completion_tokens = 0, prompt_tokens = 0;
  for (size_t p = 0; p < prompts.size(); ++p) {
    const auto out = s.engine->generate(prompts[p], c, seed_of(c),
                                        [](int64_t, const std::string&, const TokenLogprob*) { return true; });
    prompt_tokens += prompts[p].tokens;
    for (size_t i = 0; i < out.size(); ++i) {
      choices.push_back(choice_json(c, static_cast<int64_t>(p) * c.n + static_cast<int64_t>(i), out[i], c.prompts[p]));
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
  json body;
  try {
    body = json::parse(req.body);
  } catch (const json::exception& e) {
    throw RequestError(400, fmt::format("the request body is not valid JSON: {}", e.what()), "", "invalid_json");
  }
  const Translation t = parse_translation(body, s.limits);
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
  srv.Get("/metrics", guarded(s, [&s](const httplib::Request&, httplib::Response& res) {
            res.set_content(s.metrics.text(s.engine.get()), "text/plain; version=0.0.4");
          }));
  // httplib's own errors (404 route, 413 body) as OpenAI JSON errors.
  srv.set_error_handler([&s](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    const std::string msg = res.status == 413   ? fmt::format("the request body exceeds {} bytes", s.opt.body_limit)
                            : res.status == 404 ? "no such route"
                                                : fmt::format("HTTP error {}", res.status);
    s.metrics.errors++;
    send_json(res, res.status, error_body(res.status, msg));
  });
}

// Debian's httplib listens with a backlog of 5 (compiled into the library): a burst of new
// connections (64 clients opening or reopening theirs at once) overflows it, and each dropped
// handshake waits ~1 s for the client's retry. Linux lets listen() be called again on a
// listening socket to change its backlog; the socket is the one bound to `port` here.
void raise_listen_backlog(int port, int backlog) {
  for (const auto& e : std::filesystem::directory_iterator("/proc/self/fd")) {
    int fd = -1;
    try {
      fd = std::stoi(e.path().filename().string());
    } catch (const std::exception&) {
      continue;
    }
    int listening = 0;
    socklen_t n = sizeof(listening);
    sockaddr_storage addr{};
    socklen_t alen = sizeof(addr);
    if (getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &listening, &n) != 0 || !listening) continue;
    if (getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &alen) != 0) continue;
    const int bound = addr.ss_family == AF_INET    ? ntohs(reinterpret_cast<sockaddr_in*>(&addr)->sin_port)
                      : addr.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&addr)->sin6_port)
                                                   : -1;
    if (bound == port) ::listen(fd, backlog);
  }
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
    s.engine = std::make_unique<Engine>(load_run(opt.model), p.stem().string(),
                                        EngineOptions{.threads = model_threads(opt.threads),
                                                      .precision = opt.precision,
                                                      .slots = std::max(1, opt.slots),
                                                      .queue_max = opt.queue_max});
}

}  // namespace

int run_server(const ServeOptions& opt, const std::atomic<bool>& stop,
               const std::function<void(const std::string& url)>& on_ready) {
  State s{opt, nullptr, nullptr, {}, {}, {}};
  httplib::Server srv;
  // A thread per connection being served: a streamed request holds its thread while it waits for
  // tokens, so the pool has room for every slot, every waiting request and a few more (/health,
  // /metrics, and requests to turn away with 503).
  const auto pool = static_cast<size_t>(std::max(1, opt.slots)) + static_cast<size_t>(opt.queue_max) + 4;
  srv.new_task_queue = [pool] { return new httplib::ThreadPool(pool); };
  srv.set_payload_max_length(opt.body_limit);
  srv.set_tcp_nodelay(true);  // each streamed token goes out at once (Nagle held small writes ~40 ms)
  // httplib closes a keep-alive connection after 5 requests by default; 64 clients reconnecting
  // at once then overflow its listen backlog (5, compiled into Debian's library) and wait ~1 s
  // for a SYN retry. Keep connections for many requests instead.
  srv.set_keep_alive_max_count(100000);
  srv.set_read_timeout(opt.timeout_s, 0);
  srv.set_write_timeout(opt.timeout_s, 0);
  add_routes(srv, s);
  const int port =
      opt.port == 0 ? srv.bind_to_any_port(opt.host) : (srv.bind_to_port(opt.host, opt.port) ? opt.port : -1);
  ATTO_CHECK(port > 0, "atto serve: cannot listen on {}:{} (in use, or not an address of this machine)", opt.host,
             opt.port);
  raise_listen_backlog(port, 1024);
  std::atomic<bool> listening_done{false};
  std::thread listener([&] {
    srv.listen_after_bind();
    listening_done = true;
  });
  // httplib's stop() does nothing until listen has started its loop: one called in that window
  // was lost, and the join below waited forever (a model that failed to load right after the
  // bind hung `atto serve`, deaf to SIGTERM). Stop until the listener has returned.
  auto stop_listener = [&] {
    while (!listening_done) {
      srv.stop();
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    listener.join();
  };
  try {
    load_model(s, opt);
  } catch (...) {
    stop_listener();
    throw;
  }
  s.limits = {.max_tokens_cap = opt.max_tokens_cap,
              .default_max_tokens = 16,
              .max_n = 16,
              .model_id = s.engine ? s.engine->id() : s.translator->id()};
  s.ready = true;
  on_ready(fmt::format("http://{}:{}", opt.host, port));
  while (!stop) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  stop_listener();  // stops accepting; the pool's threads finish their requests before listen returns
  return 0;
}

}  // namespace atto::serve
