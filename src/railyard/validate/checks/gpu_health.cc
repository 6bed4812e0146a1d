// gpu.health: per GPU, from NVML: uncorrected (volatile) ECC errors since boot and a failed
// row remapping FAIL (the memory is bad; the GPU needs service); ECC disabled and a row
// remapping that waits for a GPU reset WARN. Values a GPU does not support are not judged.
// SKIPPED when the profile expects no GPU (Gate), NVML is not installed, or it sees no GPU
// (gpu.count reports that).
#include <fmt/format.h>

#include <vector>

#include "railyard/validate/check.h"
#include "railyard/validate/internal/nvml.h"

namespace railyard::validate {
namespace {

class GpuHealthCheck final : public BasicCheck {
 public:
  GpuHealthCheck()
      : BasicCheck({.id = "gpu.health",
                    .summary = "no uncorrected ECC errors or failed row remapping; ECC on",
                    .category = Category::kGpu,
                    .cost = Cost::kQuick,
                    .timeout = std::chrono::seconds(5),
                    .needs = {.gpu = true}}) {}

  Outcome Run(const CheckContext& ctx) const override {
    Result<std::vector<GpuState>> gpus = ctx.env->Gpus();
    if (!gpus.ok()) return internal::NvmlUnavailable(gpus.status());
    if (gpus->empty()) return Outcome::Skipped("NVML sees no GPU (see gpu.count)");
    std::vector<Outcome> parts;
    uint64_t uncorrected = 0;
    for (const GpuState& g : *gpus) {
      if (g.ecc_uncorrected.value_or(0) > 0) {
        uncorrected += *g.ecc_uncorrected;
        parts.push_back(Outcome::Fail(fmt::format("GPU {} has {} uncorrected ECC errors since boot",
                                                  g.index, *g.ecc_uncorrected)));
      }
      if (g.remap_failure.value_or(false)) {
        parts.push_back(Outcome::Fail(fmt::format("GPU {} failed a row remapping", g.index)));
      }
      if (g.remap_pending.value_or(false)) {
        parts.push_back(Outcome::Warn(
            fmt::format("GPU {} has a row remapping pending (reset the GPU)", g.index)));
      }
      if (g.ecc_enabled.has_value() && !*g.ecc_enabled) {
        parts.push_back(Outcome::Warn(fmt::format("GPU {} runs with ECC disabled", g.index)));
      }
    }
    std::string measured = fmt::format("{} uncorrected ECC", uncorrected);
    if (parts.empty()) {
      return Outcome::Pass(
                 fmt::format("{} GPU{} healthy", gpus->size(), gpus->size() == 1 ? "" : "s"))
          .With(measured, "0 uncorrected ECC");
    }
    return Worst(parts).With(measured, "0 uncorrected ECC");
  }
};

}  // namespace

std::unique_ptr<Check> NewGpuHealthCheck() { return std::make_unique<GpuHealthCheck>(); }

}  // namespace railyard::validate
