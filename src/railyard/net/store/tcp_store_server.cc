#include "railyard/net/store/tcp_store_server.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <map>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <vector>

#include "railyard/base/files.h"
#include "railyard/base/logging.h"
#include "railyard/net/handshake.h"
#include "railyard/net/internal/sockaddr.h"
#include "railyard/net/store/tcp_store_codec.h"

namespace railyard::net {
namespace {

using store_wire::DecodeBody;
using store_wire::EncodeFrame;
using store_wire::FrameBodyLength;
using store_wire::kAdd;
using store_wire::kBadValue;
using store_wire::kCas;
using store_wire::kGet;
using store_wire::kMaxFrameBytes;
using store_wire::kSet;
using store_wire::kStoreHandshake;
using store_wire::kTimeout;
using store_wire::kWait;
using store_wire::Message;
using store_wire::ValidateRequest;

const base::Logger kLog("store");

constexpr int64_t kMaxParkMs = int64_t{30} * 24 * 3600 * 1000;

void SetNoDelay(int fd) {
  int one = 1;
  // Requests are small and latency-bound; a failure here only costs speed.
  (void)::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

Result<int64_t> ApplyAdd(std::string& value, int64_t delta) {
  int64_t current = 0;
  if (!value.empty()) {
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), current);
    if (ec != std::errc() || end != value.data() + value.size()) {
      return InvalidArgument("holds '{}', not an integer", value.substr(0, 64));
    }
  }
  if (__builtin_add_overflow(current, delta, &current)) {
    return InvalidArgument("adding {} to {} overflows a 64-bit integer", delta, value);
  }
  value = std::to_string(current);
  return current;
}

constexpr uint64_t kListenId = 0;
constexpr uint64_t kWakeId = 1;

struct Conn {
  Conn(uint64_t id, std::string_view secret) : id(id), handshake(kStoreHandshake, secret) {}
  uint64_t id = 0;
  base::UniqueFd fd;
  std::string peer;  // "ip:port", for every log line about this client
  Handshake handshake;
  bool challenged = false;  // its hello was answered; its proof is awaited
  bool authed = false;
  bool broken = false;  // a send failed; closed at the next safe point
  std::string in;
  std::string out;
  size_t out_sent = 0;
  bool parked = false;
  Message request;                                    // the parked Get/Wait
  std::string waiting_on;                             // the key it is registered under
  base::Deadline deadline = base::Deadline::Never();  // the parked request's
  uint32_t events = 0;                                // the epoll mask in force
};

class TcpStoreServerImpl final : public TcpStoreServer {
 public:
  TcpStoreServerImpl(std::string ip, int port, std::string secret, base::UniqueFd listen_fd,
                     base::UniqueFd wake_fd, base::UniqueFd epoll_fd)
      : ip_(std::move(ip)),
        port_(port),
        secret_(std::move(secret)),
        listen_fd_(std::move(listen_fd)),
        wake_fd_(std::move(wake_fd)),
        epoll_fd_(std::move(epoll_fd)) {}

  ~TcpStoreServerImpl() override {
    uint64_t one = 1;
    // eventfd writes of 8 bytes cannot be short; a failure would mean a closed fd (a bug).
    (void)!::write(wake_fd_.get(), &one, sizeof(one));
    if (thread_.joinable()) thread_.join();
  }

  void StartThread() {
    thread_ = std::thread([this] { Run(); });
  }

  int port() const override { return port_; }
  std::string address() const override { return fmt::format("{}:{}", ip_, port_); }
  size_t ParkedRequestsForTest() const override { return parked_count_.load(); }
  size_t PendingHandshakesForTest() const override { return pending_count_.load(); }
  Status health() const override {
    std::lock_guard lock(error_mu_);
    return bg_error_;
  }

 private:
  void Run();
  void AcceptAll();
  void HandleEvents(Conn& c, uint32_t events);
  void ReadSome(Conn& c);
  void Process(Conn& c);
  // Drives the handshake with buffered bytes; false when it needs more or the client failed.
  bool Authenticate(Conn& c);
  void Execute(Conn& c, Message m);
  bool TryComplete(Conn& c);  // a parked request: answers it when its keys are all set
  void Notify(const std::string& key);
  void Unpark(Conn& c);
  void SetParked(Conn& c, bool parked) {
    if (c.parked != parked) parked_count_ += parked ? 1 : -1;
    c.parked = parked;
  }
  void Send(Conn& c, const Message& reply);
  void Flush(Conn& c);
  void UpdateInterest(Conn& c);
  void Reject(Conn& c, std::string_view why);
  void Close(uint64_t id);
  void ExpireTimers();
  int NextTimeoutMs() const;
  void RecordError(Status s) {
    std::lock_guard lock(error_mu_);
    if (bg_error_.ok()) bg_error_ = std::move(s);
  }

