// atto/serve/front.h: the server's connections (docs/serve.md, "Limits"). No thread waits on a
// client that is still sending: one event loop (poll) accepts every connection and reads each
// request whole (request line, headers, body) into memory, under a total deadline and size caps;
// only a complete request goes to a thread, which runs httplib's routing on the bytes already
// read and writes the answer to the socket. Hence:
//
//   - a client that sends one byte a second costs a file descriptor and a buffer, never a
//     thread, and is answered 408 and closed when its request is not in by the deadline;
//   - the number of open connections is capped (beyond: 503 at once, then closed), and so are
//     the bytes of one request's headers (431), of its body (413) and of all incomplete requests
//     together (503): the memory held for clients is bounded;
//   - `GET /health` requests go to threads of their own (the reserve), so a health check is
//     answered at once even while every other thread is busy with a long completion;
//   - an idle kept-alive connection goes back to the event loop between requests, and is closed
//     when no request starts within idle_s.
//
//   serve::Front front(router, limits);
//   int port = front.bind("127.0.0.1", 0);   // atto::Error when it cannot listen
//   front.start();  ... front.stop();        // stop: no more requests; in-flight ones finish
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <thread>

#include <httplib.h>

namespace atto::serve {

struct FrontLimits {
  int max_connections = 512;                // open connections; the next one gets 503 and is closed
  int request_deadline_s = 15;              // a request's line, headers and body must be in by then: 408
  int idle_s = 5;                           // a kept-alive connection's wait for its next request
  size_t header_limit = 64 << 10;           // request line and headers; beyond: 431
  size_t body_limit = 1 << 20;              // a request body; beyond: 413
  size_t buffer_budget = size_t{64} << 20;  // all incomplete requests together; beyond: 503
  int workers = 76;                         // threads serving complete requests
  int health_workers = 2;                   // threads serving only GET /health (the reserve)
  int write_timeout_s = 600;                // one write to a client that does not read
};

// httplib's routing, run on a stream we give it (process_request is protected in httplib).
// httplib ends a streamed answer early when its own listening socket is closed (it never opens
// one here): serving(fd) makes it see ours.
class Router : public httplib::Server {
 public:
  bool serve(httplib::Stream& strm, bool close_connection, bool& connection_closed) {
    return process_request(strm, close_connection, connection_closed, nullptr);
  }
  void serving(int listen_fd) { svr_sock_ = listen_fd; }
};

// How much of `buf` is one whole request: incomplete (wait for more), complete (`length` bytes),
// or an error to answer with `status` and close (oversized, malformed framing).
struct Framing {
  enum Kind { Incomplete, Complete, Refused } kind = Incomplete;
  size_t length = 0;
  int status = 0;
  std::string message;
  size_t expect_at = 0;  // where an "Expect: 100-continue" header starts (0: none)
};
Framing frame_request(std::string_view buf, size_t header_limit, size_t body_limit);

class Front {
 public:
  Front(Router& router, FrontLimits limits);
  ~Front();  // stops, if still running
  Front(const Front&) = delete;
  Front& operator=(const Front&) = delete;
  // Listens on host:port (0: any free port); returns the port. atto::Error when it cannot.
  int bind(const std::string& host, int port);
  // Starts the event loop and the threads; atto::Error when the threads cannot be made.
  void start();
  // Stops accepting and reading; returns when the requests in flight have been answered.
  void stop();
  int open_connections() const { return open_; }

  struct Loop;

 private:
  void close_loop();
  Router& router_;
  FrontLimits limits_;
  int listen_fd_ = -1;
  std::atomic<int> open_{0};
  std::unique_ptr<Loop> loop_;
};

}  // namespace atto::serve
