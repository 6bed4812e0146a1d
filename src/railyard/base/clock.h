// Deadline: the one way Railyard expresses "wait no longer than this".
//
// Every blocking call takes a Deadline. A Deadline is a point on the monotonic clock (or
// "never"); it converts to the timeouts the OS wants (poll's milliseconds, timespec) and
// clamps at zero once passed, so a loop of `poll(..., d.PollTimeoutMs())` calls always ends.
//
//   Deadline d = Deadline::After(std::chrono::seconds(30));
//   while (!done) { if (d.Expired()) return DeadlineExceeded("..."); ... }
//
// Thread-safety: a value type; immutable after construction.
#pragma once

#include <chrono>
#include <cstdint>

namespace railyard::base {

using Clock = std::chrono::steady_clock;
using Duration = std::chrono::nanoseconds;

class Deadline {
 public:
  // A deadline that never expires. Use only where a caller explicitly asked for no limit.
  static Deadline Never() { return Deadline(Clock::time_point::max()); }
  static Deadline After(Duration d) { return Deadline(Clock::now() + d); }
  static Deadline At(Clock::time_point t) { return Deadline(t); }

  bool IsNever() const { return when_ == Clock::time_point::max(); }
  bool Expired() const { return !IsNever() && Clock::now() >= when_; }
  Clock::time_point when() const { return when_; }

  // Time left, zero once expired, Duration::max() for Never().
  Duration Remaining() const {
    if (IsNever()) return Duration::max();
    auto left = when_ - Clock::now();
    return left.count() > 0 ? std::chrono::duration_cast<Duration>(left) : Duration::zero();
  }

  // Timeout for poll()/epoll_wait(): -1 for Never(), else remaining milliseconds rounded up
  // (so a wait never returns just before the deadline and spins), capped to int range.
  int PollTimeoutMs() const;

  // The earlier of two deadlines.
  static Deadline Earliest(Deadline a, Deadline b) { return a.when_ < b.when_ ? a : b; }

 private:
  explicit Deadline(Clock::time_point when) : when_(when) {}
  Clock::time_point when_;
};

// Seconds since an arbitrary start, for progress and benchmark timing.
inline double SecondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

}  // namespace railyard::base
