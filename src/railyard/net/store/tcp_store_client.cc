#include "railyard/net/store/tcp_store_client.h"

#include <errno.h>
#include <fmt/ranges.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <thread>
#include <vector>

#include "railyard/base/files.h"
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
using store_wire::kMaxWaitKeys;
using store_wire::kOk;
using store_wire::kSet;
using store_wire::kStoreHandshake;
using store_wire::kTimeout;
using store_wire::kWait;
using store_wire::Message;

// Waits for `events` on fd until the deadline. DEADLINE_EXCEEDED or the poll error.
Status PollFd(int fd, short events, base::Deadline deadline) {
  for (;;) {
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, deadline.PollTimeoutMs());
    if (r > 0) return Status::Ok();
    if (r == 0) return DeadlineExceeded("deadline");
    if (errno != EINTR) return ErrnoStatus(errno, "poll");
  }
}

Status SendAll(int fd, std::string_view data, base::Deadline deadline) {
  while (!data.empty()) {
    ssize_t n = ::send(fd, data.data(), data.size(), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      data.remove_prefix(static_cast<size_t>(n));
    } else if (n < 0 && errno == EAGAIN) {
      RY_RETURN_IF_ERROR(PollFd(fd, POLLOUT, deadline));
    } else if (n < 0 && errno != EINTR) {
      return Unavailable("connection lost while sending ({})",
                         ErrnoStatus(errno, "send").message());
    }
  }
  return Status::Ok();
}

Status RecvExact(int fd, char* out, size_t n, base::Deadline deadline) {
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::recv(fd, out + got, n - got, MSG_DONTWAIT);
    if (r > 0) {
      got += static_cast<size_t>(r);
    } else if (r == 0) {
      return Unavailable("the store closed the connection (did it exit?)");
    } else if (errno == EAGAIN) {
      RY_RETURN_IF_ERROR(PollFd(fd, POLLIN, deadline));
    } else if (errno != EINTR) {
      return Unavailable("connection lost ({})", ErrnoStatus(errno, "recv").message());
    }
  }
  return Status::Ok();
}

class TcpStoreClient final : public Store {
 public:
  TcpStoreClient(std::string address, sockaddr_in addr, std::string secret)
      : address_(std::move(address)), addr_(addr), secret_(std::move(secret)) {}

  // Opens and authenticates one connection, retrying refusals until the deadline.
  Result<base::UniqueFd> Connect(base::Deadline deadline);
  // Proves the secret both ways on a connected socket. `dropped` is set when the store
  // closed the connection before proving itself (worth retrying).
  Result<base::UniqueFd> Handshake(base::UniqueFd fd, base::Deadline deadline, bool* dropped);
  void ReturnIdle(base::UniqueFd fd) {
    std::lock_guard lock(mu_);
    if (idle_.size() < kMaxIdle) idle_.push_back(std::move(fd));
  }

  Status Set(std::string_view key, std::string_view value, base::Deadline deadline) override {
    RY_RETURN_IF_ERROR(CheckKey(key));
    RY_RETURN_IF_ERROR(CheckValue(key, value));
    Message m{kSet, 0, {std::string(key), std::string(value)}};
    return Call(m, fmt::format("Set '{}'", key), deadline).status();
  }

  Result<std::string> Get(std::string_view key, base::Deadline deadline) override {
    RY_RETURN_IF_ERROR(CheckKey(key));
    Message m{kGet, ServerTimeoutMs(deadline), {std::string(key)}};
    std::string timeout =
        fmt::format("{}: key '{}' was not set before the deadline", Describe(), key);
    RY_ASSIGN_OR_RETURN(Message r, Call(m, fmt::format("Get '{}'", key), deadline, timeout));
    if (r.op == kOk && r.fields.size() == 1) return std::move(r.fields[0]);
    if (r.op == kTimeout) return DeadlineExceeded("{}", timeout);
    return Garbled("Get");
  }

  Result<int64_t> Add(std::string_view key, int64_t delta, base::Deadline deadline) override {
    RY_RETURN_IF_ERROR(CheckKey(key));
    Message m{kAdd, delta, {std::string(key)}};
    RY_ASSIGN_OR_RETURN(Message r, Call(m, fmt::format("Add '{}'", key), deadline));
    if (r.op == kOk) return r.num;
    if (r.op == kBadValue && r.fields.size() == 1) {
      return InvalidArgument("{}: key '{}' {}", Describe(), key, r.fields[0]);
    }
    return Garbled("Add");
  }

  Result<std::string> CompareAndSet(std::string_view key, std::string_view expected,
                                    std::string_view desired, base::Deadline deadline) override {
    RY_RETURN_IF_ERROR(CheckKey(key));
    RY_RETURN_IF_ERROR(CheckValue(key, expected));
    RY_RETURN_IF_ERROR(CheckValue(key, desired));
    Message m{kCas, 0, {std::string(key), std::string(expected), std::string(desired)}};
    RY_ASSIGN_OR_RETURN(Message r, Call(m, fmt::format("CompareAndSet '{}'", key), deadline));
    if (r.op == kOk && r.fields.size() == 1) return std::move(r.fields[0]);
    return Garbled("CompareAndSet");
  }

