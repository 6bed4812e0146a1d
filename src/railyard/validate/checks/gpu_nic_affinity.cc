// gpu.nic_affinity: each GPU's PCIe distance to each NIC (PIX, PXB, PHB, NODE, SYS, as
// `nvidia-smi topo -m` names them) is no farther than the topology says. NCCL pairs each GPU
// with its closest NIC for GPUDirect RDMA; a NIC in the wrong slot, a riser that moved or a
// BIOS that changed the PCIe layout sends that traffic across the CPU interconnect at a
// fraction of the rate. Discovered through topo's discovery (sysfs, NVML's GPU numbering).
// SKIPPED when the profile expects no GPU (Gate) or the topology lists no paths for the host.
#include <fmt/format.h>

#include <map>
#include <utility>
#include <vector>

#include "railyard/validate/check.h"

namespace railyard::validate {
namespace {

class GpuNicAffinityCheck final : public BasicCheck {
 public:
  GpuNicAffinityCheck()
      : BasicCheck({.id = "gpu.nic_affinity",
                    .summary = "GPU-to-NIC PCIe distances no farther than the topology's",
                    .category = Category::kGpu,
                    .cost = Cost::kQuick,
                    .timeout = std::chrono::seconds(5),
                    .needs = {.gpu = true}}) {}

  Outcome Run(const CheckContext& ctx) const override {
    const std::vector<topo::GpuNicPath>& want = ctx.profile->gpu_nic_paths;
    if (want.empty()) {
      return Outcome::Skipped(fmt::format(
          "the topology lists no GPU-NIC paths for {} (give --topology with them)", ctx.host));
    }
    Result<std::vector<topo::GpuNicPath>> found = ctx.env->GpuNicPaths();
    if (!found.ok()) return Outcome::Unknown(found.status().message());
    std::map<std::pair<int, std::string>, topo::PathClass> here;
    for (const topo::GpuNicPath& p : *found) here[{p.gpu, p.nic}] = p.path;
    std::vector<Outcome> parts;
    int right = 0;
    for (const topo::GpuNicPath& w : want) {
      auto it = here.find({w.gpu, w.nic});
      if (it == here.end()) {
        parts.push_back(
            Outcome::Fail(fmt::format("GPU {} to {}: not found on this host (expected {})", w.gpu,
                                      w.nic, topo::PathClassName(w.path))));
      } else if (static_cast<int>(it->second) > static_cast<int>(w.path)) {
        parts.push_back(Outcome::Fail(fmt::format("GPU {} to {} is {}, expected {} or closer",
                                                  w.gpu, w.nic, topo::PathClassName(it->second),
                                                  topo::PathClassName(w.path))));
      } else {
        ++right;
      }
    }
    std::string measured = fmt::format("{} of {} as expected", right, want.size());
    std::string expected = fmt::format("{} paths from the topology", want.size());
    if (parts.empty()) {
      return Outcome::Pass(fmt::format("{} GPU-NIC paths as close as expected", right))
          .With(measured, expected);
    }
    return Worst(parts).With(measured, expected);
  }
};

}  // namespace

std::unique_ptr<Check> NewGpuNicAffinityCheck() { return std::make_unique<GpuNicAffinityCheck>(); }

}  // namespace railyard::validate