  const std::string ip_;
  const int port_;
  const std::string secret_;
  base::UniqueFd listen_fd_;
  base::UniqueFd wake_fd_;
  base::UniqueFd epoll_fd_;
  std::thread thread_;
  mutable std::mutex error_mu_;
  Status bg_error_;
  std::atomic<size_t> parked_count_{0};
  std::atomic<size_t> pending_count_{0};

  // Owned by the serving thread.
  std::unordered_map<uint64_t, std::unique_ptr<Conn>> conns_;
  std::map<std::string, std::string> values_;
  std::unordered_map<std::string, std::vector<uint64_t>> waiters_;
  std::vector<uint64_t> resume_;  // connections whose parked request completed
  PendingHandshakes pending_;     // connections that have not proven the secret yet
  bool warned_full_ = false;
  uint64_t next_id_ = 2;
  base::Deadline accept_paused_until_ = base::Deadline::Never();
  bool accept_paused_ = false;
};

void TcpStoreServerImpl::Run() {
  epoll_event events[128];
  for (;;) {
    int n = ::epoll_wait(epoll_fd_.get(), events, 128, NextTimeoutMs());
    if (n < 0) {
      if (errno == EINTR) continue;
      RecordError(ErrnoStatus(errno, fmt::format("tcp store {}: epoll_wait", address())));
      kLog.Error("{}", health().message());
      conns_.clear();  // clients see the connection close instead of waiting out deadlines
      return;
    }
    for (int i = 0; i < n; ++i) {
      uint64_t id = events[i].data.u64;
      if (id == kWakeId) return;  // destructor: connections close with conns_
      if (id == kListenId) {
        AcceptAll();
        continue;
      }
      auto it = conns_.find(id);
      if (it != conns_.end()) HandleEvents(*it->second, events[i].events);
    }
    ExpireTimers();
    while (!resume_.empty()) {
      uint64_t id = resume_.back();
      resume_.pop_back();
      auto it = conns_.find(id);
      if (it == conns_.end()) continue;
      Process(*it->second);
      if (it->second->broken) {
        Close(id);
      } else {
        UpdateInterest(*it->second);
      }
    }
  }
}

void TcpStoreServerImpl::AcceptAll() {
  for (;;) {
    sockaddr_in peer{};
    socklen_t len = sizeof(peer);
    int fd = ::accept4(listen_fd_.get(), reinterpret_cast<sockaddr*>(&peer), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EAGAIN || errno == EINTR || errno == ECONNABORTED) return;
      // Out of descriptors: pending clients wait in the backlog while the loop keeps serving
      // the others; stop watching the listener briefly so it does not spin.
      kLog.Error("tcp store {}: accept failed: {}; pausing accepts for 100 ms", address(),
                 ErrnoStatus(errno, "accept").message());
      epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, listen_fd_.get(), nullptr);
      accept_paused_ = true;
      accept_paused_until_ = base::Deadline::After(std::chrono::milliseconds(100));
      return;
    }
    auto c = std::make_unique<Conn>(next_id_++, secret_);
    c->fd = base::UniqueFd(fd);
    c->peer = internal::SockaddrText(peer);
    SetNoDelay(fd);
    kLog.Debug("tcp store {}: client {} connected", address(), c->peer);
    if (std::optional<uint64_t> victim = pending_.Add(c->id)) {
      auto it = conns_.find(*victim);
      if (it != conns_.end()) {
        // Said once per server: under a flood of connects a line per drop would be a flood too.
        kLog.Log(warned_full_ ? base::LogLevel::kDebug : base::LogLevel::kWarn,
                 "tcp store {}: {} connections are inside the handshake; dropping {} to admit {} "
                 "(a flood of connections that never authenticate?)",
                 address(), kMaxPendingHandshakes, it->second->peer, c->peer);
        warned_full_ = true;
      }
      Close(*victim);
    }
    pending_count_ = pending_.size();
    Conn& ref = *c;
    conns_[ref.id] = std::move(c);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = ref.id;
    if (epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
      kLog.Error("tcp store {}: cannot watch client {}: {}", address(), ref.peer,
                 ErrnoStatus(errno, "epoll_ctl").message());
      Close(ref.id);
      continue;
    }
    ref.events = ev.events;
    // A client that waited in the backlog has its hello queued already: answer it now.
    HandleEvents(ref, EPOLLIN);
  }
}

