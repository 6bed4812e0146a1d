// A small HTTP/1.1 server for Railyard's control endpoints (the scheduler extender): one
// event-loop thread on poll(2) that owns every socket, and a few worker threads that run
// the handlers which take time.
//
// It exists because cpp-httplib 0.11 (Debian 12) gives a connection a pool thread for its
// whole life and times out each recv() separately, so a handful of clients sending a byte
// every few seconds hold every thread and /healthz stops answering. Here no thread ever
// waits on a client:
// - every request has one deadline for its whole head and body (request_deadline, counted
//   from the connection's accept or its previous response): a client that trickles bytes
//   gets 408 and is closed when it passes, however often it sends; a kept-alive connection
//   idles up to idle_timeout between requests;
// - at most max_connections are open; one more is answered 503 and closed;
// - head and body sizes are capped (431, 413) before they are buffered, and the bodies
//   being read or handled at once share one byte budget (503 beyond it);
// - handlers registered `on_loop` (health checks) answer on the loop thread itself, so they
//   answer while every worker is busy.
// Supported: GET and POST with Content-Length, keep-alive and pipelining (one request in
// flight per connection), `Expect: 100-continue`. Not supported: chunked bodies (501), TLS.
//
// Requests the server turns away are counted by reason (InvalidCounts): "timeout",
// "header_too_large", "body_too_large", "bad_http", "not_found", "method_not_allowed",
// "connection_limit", "busy"; handlers add their own reasons with CountInvalid.
//
// Thread-safety: Route and Bind before Serve, from one thread. Serve blocks on the calling
// thread until Stop, which may be called from any thread (also before Serve). CountInvalid,
// InvalidCounts and open_connections are safe from any thread.
#pragma once

#include <atomic>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "railyard/base/clock.h"
#include "railyard/base/files.h"
#include "railyard/base/status.h"

namespace railyard::http {

struct HttpRequest {
  std::string method;                                        // "GET", "POST"
  std::string path;                                          // the target without its query string
  std::vector<std::pair<std::string, std::string>> headers;  // names lower-cased
  std::string body;
  std::string peer;  // "127.0.0.1:53412", "[::1]:53412"
  bool peer_is_loopback = false;

  // The first header named `lower_case_name`; nullptr when absent.
  const std::string* Header(std::string_view lower_case_name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // extra, e.g. WWW-Authenticate
};

// May move from the request (its body).
using HttpHandler = std::function<HttpResponse(HttpRequest&)>;

struct HttpServerOptions {
  int max_connections = 256;
  // From accept, or from the first byte of a request on a kept-alive connection, to the last
  // byte of the request's body.
  base::Duration request_deadline = std::chrono::seconds(10);
  // A kept-alive connection waiting for its next request is closed quietly after this.
  // Longer than the 90 s after which Go's default HTTP transport drops an idle connection
  // itself, so that a Go client (kube-scheduler) closes first rather than send a request
  // into a connection the server is closing.
  base::Duration idle_timeout = std::chrono::seconds(120);
  // For writing one response; a client that does not read is closed after it.
  base::Duration write_deadline = std::chrono::seconds(10);
  size_t max_head_bytes = 16u << 10;
  size_t max_body_bytes = 16u << 20;
  // Declared Content-Length of all requests being read or handled at once.
  size_t max_buffered_body_bytes = 64u << 20;
  int workers = 2;
};

class HttpServer {
 public:
  explicit HttpServer(HttpServerOptions options = {});
  // Stops; a thread running Serve must have returned before the server is destroyed.
  ~HttpServer();

  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // `on_loop`: run on the event-loop thread; the handler must be quick and never block.
  void Route(std::string method, std::string path, HttpHandler handler, bool on_loop = false);

  // Listens on ADDRESS:PORT (a numeric IPv4/IPv6 address, "[::1]", or a host name, of which
  // the first address that binds is used; port 0: any free port). UNAVAILABLE naming the
  // address and the OS's reason on failure, e.g. a port in use.
  Status Bind(const std::string& address, int port);
  int port() const { return port_; }
  // The address actually bound, "127.0.0.1:8888" or "[::1]:8888".
  const std::string& bound_address() const { return bound_address_; }

  // Serves until Stop(). FAILED_PRECONDITION before Bind.
  Status Serve();
  void Stop();

  void CountInvalid(std::string_view reason);
  std::map<std::string, uint64_t> InvalidCounts() const;
  int open_connections() const { return open_connections_.load(); }

 private:
  struct RouteEntry {
    std::string method;
    std::string path;
    HttpHandler handler;
    bool on_loop = false;
  };
  struct Conn;
  struct Job {
    uint64_t conn = 0;
    const RouteEntry* route = nullptr;
    HttpRequest request;
  };
  struct Done {
    uint64_t conn = 0;
    HttpResponse response;
  };

  void WorkerLoop();
  void Wake();
  void AcceptAll(std::map<uint64_t, std::unique_ptr<Conn>>& conns);
  // Each returns false when the connection is finished and must be closed.
  // Reads what the socket has, then Pump.
  bool OnReadable(Conn& c);
  // Runs the connection's state machine until it waits: parses buffered requests, writes
  // responses, starts the next kept-alive request.
  bool Pump(Conn& c);
  bool OnDeadline(Conn& c);
  // Parses the buffered head and body of one request and dispatches it.
  void Advance(Conn& c);
  void StartResponse(Conn& c, HttpResponse response, bool close_after);
  // Counts `reason`, answers {"Error": message} with `status` and closes after it.
  void Reject(Conn& c, int status, std::string_view reason, std::string message,
              std::vector<std::pair<std::string, std::string>> headers = {});

  HttpServerOptions options_;
  std::vector<RouteEntry> routes_;
  base::UniqueFd listener_;
  base::UniqueFd wake_;  // eventfd: workers and Stop() wake the loop
  int port_ = 0;
  std::string bound_address_;
  std::atomic<bool> stop_{false};
  std::atomic<bool> serving_{false};
  std::atomic<int> open_connections_{0};
  size_t buffered_body_bytes_ = 0;                 // loop thread only
  uint64_t next_conn_id_ = 1;                      // loop thread only
  base::Clock::time_point accept_paused_until_{};  // after EMFILE; loop thread only

  std::mutex mu_;  // guards jobs_, done_, workers_stop_
  std::condition_variable jobs_cv_;
  std::deque<Job> jobs_;
  std::deque<Done> done_;
  bool workers_stop_ = false;
  std::vector<std::thread> workers_;

  mutable std::mutex counts_mu_;
  std::map<std::string, uint64_t> invalid_;
};

}  // namespace railyard::http