  using Store::Wait;
  Status Wait(std::span<const std::string> keys, base::Deadline deadline,
              std::vector<std::string>* missing) override {
    if (keys.empty()) return Status::Ok();
    if (keys.size() > kMaxWaitKeys) {
      return InvalidArgument("{}: Wait for {} keys, at most {} at once", Describe(), keys.size(),
                             kMaxWaitKeys);
    }
    Message m{kWait, ServerTimeoutMs(deadline), {}};
    for (const auto& k : keys) {
      RY_RETURN_IF_ERROR(CheckKey(k));
      m.fields.push_back(k);
    }
    std::string timeout = fmt::format("{}: keys not all set before the deadline: {}", Describe(),
                                      fmt::join(keys, ", "));
    const std::string what = fmt::format("Wait for {} keys", keys.size());
    Result<Message> answer = Call(m, what, deadline, timeout);
    if (!answer.ok() && answer.status().message() == timeout) {
      // The server's list did not arrive by our deadline (under load its reply, due a little
      // before it, can be late). Ask once more with a server timeout of zero: it answers at
      // once with the keys unset now. Keys are never unset, so each of those was unset at the
      // deadline too; naming all of them instead would blame ranks that had published.
      Message now{kWait, 0, m.fields};
      Result<Message> recheck = Call(now, what, base::Deadline::After(kRecheckBound), timeout);
      if (recheck.ok() && recheck->op == kOk) {
        return DeadlineExceeded("{}: keys not all set before the deadline, all set just after: {}",
                                Describe(), fmt::join(keys, ", "));
      }
      if (recheck.ok()) answer = std::move(recheck);
    }
    RY_RETURN_IF_ERROR(answer.status());
    Message& r = *answer;
    if (r.op == kOk) return Status::Ok();
    if (r.op == kTimeout) {
      // The server's own list, sent just before the deadline: reliable.
      if (missing != nullptr) *missing = r.fields;
      return DeadlineExceeded("{}: keys not set before the deadline: {}", Describe(),
                              fmt::join(r.fields, ", "));
    }
    return Garbled("Wait");
  }

  std::string Describe() const override { return "tcp store " + address_; }

 private:
  static constexpr size_t kMaxIdle = 8;
  // How long a Wait that missed its deadline spends asking which keys are still unset.
  static constexpr auto kRecheckBound = std::chrono::milliseconds(500);

  Status CheckKey(std::string_view key) const { return CheckStoreKey(Describe(), key); }
  Status CheckValue(std::string_view key, std::string_view value) const {
    return CheckStoreValue(Describe(), key, value);
  }
  Status Garbled(std::string_view op) const {
    return DataLoss("{}: malformed answer to {} (a different railyard version?)", Describe(), op);
  }

  // The server answers a little before the client's own deadline, so the usual timeout is
  // a clean reply rather than a connection dropped mid-request.
  static int64_t ServerTimeoutMs(base::Deadline deadline) {
    if (deadline.IsNever()) return -1;
    int64_t ms =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline.Remaining()).count();
    return ms - std::min<int64_t>(ms / 4, 20);
  }

  // Sends one request on an idle (or new) connection and reads the answer. A connection
  // that failed or timed out mid-request is closed, never reused: its stream position is
  // unknown. `timeout_message`, when given, is the DEADLINE_EXCEEDED message for a deadline
  // that passes while the request is out (a Get waiting for its key).
  Result<Message> Call(const Message& request, std::string_view what, base::Deadline deadline,
                       std::string_view timeout_message = {});

  const std::string address_;
  const sockaddr_in addr_;
  const std::string secret_;
  std::mutex mu_;
  std::vector<base::UniqueFd> idle_;
};

Result<base::UniqueFd> TcpStoreClient::Connect(base::Deadline deadline) {
  auto backoff = std::chrono::milliseconds(5);
  for (;;) {
    base::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!fd.valid()) return ErrnoStatus(errno, "socket for " + Describe());
    int err = 0;
    if (::connect(fd.get(), reinterpret_cast<const sockaddr*>(&addr_), sizeof(addr_)) != 0) {
      err = errno;
      if (err == EINPROGRESS || err == EINTR) {
        Status s = PollFd(fd.get(), POLLOUT, deadline);
        if (s.code() == StatusCode::kDeadlineExceeded) {
          return DeadlineExceeded("{}: connection not established before the deadline", Describe());
        }
        RY_RETURN_IF_ERROR(s);
        socklen_t len = sizeof(err);
        if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0) err = errno;
      }
    }
    Status last;
    if (err == 0) {
      bool dropped = false;
      Result<base::UniqueFd> authed = Handshake(std::move(fd), deadline, &dropped);
      if (authed.ok() || !dropped) return authed;
      last = authed.status();
    } else {
      last = ErrnoStatus(err, "connect");
      bool transient = err == ECONNREFUSED || err == ECONNRESET || err == ETIMEDOUT ||
                       err == EHOSTUNREACH || err == ENETUNREACH || err == EAGAIN;
      if (!transient) return Unavailable("{}: cannot connect: {}", Describe(), last.message());
    }
    if (deadline.Expired()) {
      return DeadlineExceeded(
          "{}: not reachable before the deadline (last: {}); is the store running and the "
          "address right?",
          Describe(), last.message());
    }
    // Ranks usually start before the store is listening, and a store flooded with
    // connections drops some before their handshake: retry, gently.
    std::this_thread::sleep_for(std::min<base::Duration>(backoff, deadline.Remaining()));
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
}