void TcpStoreServerImpl::HandleEvents(Conn& c, uint32_t events) {
  uint64_t id = c.id;
  if (events & EPOLLERR) {
    kLog.Debug("tcp store {}: client {} socket error", address(), c.peer);
    Close(id);
    return;
  }
  if (events & EPOLLOUT) Flush(c);
  if (!c.broken && (events & (EPOLLIN | EPOLLRDHUP | EPOLLHUP))) {
    if (c.parked || !c.out.empty()) {
      // Not reading while busy; the peer hung up, so nobody waits for the answer.
      kLog.Debug("tcp store {}: client {} left while waiting", address(), c.peer);
      Close(id);
      return;
    }
    ReadSome(c);
    if (conns_.find(id) == conns_.end()) return;
    Process(c);
  }
  if (c.broken) {
    Close(id);
    return;
  }
  UpdateInterest(c);
}

void TcpStoreServerImpl::ReadSome(Conn& c) {
  // Before authentication only the handshake's next message is read: nothing else from an
  // unknown peer.
  char buf[64 * 1024];
  size_t step = c.challenged ? kAnswerBytes : c.handshake.hello_bytes();
  size_t want = c.authed ? sizeof(buf) : step - std::min(step, c.in.size());
  if (want == 0) return;
  ssize_t n = ::recv(c.fd.get(), buf, want, 0);
  if (n > 0) {
    c.in.append(buf, static_cast<size_t>(n));
    return;
  }
  if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
  if (c.challenged && !c.authed) {
    // It heard the store's proof and went away: a client with another secret does that.
    kLog.Warn(
        "tcp store {}: client {} left after the store proved itself, without proving "
        "the job secret (a different RAILYARD_JOB_SECRET?)",
        address(), c.peer);
  } else {
    kLog.Debug("tcp store {}: client {} disconnected", address(), c.peer);
  }
  c.broken = true;
}

void TcpStoreServerImpl::Process(Conn& c) {
  while (!c.broken && !c.parked && c.out.empty()) {
    if (!c.authed) {
      if (!Authenticate(c)) return;
      continue;
    }
    if (c.in.size() < 4) return;
    uint64_t len = FrameBodyLength(c.in);
    if (len > kMaxFrameBytes) {
      Reject(c, fmt::format("a frame of {} bytes (the limit is {})", len, kMaxFrameBytes));
      return;
    }
    if (c.in.size() < 4 + len) return;
    Result<Message> m = DecodeBody(std::string_view(c.in).substr(4, len));
    Status valid = m.ok() ? ValidateRequest(*m) : m.status();
    if (!valid.ok()) {
      Reject(c, "a malformed request (" + valid.message() + ")");
      return;
    }
    c.in.erase(0, 4 + len);
    Execute(c, std::move(m).value());
  }
}

bool TcpStoreServerImpl::Authenticate(Conn& c) {
  if (!c.challenged) {
    if (c.in.size() < c.handshake.hello_bytes()) return false;
    Result<std::string> challenge = c.handshake.AcceptorChallenge(
        std::string_view(c.in).substr(0, c.handshake.hello_bytes()), "client " + c.peer);
    if (!challenge.ok()) {
      kLog.Warn("tcp store {}: refused: {}", address(), challenge.status().message());
      c.broken = true;
      return false;
    }
    c.in.erase(0, c.handshake.hello_bytes());
    c.challenged = true;
    pending_.HelloReceived(c.id);
    c.out = std::move(challenge).value();
    c.out_sent = 0;
    Flush(c);
    return true;
  }
  if (c.in.size() < kAnswerBytes) return false;
  if (!c.handshake.AcceptorCheck(std::string_view(c.in).substr(0, kAnswerBytes))) {
    kLog.Warn(
        "tcp store {}: refused client {}: its answer does not prove the job secret (not a "
        "railyard client)",
        address(), c.peer);
    c.broken = true;
    return false;
  }
  c.in.erase(0, kAnswerBytes);
  c.authed = true;
  pending_.Remove(c.id);
  pending_count_ = pending_.size();
  return true;
}

