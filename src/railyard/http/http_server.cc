#include "railyard/http/http_server.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <cstring>

#include "railyard/base/logging.h"
#include "railyard/base/strings.h"
#include "railyard/http/json_body.h"

namespace railyard::http {

using base::Clock;

namespace {

base::Logger& Log() {
  static base::Logger log("http");
  return log;
}

constexpr size_t kReadChunk = 256u << 10;
constexpr int kAcceptsPerWake = 64;
constexpr size_t kMaxHeaders = 100;
// After a response that closes the connection, unread input is drained this long, so that
// the close does not reset the connection and destroy the response before the client read it.
constexpr auto kLinger = std::chrono::seconds(1);
// After EMFILE the listener stays readable; pausing accepts keeps the loop from spinning.
constexpr auto kAcceptPause = std::chrono::milliseconds(100);

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 411:
      return "Length Required";
    case 413:
      return "Payload Too Large";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    default:
      return "Status";
  }
}

std::string ErrorBody(std::string_view message) {
  return DumpJson(nlohmann::json{{"Error", message}});
}

std::string Serialize(const HttpResponse& r, bool close) {
  std::string out = fmt::format(
      "HTTP/1.1 {} {}\r\nContent-Type: {}\r\nContent-Length: {}\r\nConnection: {}\r\n", r.status,
      ReasonPhrase(r.status), r.content_type, r.body.size(), close ? "close" : "keep-alive");
  for (const auto& [name, value] : r.headers) out += fmt::format("{}: {}\r\n", name, value);
  out += "\r\n";
  out += r.body;
  return out;
}

// "1.2.3.4:80" / "[::1]:80"; *loopback for 127.0.0.0/8, ::1 and ::ffff:127.x.
std::string FormatAddress(const sockaddr_storage& sa, bool* loopback) {
  char text[INET6_ADDRSTRLEN] = "?";
  *loopback = false;
  if (sa.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(sa);
    ::inet_ntop(AF_INET, &in.sin_addr, text, sizeof text);
    *loopback = (ntohl(in.sin_addr.s_addr) >> 24) == 127;
    return fmt::format("{}:{}", text, ntohs(in.sin_port));
  }
  if (sa.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(sa);
    ::inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text);
    *loopback = IN6_IS_ADDR_LOOPBACK(&in6.sin6_addr) ||
                (IN6_IS_ADDR_V4MAPPED(&in6.sin6_addr) && in6.sin6_addr.s6_addr[12] == 127);
    return fmt::format("[{}]:{}", text, ntohs(in6.sin6_port));
  }
  return "unknown";
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// HTTP's optional whitespace (RFC 9110 OWS) is space and tab only.
std::string_view StripOws(std::string_view s) { return base::StripChars(s, " \t"); }

