// The tcp backend's event loop: one epoll set per rank, level-triggered, and an eventfd that
// lets Abort() wake a thread sleeping in it.
//
// Every registered descriptor carries a 64-bit key in its epoll_event, packed so that the
// key alone says what became ready:
//
//   1                         the listening socket
//   2                         the wake eventfd
//   kOutBit | peer << 16 | s  outbound stream s (< 2^16) to `peer`: found by index, since
//                             outbound streams live as long as the transport
//   kInBit | n                inbound connection number n (never reused), looked up in a
//                             map: accepted connections come and go, and an event still
//                             queued for one that was closed finds nothing instead of a
//                             dangling pointer
//
//   Loop loop;
//   RY_RETURN_IF_ERROR(loop.Open());
//   loop.Add(fd, OutKey(peer, 0), EPOLLIN | EPOLLOUT);
//   RY_ASSIGN_OR_RETURN(int n, loop.Wait(events, timeout_ms));
//
// Internal to net/tcp. Thread-safety: Wake() from any thread; the rest from the thread that
// drives progress.
#pragma once

#include <sys/epoll.h>

#include <cstdint>
#include <span>

#include "railyard/base/files.h"
#include "railyard/base/status.h"

namespace railyard::net::tcp {

inline constexpr uint64_t kListenKey = 1;
inline constexpr uint64_t kWakeKey = 2;
inline constexpr uint64_t kOutBit = uint64_t{1} << 62;
inline constexpr uint64_t kInBit = uint64_t{1} << 61;

inline uint64_t OutKey(int peer, uint32_t stream) {
  return kOutBit | (uint64_t(uint32_t(peer)) << 16) | stream;
}
inline bool IsOutKey(uint64_t key) { return (key & kOutBit) != 0; }
inline int OutKeyPeer(uint64_t key) { return static_cast<int>((key >> 16) & 0xffffffff); }
inline uint32_t OutKeyStream(uint64_t key) { return key & 0xffff; }
inline uint64_t InKey(uint64_t n) { return kInBit | n; }

class Loop {
 public:
  // Creates the epoll set and the wake eventfd, registered under kWakeKey.
  Status Open();

  // epoll_ctl failures are not reported: they mean a descriptor this transport closed, and
  // the stream's own reads and writes report what happened to it.
  void Add(int fd, uint64_t key, uint32_t events);
  void Modify(int fd, uint64_t key, uint32_t events);
  void Remove(int fd);

  // Waits up to `timeout_ms` (-1: forever) and returns the number of ready events; 0 when
  // interrupted by a signal.
  Result<int> Wait(std::span<epoll_event> events, int timeout_ms);
  // Makes a Wait in another thread return. Async-signal-safe.
  void Wake();
  // Empties the eventfd after a kWakeKey event.
  void ClearWake();

 private:
  base::UniqueFd epoll_fd_;
  base::UniqueFd wake_fd_;
};

}  // namespace railyard::net::tcp
