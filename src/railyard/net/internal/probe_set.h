// The bookkeeping of one Probe call, shared by the backends: which ranks were asked, which
// have settled (alive, dead, unresponsive) and the results in the caller's order. How a
// backend asks (a ping frame, a slot in shared memory, a control message) stays its own.
//
//   ProbeSet probes(ranks, rank(), size(), activity_);  // self alive, bad ranks dead
//   for (size_t i : probes.Pending()) SendPing(probes.rank(i));
//   while (!probes.settled() && !deadline.Expired()) { progress; probes.Alive(i, ...); }
//   return probes.Finish();                              // the rest: unresponsive
//
// Internal to net/. Thread-safety: none.
#pragma once

#include <cstddef>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/net/transport.h"

namespace railyard::net::internal {

class ProbeSet {
 public:
  // Ranks outside [0, size) are dead ("no rank 7 in a job of 4 ranks"), `self` is alive with
  // `self_activity`; the others are pending.
  ProbeSet(std::span<const int> ranks, int self, int size, std::string_view self_activity);

  size_t size() const { return results_.size(); }
  int rank(size_t i) const { return results_[i].rank; }
  bool pending(size_t i) const { return pending_[i]; }
  // Indices of the ranks still pending, in order.
  std::vector<size_t> Pending() const;
  bool settled() const { return left_ == 0; }

  // Settles rank i (no-ops once it is settled).
  void Alive(size_t i, std::string activity);
  void Dead(size_t i, std::string detail);
  void Unresponsive(size_t i, std::string detail);

  // The results; ranks still pending are unresponsive with `detail`.
  std::vector<ProbeResult> Finish(std::string_view detail =
                                      "did not answer a probe before the deadline (stopped, hung "
                                      "outside communication, or its link is down)") &&;

 private:
  void Settle(size_t i, ProbeResult::State state, std::string text, bool is_activity);

  std::vector<ProbeResult> results_;
  std::vector<bool> pending_;
  size_t left_ = 0;
};

}  // namespace railyard::net::internal
