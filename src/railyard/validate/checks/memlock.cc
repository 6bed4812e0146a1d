// node.memlock: the locked-memory limit RDMA registration needs (unlimited on an RDMA
// profile). Reads RLIMIT_MEMLOCK of the checking process, which the agent inherits from the
// same place a job's ranks do (limits.conf, the Slurm or container runtime's settings).
#include <fmt/format.h>

#include <cmath>
#include <limits>

#include "railyard/validate/check.h"

namespace railyard::validate {
namespace {

class MemlockCheck final : public BasicCheck {
 public:
  MemlockCheck()
      : BasicCheck(
            {.id = "node.memlock",
             .summary = "RLIMIT_MEMLOCK at least the profile's memlock (unlimited with RDMA)",
             .category = Category::kNode,
             .cost = Cost::kQuick,
             .timeout = std::chrono::seconds(2),
             .unit = Unit::kBytes,
             .default_fail = "100% of expected"}) {}

  Outcome Run(const CheckContext& ctx) const override {
    Result<uint64_t> limit = ctx.env->MemlockLimit();
    if (!limit.ok()) return Outcome::Unknown(limit.status().message());
    auto as_double = [](uint64_t v) {
      return v == kUnlimited ? std::numeric_limits<double>::infinity() : static_cast<double>(v);
    };
    double measured = as_double(*limit);
    std::string what = fmt::format("memlock limit {}", FormatValue(measured, Unit::kBytes));
    if (!ctx.profile->memlock_bytes) {
      return Outcome::Skipped(
          fmt::format("{}; profile {} expects no limit", what, ctx.profile->name));
    }
    double expected = as_double(*ctx.profile->memlock_bytes);
    // A fraction of "unlimited" is still unlimited: compare directly, not through a product.
    if (std::isinf(expected) && !std::isinf(measured)) {
      return Outcome::Fail(fmt::format("{}, expected unlimited", what));
    }
    return Judge(info(), *ctx.settings, measured, what, {.expected = expected});
  }
};

}  // namespace

std::unique_ptr<Check> NewMemlockCheck() { return std::make_unique<MemlockCheck>(); }

}  // namespace railyard::validate
