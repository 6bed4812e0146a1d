// Outbound streams (connect, hello, answer, flushing) and the acceptor's side of the
// handshake; see connection.h.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "railyard/base/logging.h"
#include "railyard/net/internal/sockaddr.h"
#include "railyard/net/peer_directory.h"
#include "railyard/net/tcp/tcp_transport_impl.h"

namespace railyard::net::tcp {
namespace {

const base::Logger kLog("net");

std::function<void(int)>& ConnectFailureHook() {
  static std::function<void(int)> hook;
  return hook;
}

}  // namespace

bool IsTransientConnectError(int err) {
  return err == EHOSTUNREACH || err == ENETUNREACH || err == ETIMEDOUT || err == ECONNREFUSED;
}

void SetConnectFailureHookForTest(std::function<void(int err)> hook) {
  ConnectFailureHook() = std::move(hook);
}

void TuneSocket(int fd, size_t buffer_bytes) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (buffer_bytes > 0) {
    int b = static_cast<int>(std::min<size_t>(buffer_bytes, 1 << 30));
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &b, sizeof b);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &b, sizeof b);
  }
}

void TcpTransport::EnsureConnected(int peer) {
  PeerState& p = peers_[peer];
  for (uint32_t s = 0; s < p.out.size(); ++s) {
    if (p.out[s].state != OutStream::kIdle) continue;
    p.out[s].retries = 0;
    p.out[s].backoff = kFirstConnectBackoff;
    StartConnect(peer, s);
  }
}

void TcpTransport::StartConnect(int peer, uint32_t stream) {
  PeerState& p = peers_[peer];
  OutStream& s = p.out[stream];
  s.fd.Reset(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.fd.valid()) {
    FailPeer(peer, ErrnoStatus(errno, "socket"));
    return;
  }
  TuneSocket(s.fd.get(), tcp_.socket_buffer_bytes);
  // Only the connector's algorithm matters: data flows from connector to acceptor.
  const std::string& my_boot = peers_[opt_.rank].info.boot_id;
  const bool same_kernel =
      SameHost(listen_addr_, p.addr) || (!my_boot.empty() && p.info.boot_id == my_boot);
  std::string cc = congestion_.Apply(s.fd.get(), same_kernel);
  if (stream == 0) {
    kLog.Debug("rank {} -> {}: congestion control {}", opt_.rank, p.info.address,
               cc.empty() ? "system default" : cc);
  }
  s.state = OutStream::kConnecting;
  s.handshake.reset();
  s.challenge_got = 0;
  int rc = ::connect(s.fd.get(), reinterpret_cast<sockaddr*>(&p.addr), sizeof p.addr);
  if (rc != 0 && errno != EINPROGRESS) return ConnectFailed(peer, stream, errno);
  loop_.Add(s.fd.get(), OutKey(peer, stream), EPOLLIN | EPOLLOUT);
  s.want_out = true;
}

void TcpTransport::ConnectFailed(int peer, uint32_t stream, int err) {
  PeerState& p = peers_[peer];
  OutStream& s = p.out[stream];
  if (const auto& hook = ConnectFailureHook()) hook(err);
  const auto now = std::chrono::steady_clock::now();
  if (s.retries == 0) s.first_failure = now;
  const auto window = err == ECONNREFUSED ? kRefusedRetry : kUnreachableRetry;
  if (!IsTransientConnectError(err) || now + s.backoff - s.first_failure > window) {
    Status st = ErrnoStatus(err, fmt::format("connect to {}", p.info.address));
    if (s.retries > 0) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(now - s.first_failure);
      st = Status(st.code(), fmt::format("{} (tried {} times over {} ms)", st.message(),
                                         s.retries + 1, ms.count()));
    }
    return FailPeer(peer, std::move(st));
  }
  // Wait on a timerfd under the stream's own key: the event loop needs no timer list.
  loop_.Remove(s.fd.get());
  s.fd.Reset(::timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK | TFD_CLOEXEC));
  if (!s.fd.valid()) return FailPeer(peer, ErrnoStatus(errno, "timerfd_create"));
  itimerspec when{};
  auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(s.backoff).count();
  when.it_value.tv_sec = ns / 1'000'000'000;
  when.it_value.tv_nsec = ns % 1'000'000'000;
  if (::timerfd_settime(s.fd.get(), 0, &when, nullptr) != 0) {
    return FailPeer(peer, ErrnoStatus(errno, "timerfd_settime"));
  }
  kLog.Debug("rank {} -> {}: connect failed ({}); retrying in {} ms", opt_.rank, p.info.address,
             std::strerror(err), s.backoff.count());
  loop_.Add(s.fd.get(), OutKey(peer, stream), EPOLLIN);
  s.state = OutStream::kBackoff;
  s.want_out = false;
  ++s.retries;
  s.backoff = std::min(2 * s.backoff, kMaxConnectBackoff);
}

