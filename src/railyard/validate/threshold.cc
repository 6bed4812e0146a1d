#include "railyard/validate/threshold.h"

#include <fmt/format.h>

#include <charconv>
#include <chrono>
#include <cmath>
#include <limits>

#include "railyard/base/strings.h"
#include "railyard/base/units.h"

namespace railyard::validate {
namespace {

Result<double> Number(std::string_view s) {
  double v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size() || !std::isfinite(v) || v < 0) {
    return InvalidArgument("'{}' is not a non-negative number", s);
  }
  return v;
}

Result<double> Absolute(std::string_view s, Unit unit) {
  switch (unit) {
    case Unit::kNone:
      return InvalidArgument("this check takes no threshold");
    case Unit::kRate: {
      RY_ASSIGN_OR_RETURN(uint64_t bits, base::ParseRateBits(s));
      return static_cast<double>(bits);
    }
    case Unit::kBytes: {
      if (s == "unlimited") return std::numeric_limits<double>::infinity();
      RY_ASSIGN_OR_RETURN(uint64_t bytes, base::ParseBytes(s));
      return static_cast<double>(bytes);
    }
    case Unit::kDuration: {
      RY_ASSIGN_OR_RETURN(std::chrono::nanoseconds d, base::ParseDuration(s));
      return std::chrono::duration<double>(d).count();
    }
    case Unit::kCount:
      return Number(s);
  }
  return InvalidArgument("unknown unit");
}

}  // namespace

std::string_view UnitName(Unit u) {
  switch (u) {
    case Unit::kNone:
      return "none";
    case Unit::kRate:
      return "rate";
    case Unit::kBytes:
      return "bytes";
    case Unit::kDuration:
      return "duration";
    case Unit::kCount:
      return "count";
  }
  return "none";
}

Result<Threshold> ParseThreshold(std::string_view text, Unit unit) {
  std::string_view s = base::StripAsciiWhitespace(text);
  Threshold t;
  t.text = std::string(s);
  auto fail = [&](std::string_view why) {
    return InvalidArgument(
        "threshold '{}': {} (expected '80% of median', '90% of expected' or a {} value)", text, why,
        UnitName(unit));
  };
  if (unit == Unit::kNone) return fail("this check takes no threshold");
  size_t pct = s.find('%');
  if (pct != s.npos) {
    std::string_view rest = base::StripAsciiWhitespace(s.substr(pct + 1));
    if (rest == "of median") {
      t.kind = Threshold::Kind::kOfMedian;
    } else if (rest == "of expected") {
      t.kind = Threshold::Kind::kOfExpected;
    } else {
      return fail("a percentage must be followed by 'of median' or 'of expected'");
    }
    Result<double> v = Number(base::StripAsciiWhitespace(s.substr(0, pct)));
    if (!v.ok() || *v > 1000) return fail("the percentage must be a number from 0 to 1000");
    t.value = *v / 100;
    return t;
  }
  Result<double> v = Absolute(s, unit);
  if (!v.ok()) return fail(v.status().message());
  t.value = *v;
  return t;
}

Result<double> Bound(const Threshold& t, const References& refs) {
  switch (t.kind) {
    case Threshold::Kind::kAbsolute:
      return t.value;
    case Threshold::Kind::kOfMedian:
      if (refs.median <= 0) {
        return FailedPrecondition("threshold '{}': no fleet median to compare with", t.text);
      }
      return t.value * refs.median;
    case Threshold::Kind::kOfExpected:
      if (refs.expected <= 0) {
        return FailedPrecondition(
            "threshold '{}': no expected value (give the rate in the topology or the plan's "
            "profile, or use a median threshold)",
            t.text);
      }
      return t.value * refs.expected;
  }
  return Internal("unknown threshold kind");
}

Result<bool> Breaches(const Threshold& t, bool higher_is_better, double measured,
                      const References& refs) {
  RY_ASSIGN_OR_RETURN(double bound, Bound(t, refs));
  return higher_is_better ? measured < bound : measured > bound;
}

std::string FormatValue(double value, Unit unit) {
  switch (unit) {
    case Unit::kRate:
      return base::FormatRateBits(value);
    case Unit::kBytes:
      if (std::isinf(value)) return "unlimited";
      return base::FormatBytes(static_cast<uint64_t>(std::llround(value)));
    case Unit::kDuration:
      return base::FormatDuration(std::chrono::nanoseconds(std::llround(value * 1e9)));
    case Unit::kNone:
    case Unit::kCount:
      break;
  }
  return fmt::format("{:g}", value);
}

}  // namespace railyard::validate
