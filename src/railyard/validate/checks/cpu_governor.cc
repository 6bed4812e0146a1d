// node.cpu_governor: the cpufreq scaling governor of every CPU. With powersave or ondemand a
// core ramps its clock after the work arrives, which adds latency jitter to small messages
// and the progress threads of collectives; training nodes run "performance". SKIPPED where
// the kernel exposes no cpufreq (most VMs: the hypervisor or firmware sets the clock).
#include <fmt/format.h>

#include <map>

#include "railyard/base/strings.h"
#include "railyard/validate/check.h"

namespace railyard::validate {
namespace {

constexpr const char* kCpuDir = "/sys/devices/system/cpu";

bool IsCpuName(std::string_view name) {
  return name.size() > 3 && name.starts_with("cpu") &&
         name.find_first_not_of("0123456789", 3) == std::string_view::npos;
}

class CpuGovernorCheck final : public BasicCheck {
 public:
  CpuGovernorCheck()
      : BasicCheck({.id = "node.cpu_governor",
                    .summary = "every CPU's cpufreq governor is the expected one (performance)",
                    .category = Category::kNode,
                    .cost = Cost::kQuick,
                    .timeout = std::chrono::seconds(2),
                    .params = {{"governor", "performance", "the governor every CPU must use"}}}) {}

  Outcome Run(const CheckContext& ctx) const override {
    const std::string& want = ctx.settings->params.find("governor")->second;
    Result<std::vector<std::string>> names = ctx.env->ListDir(kCpuDir);
    if (!names.ok()) return Outcome::Unknown(names.status().message());
    std::map<std::string, int> by_governor;
    int cpus = 0;
    for (const std::string& name : *names) {
      if (!IsCpuName(name)) continue;
      ++cpus;
      std::string path = fmt::format("{}/{}/cpufreq/scaling_governor", kCpuDir, name);
      Result<std::string> g = ctx.env->ReadFile(path);
      if (g.ok()) {
        ++by_governor[std::string(base::StripAsciiWhitespace(*g))];
      } else if (g.status().code() != StatusCode::kNotFound) {
        return Outcome::Unknown(g.status().message());
      }
    }
    if (cpus == 0) return Outcome::Unknown(fmt::format("{}: no cpuN entries", kCpuDir));
    if (by_governor.empty()) {
      return Outcome::Skipped(fmt::format(
          "no cpufreq governor on {} CPUs (the clock is set by the hypervisor or firmware)", cpus));
    }
    std::vector<std::string> found;
    for (const auto& [g, n] : by_governor) found.push_back(fmt::format("{} x{}", g, n));
    std::string measured = fmt::format("{}", fmt::join(found, ", "));
    auto it = by_governor.find(want);
    int right = it == by_governor.end() ? 0 : it->second;
    int total = 0;
    for (const auto& [g, n] : by_governor) total += n;
    if (right == total) {
      return Outcome::Pass(fmt::format("{} CPUs use {}", total, want)).With(measured, want);
    }
    return Outcome::Warn(fmt::format("{} of {} CPUs do not use {} ({})", total - right, total, want,
                                     measured))
        .With(measured, want);
  }
};

}  // namespace

std::unique_ptr<Check> NewCpuGovernorCheck() { return std::make_unique<CpuGovernorCheck>(); }

}  // namespace railyard::validate