// Whether a comma-separated header value (Connection) lists `token`.
bool HasToken(std::string_view value, std::string_view token) {
  while (!value.empty()) {
    size_t comma = value.find(',');
    if (EqualsIgnoreCase(StripOws(value.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    value.remove_prefix(comma + 1);
  }
  return false;
}

// The request line and headers (without the blank line that ends them).
Status ParseHead(std::string_view head, HttpRequest* req, bool* http10) {
  size_t eol = head.find("\r\n");
  std::string_view line = head.substr(0, eol);
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos || line.find(' ', sp2 + 1) != std::string_view::npos) {
    return InvalidArgument("malformed request line: expected 'METHOD /path HTTP/1.1'");
  }
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  if (method.empty() ||
      !std::all_of(method.begin(), method.end(), [](char c) { return c >= 'A' && c <= 'Z'; })) {
    return InvalidArgument("malformed request line: method is not an upper-case token");
  }
  if (target.empty() || target.front() != '/') {
    return InvalidArgument("malformed request line: target must start with '/'");
  }
  if (version != "HTTP/1.1" && version != "HTTP/1.0") {
    return InvalidArgument("unsupported protocol version; expected HTTP/1.1 or HTTP/1.0");
  }
  req->method = std::string(method);
  req->path = std::string(target.substr(0, target.find('?')));
  *http10 = version == "HTTP/1.0";
  req->headers.clear();
  while (eol != std::string_view::npos) {
    head.remove_prefix(eol + 2);
    eol = head.find("\r\n");
    std::string_view h = head.substr(0, eol);
    size_t colon = h.find(':');
    if (colon == 0 || colon == std::string_view::npos || h.front() == ' ' || h.front() == '\t' ||
        h.substr(0, colon).find_first_of(" \t") != std::string_view::npos) {
      return InvalidArgument("malformed header line (expected 'Name: value')");
    }
    if (req->headers.size() == kMaxHeaders) {
      return InvalidArgument("more than {} header lines", kMaxHeaders);
    }
    std::string name(h.substr(0, colon));
    std::transform(name.begin(), name.end(), name.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    req->headers.emplace_back(std::move(name), std::string(StripOws(h.substr(colon + 1))));
  }
  return Status::Ok();
}

}  // namespace

const std::string* HttpRequest::Header(std::string_view lower_case_name) const {
  for (const auto& [name, value] : headers) {
    if (name == lower_case_name) return &value;
  }
  return nullptr;
}

struct HttpServer::Conn {
  enum class State { kHead, kBody, kBusy, kWrite, kLinger };
  uint64_t id = 0;
  base::UniqueFd fd;
  std::string peer;
  bool loopback = false;
  State state = State::kHead;
  Clock::time_point deadline;
  bool idle = false;    // kept alive after a response, no byte of the next request yet
  std::string in;       // received bytes not consumed yet
  size_t scanned = 0;   // bytes of `in` already searched for the end of the head
  size_t head_len = 0;  // with the blank line
  size_t body_len = 0;
  size_t reserved = 0;  // share of max_buffered_body_bytes held by this request
  const RouteEntry* route = nullptr;
  HttpRequest req;
  bool close_after = false;
  std::string out;
  size_t out_off = 0;
  bool closed = false;  // listed for closing at the end of this loop iteration
};

HttpServer::HttpServer(HttpServerOptions options)
    : options_(std::move(options)), wake_(::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK)) {}

HttpServer::~HttpServer() { Stop(); }

void HttpServer::Route(std::string method, std::string path, HttpHandler handler, bool on_loop) {
  routes_.push_back({std::move(method), std::move(path), std::move(handler), on_loop});
}

Status HttpServer::Bind(const std::string& address, int port) {
  if (port < 0 || port > 65535) {
    return InvalidArgument("listen port {} is not a number from 0 to 65535", port);
  }
  std::string host = address;
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (host.empty()) {
    return InvalidArgument("listen address is empty: expected an IP address or a host name");
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found)) {
    return Unavailable("cannot listen on {}:{}: {}", address, port, ::gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> guard(found, ::freeaddrinfo);
  int error = 0;
  for (const addrinfo* ai = found; ai != nullptr; ai = ai->ai_next) {
    base::UniqueFd s(
        ::socket(ai->ai_family, ai->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, ai->ai_protocol));
    if (!s.valid()) {
      error = errno;
      continue;
    }
    // SO_REUSEADDR only: SO_REUSEPORT would let a second server share the port silently,
    // where a busy port must be an error.
    int yes = 1;
    ::setsockopt(s.get(), SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
    if (::bind(s.get(), ai->ai_addr, ai->ai_addrlen) != 0 || ::listen(s.get(), 128) != 0) {
      error = errno;
      continue;
    }
    sockaddr_storage sa{};
    socklen_t len = sizeof sa;
    ::getsockname(s.get(), reinterpret_cast<sockaddr*>(&sa), &len);
    bool loopback = false;
    bound_address_ = FormatAddress(sa, &loopback);
    port_ = sa.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6&>(sa).sin6_port)
                                     : ntohs(reinterpret_cast<sockaddr_in&>(sa).sin_port);
    listener_ = std::move(s);
    return Status::Ok();
  }
  return Unavailable("cannot listen on {}:{}: {} (in use, or not an address of this host)", address,
                     port, std::strerror(error));
}

void HttpServer::Wake() {
  uint64_t one = 1;
  [[maybe_unused]] ssize_t n = ::write(wake_.get(), &one, sizeof one);
}

void HttpServer::Stop() {
  stop_.store(true);
  if (wake_.valid()) Wake();
}

void HttpServer::CountInvalid(std::string_view reason) {
  std::lock_guard lock(counts_mu_);
  ++invalid_[std::string(reason)];
}

std::map<std::string, uint64_t> HttpServer::InvalidCounts() const {
  std::lock_guard lock(counts_mu_);
  return invalid_;
}

void HttpServer::WorkerLoop() {
  std::unique_lock lock(mu_);
  while (true) {
    jobs_cv_.wait(lock, [&] { return workers_stop_ || !jobs_.empty(); });
    if (workers_stop_) return;
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    HttpResponse response;
    try {
      response = job.route->handler(job.request);
    } catch (const std::exception& e) {
      Log().Error("{} {} from {}: {}", job.request.method, job.request.path, job.request.peer,
                  e.what());
      response = {
          500, "application/json", ErrorBody(fmt::format("internal error: {}", e.what())), {}};
    }
    lock.lock();
    done_.push_back({job.conn, std::move(response)});
    Wake();
  }
}

void HttpServer::AcceptAll(std::map<uint64_t, std::unique_ptr<Conn>>& conns) {
  for (int i = 0; i < kAcceptsPerWake; ++i) {
    sockaddr_storage sa{};
    socklen_t len = sizeof sa;
    base::UniqueFd fd(::accept4(listener_.get(), reinterpret_cast<sockaddr*>(&sa), &len,
                                SOCK_CLOEXEC | SOCK_NONBLOCK));
    if (!fd.valid()) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        Log().Warn("accept on {}: {}; pausing accepts", bound_address_, std::strerror(errno));
        accept_paused_until_ = Clock::now() + kAcceptPause;
      }
      return;  // EAGAIN: nothing more queued
    }
    if (conns.size() >= static_cast<size_t>(options_.max_connections)) {
      CountInvalid("connection_limit");
      HttpResponse busy{503,
                        "application/json",
                        ErrorBody(fmt::format("too many connections (at most {} at once)",
                                              options_.max_connections)),
                        {}};
      const std::string out = Serialize(busy, /*close=*/true);
      // A fresh socket's send buffer takes a few hundred bytes at once.
      [[maybe_unused]] ssize_t n =
          ::send(fd.get(), out.data(), out.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
      ::shutdown(fd.get(), SHUT_WR);
      char drain[4096];
      while (::recv(fd.get(), drain, sizeof drain, MSG_DONTWAIT) > 0) {
      }
      continue;
    }
    int yes = 1;
    ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &yes, sizeof yes);
    auto c = std::make_unique<Conn>();
    c->id = next_conn_id_++;
    c->fd = std::move(fd);
    c->peer = FormatAddress(sa, &c->loopback);
    c->deadline = Clock::now() + options_.request_deadline;
    conns.emplace(c->id, std::move(c));
    open_connections_.fetch_add(1);
  }
}

