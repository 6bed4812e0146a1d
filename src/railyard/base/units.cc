#include "railyard/base/units.h"

#include <cctype>
#include <charconv>
#include <cmath>
#include <limits>
#include <optional>
#include <span>

#include "railyard/base/strings.h"

namespace railyard::base {
namespace {

// 128-bit intermediates keep "1.5GiB" exact; a double would round large sizes.
__extension__ typedef unsigned __int128 Uint128;

// Fraction digits beyond this are dropped: they are below any unit's resolution and more would
// overflow the 64-bit fraction.
constexpr int kMaxFractionDigits = 18;

struct Unit {
  std::string_view name;
  uint64_t multiplier;
};

constexpr uint64_t kK = 1000, kM = kK * kK, kG = kM * kK, kT = kG * kK, kP = kT * kK, kE = kP * kK;
constexpr uint64_t kKi = uint64_t{1} << 10, kMi = kKi << 10, kGi = kMi << 10, kTi = kGi << 10,
                   kPi = kTi << 10, kEi = kPi << 10;

// P and E are here so that everything FormatBytes prints parses back.
constexpr Unit kByteUnits[] = {
    {"B", 1},     {"KB", kK},   {"kB", kK},   {"MB", kM},   {"GB", kG},
    {"TB", kT},   {"PB", kP},   {"EB", kE},   {"KiB", kKi}, {"MiB", kMi},
    {"GiB", kGi}, {"TiB", kTi}, {"PiB", kPi}, {"EiB", kEi}, {"kib", kKi},
    {"mib", kMi}, {"gib", kGi}, {"tib", kTi}, {"pib", kPi}, {"eib", kEi},
};

constexpr Unit kBitUnits[] = {
    {"bit", 1},   {"kbit", kK}, {"Kbit", kK}, {"mbit", kM}, {"Mbit", kM}, {"gbit", kG},
    {"Gbit", kG}, {"tbit", kT}, {"Tbit", kT}, {"pbit", kP}, {"Pbit", kP},
};

// Largest first: ParseDuration requires parts in this order.
constexpr Unit kDurationUnits[] = {
    {"h", 3600ull * 1000 * 1000 * 1000},
    {"m", 60ull * 1000 * 1000 * 1000},
    {"s", 1000 * 1000 * 1000},
    {"ms", 1000 * 1000},
    {"us", 1000},
    {"\u00b5s", 1000},
    {"ns", 1},
};

constexpr std::string_view kBytesExpected =
    "B, KB, MB, GB, TB, PB, EB, KiB, MiB, GiB, TiB, PiB, EiB";
constexpr std::string_view kRateExpected =
    "bit, kbit, Mbit, Gbit, Tbit, or a byte rate like MB/s, GiB/s";
constexpr std::string_view kDurationExpected = "ns, us, ms, s, m, h";

// What a parser is reading, for error messages.
struct Kind {
  std::string_view noun;     // "size"
  std::string_view example;  // "64MiB"
};
constexpr Kind kSize{"size", "64MiB"};
constexpr Kind kRate{"rate", "10Gbit"};
constexpr Kind kDuration{"duration", "1m30s"};

// A non-negative decimal as written: whole + frac / 10^frac_digits.
struct Decimal {
  uint64_t whole = 0;
  uint64_t frac = 0;
  int frac_digits = 0;
};

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

uint64_t Pow10(int n) {
  uint64_t p = 1;
  for (int i = 0; i < n; ++i) p *= 10;
  return p;
}

const Unit* FindUnit(std::span<const Unit> units, std::string_view name) {
  for (const Unit& u : units) {
    if (u.name == name) return &u;
  }
  return nullptr;
}

Status Invalid(const Kind& kind, std::string_view input, std::string_view why) {
  return InvalidArgument("invalid {} '{}': {}", kind.noun, input, why);
}

// "b", "kb", "Mb", ...: a lowercase b with at most a prefix letter.
bool IsAmbiguousBitOrByte(std::string_view unit) {
  if (unit == "b") return true;
  return unit.size() == 2 && unit[1] == 'b' &&
         std::string_view("kKmMgGtT").find(unit[0]) != std::string_view::npos;
}

// The common start of every parser: non-empty, not negative.
Result<std::string_view> CheckStart(const Kind& kind, std::string_view input) {
  std::string_view t = StripAsciiWhitespace(input);
  if (t.empty()) {
    return Invalid(kind, input, fmt::format("empty (expected a value like {})", kind.example));
  }
  if (t.front() == '-')
    return Invalid(kind, input, fmt::format("a {} cannot be negative", kind.noun));
  return t;
}

// Reads "digits[.digits]" from the front of `s` and advances `s` past it.
Result<Decimal> ReadDecimal(std::string_view& s, const Kind& kind, std::string_view input) {
  size_t i = 0;
  while (i < s.size() && IsDigit(s[i])) ++i;
  if (i == 0) {
    return Invalid(kind, input,
                   fmt::format("expected a number at '{}' (like {})", s, kind.example));
  }
  Decimal d;
  auto [ptr, ec] = std::from_chars(s.data(), s.data() + i, d.whole);
  if (ec != std::errc()) return Invalid(kind, input, "number too large");
  if (i < s.size() && s[i] == '.') {
    size_t start = ++i;
    while (i < s.size() && IsDigit(s[i])) ++i;
    if (i == start) {
      return Invalid(kind, input, fmt::format("expected digits after '.' (like {})", kind.example));
    }
    d.frac_digits = static_cast<int>(std::min<size_t>(i - start, kMaxFractionDigits));
    std::from_chars(s.data() + start, s.data() + start + d.frac_digits, d.frac);
  }
  s.remove_prefix(i);
  return d;
}

// d * multiplier rounded to the nearest integer (halves up); nullopt past 2^64-1.
std::optional<uint64_t> Scale(const Decimal& d, uint64_t multiplier) {
  Uint128 whole = static_cast<Uint128>(d.whole) * multiplier;
  Uint128 denom = Pow10(d.frac_digits);
  Uint128 frac = (static_cast<Uint128>(d.frac) * multiplier + denom / 2) / denom;
  Uint128 total = whole + frac;
  if (total > std::numeric_limits<uint64_t>::max()) return std::nullopt;
  return static_cast<uint64_t>(total);
}

// Digits after the point for three significant digits.
int DecimalsFor(double v) { return v < 10 ? 2 : v < 100 ? 1 : 0; }

double RoundTo(double v, int decimals) {
  double p = std::pow(10.0, decimals);
  return std::round(v * p) / p;
}

// Picks the largest unit (each `base` times the previous) that keeps the value >= 1, then
// prints an integer when exact (and allowed) or three significant digits.
std::string FormatWithUnits(double value, double base, std::span<const std::string_view> units,
                            bool integer_allowed = true) {
  if (!std::isfinite(value)) return fmt::format("{} {}", value, units[0]);
  if (value < 0) return "-" + FormatWithUnits(-value, base, units, integer_allowed);
  size_t idx = 0;
  while (value >= base && idx + 1 < units.size()) {
    value /= base;
    ++idx;
  }
  if (integer_allowed && value == std::floor(value)) {
    return fmt::format("{:.0f} {}", value, units[idx]);
  }
  double rounded = RoundTo(value, DecimalsFor(value));
  // 1023.996 KiB would print as "1024 KiB"; say "1.00 MiB" instead.
  if (rounded >= base && idx + 1 < units.size()) {
    value /= base;
    ++idx;
    rounded = RoundTo(value, DecimalsFor(value));
  }
  // Rounding may add a digit (9.996 -> 10.0), so choose the decimals from the rounded value.
  return fmt::format("{:.{}f} {}", value, DecimalsFor(rounded), units[idx]);
}

// value / divisor as exact decimal text with trailing zeros dropped; divisor is a power of 10.
std::string ExactQuotient(uint64_t value, uint64_t divisor) {
  uint64_t whole = value / divisor;
  uint64_t frac = value % divisor;
  if (frac == 0) return fmt::format("{}", whole);
  int digits = 0;
  for (uint64_t p = divisor; p > 1; p /= 10) ++digits;
  std::string out = fmt::format("{}.{:0{}}", whole, frac, digits);
  while (out.back() == '0') out.pop_back();
  return out;
}

}  // namespace

Result<uint64_t> ParseBytes(std::string_view s) {
  RY_ASSIGN_OR_RETURN(std::string_view t, CheckStart(kSize, s));
  RY_ASSIGN_OR_RETURN(Decimal number, ReadDecimal(t, kSize, s));
  std::string_view unit = StripLeadingAsciiWhitespace(t);
  uint64_t multiplier = 1;
  if (!unit.empty()) {
    const Unit* u = FindUnit(kByteUnits, unit);
    if (u == nullptr) {
      return Invalid(kSize, s,
                     fmt::format("unknown unit '{}' (expected one of {})", unit, kBytesExpected));
    }
    multiplier = u->multiplier;
  }
  std::optional<uint64_t> bytes = Scale(number, multiplier);
  if (!bytes) return Invalid(kSize, s, "larger than the maximum of 2^64-1 bytes (16 EiB)");
  return *bytes;
}

Result<uint64_t> ParseRateBits(std::string_view s) {
  RY_ASSIGN_OR_RETURN(std::string_view t, CheckStart(kRate, s));
  RY_ASSIGN_OR_RETURN(Decimal number, ReadDecimal(t, kRate, s));
  std::string_view unit = StripLeadingAsciiWhitespace(t);
  if (unit.empty()) {
    return Invalid(kRate, s, fmt::format("missing unit (expected one of {})", kRateExpected));
  }
  bool per_second = unit.ends_with("/s");
  std::string_view base = per_second ? unit.substr(0, unit.size() - 2) : unit;

  uint64_t multiplier = 0;
  if (const Unit* u = FindUnit(kBitUnits, base)) {
    multiplier = u->multiplier;
  } else if (const Unit* b = FindUnit(kByteUnits, base)) {
    if (!per_second) {
      return Invalid(
          kRate, s,
          fmt::format("'{0}' is a size, not a rate (write {0}/s for bytes per second)", unit));
    }
    multiplier = b->multiplier * 8;
  } else if (IsAmbiguousBitOrByte(base)) {
    // "Gb" means Gbit to some and GB to others; a factor of 8 is too much to guess.
    std::string prefix(base.substr(0, base.size() - 1));
    std::string byte_prefix = prefix;
    if (!byte_prefix.empty()) byte_prefix[0] = static_cast<char>(std::toupper(byte_prefix[0]));
    return Invalid(kRate, s,
                   fmt::format("unit '{}' is ambiguous (write {}bit for bits per second or {}B/s "
                               "for bytes per second)",
                               unit, prefix, byte_prefix));
  } else {
    return Invalid(kRate, s,
                   fmt::format("unknown unit '{}' (expected one of {})", unit, kRateExpected));
  }

  std::optional<uint64_t> bits = Scale(number, multiplier);
  if (!bits) return Invalid(kRate, s, "larger than the maximum of 2^64-1 bit/s");
  if (*bits == 0) return Invalid(kRate, s, "a rate must be greater than zero");
  return *bits;
}

Result<std::chrono::nanoseconds> ParseDuration(std::string_view s) {
  RY_ASSIGN_OR_RETURN(std::string_view t, CheckStart(kDuration, s));
  Uint128 total = 0;
  size_t next_unit = 0;  // index into kDurationUnits of the smallest unit not used yet
  while (!t.empty()) {
    RY_ASSIGN_OR_RETURN(Decimal number, ReadDecimal(t, kDuration, s));
    t = StripLeadingAsciiWhitespace(t);
    size_t n = 0;
    while (n < t.size() && !IsDigit(t[n]) && !IsSpace(t[n]) && t[n] != '.') ++n;
    std::string_view unit = t.substr(0, n);
    t = StripLeadingAsciiWhitespace(t.substr(n));
    if (unit.empty()) {
      return Invalid(kDuration, s,
                     fmt::format("missing unit (expected one of {}, like 30s or {})",
                                 kDurationExpected, kDuration.example));
    }
    size_t idx = 0;
    while (idx < std::size(kDurationUnits) && kDurationUnits[idx].name != unit) ++idx;
    if (idx == std::size(kDurationUnits)) {
      return Invalid(kDuration, s,
                     fmt::format("unknown unit '{}' (expected one of {}, like {})", unit,
                                 kDurationExpected, kDuration.example));
    }
    if (idx < next_unit) {
      return Invalid(kDuration, s,
                     fmt::format("unit '{}' repeated or out of order (write parts from the "
                                 "largest unit to the smallest, like 1h30m)",
                                 unit));
    }
    // "us" and "µs" are one unit.
    next_unit = kDurationUnits[idx].name == "us" ? idx + 2 : idx + 1;
    std::optional<uint64_t> part = Scale(number, kDurationUnits[idx].multiplier);
    if (part) total += *part;
    if (!part || total > static_cast<Uint128>(std::numeric_limits<int64_t>::max())) {
      return Invalid(kDuration, s, "longer than the maximum of about 292 years");
    }
  }
  return std::chrono::nanoseconds(static_cast<int64_t>(total));
}

std::string FormatBytes(uint64_t bytes) {
  static constexpr std::string_view kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  // Exactness is decided on integers: above 2^53 a double cannot tell 2^60 from 2^60+1.
  size_t idx = 0;
  uint64_t unit = 1;
  while (idx + 1 < std::size(kUnits) && bytes / unit >= 1024) {
    unit *= 1024;
    ++idx;
  }
  if (bytes % unit == 0) return fmt::format("{} {}", bytes / unit, kUnits[idx]);
  return FormatWithUnits(static_cast<double>(bytes), 1024, kUnits, /*integer_allowed=*/false);
}

std::string FormatRateBits(double bits_per_s) {
  static constexpr std::string_view kUnits[] = {"bit/s",  "kbit/s", "Mbit/s",
                                                "Gbit/s", "Tbit/s", "Pbit/s"};
  return FormatWithUnits(bits_per_s, 1000, kUnits);
}

std::string FormatByteRate(double bytes_per_s) {
  static constexpr std::string_view kUnits[] = {"B/s", "KB/s", "MB/s", "GB/s", "TB/s", "PB/s"};
  return FormatWithUnits(bytes_per_s, 1000, kUnits);
}

std::string FormatDuration(std::chrono::nanoseconds d) {
  int64_t count = d.count();
  // Magnitude in unsigned arithmetic so the most negative value does not overflow.
  uint64_t ns = count < 0 ? uint64_t{0} - static_cast<uint64_t>(count) : count;
  std::string sign = count < 0 ? "-" : "";
  constexpr uint64_t kUs = 1000, kMs = 1000 * kUs, kS = 1000 * kMs, kMin = 60 * kS,
                     kHour = 60 * kMin;
  if (ns == 0) return "0s";
  if (ns < kUs) return fmt::format("{}{}ns", sign, ns);
  if (ns < kMs) return fmt::format("{}{}us", sign, ExactQuotient(ns, kUs));
  if (ns < kS) return fmt::format("{}{}ms", sign, ExactQuotient(ns, kMs));
  if (ns < kMin) return fmt::format("{}{}s", sign, ExactQuotient(ns, kS));
  std::string out = sign;
  if (ns >= kHour) out += fmt::format("{}h", ns / kHour);
  if (ns % kHour >= kMin) out += fmt::format("{}m", ns % kHour / kMin);
  if (ns % kMin != 0) out += fmt::format("{}s", ExactQuotient(ns % kMin, kS));
  return out;
}

}  // namespace railyard::base
