// node.memory: memory available for a job (MemAvailable against MemTotal, /proc/meminfo),
// and, when the plan names it, the installed total: a DIMM that failed training at boot shows
// as a node with less memory than its siblings.
#include <fmt/format.h>

#include <optional>

#include "railyard/base/units.h"
#include "railyard/validate/check.h"
#include "railyard/validate/internal/proc_text.h"

namespace railyard::validate {
namespace {

class MemoryCheck final : public BasicCheck {
 public:
  MemoryCheck()
      : BasicCheck({.id = "node.memory",
                    .summary = "memory available (MemAvailable) and, if set, MemTotal",
                    .category = Category::kNode,
                    .cost = Cost::kQuick,
                    .timeout = std::chrono::seconds(2),
                    .unit = Unit::kBytes,
                    .default_warn = "10% of expected",
                    .params = {{"min_total", "0",
                                "smallest MemTotal accepted (e.g. 1900GiB); 0: not checked"}}}) {}

  Outcome Run(const CheckContext& ctx) const override {
    constexpr const char* kPath = "/proc/meminfo";
    Result<std::string> text = ctx.env->ReadFile(kPath);
    if (!text.ok()) return Outcome::Unknown(text.status().message());
    std::optional<uint64_t> total = internal::MeminfoValue(*text, "MemTotal");
    std::optional<uint64_t> avail = internal::MeminfoValue(*text, "MemAvailable");
    if (!total || !avail || *total == 0) {
      return Outcome::Unknown(fmt::format("{}: no readable MemTotal and MemAvailable", kPath));
    }
    std::string total_text = base::FormatBytes(*total);
    const std::string& min_text = ctx.settings->params.find("min_total")->second;
    Result<uint64_t> min_total = base::ParseBytes(min_text);
    if (!min_total.ok()) {
      return Outcome::Unknown(fmt::format("parameter min_total: {}", min_total.status().message()));
    }
    if (*total < *min_total) {
      return Outcome::Fail(fmt::format("memory total {}, expected at least {}", total_text,
                                       base::FormatBytes(*min_total)))
          .With(total_text, ">= " + base::FormatBytes(*min_total));
    }
    return Judge(info(), *ctx.settings, static_cast<double>(*avail),
                 fmt::format("memory available {} of {}", base::FormatBytes(*avail), total_text),
                 {.expected = static_cast<double>(*total)});
  }
};

}  // namespace

std::unique_ptr<Check> NewMemoryCheck() { return std::make_unique<MemoryCheck>(); }

}  // namespace railyard::validate