void TcpTransport::SetWantOut(OutStream& s, bool want, uint64_t key) {
  if (s.want_out == want) return;
  loop_.Modify(s.fd.get(), key, want ? (EPOLLIN | EPOLLOUT) : EPOLLIN);
  s.want_out = want;
}

void TcpTransport::QueueControl(int peer, FrameType type, uint64_t nonce, std::string payload) {
  PeerState& p = peers_[peer];
  if (!p.failure.ok()) return;
  EnsureConnected(peer);
  SendChunk ch;
  ch.hdr.type = type;
  ch.hdr.msg_id = nonce;
  ch.hdr.total = ch.hdr.length = payload.size();
  ch.owned = std::move(payload);
  ch.owns = true;
  p.out[0].queue.push_back(std::move(ch));
  FlushStream(peer, 0);
}

// Writes as much of the stream's queue as the socket takes.
void TcpTransport::FlushStream(int peer, uint32_t stream) {
  PeerState& p = peers_[peer];
  OutStream& s = p.out[stream];
  if (s.state != OutStream::kReady || !p.failure.ok()) return;
  while (!s.queue.empty()) {
    SendChunk& ch = s.queue.front();
    const char* payload = ch.owns ? ch.owned.data() : ch.data;
    size_t total = sizeof(FrameHeader) + ch.hdr.length;
    iovec iov[2];
    int n = 0;
    if (ch.sent < sizeof(FrameHeader)) {
      iov[n++] = {reinterpret_cast<char*>(&ch.hdr) + ch.sent, sizeof(FrameHeader) - ch.sent};
      if (ch.hdr.length > 0) iov[n++] = {const_cast<char*>(payload), ch.hdr.length};
    } else {
      size_t done = ch.sent - sizeof(FrameHeader);
      iov[n++] = {const_cast<char*>(payload) + done, ch.hdr.length - done};
    }
    msghdr mh{};
    mh.msg_iov = iov;
    mh.msg_iovlen = n;
    ssize_t w = ::sendmsg(s.fd.get(), &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      FailPeer(peer, ErrnoStatus(errno, "sending"));
      return;
    }
    ch.sent += static_cast<size_t>(w);
    if (ch.sent < total) break;
    if (ch.req != 0) {
      Req& r = *reqs_.Find(ch.req);
      if (--r.chunks_left == 0) r.done = true;
    }
    s.queue.pop_front();
  }
  SetWantOut(s, !s.queue.empty(), OutKey(peer, stream));
}

