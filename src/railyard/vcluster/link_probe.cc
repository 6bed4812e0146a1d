#include "railyard/vcluster/link_probe.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>
#include <vector>

#include "railyard/base/files.h"

namespace railyard::vcluster {
namespace {

using base::Clock;
using base::Deadline;
using base::UniqueFd;
using base::WaitFd;

constexpr size_t kChunk = 1 << 20;

Result<sockaddr_in> MakeAddr(const std::string& address, uint16_t port) {
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  if (::inet_pton(AF_INET, address.c_str(), &sa.sin_addr) != 1) {
    return InvalidArgument("'{}' is not an IPv4 address", address);
  }
  return sa;
}

void PutU64(unsigned char* p, uint64_t v) {
  for (int i = 0; i < 8; ++i) p[i] = static_cast<unsigned char>(v >> (8 * i));
}
uint64_t GetU64(const unsigned char* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
  return v;
}

// WaitFd until `deadline`, looking at `stop` (may be null) every kSinkStopSlice:
// ABORTED once it is set.
Status WaitOrStop(int fd, short events, Deadline deadline, const std::atomic<bool>* stop,
                  std::string_view what) {
  if (stop == nullptr) return WaitFd(fd, events, deadline, what);
  for (;;) {
    if (stop->load()) return Aborted("{}: stopped", what);
    Status s =
        WaitFd(fd, events, Deadline::Earliest(deadline, Deadline::After(kSinkStopSlice)), what);
    if (s.code() != StatusCode::kDeadlineExceeded || deadline.Expired()) return s;
  }
}

void ServeConnection(UniqueFd fd, Deadline deadline, const std::atomic<bool>* stop) {
  std::vector<char> buf(kChunk);
  uint64_t bytes = 0;
  Clock::time_point first{}, last{};
  for (;;) {
    if (!WaitOrStop(fd.get(), POLLIN, deadline, stop, "sink read").ok()) return;
    ssize_t n = ::recv(fd.get(), buf.data(), buf.size(), 0);
    if (n < 0) {
      if (errno == EINTR || errno == EAGAIN) continue;
      return;
    }
    if (n == 0) break;
    last = Clock::now();
    if (bytes == 0) first = last;
    bytes += static_cast<uint64_t>(n);
  }
  unsigned char reply[16];
  PutU64(reply, bytes);
  PutU64(reply + 8, static_cast<uint64_t>((last - first).count()));
  base::WriteAll(fd.get(), std::string_view(reinterpret_cast<char*>(reply), 16), "sink reply")
      .IgnoreError();
}

}  // namespace

Status RunSink(const SinkOptions& options, const std::function<void(std::string)>& on_ready) {
  RY_ASSIGN_OR_RETURN(sockaddr_in sa, MakeAddr(options.address, options.port));
  UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!listener.valid()) return ErrnoStatus(errno, "sink: socket");
  int one = 1;
  ::setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    return ErrnoStatus(errno, fmt::format("sink: bind {}:{}", options.address, options.port));
  }
  if (::listen(listener.get(), 64) != 0) return ErrnoStatus(errno, "sink: listen");
  socklen_t len = sizeof sa;
  ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&sa), &len);
  if (on_ready) on_ready(fmt::format("{}:{}", options.address, ntohs(sa.sin_port)));

  const Deadline end = Deadline::After(options.lifetime);
  std::vector<std::thread> workers;
  for (int served = 0; served < options.max_connections;) {
    Status ready = WaitOrStop(listener.get(), POLLIN, end, options.stop, "sink accept");
    if (!ready.ok()) break;  // lifetime over or stopped
    int fd = ::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    ++served;
    workers.emplace_back(ServeConnection, UniqueFd(fd), end, options.stop);
  }
  for (auto& t : workers) t.join();
  return Status::Ok();
}

Result<SendResult> RunSend(const std::string& address, uint16_t port, base::Duration duration,
                           Deadline deadline) {
  const std::string where = fmt::format("{}:{}", address, port);
  RY_ASSIGN_OR_RETURN(sockaddr_in sa, MakeAddr(address, port));
  UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return ErrnoStatus(errno, "send: socket");
  int one = 1;
  ::setsockopt(fd.get(), IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 &&
      errno != EINPROGRESS) {
    return ErrnoStatus(errno, fmt::format("connect to sink {}", where));
  }
  RY_RETURN_IF_ERROR(WaitFd(fd.get(), POLLOUT, deadline, fmt::format("connect to {}", where)));
  int err = 0;
  socklen_t elen = sizeof err;
  ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &elen);
  if (err != 0) return ErrnoStatus(err, fmt::format("connect to sink {}", where));

  std::vector<char> chunk(kChunk, 'r');
  const Deadline stop = Deadline::Earliest(Deadline::After(duration), deadline);
  while (!stop.Expired()) {
    RY_RETURN_IF_ERROR(WaitFd(fd.get(), POLLOUT, deadline, fmt::format("send to {}", where)));
    ssize_t n = ::send(fd.get(), chunk.data(), chunk.size(), MSG_NOSIGNAL);
    if (n < 0 && errno != EAGAIN && errno != EINTR) {
      return ErrnoStatus(errno, fmt::format("send to {}", where));
    }
  }
  ::shutdown(fd.get(), SHUT_WR);
  unsigned char reply[16];
  size_t got = 0;
  while (got < sizeof reply) {
    RY_RETURN_IF_ERROR(
        WaitFd(fd.get(), POLLIN, deadline, fmt::format("waiting for sink {} to answer", where)));
    ssize_t n = ::recv(fd.get(), reply + got, sizeof reply - got, 0);
    if (n == 0) return Unavailable("sink {} closed the connection without answering", where);
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      return ErrnoStatus(errno, fmt::format("read answer of sink {}", where));
    }
    got += static_cast<size_t>(n);
  }
  SendResult r;
  r.bytes = GetU64(reply);
  r.seconds = static_cast<double>(GetU64(reply + 8)) / 1e9;
  return r;
}

}  // namespace railyard::vcluster
