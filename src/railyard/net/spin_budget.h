// How many non-blocking polls a wait spends before it sleeps, learned from how recent waits
// ended.
//
// Polling first pays when the awaited data is microseconds away (a small allreduce on
// loopback: 50 -> 24 us with 2 ranks), and costs when it is milliseconds away: on 1 Gbit
// links a 128 KiB piece takes about 1 ms, and 4 ranks polling for every piece spent most of
// a 2-core host in epoll_wait and sched_yield (perf: about 70% of samples), leaving the
// network stack short of CPU. So the budget follows the waits:
//   - a wait that spent its whole budget and had to sleep halves it (down to kFloor);
//   - a wait that finished after k polls raises it to 2k if that is more (up to the maximum),
//     so a budget only grows when waits finish near its edge.
// Not thread-safe: the transport updates it under its progress lock.
#pragma once

#include <algorithm>

namespace railyard::net {

class SpinBudget {
 public:
  // Polls kept even after many slow waits: a few cost little, and a wait that now finishes
  // within them is what lets the budget grow back.
  static constexpr int kFloor = 4;

  explicit SpinBudget(int max_polls) : max_(std::max(0, max_polls)), polls_(max_) {}

  int polls() const { return polls_; }
  int max_polls() const { return max_; }

  // The wait finished after `polls` polls, without sleeping.
  void FinishedAfter(int polls) { polls_ = std::clamp(2 * polls, polls_, max_); }
  // The wait polled `polls()` times in vain and went to sleep.
  void Slept() { polls_ = std::max(std::min(kFloor, max_), polls_ / 2); }

 private:
  int max_;
  int polls_;
};

}  // namespace railyard::net