void TcpStoreServerImpl::Execute(Conn& c, Message m) {
  const std::string key = m.fields.empty() ? std::string() : m.fields[0];
  Message reply;
  switch (m.op) {
    case kSet:
      values_[key] = std::move(m.fields[1]);
      Send(c, reply);
      Notify(key);
      return;
    case kAdd: {
      auto [it, inserted] = values_.try_emplace(key);
      Result<int64_t> sum = ApplyAdd(it->second, m.num);
      if (!sum.ok()) {
        if (inserted) values_.erase(it);
        reply.op = kBadValue;
        reply.fields.push_back(sum.status().message());
        Send(c, reply);
        return;
      }
      reply.num = *sum;
      Send(c, reply);
      Notify(key);
      return;
    }
    case kCas: {
      auto it = values_.find(key);
      std::string_view present = it == values_.end() ? std::string_view() : it->second;
      if (present != m.fields[1]) {
        reply.fields.emplace_back(present);
        Send(c, reply);
        return;
      }
      values_[key] = m.fields[2];
      reply.fields.push_back(std::move(m.fields[2]));
      Send(c, reply);
      Notify(key);
      return;
    }
    case kGet:
    case kWait:
      c.request = std::move(m);
      // Clamped: a huge timeout from the wire must not overflow the clock arithmetic.
      c.deadline = c.request.num < 0 ? base::Deadline::Never()
                                     : base::Deadline::After(std::chrono::milliseconds(
                                           std::min<int64_t>(c.request.num, kMaxParkMs)));
      SetParked(c, true);
      TryComplete(c);
      return;
  }
}

bool TcpStoreServerImpl::TryComplete(Conn& c) {
  for (const auto& k : c.request.fields) {
    if (values_.count(k)) continue;
    c.waiting_on = k;
    waiters_[k].push_back(c.id);
    return false;
  }
  Message reply;
  if (c.request.op == kGet) reply.fields.push_back(values_[c.request.fields[0]]);
  SetParked(c, false);
  c.waiting_on.clear();
  c.deadline = base::Deadline::Never();
  Send(c, reply);
  return true;
}

void TcpStoreServerImpl::Notify(const std::string& key) {
  auto node = waiters_.extract(key);
  if (node.empty()) return;
  for (uint64_t id : node.mapped()) {
    auto it = conns_.find(id);
    if (it == conns_.end() || !it->second->parked || it->second->waiting_on != key) continue;
    it->second->waiting_on.clear();
    if (TryComplete(*it->second)) resume_.push_back(id);
  }
}

void TcpStoreServerImpl::Unpark(Conn& c) {
  if (!c.waiting_on.empty()) {
    auto it = waiters_.find(c.waiting_on);
    if (it != waiters_.end()) {
      std::erase(it->second, c.id);
      if (it->second.empty()) waiters_.erase(it);
    }
  }
  c.waiting_on.clear();
  SetParked(c, false);
  c.deadline = base::Deadline::Never();
}

void TcpStoreServerImpl::Send(Conn& c, const Message& reply) {
  c.out = EncodeFrame(reply);
  c.out_sent = 0;
  Flush(c);
}

void TcpStoreServerImpl::Flush(Conn& c) {
  while (c.out_sent < c.out.size()) {
    ssize_t n = ::send(c.fd.get(), c.out.data() + c.out_sent, c.out.size() - c.out_sent,
                       MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN) return;  // EPOLLOUT resumes it
      kLog.Debug("tcp store {}: client {} send failed", address(), c.peer);
      c.broken = true;
      return;
    }
    c.out_sent += static_cast<size_t>(n);
  }
  c.out.clear();
  c.out_sent = 0;
}

void TcpStoreServerImpl::UpdateInterest(Conn& c) {
  uint32_t want = EPOLLRDHUP;
  if (!c.out.empty())
    want |= EPOLLOUT;
  else if (!c.parked)
    want |= EPOLLIN;
  if (want == c.events) return;
  epoll_event ev{};
  ev.events = want;
  ev.data.u64 = c.id;
  if (epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, c.fd.get(), &ev) != 0) {
    kLog.Error("tcp store {}: cannot watch client {}: {}", address(), c.peer,
               ErrnoStatus(errno, "epoll_ctl").message());
    c.broken = true;
    return;
  }
  c.events = want;
}

