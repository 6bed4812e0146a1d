// collective.allreduce: an allreduce bus-bandwidth sweep over every live host, one rank per
// host, with Railyard's own collectives over tcp (collective_probe.h; nccl-tests' busbw =
// algbw x 2(n-1)/n). The busbw of the largest size is judged against what the hosts' links
// allow: `expected` is the slowest host link's rate from the topology, or the fleet median of
// the pair bandwidths where no topology says. A ring allreduce at a large size approaches the
// link rate, so a sweep far below it while every pair test passed points at something only a
// collective shows (a host that stalls under many-to-many load, a congested uplink).
//
// Sizes are kept small by default so the full plan stays short on slow links; a plan sets
// larger ones on a real fabric. It runs from the coordinator; on one host alone it is SKIPPED.
#include "railyard/validate/check.h"

namespace railyard::validate {
namespace {

class AllreduceCheck final : public CoordinatorCheck {
 public:
  AllreduceCheck()
      : CoordinatorCheck({.id = "collective.allreduce",
                          .summary = "allreduce bus bandwidth over all live hosts (Railyard comm)",
                          .category = Category::kCollective,
                          .cost = Cost::kFull,
                          .timeout = std::chrono::seconds(60),
                          .unit = Unit::kRate,
                          .default_warn = "50% of expected",
                          .default_fail = "25% of expected",
                          .params = {{"sizes", "64KiB,1MiB",
                                      "bytes per rank, as `railyard bench comm --sizes` takes them "
                                      "(4KiB:64MiB, or a comma list)"},
                                     {"warmup", "2", "untimed iterations per size"},
                                     {"iters", "5", "timed iterations per size"}}}) {}
};

}  // namespace

std::unique_ptr<Check> NewAllreduceCheck() { return std::make_unique<AllreduceCheck>(); }

}  // namespace railyard::validate
