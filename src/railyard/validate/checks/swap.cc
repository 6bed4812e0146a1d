// node.swap: swap in use on a training node. A rank paged out stalls every collective it
// takes part in, so any use warns and a large amount fails. Reads /proc/meminfo.
#include <fmt/format.h>

#include <charconv>
#include <optional>

#include "railyard/base/strings.h"
#include "railyard/validate/check.h"

namespace railyard::validate {
namespace {

// The value in bytes of a "Key:   1234 kB" line of /proc/meminfo.
std::optional<uint64_t> MeminfoBytes(std::string_view text, std::string_view key) {
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    std::string_view line = text.substr(at, end == text.npos ? text.npos : end - at);
    at = end == text.npos ? text.size() : end + 1;
    if (!line.starts_with(key) || line.size() <= key.size() || line[key.size()] != ':') continue;
    std::string_view rest = base::StripAsciiWhitespace(line.substr(key.size() + 1));
    uint64_t v = 0;
    auto [p, ec] = std::from_chars(rest.data(), rest.data() + rest.size(), v);
    if (ec != std::errc()) return std::nullopt;
    std::string_view unit = base::StripAsciiWhitespace(rest.substr(p - rest.data()));
    if (unit == "kB") return v * 1024;
    return unit.empty() ? std::optional<uint64_t>(v) : std::nullopt;
  }
  return std::nullopt;
}

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
    std::optional<uint64_t> total = MeminfoBytes(*text, "SwapTotal");
    std::optional<uint64_t> free = MeminfoBytes(*text, "SwapFree");
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
