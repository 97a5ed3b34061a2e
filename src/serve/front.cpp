#include "serve/front.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <mutex>
#include <system_error>
#include <vector>

#include <fmt/format.h>

#include "base/error.h"
#include "serve/openai.h"

namespace atto::serve {

namespace {

using Clock = std::chrono::steady_clock;

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\r')) s.remove_suffix(1);
  return s;
}

bool iequals(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return (x >= 'A' && x <= 'Z' ? x + 32 : x) == (y >= 'A' && y <= 'Z' ? y + 32 : y);
         });
}

// Digits only (base 10 or 16); a value beyond 2^60 saturates there (too large for any limit).
bool parse_size(std::string_view s, int base, size_t& out) {
  constexpr size_t kHuge = size_t{1} << 60;
  if (s.empty() || s.size() > 64) return false;
  out = 0;
  for (char c : s) {
    const int d = c >= '0' && c <= '9'                 ? c - '0'
                  : base == 16 && c >= 'a' && c <= 'f' ? c - 'a' + 10
                  : base == 16 && c >= 'A' && c <= 'F' ? c - 'A' + 10
                                                       : -1;
    if (d < 0) return false;
    out = std::min(kHuge, out * static_cast<size_t>(base) + static_cast<size_t>(d));
  }
  return true;
}

Framing refused(int status, std::string message) { return {Framing::Refused, 0, status, std::move(message), 0}; }

std::string too_large(size_t limit) { return fmt::format("the request body exceeds {} bytes", limit); }

// A chunked body from `pos` (httplib reads chunks, then "0\r\n\r\n" without trailers).
Framing frame_chunked(std::string_view buf, size_t pos, size_t body_limit) {
  for (size_t total = 0;;) {
    const size_t eol = buf.find("\r\n", pos);
    if (eol == std::string_view::npos)
      return buf.size() - pos > 1024 ? refused(400, "a chunk-size line is too long") : Framing{};
    std::string_view line = buf.substr(pos, eol - pos);
    size_t n = 0;
    if (!parse_size(trim(line.substr(0, line.find(';'))), 16, n)) return refused(400, "a malformed chunk size");
    total += n;
    if (total > body_limit) return refused(413, too_large(body_limit));
    pos = eol + 2;
    if (buf.size() < pos + n + 2) return {};
    if (buf.compare(pos + n, 2, "\r\n") != 0)
      return refused(400, n == 0 ? "chunk trailers are not supported" : "a chunk does not end with CRLF");
    pos += n + 2;
    if (n == 0) return {Framing::Complete, pos, 0, "", 0};
  }
}

// The framing headers of a request head (the lines after the request line, up to the blank line).
struct Head {
  size_t length = 0;
  bool has_length = false, chunked = false;
  size_t expect_at = 0;  // where an "Expect: 100-continue" header's name starts; 0 = none
};

Framing read_head(std::string_view buf, size_t end, Head& h) {
  for (size_t at = buf.find("\r\n") + 2; at < end;) {
    const size_t eol = std::min(buf.find("\r\n", at), end);
    const std::string_view line = buf.substr(at, eol - at);
    const size_t colon = line.find(':');
    const std::string_view name = colon == std::string_view::npos ? "" : trim(line.substr(0, colon));
    const std::string_view value = colon == std::string_view::npos ? "" : trim(line.substr(colon + 1));
    if (iequals(name, "content-length")) {
      if (h.has_length) return refused(400, "more than one Content-Length header");
      if (!parse_size(value, 10, h.length)) return refused(400, "Content-Length is not a number");
      h.has_length = true;
    } else if (iequals(name, "transfer-encoding")) {
      if (!iequals(value, "chunked")) return refused(400, "Transfer-Encoding other than chunked");
      h.chunked = true;
    } else if (iequals(name, "expect") && iequals(value, "100-continue")) {
      h.expect_at = at;
    }
    at = eol + 2;
  }
  if (h.chunked && h.has_length) return refused(400, "both Content-Length and Transfer-Encoding");
  return {};
}

// The process-wide count of open connections, and a socket closed with it.
void close_socket(int fd, std::atomic<int>& open) {
  ::shutdown(fd, SHUT_RDWR);
  ::close(fd);
  --open;
}

// Writes all of [p, p + n) within timeout_s per wait; false when the client went away or stalled.
bool send_all(int fd, const char* p, size_t n, int timeout_s) {
  while (n > 0) {
    const ssize_t w = ::send(fd, p, n, MSG_NOSIGNAL);
    if (w > 0) {
      p += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno == EINTR) continue;
    if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return false;
    pollfd pf{fd, POLLOUT, 0};
    if (::poll(&pf, 1, timeout_s * 1000) <= 0) return false;
  }
  return true;
}