void TcpStoreServerImpl::Reject(Conn& c, std::string_view why) {
  kLog.Warn("tcp store {}: closing connection from {}: it sent {}", address(), c.peer, why);
  c.broken = true;
}

void TcpStoreServerImpl::Close(uint64_t id) {
  auto it = conns_.find(id);
  if (it == conns_.end()) return;
  Unpark(*it->second);
  if (!it->second->authed) {
    pending_.Remove(id);
    pending_count_ = pending_.size();
  }
  // Closing the descriptor removes it from the epoll set.
  conns_.erase(it);
}

void TcpStoreServerImpl::ExpireTimers() {
  if (accept_paused_ && accept_paused_until_.Expired()) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenId;
    if (epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, listen_fd_.get(), &ev) == 0) {
      accept_paused_ = false;
    } else {
      accept_paused_until_ = base::Deadline::After(std::chrono::milliseconds(100));
    }
  }
  for (uint64_t id : pending_.TakeExpired()) {
    auto it = conns_.find(id);
    if (it == conns_.end()) continue;
    kLog.Info("tcp store {}: closing {}: handshake not finished within {} s", address(),
              it->second->peer, kHandshakeTimeout.count());
    Close(id);
  }
  pending_count_ = pending_.size();
  std::vector<uint64_t> expired;
  for (const auto& [id, c] : conns_) {
    if (c->parked && c->deadline.Expired()) expired.push_back(id);
  }
  for (uint64_t id : expired) {
    Conn& c = *conns_[id];
    Message reply;
    reply.op = kTimeout;
    for (const auto& k : c.request.fields) {
      if (!values_.count(k)) reply.fields.push_back(k);
    }
    Unpark(c);
    Send(c, reply);
    resume_.push_back(id);
  }
}

int TcpStoreServerImpl::NextTimeoutMs() const {
  base::Deadline next = accept_paused_ ? accept_paused_until_ : base::Deadline::Never();
  next = base::Deadline::Earliest(next, pending_.NextDeadline());
  for (const auto& [id, c] : conns_) next = base::Deadline::Earliest(next, c->deadline);
  return next.PollTimeoutMs();
}

}  // namespace

Result<std::unique_ptr<TcpStoreServer>> TcpStoreServer::Start(
    const TcpStoreServerOptions& options) {
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  if (::inet_pton(AF_INET, options.bind_ip.c_str(), &addr.sin_addr) != 1) {
    return InvalidArgument("tcp store bind address '{}' is not an IPv4 address", options.bind_ip);
  }
  if (options.port < 0 || options.port > 65535) {
    return InvalidArgument("tcp store port {} is out of range (0-65535)", options.port);
  }
  addr.sin_port = htons(static_cast<uint16_t>(options.port));
  std::string where = fmt::format("{}:{}", options.bind_ip, options.port);
  base::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus(errno, "tcp store socket");
  int one = 1;
  // A restarted launcher must be able to reuse its well-known port at once.
  (void)::setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    Status s = ErrnoStatus(errno, "bind");
    return Unavailable("tcp store cannot listen on {}: {}", where, s.message());
  }
  if (::listen(fd.get(), SOMAXCONN) != 0) {
    return ErrnoStatus(errno, "listen on " + where);
  }
  socklen_t len = sizeof(addr);
  if (::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return ErrnoStatus(errno, "getsockname of " + where);
  }
  base::UniqueFd wake(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!wake.valid()) return ErrnoStatus(errno, "eventfd for tcp store");
  base::UniqueFd ep(::epoll_create1(EPOLL_CLOEXEC));
  if (!ep.valid()) return ErrnoStatus(errno, "epoll_create1 for tcp store");
  for (auto [watched, id] : {std::pair{fd.get(), kListenId}, std::pair{wake.get(), kWakeId}}) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = id;
    if (::epoll_ctl(ep.get(), EPOLL_CTL_ADD, watched, &ev) != 0) {
      return ErrnoStatus(errno, "epoll_ctl for tcp store");
    }
  }
  auto server =
      std::make_unique<TcpStoreServerImpl>(options.bind_ip, ntohs(addr.sin_port), options.secret,
                                           std::move(fd), std::move(wake), std::move(ep));
  server->StartThread();
  kLog.Info("tcp store listening on {}", server->address());
  return std::unique_ptr<TcpStoreServer>(std::move(server));
}

}  // namespace railyard::net
