// node.cpus: the CPUs online, from /sys/devices/system/cpu/online. A CPU the firmware or a
// hot-unplug took offline leaves the job's per-rank thread pinning short; a plan sets the
// count it expects with a bound ("fail: 64").
#include <fmt/format.h>

#include "railyard/topo/node_json.h"
#include "railyard/validate/check.h"

namespace railyard::validate {
namespace {

class CpusCheck final : public BasicCheck {
 public:
  CpusCheck()
      : BasicCheck({.id = "node.cpus",
                    .summary = "CPUs online, against the plan's bounds",
                    .category = Category::kNode,
                    .cost = Cost::kQuick,
                    .timeout = std::chrono::seconds(2),
                    .unit = Unit::kCount}) {}

  Outcome Run(const CheckContext& ctx) const override {
    constexpr const char* kPath = "/sys/devices/system/cpu/online";
    Result<std::string> text = ctx.env->ReadFile(kPath);
    if (!text.ok()) return Outcome::Unknown(text.status().message());
    Result<std::vector<int>> cpus = topo::ParseCpuList(*text);
    if (!cpus.ok()) return Outcome::Unknown(fmt::format("{}: {}", kPath, cpus.status().message()));
    if (cpus->empty()) return Outcome::Unknown(fmt::format("{}: no CPU listed", kPath));
    double n = static_cast<double>(cpus->size());
    return Judge(info(), *ctx.settings, n, fmt::format("{} CPUs online", cpus->size()));
  }
};

}  // namespace

std::unique_ptr<Check> NewCpusCheck() { return std::make_unique<CpusCheck>(); }

}  // namespace railyard::validate
