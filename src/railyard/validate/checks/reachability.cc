// fabric.reachability: every live host reaches the probe port of each host it will be
// measured against (its partners in the fabric schedule), both ways. The coordinator runs it
// (coordinator_fabric.cc) before the latency and bandwidth tests, so a host nobody can reach
// is named as such rather than as slow. A host that fails with most of its partners is FAIL;
// a single pair that fails while both ends reach everyone else is a link finding.
#include "railyard/validate/check.h"

namespace railyard::validate {
namespace {

class ReachabilityCheck final : public CoordinatorCheck {
 public:
  ReachabilityCheck()
      : CoordinatorCheck({.id = "fabric.reachability",
                          .summary = "every host connects to its schedule partners' probe ports, "
                                     "both ways (from the coordinator)",
                          .category = Category::kFabric,
                          .cost = Cost::kQuick,
                          .timeout = std::chrono::seconds(5)}) {}
};

}  // namespace

std::unique_ptr<Check> NewReachabilityCheck() { return std::make_unique<ReachabilityCheck>(); }

}  // namespace railyard::validate