const char* reason(int status) {
  switch (status) {
    case 400: return "Bad Request";
    case 408: return "Request Timeout";
    case 413: return "Payload Too Large";
    case 431: return "Request Header Fields Too Large";
    default: return "Service Unavailable";
  }
}

// An answer from the front itself (the request never reached a thread): OpenAI's error body.
void send_refusal(int fd, int status, const std::string& message) {
  const std::string body = error_body(status, message).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  const std::string head =
      fmt::format("HTTP/1.1 {} {}\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
                  status, reason(status), body.size());
  send_all(fd, (head + body).data(), head.size() + body.size(), 1);
}

void address_of(int fd, bool peer, std::string& ip, int& port) {
  sockaddr_storage a{};
  socklen_t n = sizeof(a);
  if ((peer ? ::getpeername(fd, reinterpret_cast<sockaddr*>(&a), &n)
            : ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &n)) != 0)
    return;
  char host[NI_MAXHOST], serv[NI_MAXSERV];
  if (::getnameinfo(reinterpret_cast<sockaddr*>(&a), n, host, sizeof(host), serv, sizeof(serv),
                    NI_NUMERICHOST | NI_NUMERICSERV) != 0)
    return;
  ip = host;
  port = std::atoi(serv);
}

// One whole request, already read, for httplib: reads come from the buffer (0 at its end: the
// socket is never read here, so a thread never waits on a client), writes go to the socket.
class BufferedStream final : public httplib::Stream {
 public:
  BufferedStream(int fd, std::string buf, size_t length, int write_timeout_s)
      : fd_(fd), buf_(std::move(buf)), end_(length), timeout_s_(write_timeout_s) {}
  bool is_readable() const override { return pos_ < end_; }
  bool is_writable() const override {
    pollfd pf{fd_, POLLOUT, 0};
    return ::poll(&pf, 1, timeout_s_ * 1000) > 0 && !(pf.revents & (POLLERR | POLLHUP));
  }
  ssize_t read(char* p, size_t n) override {
    n = std::min(n, end_ - pos_);
    std::memcpy(p, buf_.data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* p, size_t n) override {
    return send_all(fd_, p, n, timeout_s_) ? static_cast<ssize_t>(n) : -1;
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, true, ip, port); }
  void get_local_ip_and_port(std::string& ip, int& port) const override { address_of(fd_, false, ip, port); }
  socket_t socket() const override { return fd_; }
  std::string leftover() const { return buf_.substr(end_); }  // a pipelined next request's first bytes

 private:
  int fd_;
  std::string buf_;
  size_t pos_ = 0, end_;
  int timeout_s_;
};

}  // namespace

// A fixed set of threads running posted jobs; shutdown() runs the jobs already posted, then joins.
// Outside the anonymous namespace: Front::Loop, a member of a class with external linkage, holds
// two (GCC's -Wsubobject-linkage, when this file is compiled inside a unity source).
namespace front_internal {
class Pool {
 public:
  void start(int n, const char* what) {
    try {
      for (int i = 0; i < n; ++i) threads_.emplace_back([this] { work(); });
    } catch (const std::system_error& e) {
      shutdown();
      fail("atto serve: cannot start {} threads for {} ({}): lower --slots or --queue", n, what, e.what());
    }
  }
  void post(std::function<void()> job) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      jobs_.push_back(std::move(job));
    }
    cv_.notify_one();
  }
  void shutdown() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      done_ = true;
    }
    cv_.notify_all();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void work() {
    for (;;) {
      std::function<void()> job;
      {
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return done_ || !jobs_.empty(); });
        if (jobs_.empty()) return;
        job = std::move(jobs_.front());
        jobs_.pop_front();
      }
      job();
    }
  }
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> jobs_;
  std::vector<std::thread> threads_;
  bool done_ = false;
};
}  // namespace front_internal

namespace {

bool is_health(std::string_view buf) {
  constexpr std::string_view kHealth = "GET /health";
  return buf.size() > kHealth.size() && buf.starts_with(kHealth) &&
         (buf[kHealth.size()] == ' ' || buf[kHealth.size()] == '?');
}

}  // namespace

Framing frame_request(std::string_view buf, size_t header_limit, size_t body_limit) {
  if (buf.starts_with("\r\n")) return refused(400, "the request line is empty");
  const size_t end = buf.find("\r\n\r\n");
  if (end == std::string_view::npos || end + 4 > header_limit)
    return buf.size() > header_limit || end != std::string_view::npos
               ? refused(431, fmt::format("the request line and headers exceed {} bytes", header_limit))
               : Framing{};
  Head h;
  if (Framing f = read_head(buf, end + 2, h); f.kind == Framing::Refused) return f;
  Framing f;
  if (h.chunked) {
    f = frame_chunked(buf, end + 4, body_limit);
  } else if (h.length > body_limit) {
    return refused(413, too_large(body_limit));
  } else if (buf.size() >= end + 4 + h.length) {
    f = {Framing::Complete, end + 4 + h.length, 0, "", 0};
  }
  f.expect_at = h.expect_at;
  return f;
}

