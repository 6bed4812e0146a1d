// The shared window (SharedWindow in transport.h): each rank's counter in its segment,
// raised after its writes and awaited by readers; see shm_transport.h.
#include <algorithm>

#include "railyard/base/logging.h"
#include "railyard/net/internal/pending.h"
#include "railyard/net/shm/shm_transport_impl.h"

namespace railyard::net::shm {
void ShmTransport::PublishWindow(uint64_t value) {
  own_.header()->window_seq.store(value, std::memory_order_release);
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) shm::WakeIfSleeping(P(r).header);
  }
}

Status ShmTransport::WaitWindow(uint64_t value, Deadline deadline) {
  if (window_bytes_ == 0)
    return FailedPrecondition("{}: the shm transport has no shared window", Me());
  auto behind = [&](int r) {
    return r != rank_ && P(r).header->window_seq.load(std::memory_order_acquire) < value;
  };
  auto all_there = [&] {
    for (int r = 0; r < size_; ++r) {
      if (behind(r)) return false;
    }
    return true;
  };
  base::Clock::time_point idle_since = base::Clock::now();
  for (;;) {
    if (all_there()) return Status::Ok();
    RY_RETURN_IF_ERROR(Usable());
    bool moved = Progress();
    AnswerProbes();
    if (failed()) return failure_.status();
    base::Clock::time_point now = base::Clock::now();
    if (now >= next_liveness_check_) {
      next_liveness_check_ = now + kLivenessTick;
      CheckLiveness();
      for (int r = 0; r < size_ && !failed(); ++r) {
        if (behind(r) && P(r).watch.Exited()) {
          SetFatal(Unavailable("{}: process exited before its shared-window step {}",
                               DescribePeer(P(r).info), value));
        }
      }
      if (failed()) return failure_.status();
    }
    if (deadline.Expired()) {
      std::vector<int> ranks;
      for (int r = 0; r < size_; ++r) {
        if (behind(r)) ranks.push_back(r);
      }
      std::string detail;
      for (int r : ranks) {
        detail += fmt::format("; {} at step {}", DescribePeer(P(r).info),
                              P(r).header->window_seq.load(std::memory_order_relaxed));
      }
      SetFatal(
          DeadlineExceeded("{}: deadline passed waiting for ranks {} to reach "
                           "shared-window step {}{}",
                           Me(), DescribeRanks(ranks), value, detail));
      return failure_.status();
    }
    Backoff(moved, now, &idle_since, deadline, [&] { return all_there() || HasWork(); });
  }
}

}  // namespace railyard::net::shm
