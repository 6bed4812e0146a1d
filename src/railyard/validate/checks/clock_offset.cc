// node.clock_offset: this host's CLOCK_REALTIME against the coordinator's, measured by the
// coordinator (coordinator.cc): it stamps t0, asks the agent for its clock through the store,
// stamps t1; offset = agent - (t0 + t1) / 2, uncertain by (t1 - t0) / 2, best of three by the
// shortest round trip. Only the part of the offset the round trip cannot explain is judged.
//
// Bounds: NTP or PTP keep hosts of one cluster within a few milliseconds of each other, so
// 50 ms means time synchronisation is not working on the host (WARN); at 500 ms the
// timestamps of logs, traces and checkpoints from different hosts no longer order events,
// and credentials with a validity window (munge, Kerberos, TLS) are a few such steps from
// failing (FAIL).
#include "railyard/validate/check.h"

namespace railyard::validate {
namespace {

class ClockOffsetCheck final : public CoordinatorCheck {
 public:
  ClockOffsetCheck()
      : CoordinatorCheck({.id = "node.clock_offset",
                          .summary = "realtime clock offset against the coordinator (from the "
                                     "coordinator)",
                          .category = Category::kNode,
                          .cost = Cost::kQuick,
                          .timeout = std::chrono::seconds(2),
                          .unit = Unit::kDuration,
                          .higher_is_better = false,
                          .default_warn = "50ms",
                          .default_fail = "500ms"}) {}
};

}  // namespace

std::unique_ptr<Check> NewClockOffsetCheck() { return std::make_unique<ClockOffsetCheck>(); }

}  // namespace railyard::validate
