// gpu.count: the GPUs NVML sees against the profile's count (from the plan or the topology).
// A GPU that fell off the bus (Xid 79) or was not initialised leaves the node short, and a
// job that asks for 8 per node then fails at start or, worse, hangs in its first collective.
// SKIPPED when the profile expects no GPU (Gate) or NVML is not installed.
#include <fmt/format.h>

#include "railyard/validate/check.h"
#include "railyard/validate/internal/nvml.h"

namespace railyard::validate {
namespace {

class GpuCountCheck final : public BasicCheck {
 public:
  GpuCountCheck()
      : BasicCheck({.id = "gpu.count",
                    .summary = "GPUs visible to NVML, at least the profile's count",
                    .category = Category::kGpu,
                    .cost = Cost::kQuick,
                    .timeout = std::chrono::seconds(5),
                    .needs = {.gpu = true},
                    .unit = Unit::kCount,
                    .default_fail = "100% of expected"}) {}

  Outcome Run(const CheckContext& ctx) const override {
    Result<std::vector<GpuState>> gpus = ctx.env->Gpus();
    if (!gpus.ok()) return internal::NvmlUnavailable(gpus.status());
    std::string what = fmt::format("{} GPU{}", gpus->size(), gpus->size() == 1 ? "" : "s");
    if (!gpus->empty() && !gpus->front().name.empty()) {
      what += fmt::format(" ({})", gpus->front().name);
    }
    Outcome o = Judge(info(), *ctx.settings, static_cast<double>(gpus->size()), what,
                      {.expected = static_cast<double>(ctx.profile->gpus)});
    o.expected = fmt::format(">= {}", ctx.profile->gpus);
    return o;
  }
};

}  // namespace

std::unique_ptr<Check> NewGpuCountCheck() { return std::make_unique<GpuCountCheck>(); }

}  // namespace railyard::validate
