// fabric.pair_bandwidth: both directions of every pair of the fabric schedule at once
// (schedule.h: all pairs up to `all_pairs_max` hosts, else the topology-covering schedule),
// each a `duration` stream measured at the receiver; then the analysis (analysis.h) blames a
// host, a link or an uplink for what is slow, re-tests each suspect against known-good hosts
// and settles it. The fail bound is analysis's "slow" threshold; the timeout is per round,
// on top of the stream's duration. The coordinator runs it (coordinator_fabric.cc).
#include "railyard/validate/check.h"

namespace railyard::validate {
namespace {

class PairBandwidthCheck final : public CoordinatorCheck {
 public:
  PairBandwidthCheck()
      : CoordinatorCheck(
            {.id = "fabric.pair_bandwidth",
             .summary = "pairwise bandwidth in rounds, host/link/uplink attribution "
                        "with re-tests (from the coordinator)",
             .category = Category::kFabric,
             .cost = Cost::kFull,
             .timeout = std::chrono::seconds(10),
             .unit = Unit::kRate,
             .higher_is_better = true,
             .default_fail = "80% of median",
             .params = {{"duration", "1s", "how long each direction of a pair streams"},
                        {"all_pairs_max", "32",
                         "largest host count tested all pairs; above, the topology "
                         "schedule"}}}) {}
};

}  // namespace

std::unique_ptr<Check> NewPairBandwidthCheck() { return std::make_unique<PairBandwidthCheck>(); }

}  // namespace railyard::validate
