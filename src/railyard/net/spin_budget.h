// How many non-blocking polls a wait spends before it sleeps, learned from how recent waits
// ended.
//
// Polling first pays when the awaited data is microseconds away (a 4 KiB allreduce on
// loopback, 2 ranks: 24 us against 50 sleeping at once), and costs when it is milliseconds away: on
// 1 Gbit links a 128 KiB piece takes about 1 ms, and 4 ranks polling for every piece spent most of
// a 2-core host in epoll_wait and sched_yield (perf: about 70% of samples), leaving the
// network stack short of CPU. So the budget follows the waits, additive increase and
// multiplicative decrease as in TCP's congestion window:
//   - a wait that finished after k polls adds kStep polls, or doubles k if that is more
//     (a wait that needed most of the budget asks for room to spare), up to the maximum;
//   - a wait that polled its whole budget in vain and slept halves it (down to kFloor).
// It settles where the share of waits that polling serves balances the halvings: near the
// maximum when most waits end within a few polls (small messages on one host), near the
// floor when most end in sleep (large messages on slow links).
// Not thread-safe: the transport updates it under its progress lock.
#pragma once

#include <algorithm>

namespace railyard::net {

class SpinBudget {
 public:
  // Polls kept even after many slow waits: a few cost little, and a wait that now finishes
  // within them is what lets the budget grow back.
  static constexpr int kFloor = 4;
  static constexpr int kStep = 8;

  explicit SpinBudget(int max_polls) : max_(std::max(0, max_polls)), polls_(max_) {}

  int polls() const { return polls_; }
  int max_polls() const { return max_; }

  // The wait finished after `polls` polls, without sleeping.
  void FinishedAfter(int polls) { polls_ = std::min(max_, std::max(polls_ + kStep, 2 * polls)); }
  // The wait polled `polls()` times in vain and went to sleep.
  void Slept() { polls_ = std::max(std::min(kFloor, max_), polls_ / 2); }

 private:
  int max_;
  int polls_;
};

}  // namespace railyard::net
