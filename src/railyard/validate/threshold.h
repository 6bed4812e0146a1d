// Thresholds: the warn and fail bounds a plan sets on a check's measured value.
//
// A bound is absolute ("50Gbit/s", "4GiB", "2s", "3") or a fraction of a reference: the
// fleet median of the same test ("80% of median") or the value the topology leads one to
// expect ("90% of expected"). The check says which way is bad (bandwidth: lower; latency,
// swap in use: higher) and in which unit its value is, so one syntax serves every check.
//
//   RY_ASSIGN_OR_RETURN(Threshold t, ParseThreshold("80% of median", Unit::kRate));
//   bool bad = Breaches(t, /*higher_is_better=*/true, measured, {.median = m});
//
// Thread-safety: values and pure functions.
#pragma once

#include <string>
#include <string_view>

#include "railyard/base/status.h"

namespace railyard::validate {

// The unit of a check's measured value; it decides how an absolute bound is parsed.
enum class Unit {
  kNone,      // pass/fail only, no bounds
  kRate,      // bits per second: "200Mbit/s", "12.5GB/s" (base::ParseRateBits)
  kBytes,     // "64KiB", "4GiB" (base::ParseBytes); "unlimited" is the largest value
  kDuration,  // seconds: "250ms", "2s" (base::ParseDuration)
  kCount,     // a plain number: "8", "0.5"
};
std::string_view UnitName(Unit u);  // "none", "rate", "bytes", "duration", "count"

struct Threshold {
  enum class Kind { kAbsolute, kOfMedian, kOfExpected };
  Kind kind = Kind::kAbsolute;
  double value = 0;  // the bound itself (absolute), or the fraction (0.8 for "80%")
  std::string text;  // as written, for messages and reports
};

// Parses "80% of median", "90% of expected" (a percentage from 0 to 1000) or an absolute
// value in `unit`. INVALID_ARGUMENT naming the text and what was expected otherwise; `unit`
// kNone accepts no threshold at all.
Result<Threshold> ParseThreshold(std::string_view text, Unit unit);

// What a relative bound is a fraction of; 0 means not known.
struct References {
  double median = 0;
  double expected = 0;
};

// The bound in the measured value's unit: the absolute value, or the fraction times its
// reference. FAILED_PRECONDITION when that reference is not known (0), naming which.
Result<double> Bound(const Threshold& t, const References& refs);

// True when `measured` is on the bad side of the bound: below it when higher is better, above
// it otherwise. A value equal to the bound passes. Errors as Bound.
Result<bool> Breaches(const Threshold& t, bool higher_is_better, double measured,
                      const References& refs);

// `value` in `unit` for messages: "200 Mbit/s", "64 KiB", "250ms", "8".
std::string FormatValue(double value, Unit unit);

}  // namespace railyard::validate
