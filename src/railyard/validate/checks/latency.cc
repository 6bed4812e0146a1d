// fabric.latency: the round trip to each schedule partner, as the TCP connect time to its
// probe sink (SYN to SYN-ACK, answered by the peer's kernel: the path, not the peer's
// scheduler), median of `samples`; a host's figure is the median over its partners. The
// bounds are absolute: a round trip inside one data centre is well under a millisecond, so
// 10 ms means queueing or a detour worth a warning and 100 ms a path that training
// collectives cannot live with. A relative bound ("300% of median") is available to plans;
// it is not the default because a fleet median of tens of microseconds makes scheduling
// noise on a busy host look like a fault.
#include "railyard/validate/check.h"

namespace railyard::validate {
namespace {

class LatencyCheck final : public CoordinatorCheck {
 public:
  LatencyCheck()
      : CoordinatorCheck(
            {.id = "fabric.latency",
             .summary = "median TCP round trip to each schedule partner (from the "
                        "coordinator)",
             .category = Category::kFabric,
             .cost = Cost::kQuick,
             .timeout = std::chrono::seconds(5),
             .unit = Unit::kDuration,
             .higher_is_better = false,
             .default_warn = "10ms",
             .default_fail = "100ms",
             .params = {{"samples", "5", "round trips per partner; the median counts"}}}) {}
};

}  // namespace

std::unique_ptr<Check> NewLatencyCheck() { return std::make_unique<LatencyCheck>(); }

}  // namespace railyard::validate