Result<base::UniqueFd> TcpStoreClient::Handshake(base::UniqueFd fd, base::Deadline deadline,
                                                 bool* dropped) {
  auto fail = [&](const Status& s, std::string_view step) -> Status {
    if (s.code() == StatusCode::kDeadlineExceeded) {
      return DeadlineExceeded(
          "{}: connected, but no {} before the deadline (is something else listening there, "
          "or is the store overloaded?)",
          Describe(), step);
    }
    return Status(s.code(), fmt::format("{}: during the handshake: {}", Describe(), s.message()));
  };
  net::Handshake handshake(kStoreHandshake, secret_);
  Status s = SendAll(fd.get(), handshake.ConnectorHello(""), deadline);
  if (!s.ok()) {
    *dropped = s.code() == StatusCode::kUnavailable;
    return fail(s, "hello sent");
  }
  char challenge[kChallengeBytes];
  s = RecvExact(fd.get(), challenge, sizeof(challenge), deadline);
  if (!s.ok()) {
    // Closed before its proof: the store dropped this connection (too many handshakes at
    // once, or it is restarting). A store that refuses a client never gets that far.
    *dropped = s.code() == StatusCode::kUnavailable;
    return fail(s, "proof from the store");
  }
  RY_ASSIGN_OR_RETURN(
      std::string answer,
      handshake.ConnectorAnswer(std::string_view(challenge, sizeof(challenge)), Describe()));
  s = SendAll(fd.get(), answer, deadline);
  if (!s.ok()) return fail(s, "answer sent");
  return fd;
}

Result<Message> TcpStoreClient::Call(const Message& request, std::string_view what,
                                     base::Deadline deadline, std::string_view timeout_message) {
  std::string frame = EncodeFrame(request);
  if (frame.size() - 4 > kMaxFrameBytes) {
    return InvalidArgument("{}: {}: the request has {} bytes, the limit is {}", Describe(), what,
                           frame.size() - 4, kMaxFrameBytes);
  }
  base::UniqueFd fd;
  {
    std::lock_guard lock(mu_);
    if (!idle_.empty()) {
      fd = std::move(idle_.back());
      idle_.pop_back();
    }
  }
  if (!fd.valid()) {
    auto connected = Connect(deadline);
    // Connect names the store; add the operation and its key, as every other error here does.
    if (!connected.ok()) {
      return Status(connected.status().code(),
                    fmt::format("{}: {}", what, connected.status().message()));
    }
    fd = std::move(*connected);
  }
  auto fail = [&](const Status& s) {
    if (s.code() != StatusCode::kDeadlineExceeded) {
      return Status(s.code(), fmt::format("{}: {}: {}", Describe(), what, s.message()));
    }
    if (!timeout_message.empty()) return Status(s.code(), std::string(timeout_message));
    return DeadlineExceeded("{}: {}: no answer before the deadline", Describe(), what);
  };
  Status s = SendAll(fd.get(), frame, deadline);
  if (!s.ok()) return fail(s);
  char header[4];
  s = RecvExact(fd.get(), header, sizeof(header), deadline);
  if (!s.ok()) return fail(s);
  uint64_t len = FrameBodyLength(std::string_view(header, 4));
  if (len > kMaxFrameBytes) {
    return DataLoss("{}: {}: answer claims {} bytes (limit {})", Describe(), what, len,
                    kMaxFrameBytes);
  }
  std::string body(len, '\0');
  s = RecvExact(fd.get(), body.data(), len, deadline);
  if (!s.ok()) return fail(s);
  Result<Message> reply = DecodeBody(body);
  if (!reply.ok()) return reply.status().WithContext(Describe() + ": " + std::string(what));
  ReturnIdle(std::move(fd));
  return reply;
}

}  // namespace

Result<std::unique_ptr<Store>> ConnectTcpStore(std::string_view host_port, std::string_view secret,
                                               base::Deadline deadline) {
  Result<sockaddr_in> addr = internal::ResolveHostPort(host_port);
  if (!addr.ok()) return addr.status().WithContext("tcp store address");
  auto client =
      std::make_unique<TcpStoreClient>(std::string(host_port), *addr, std::string(secret));
  // Connect now, so a wrong secret or an unreachable store shows at startup, not at the
  // first Get.
  RY_ASSIGN_OR_RETURN(base::UniqueFd fd, client->Connect(deadline));
  client->ReturnIdle(std::move(fd));
  return std::unique_ptr<Store>(std::move(client));
}

}  // namespace railyard::net