void TcpTransport::AnswerChallenge(int peer, uint32_t stream) {
  PeerState& p = peers_[peer];
  OutStream& s = p.out[stream];
  Result<std::string> answer = s.handshake->ConnectorAnswer(
      std::string_view(s.challenge, kChallengeBytes), "the listener at " + p.info.address);
  s.handshake.reset();
  if (!answer.ok()) {
    kLog.Warn("tcp transport rank {}: {}", opt_.rank, answer.status().message());
    return FailPeer(peer, answer.status());
  }
  // 32 bytes after 40: the socket buffer has room.
  if (::send(s.fd.get(), answer->data(), answer->size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
      static_cast<ssize_t>(answer->size())) {
    return FailPeer(peer, Unavailable("sending the handshake answer to {} failed", p.info.address));
  }
  s.state = OutStream::kReady;
  FlushStream(peer, stream);
}

void TcpTransport::HandleOutEvent(uint64_t key, uint32_t events) {
  int peer = OutKeyPeer(key);
  uint32_t stream = OutKeyStream(key);
  PeerState& p = peers_[peer];
  OutStream& s = p.out[stream];
  if (!s.fd.valid()) return;
  if (s.state == OutStream::kBackoff) {
    uint64_t expirations = 0;
    if (::read(s.fd.get(), &expirations, sizeof expirations) != sizeof expirations) return;
    loop_.Remove(s.fd.get());
    return StartConnect(peer, stream);
  }
  if (s.state == OutStream::kConnecting) {
    int err = 0;
    socklen_t len = sizeof err;
    getsockopt(s.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
    if (err != 0) return ConnectFailed(peer, stream, err);
    if (!(events & (EPOLLOUT | EPOLLIN))) return;
    HelloContext ctx{opt_.rank, peer, stream, static_cast<uint32_t>(p.out.size())};
    s.handshake.emplace(kTcpHandshake, opt_.secret);
    std::string hello = s.handshake->ConnectorHello(
        std::string_view(reinterpret_cast<const char*>(&ctx), sizeof ctx));
    // 40 bytes into a fresh socket buffer.
    if (::send(s.fd.get(), hello.data(), hello.size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
        static_cast<ssize_t>(hello.size())) {
      return FailPeer(peer, Unavailable("sending the hello to {} failed", p.info.address));
    }
    s.state = OutStream::kAwaitChallenge;
    SetWantOut(s, false, key);
    return;
  }
  if (s.state == OutStream::kAwaitChallenge) {
    ssize_t r = ::recv(s.fd.get(), s.challenge + s.challenge_got, kChallengeBytes - s.challenge_got,
                       MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
      return FailPeer(peer, Unavailable("{} closed the connection before proving the job "
                                        "secret (it refused this rank's hello, dropped it "
                                        "while flooded with connections, or died)",
                                        p.info.address));
    }
    if (r > 0) s.challenge_got += static_cast<size_t>(r);
    if (s.challenge_got < kChallengeBytes) return;
    return AnswerChallenge(peer, stream);
  }
  if (events & (EPOLLERR | EPOLLHUP)) {
    return FailPeer(peer, Unavailable("connection reset (process died, or its link failed)"));
  }
  if (events & EPOLLIN) {
    // Acceptors never write after the challenge: readable means closed or reset.
    char c;
    ssize_t r = ::recv(s.fd.get(), &c, 1, MSG_DONTWAIT);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
      return FailPeer(peer, Unavailable("connection closed (process died, or its link "
                                        "failed)"));
    }
  }
  if (events & EPOLLOUT) FlushStream(peer, stream);
}

void TcpTransport::Accept() {
  for (;;) {
    sockaddr_in a{};
    socklen_t len = sizeof a;
    int fd = ::accept4(listen_fd_.get(), reinterpret_cast<sockaddr*>(&a), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or a transient error: the listener stays armed
    auto in = std::make_unique<InStream>();
    in->fd.Reset(fd);
    in->remote = internal::SockaddrText(a);
    in->handshake.emplace(kTcpHandshake, opt_.secret);
    TuneSocket(fd, tcp_.socket_buffer_bytes);
    in->rx.reset(new char[kRxBufferBytes]);
    uint64_t key = InKey(next_in_key_++);
    in->key = key;
    if (std::optional<uint64_t> victim = pending_.Add(key)) {
      auto vit = in_streams_.find(*victim);
      if (vit != in_streams_.end() && !warned_full_) {
        warned_full_ = true;  // once: under a flood of connects a line per drop is a flood too
        kLog.Warn(
            "tcp transport rank {}: {} connections are inside the handshake; dropping "
            "the oldest idle ones ({} first; a flood of connections that never "
            "authenticate?)",
            opt_.rank, kMaxPendingHandshakes, vit->second->remote);
      }
      DropPending(*victim, "too many connections inside the handshake");
    }
    loop_.Add(fd, key, EPOLLIN);
    InStream& ref = *in;
    in_streams_[key] = std::move(in);
    // A rank that waited in the backlog has its hello queued already: answer it now.
    ReadInStream(ref);
    if (ref.closed) in_streams_.erase(key);
  }
}

void TcpTransport::DropPending(uint64_t key, std::string_view why) {
  pending_.Remove(key);
  auto it = in_streams_.find(key);
  if (it == in_streams_.end()) return;
  kLog.Debug("tcp transport rank {}: closing connection from {}: {}", opt_.rank, it->second->remote,
             why);
  loop_.Remove(it->second->fd.get());
  in_streams_.erase(it);
}

void TcpTransport::ExpirePending() {
  for (uint64_t key : pending_.TakeExpired()) {
    auto it = in_streams_.find(key);
    if (it == in_streams_.end()) continue;
    kLog.Info(
        "tcp transport rank {}: closing connection from {}: handshake not finished "
        "within {} s",
        opt_.rank, it->second->remote, kHandshakeTimeout.count());
    loop_.Remove(it->second->fd.get());
    in_streams_.erase(it);
  }
}

bool TcpTransport::AuthenticateInStream(InStream& in) {
  Handshake& hs = *in.handshake;
  if (!in.challenged) {
    if (in.handshake_in.size() < hs.hello_bytes()) return false;
    Result<std::string> challenge =
        hs.AcceptorChallenge(in.handshake_in, "connection from " + in.remote);
    if (!challenge.ok()) {
      CloseInStream(in, challenge.status().message());
      return false;
    }
    std::memcpy(&in.claim, hs.context().data(), sizeof(HelloContext));
    const HelloContext& h = in.claim;
    if (h.from < 0 || h.from >= opt_.size || h.from == opt_.rank || h.to != opt_.rank ||
        h.streams != peers_[h.from].out.size() || h.stream >= h.streams) {
      CloseInStream(in, fmt::format("hello from rank {} to rank {} stream {}/{} does not fit "
                                    "this job",
                                    h.from, h.to, h.stream, h.streams));
      return false;
    }
    // 48 bytes into a fresh socket buffer: a short write means a broken peer.
    if (::send(in.fd.get(), challenge->data(), challenge->size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
        static_cast<ssize_t>(challenge->size())) {
      CloseInStream(in, "could not send the challenge");
      return false;
    }
    in.handshake_in.clear();
    in.challenged = true;
    pending_.HelloReceived(in.key);
    return false;
  }
  if (in.handshake_in.size() < kAnswerBytes) return false;
  if (!hs.AcceptorCheck(in.handshake_in)) {
    CloseInStream(in, fmt::format("claims rank {} but its answer does not prove the job "
                                  "secret",
                                  in.claim.from));
    return false;
  }
  pending_.Remove(in.key);
  in.handshake.reset();
  in.handshake_in.clear();
  in.peer = in.claim.from;
  in.index = in.claim.stream;
  return true;
}

void TcpTransport::CloseInStream(InStream& in, const std::string& why, bool violation) {
  if (in.closed) return;
  in.closed = true;
  loop_.Remove(in.fd.get());
  in.fd.Reset();
  if (in.peer < 0) {
    pending_.Remove(in.key);
    // A connection that closes without a word is not worth a warning (a port scan, or one
    // of a flood); one that spoke and failed is.
    bool spoke = in.challenged || !in.handshake_in.empty();
    kLog.Log(spoke ? base::LogLevel::kWarn : base::LogLevel::kDebug,
             "tcp transport rank {}: refused connection from {}: {}", opt_.rank, in.remote, why);
    return;
  }
  PeerState& p = peers_[in.peer];
  if (violation) {
    kLog.Warn("tcp transport rank {}: {} at {} broke the protocol: {}", opt_.rank,
              DescribePeer(p.info), in.remote, why);
    FailPeer(in.peer, Unavailable("{}; connection closed", why));
  } else if (p.said_bye) {
    FailPeer(in.peer, Unavailable("closed its transport (finished or left the job)"));
  } else {
    FailPeer(in.peer, Unavailable("{} (process died, or its host or link failed)", why));
  }
}

}  // namespace railyard::net::tcp