void HttpServer::StartResponse(Conn& c, HttpResponse response, bool close_after) {
  buffered_body_bytes_ -= c.reserved;
  c.reserved = 0;
  c.close_after = close_after;
  c.out = Serialize(response, close_after);
  c.out_off = 0;
  c.state = Conn::State::kWrite;
  c.deadline = Clock::now() + options_.write_deadline;
}

void HttpServer::Reject(Conn& c, int status, std::string_view reason, std::string message,
                        std::vector<std::pair<std::string, std::string>> headers) {
  CountInvalid(reason);
  Log().Debug("{} {} from {}: {} {}", c.req.method.empty() ? "request" : c.req.method, c.req.path,
              c.peer, status, message);
  StartResponse(c, {status, "application/json", ErrorBody(message), std::move(headers)},
                /*close_after=*/true);
}

void HttpServer::Advance(Conn& c) {
  using State = Conn::State;
  if (c.state == State::kHead) {
    // RFC 9112 2.2: ignore empty lines before a request line (some clients add one).
    while (c.in.size() >= 2 && c.in[0] == '\r' && c.in[1] == '\n') c.in.erase(0, 2);
    const size_t from = c.scanned >= 3 ? c.scanned - 3 : 0;
    const size_t end = c.in.find("\r\n\r\n", from);
    if (end == std::string::npos || end + 4 > options_.max_head_bytes) {
      c.scanned = c.in.size();
      if (c.in.size() > options_.max_head_bytes) {
        Reject(c, 431, "header_too_large",
               fmt::format("request line and headers exceed {} bytes", options_.max_head_bytes));
      }
      return;
    }
    bool http10 = false;
    if (Status s = ParseHead(std::string_view(c.in).substr(0, end), &c.req, &http10); !s.ok()) {
      Reject(c, 400, "bad_http", s.message());
      return;
    }
    c.head_len = end + 4;
    c.route = nullptr;
    bool path_known = false;
    for (const auto& r : routes_) {
      if (r.path != c.req.path) continue;
      path_known = true;
      if (r.method == c.req.method) c.route = &r;
    }
    if (c.route == nullptr) {
      if (!path_known) {
        Reject(c, 404, "not_found", fmt::format("no endpoint {}", c.req.path));
        return;
      }
      std::string allow;
      for (const auto& r : routes_) {
        if (r.path == c.req.path) allow += (allow.empty() ? "" : ", ") + r.method;
      }
      Reject(c, 405, "method_not_allowed",
             fmt::format("{} does not accept {}; use {}", c.req.path, c.req.method, allow),
             {{"Allow", allow}});
      return;
    }
    if (c.req.Header("transfer-encoding") != nullptr) {
      Reject(c, 501, "bad_http", "Transfer-Encoding is not supported; send a Content-Length");
      return;
    }
    const std::string* length = c.req.Header("content-length");
    uint64_t body_len = 0;
    if (length != nullptr) {
      auto [ptr, ec] = std::from_chars(length->data(), length->data() + length->size(), body_len);
      if (ec != std::errc() || ptr != length->data() + length->size() || length->empty()) {
        Reject(c, 400, "bad_http", fmt::format("Content-Length '{}' is not a number", *length));
        return;
      }
      for (const auto& [name, value] : c.req.headers) {
        if (name == "content-length" && value != *length) {
          Reject(c, 400, "bad_http", "conflicting Content-Length headers");
          return;
        }
      }
    } else if (c.req.method == "POST") {
      Reject(c, 411, "bad_http", "POST needs a Content-Length");
      return;
    }
    if (body_len > options_.max_body_bytes) {
      Reject(c, 413, "body_too_large",
             fmt::format("request body of {} bytes exceeds the limit of {} bytes", body_len,
                         options_.max_body_bytes));
      return;
    }
    if (buffered_body_bytes_ + body_len > options_.max_buffered_body_bytes) {
      Reject(c, 503, "busy", "too many request bytes in flight; retry");
      return;
    }
    buffered_body_bytes_ += body_len;
    c.reserved = body_len;
    c.body_len = body_len;
    const std::string* connection = c.req.Header("connection");
    c.close_after = connection != nullptr ? HasToken(*connection, "close") : http10;
    if (http10 && connection != nullptr && !HasToken(*connection, "keep-alive")) {
      c.close_after = true;
    }
    const std::string* expect = c.req.Header("expect");
    if (expect != nullptr && EqualsIgnoreCase(*expect, "100-continue") &&
        c.in.size() < c.head_len + c.body_len) {
      static constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";
      // Nothing else is queued on the socket while a request is read, so this fits.
      [[maybe_unused]] ssize_t n =
          ::send(c.fd.get(), kContinue.data(), kContinue.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    }
    c.state = State::kBody;
  }
  if (c.state != State::kBody || c.in.size() < c.head_len + c.body_len) return;
  c.req.body.assign(c.in, c.head_len, c.body_len);
  c.in.erase(0, c.head_len + c.body_len);
  c.scanned = 0;
  c.req.peer = c.peer;
  c.req.peer_is_loopback = c.loopback;
  if (c.route->on_loop) {
    HttpResponse response;
    try {
      response = c.route->handler(c.req);
    } catch (const std::exception& e) {
      response = {500, "application/json", ErrorBody(e.what()), {}};
    }
    StartResponse(c, std::move(response), c.close_after);
    return;
  }
  c.state = State::kBusy;
  {
    std::lock_guard lock(mu_);
    jobs_.push_back({c.id, c.route, std::move(c.req)});
  }
  jobs_cv_.notify_one();
}

bool HttpServer::Pump(Conn& c) {
  using State = Conn::State;
  while (true) {
    if (c.state == State::kHead || c.state == State::kBody) {
      Advance(c);
      if (c.state != State::kWrite) return true;
    }
    if (c.state != State::kWrite) return true;
    while (c.out_off < c.out.size()) {
      ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_off, c.out.size() - c.out_off,
                         MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return true;
      if (n <= 0) return false;
      c.out_off += static_cast<size_t>(n);
    }
    std::string().swap(c.out);
    c.out_off = 0;
    if (c.close_after) {
      ::shutdown(c.fd.get(), SHUT_WR);
      c.in.clear();
      c.state = State::kLinger;
      c.deadline = Clock::now() + kLinger;
      return true;
    }
    // Kept alive. A pipelined request may be buffered already: its deadline starts now;
    // otherwise the connection idles until the next request's first byte starts it.
    c.state = State::kHead;
    c.req = HttpRequest();
    c.idle = c.in.empty();
    c.deadline = Clock::now() + (c.idle ? options_.idle_timeout : options_.request_deadline);
  }
}

bool HttpServer::OnReadable(Conn& c) {
  char buf[64 << 10];
  for (size_t got = 0; got < kReadChunk;) {
    ssize_t n = ::recv(c.fd.get(), buf, sizeof buf, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) break;
    if (n <= 0) return false;  // closed by the peer, or reset
    got += static_cast<size_t>(n);
    if (c.state == Conn::State::kLinger) continue;
    c.in.append(buf, static_cast<size_t>(n));
    if (c.idle) {  // the first byte of the next request on a kept-alive connection
      c.idle = false;
      c.deadline = Clock::now() + options_.request_deadline;
    }
  }
  return c.state == Conn::State::kLinger || Pump(c);
}

bool HttpServer::OnDeadline(Conn& c) {
  switch (c.state) {
    case Conn::State::kHead:
      if (c.idle) return false;  // a kept-alive connection nobody used: close quietly
      [[fallthrough]];
    case Conn::State::kBody:
      Reject(c, 408, "timeout",
             fmt::format("request not complete within {:.3g} s",
                         std::chrono::duration<double>(options_.request_deadline).count()));
      return Pump(c);
    case Conn::State::kBusy:
      return true;
    default:
      return false;  // a response the client does not read, or the linger after one
  }
}

Status HttpServer::Serve() {
  if (!listener_.valid()) return FailedPrecondition("HttpServer::Serve called before Bind");
  if (!wake_.valid()) return Internal("HttpServer: eventfd could not be created");
  {
    std::lock_guard lock(mu_);
    workers_stop_ = false;
  }
  for (int i = 0; i < std::max(1, options_.workers); ++i) {
    workers_.emplace_back([this] { WorkerLoop(); });
  }
  std::map<uint64_t, std::unique_ptr<Conn>> conns;
  std::vector<pollfd> fds;
  std::vector<Conn*> polled;
  std::vector<uint64_t> closing;
  auto close_later = [&closing](Conn& c) {
    if (c.closed) return;
    c.closed = true;
    closing.push_back(c.id);
  };
  Status result = Status::Ok();
  while (!stop_.load()) {
    fds.clear();
    polled.clear();
    fds.push_back({wake_.get(), POLLIN, 0});
    Clock::time_point now = Clock::now();
    Clock::time_point next = Clock::time_point::max();
    const bool accepting = now >= accept_paused_until_;
    if (accepting) {
      fds.push_back({listener_.get(), POLLIN, 0});
    } else {
      next = accept_paused_until_;
    }
    for (auto& [id, c] : conns) {
      // A connection whose request a worker handles is left out (fd -1): a hang-up would
      // otherwise be reported on every wake and spin the loop until the worker is done.
      const bool busy = c->state == Conn::State::kBusy;
      const short events = c->state == Conn::State::kWrite ? POLLOUT : POLLIN;
      fds.push_back({busy ? -1 : c->fd.get(), events, 0});
      polled.push_back(c.get());
      if (!busy) next = std::min(next, c->deadline);
    }
    const int timeout =
        next == Clock::time_point::max() ? -1 : base::Deadline::At(next).PollTimeoutMs();
    if (::poll(fds.data(), fds.size(), timeout) < 0 && errno != EINTR) {
      result = ErrnoStatus(errno, fmt::format("HttpServer on {}: poll", bound_address_));
      break;
    }
    closing.clear();
    if (fds[0].revents != 0) {
      uint64_t count = 0;
      [[maybe_unused]] ssize_t n = ::read(wake_.get(), &count, sizeof count);
      std::deque<Done> done;
      {
        std::lock_guard lock(mu_);
        done.swap(done_);
      }
      for (Done& d : done) {
        auto it = conns.find(d.conn);
        if (it == conns.end() || it->second->state != Conn::State::kBusy) continue;
        StartResponse(*it->second, std::move(d.response), it->second->close_after);
        if (!Pump(*it->second)) close_later(*it->second);
      }
    }
    const size_t first = accepting ? 2 : 1;
    for (size_t i = 0; i < polled.size(); ++i) {
      Conn& c = *polled[i];
      const short revents = fds[first + i].revents;
      if (revents == 0 || c.closed) continue;
      bool keep = true;
      if (c.state == Conn::State::kWrite) {
        keep = Pump(c);
      } else if (c.state != Conn::State::kBusy) {
        keep = OnReadable(c);
      }
      if (!keep) close_later(c);
    }
    if (accepting && (fds[1].revents & POLLIN)) AcceptAll(conns);
    now = Clock::now();
    for (auto& [id, c] : conns) {
      if (!c->closed && c->state != Conn::State::kBusy && c->deadline <= now && !OnDeadline(*c)) {
        close_later(*c);
      }
    }
    for (uint64_t id : closing) {
      auto it = conns.find(id);
      buffered_body_bytes_ -= it->second->reserved;
      conns.erase(it);
      open_connections_.fetch_sub(1);
    }
  }
  {
    std::lock_guard lock(mu_);
    workers_stop_ = true;
    jobs_.clear();
  }
  jobs_cv_.notify_all();
  for (auto& t : workers_) t.join();
  workers_.clear();
  done_.clear();
  conns.clear();
  open_connections_.store(0);
  buffered_body_bytes_ = 0;
  return result;
}

}  // namespace railyard::http