// The event loop: every connection that is not being answered by a thread is here.
struct Front::Loop {
  struct Conn {
    int fd = -1;
    std::string buf;
    Clock::time_point deadline;
    bool idle = false;       // kept alive, waiting for its next request (no byte of it yet)
    bool continued = false;  // "100 Continue" sent for the request being read
    bool draining = false;   // answered with an error: what the client still sends is read and dropped
  };

  Front& f;
  front_internal::Pool workers, health;
  int wake_fd = -1;
  std::atomic<bool> stopping{false};
  std::mutex mu;                   // guards returned
  std::vector<Conn> returned;      // kept-alive connections handed back by the threads
  std::vector<Conn> conns;         // the event loop's own (its thread only)
  size_t buffered = 0;             // bytes in conns' buffers
  Clock::time_point accept_pause;  // out of file descriptors: no accept until then
  std::thread thread;

  explicit Loop(Front& front) : f(front) {}
  Clock::duration seconds(int s) const { return std::chrono::seconds(s); }
  void run();
  void accept_all();
  bool read_some(Conn& c);
  bool advance(Conn& c);
  void serve(Conn c, size_t length);
  void hand_back(Conn c);
  void take_returned();
  // Answers with an error, then reads and drops what the client still sends for up to 2 s before
  // closing (as nginx's lingering close): closing with unread bytes would send a reset that
  // can destroy the answer before the client reads it. True: the connection stays in the loop.
  bool refuse(Conn& c, int status, const std::string& message) {
    send_refusal(c.fd, status, message);
    ::shutdown(c.fd, SHUT_WR);
    buffered -= std::min(buffered, c.buf.size());
    std::string().swap(c.buf);
    c.draining = true;
    c.deadline = Clock::now() + std::chrono::seconds(2);
    return true;
  }
};

void Front::Loop::accept_all() {
  for (;;) {
    const int fd = ::accept4(f.listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {  // EAGAIN: no more for now; EMFILE and the like: stop listening for 50 ms
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        accept_pause = Clock::now() + std::chrono::milliseconds(50);
      return;
    }
    if (++f.open_ > f.limits_.max_connections) {
      send_refusal(fd, 503, fmt::format("the server has {} connections open; retry later", f.limits_.max_connections));
      close_socket(fd, f.open_);
      continue;
    }
    const int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));  // each streamed token goes out at once
    conns.push_back({fd, {}, Clock::now() + seconds(f.limits_.request_deadline_s), false, false, false});
  }
}

// Reads what the client has sent; false when the connection left the loop (closed, refused or
// dispatched to a thread).
bool Front::Loop::read_some(Conn& c) {
  const FrontLimits& L = f.limits_;
  char chunk[16384];
  for (;;) {
    const ssize_t n = ::recv(c.fd, chunk, sizeof(chunk), 0);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
      close_socket(c.fd, f.open_);  // the client went away mid-request (or between requests)
      return false;
    }
    if (n < 0) break;
    if (c.draining) continue;
    if (c.idle) c.deadline = Clock::now() + seconds(L.request_deadline_s);
    c.idle = false;
    c.buf.append(chunk, static_cast<size_t>(n));
    buffered += static_cast<size_t>(n);
    if (c.buf.size() > L.header_limit + L.body_limit + 65536) return refuse(c, 413, too_large(L.body_limit));
    if (buffered > L.buffer_budget) return refuse(c, 503, "the server holds too many incomplete requests; retry later");
  }
  return c.draining || advance(c);
}

bool Front::Loop::advance(Conn& c) {
  Framing fr = frame_request(c.buf, f.limits_.header_limit, f.limits_.body_limit);
  if (fr.kind == Framing::Refused) return refuse(c, fr.status, fr.message);
  if (fr.kind == Framing::Incomplete) {
    if (fr.expect_at && !c.continued) {  // the client waits for this before it sends the body
      constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      c.continued = send_all(c.fd, kContinue.data(), kContinue.size(), 1);
    }
    return true;
  }
  if (fr.expect_at && c.continued) c.buf[fr.expect_at] = 'X';  // answered here: httplib must not again
  const size_t length = fr.length;
  Conn taken = std::move(c);
  const bool to_health = is_health(taken.buf);
  (to_health ? health : workers).post([this, length, conn = std::move(taken)]() mutable {
    serve(std::move(conn), length);
  });
  return false;
}

