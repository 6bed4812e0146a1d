// node.hugepages: the default-size huge pages reserved (HugePages_Total in /proc/meminfo)
// against the plan's `min_pages`. Jobs whose allocator or RDMA registration uses hugetlbfs
// fail at start-up without them. SKIPPED while the plan expects none (min_pages 0).
#include <fmt/format.h>

#include <optional>

#include "railyard/base/units.h"
#include "railyard/validate/check.h"
#include "railyard/validate/internal/proc_text.h"

namespace railyard::validate {
namespace {

class HugepagesCheck final : public BasicCheck {
 public:
  HugepagesCheck()
      : BasicCheck({.id = "node.hugepages",
                    .summary = "huge pages reserved, at least the plan's min_pages",
                    .category = Category::kNode,
                    .cost = Cost::kQuick,
                    .timeout = std::chrono::seconds(2),
                    .unit = Unit::kCount,
                    .default_fail = "100% of expected",
                    .params = {{"min_pages", "0", "huge pages of the default size expected"}}}) {}

  Outcome Run(const CheckContext& ctx) const override {
    constexpr const char* kPath = "/proc/meminfo";
    Result<std::string> text = ctx.env->ReadFile(kPath);
    if (!text.ok()) return Outcome::Unknown(text.status().message());
    std::optional<uint64_t> total = internal::MeminfoValue(*text, "HugePages_Total");
    std::optional<uint64_t> free = internal::MeminfoValue(*text, "HugePages_Free");
    std::optional<uint64_t> size = internal::MeminfoValue(*text, "Hugepagesize");
    if (!total || !free || !size) {
      return Outcome::Unknown(
          fmt::format("{}: no readable HugePages_Total, HugePages_Free and Hugepagesize", kPath));
    }
    std::string what =
        fmt::format("{} huge pages of {} ({} free)", *total, base::FormatBytes(*size), *free);
    const std::string& min_text = ctx.settings->params.find("min_pages")->second;
    std::optional<uint64_t> min_pages = internal::ParseUnsigned(min_text);
    if (!min_pages) {
      return Outcome::Unknown(
          fmt::format("parameter min_pages '{}' is not a whole number", min_text));
    }
    if (*min_pages == 0) {
      return Outcome::Skipped(fmt::format("{}; the plan expects none (set min_pages)", what))
          .With(std::to_string(*total), "");
    }
    return Judge(info(), *ctx.settings, static_cast<double>(*total), what,
                 {.expected = static_cast<double>(*min_pages)});
  }
};

}  // namespace

std::unique_ptr<Check> NewHugepagesCheck() { return std::make_unique<HugepagesCheck>(); }

}  // namespace railyard::validate
