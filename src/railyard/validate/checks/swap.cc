// node.swap: swap in use on a training node. A rank paged out stalls every collective it
// takes part in, so any use warns and a large amount fails. Reads /proc/meminfo.
#include <fmt/format.h>

#include <optional>

#include "railyard/validate/check.h"
#include "railyard/validate/internal/proc_text.h"

namespace railyard::validate {
namespace {

class SwapCheck final : public BasicCheck {
 public:
  SwapCheck()
      : BasicCheck({.id = "node.swap",
                    .summary = "swap in use (any warns, more than the fail bound fails)",
                    .category = Category::kNode,
                    .cost = Cost::kQuick,
                    .timeout = std::chrono::seconds(2),
                    .unit = Unit::kBytes,
                    .higher_is_better = false,
                    .default_warn = "0B",
                    .default_fail = "1GiB"}) {}

  Outcome Run(const CheckContext& ctx) const override {
    constexpr const char* kPath = "/proc/meminfo";
    Result<std::string> text = ctx.env->ReadFile(kPath);
    if (!text.ok()) return Outcome::Unknown(text.status().message());
    std::optional<uint64_t> total = internal::MeminfoValue(*text, "SwapTotal");
    std::optional<uint64_t> free = internal::MeminfoValue(*text, "SwapFree");
    if (!total || !free || *free > *total) {
      return Outcome::Unknown(fmt::format("{}: no readable SwapTotal and SwapFree", kPath));
    }
    double used = static_cast<double>(*total - *free);
    return Judge(info(), *ctx.settings, used,
                 fmt::format("swap in use {} of {}", FormatValue(used, Unit::kBytes),
                             FormatValue(static_cast<double>(*total), Unit::kBytes)));
  }
};

}  // namespace

std::unique_ptr<Check> NewSwapCheck() { return std::make_unique<SwapCheck>(); }

}  // namespace railyard::validate