// On a thread: httplib answers the request; a kept-alive connection goes back to the loop.
void Front::Loop::serve(Conn c, size_t length) {
  BufferedStream strm(c.fd, std::move(c.buf), length, f.limits_.write_timeout_s);
  bool closed = false;
  const bool ok = f.router_.serve(strm, stopping.load(), closed);
  if (!ok || closed || stopping) return close_socket(c.fd, f.open_);
  hand_back({c.fd, strm.leftover(), {}, false, false, false});
}

void Front::Loop::hand_back(Conn c) {
  {
    std::lock_guard<std::mutex> lock(mu);
    returned.push_back(std::move(c));
  }
  const uint64_t one = 1;
  if (::write(wake_fd, &one, sizeof(one)) < 0) {
  }  // the loop wakes within 100 ms anyway
}

void Front::Loop::take_returned() {
  std::vector<Conn> back;
  {
    std::lock_guard<std::mutex> lock(mu);
    back.swap(returned);
  }
  for (Conn& c : back) {
    c.idle = c.buf.empty();
    c.deadline = Clock::now() + seconds(c.idle ? f.limits_.idle_s : f.limits_.request_deadline_s);
    buffered += c.buf.size();
    if (c.idle || advance(c)) conns.push_back(std::move(c));  // a pipelined request may be whole already
  }
}

void Front::Loop::run() {
  std::vector<pollfd> fds;
  while (!stopping) {
    take_returned();
    const short accepting = Clock::now() < accept_pause ? 0 : POLLIN;
    fds.assign({{wake_fd, POLLIN, 0}, {f.listen_fd_, accepting, 0}});
    for (const Conn& c : conns) fds.push_back({c.fd, POLLIN, 0});
    ::poll(fds.data(), fds.size(), 100);
    if (fds[0].revents) {
      uint64_t n;
      if (::read(wake_fd, &n, sizeof(n)) < 0) {
      }
    }
    const size_t polled = conns.size();
    if (fds[1].revents) accept_all();
    std::vector<Conn> kept;
    buffered = 0;
    for (const Conn& c : conns) buffered += c.buf.size();
    const auto now = Clock::now();
    for (size_t i = 0; i < conns.size(); ++i) {
      Conn& c = conns[i];
      const bool ready = i < polled && fds[i + 2].revents;
      if (ready && !read_some(c)) continue;
      if (now > c.deadline && (c.idle || c.draining)) {
        close_socket(c.fd, f.open_);
        continue;
      }
      if (now > c.deadline)
        refuse(c, 408, fmt::format("the request did not arrive within {} s", f.limits_.request_deadline_s));
      kept.push_back(std::move(c));
    }
    conns.swap(kept);
  }
  for (Conn& c : conns) close_socket(c.fd, f.open_);
  conns.clear();
}

Front::Front(Router& router, FrontLimits limits) : router_(router), limits_(limits) {}

Front::~Front() { stop(); }

int Front::bind(const std::string& host, int port) {
  addrinfo hints{}, *res = nullptr;
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  const std::string service = std::to_string(port);
  const int rc = ::getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &res);
  ATTO_CHECK(rc == 0, "atto serve: --host {}: {}", host, gai_strerror(rc));
  for (addrinfo* a = res; a && listen_fd_ < 0; a = a->ai_next) {
    const int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    // A backlog of 1024: a burst of clients connecting at once is not dropped (and retried ~1 s later).
    if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 1024) == 0) {
      listen_fd_ = fd;
    } else {
      ::close(fd);
    }
  }
  ::freeaddrinfo(res);
  ATTO_CHECK(listen_fd_ >= 0, "atto serve: cannot listen on {}:{} (in use, or not an address of this machine)", host,
             port);
  std::string ip;
  int bound = port;
  address_of(listen_fd_, false, ip, bound);
  return bound;
}

void Front::start() {
  loop_ = std::make_unique<Loop>(*this);
  loop_->wake_fd = ::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  ATTO_CHECK(loop_->wake_fd >= 0, "atto serve: eventfd: {}", std::strerror(errno));
  loop_->health.start(limits_.health_workers, "health checks");
  loop_->workers.start(limits_.workers, "requests");
  router_.serving(listen_fd_);
  loop_->thread = std::thread([this] { loop_->run(); });
}

void Front::stop() {
  if (loop_) close_loop();
  router_.serving(-1);
  if (listen_fd_ >= 0) ::close(listen_fd_);
  listen_fd_ = -1;
}

void Front::close_loop() {
  loop_->stopping = true;
  if (loop_->thread.joinable()) loop_->thread.join();
  loop_->workers.shutdown();  // the requests already read are answered
  loop_->health.shutdown();
  for (Loop::Conn& c : loop_->returned) close_socket(c.fd, open_);
  ::close(loop_->wake_fd);
  loop_.reset();
}

}  // namespace atto::serve
