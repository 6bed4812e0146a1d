#include "railyard/net/tcp/loop.h"

#include <sys/eventfd.h>
#include <unistd.h>

#include <cerrno>

#include "railyard/net/tcp/tcp_transport_impl.h"

namespace railyard::net::tcp {

Status Loop::Open() {
  epoll_fd_.Reset(::epoll_create1(EPOLL_CLOEXEC));
  wake_fd_.Reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_fd_.valid() || !wake_fd_.valid()) return ErrnoStatus(errno, "tcp transport: epoll");
  Add(wake_fd_.get(), kWakeKey, EPOLLIN);
  return Status::Ok();
}

void Loop::Add(int fd, uint64_t key, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = key;
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev);
}

void Loop::Modify(int fd, uint64_t key, uint32_t events) {
  epoll_event ev{};
  ev.events = events;
  ev.data.u64 = key;
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, fd, &ev);
}

void Loop::Remove(int fd) { epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, fd, nullptr); }

Result<int> Loop::Wait(std::span<epoll_event> events, int timeout_ms) {
  int n = ::epoll_wait(epoll_fd_.get(), events.data(), static_cast<int>(events.size()), timeout_ms);
  if (n < 0) {
    if (errno == EINTR) return 0;
    return ErrnoStatus(errno, "tcp transport: epoll_wait");
  }
  return n;
}

void Loop::Wake() {
  uint64_t one = 1;
  (void)!::write(wake_fd_.get(), &one, sizeof one);
}

void Loop::ClearWake() {
  uint64_t v;
  (void)!::read(wake_fd_.get(), &v, sizeof v);
}

void TcpTransport::HandleEvent(uint64_t key, uint32_t events) {
  if (key == kListenKey) return Accept();
  if (key == kWakeKey) return loop_.ClearWake();
  if (IsOutKey(key)) return HandleOutEvent(key, events);
  auto it = in_streams_.find(key);
  if (it == in_streams_.end()) return;
  InStream& in = *it->second;
  ReadInStream(in);
  if (in.closed) in_streams_.erase(it);
}

Status TcpTransport::Poll(int timeout_ms) {
  epoll_event events[64];
  if (!unparked_.empty()) timeout_ms = 0;
  if (pending_.size() > 0) {
    int pending_ms = pending_.NextDeadline().PollTimeoutMs();
    if (timeout_ms < 0 || pending_ms < timeout_ms) timeout_ms = pending_ms;
  }
  RY_ASSIGN_OR_RETURN(int n, loop_.Wait(events, timeout_ms));
  for (int i = 0; i < n; ++i) HandleEvent(events[i].data.u64, events[i].events);
  if (pending_.size() > 0) ExpirePending();
  while (!unparked_.empty()) {
    uint64_t key = unparked_.back();
    unparked_.pop_back();
    HandleEvent(key, EPOLLIN);
  }
  if (failure_.abort_requested()) {
    HandleAbortFlag(base::Deadline::After(std::chrono::milliseconds(500)));
  }
  return Status::Ok();
}

}  // namespace railyard::net::tcp
