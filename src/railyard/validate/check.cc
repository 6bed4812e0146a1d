#include "railyard/validate/check.h"

#include <fmt/format.h>

#include <array>
#include <utility>

namespace railyard::validate {
namespace {

constexpr std::array<std::pair<std::string_view, Category>, 5> kCategories = {{
    {"node", Category::kNode},
    {"fabric", Category::kFabric},
    {"collective", Category::kCollective},
    {"storage", Category::kStorage},
    {"gpu", Category::kGpu},
}};
constexpr std::array<std::pair<std::string_view, Cost>, 3> kCosts = {{
    {"quick", Cost::kQuick},
    {"full", Cost::kFull},
    {"invasive", Cost::kInvasive},
}};

template <typename T, size_t N>
Result<T> ParseName(const std::array<std::pair<std::string_view, T>, N>& table, std::string_view s,
                    std::string_view what) {
  std::string names;
  for (const auto& [name, value] : table) {
    if (name == s) return value;
    names += names.empty() ? "" : ", ";
    names += name;
  }
  return InvalidArgument("unknown {} '{}' (expected one of: {})", what, s, names);
}

template <typename T, size_t N>
std::string_view NameOf(const std::array<std::pair<std::string_view, T>, N>& table, T v) {
  for (const auto& [name, value] : table) {
    if (value == v) return name;
  }
  return "?";
}

}  // namespace

std::string_view CategoryName(Category c) { return NameOf(kCategories, c); }
std::string_view CostName(Cost c) { return NameOf(kCosts, c); }
Result<Category> ParseCategory(std::string_view s) { return ParseName(kCategories, s, "category"); }
Result<Cost> ParseCost(std::string_view s) { return ParseName(kCosts, s, "cost"); }

Result<CheckSettings> DefaultSettings(const CheckInfo& info) {
  CheckSettings s;
  if (!info.default_warn.empty()) {
    RY_ASSIGN_OR_RETURN(s.warn, ParseThreshold(info.default_warn, info.unit));
  }
  if (!info.default_fail.empty()) {
    RY_ASSIGN_OR_RETURN(s.fail, ParseThreshold(info.default_fail, info.unit));
  }
  for (const Param& p : info.params) s.params[p.name] = p.default_value;
  return s;
}

Outcome CoordinatorCheck::Run(const CheckContext&) const {
  return Outcome::Skipped("runs from the coordinator (railyard validate --hosts)");
}

std::optional<Outcome> Gate(const CheckInfo& info, const Profile& profile, const Site& site) {
  if (info.needs.gpu && profile.gpus < 0) {
    return Outcome::Skipped(fmt::format(
        "profile {} does not say how many GPUs to expect (set gpus in the plan, or give the "
        "topology)",
        profile.name));
  }
  if (info.needs.gpu && profile.gpus == 0) {
    return Outcome::Skipped(fmt::format("no GPU expected on profile {}", profile.name));
  }
  if (info.needs.fabric_provider && profile.rdma.has_value() && !*profile.rdma &&
      profile.fabric_provider.empty()) {
    return Outcome::Skipped(fmt::format("no fabric provider expected on profile {}", profile.name));
  }
  if (info.needs.root && !site.root) return Outcome::Skipped("needs root");
  if (info.needs.shared_dir && !site.shared_dir) {
    return Outcome::Skipped("needs a shared directory (none given)");
  }
  return std::nullopt;
}

Outcome Judge(const CheckInfo& info, const CheckSettings& settings, double measured,
              std::string_view what, const References& refs) {
  const char* side = info.higher_is_better ? "below" : "above";
  std::string expected;  // "fail < 1 MiB, warn < 4 MiB", for the report's expected column
  for (auto [bound, name] :
       {std::pair{&settings.fail, "fail"}, std::pair{&settings.warn, "warn"}}) {
    if (!*bound) continue;
    Result<double> b = Bound(**bound, refs);
    expected += fmt::format("{}{} {} {}", expected.empty() ? "" : ", ", name,
                            info.higher_is_better ? "<" : ">",
                            b.ok() ? FormatValue(*b, info.unit) : (*bound)->text);
  }
  std::string value = FormatValue(measured, info.unit);
  for (auto [bound, verdict] :
       {std::pair{&settings.fail, Verdict::kFail}, std::pair{&settings.warn, Verdict::kWarn}}) {
    if (!*bound) continue;
    Result<bool> breached = Breaches(**bound, info.higher_is_better, measured, refs);
    if (!breached.ok()) {
      return Outcome::Unknown(fmt::format("{}: {}", what, breached.status().message()))
          .With(value, expected);
    }
    if (*breached) {
      double b = *Bound(**bound, refs);
      std::string limit = FormatValue(b, info.unit);
      if ((*bound)->kind != Threshold::Kind::kAbsolute)
        limit += fmt::format(" ({})", (*bound)->text);
      return Outcome{verdict, fmt::format("{}, {} {} limit {}", what, side,
                                          verdict == Verdict::kFail ? "fail" : "warn", limit)}
          .With(value, expected);
    }
  }
  return Outcome::Pass(std::string(what)).With(value, expected);
}

}  // namespace railyard::validate
