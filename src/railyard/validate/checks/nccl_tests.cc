// collective.nccl_tests: NVIDIA's nccl-tests all_reduce_perf through its adapter
// (nccl_tests.h), where it is installed: GPU collectives belong to NCCL, and its own test is
// what GPU operators trust. The out-of-place busbw of the largest size is judged against the
// fleet median (each host runs it over its own GPUs, -g from the profile's GPU count, unless
// the plan gives a launcher). SKIPPED "nccl-tests not installed (all_reduce_perf not on
// PATH)" where it is absent, never FAIL; UNKNOWN when it crashes or runs past the timeout;
// FAIL when it reports wrong values.
//
// It needs no GPU in its descriptor so that the reason it is skipped on a host without
// nccl-tests is that, not the profile's GPU count. It runs from the coordinator; on one host
// alone it is SKIPPED.
#include "railyard/validate/check.h"

namespace railyard::validate {
namespace {

class NcclTestsCheck final : public CoordinatorCheck {
 public:
  NcclTestsCheck()
      : CoordinatorCheck(
            {.id = "collective.nccl_tests",
             .summary = "nccl-tests all_reduce_perf bus bandwidth, where installed",
             .category = Category::kCollective,
             .cost = Cost::kFull,
             .timeout = std::chrono::seconds(120),
             .unit = Unit::kRate,
             .default_warn = "80% of median",
             .default_fail = "50% of median",
             .params = {{"binary", "", "all_reduce_perf's path; empty: found on PATH"},
                        {"args", "-b 8 -e 128M -f 2 -c 1",
                         "its arguments (sizes 8 B to 128 MiB doubling, results checked)"},
                        {"launcher", "",
                         "command put before it for a multi-host run, e.g. "
                         "'mpirun -np 16 --host ...'; empty: each host alone"}}}) {}
};

}  // namespace

std::unique_ptr<Check> NewNcclTestsCheck() { return std::make_unique<NcclTestsCheck>(); }

}  // namespace railyard::validate
