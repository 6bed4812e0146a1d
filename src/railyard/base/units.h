// Sizes, network rates and durations as operators write them in flags and config files.
//
// Parsers turn "64MiB", "10Gbit", "1.5GB/s" or "1m30s" into plain integers (bytes, bits per
// second, nanoseconds); formatters turn numbers back into short human text. Parsing is exact:
// the number is read as a decimal, not a double, so "1.5GiB" is exactly 1610612736 and
// ParseBytes(FormatBytes(x)) == x for every x that FormatBytes prints without rounding.
//
//   RY_ASSIGN_OR_RETURN(uint64_t chunk, ParseBytes(flags.chunk_size));    // "64MiB"
//   RY_ASSIGN_OR_RETURN(uint64_t bw, ParseRateBits(link["bandwidth"]));   // "10Gbit"
//   logger.Info("sent {} in {}", FormatBytes(n), FormatDuration(elapsed));
//
// Errors are INVALID_ARGUMENT and quote the input and what was expected, so a caller only
// adds the field name. Thread-safety: pure functions, no shared state.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

#include "railyard/base/status.h"

namespace railyard::base {

// A size in bytes: a non-negative decimal number ("512", "1.5") followed, optionally after
// spaces, by a unit: B; decimal KB (also kB), MB, GB, TB, PB, EB; binary KiB, MiB, GiB, TiB,
// PiB, EiB (also all-lowercase kib, mib, ...). No unit means bytes. Fractions round to the
// nearest byte. Lowercase "kb"/"mb" are rejected because they are often meant as kilobits.
// Errors: empty, negative, malformed number, unknown unit, more than 2^64-1 bytes.
Result<uint64_t> ParseBytes(std::string_view s);

// A network rate in bits per second, greater than zero. Bit units: bit, kbit, Mbit, Gbit,
// Tbit, Pbit (prefix in either case, all decimal), optionally followed by "/s". Byte rates must
// end in "/s" and use ParseBytes's units ("100MB/s", "1GiB/s"); they are multiplied by 8.
// "10Gb" is rejected as ambiguous, "10" for lacking a unit, "10GB" for lacking "/s".
Result<uint64_t> ParseRateBits(std::string_view s);

// A non-negative duration: one or more <number><unit> parts from largest to smallest unit,
// e.g. "30s", "250ms", "1.5s", "1m30s", "1h". Units: ns, us (or µs), ms, s, m, h. A unit is
// required ("30" is rejected); each unit may appear once. Rounds to the nearest nanosecond.
Result<std::chrono::nanoseconds> ParseDuration(std::string_view s);

// "512 B", "64 MiB", "1.50 GiB": binary units; exact multiples print as integers, the rest
// with three significant digits.
std::string FormatBytes(uint64_t bytes);

// "10 Gbit/s", "512 Mbit/s", "1.25 Gbit/s": decimal bit units, same digit rules as
// FormatBytes.
std::string FormatRateBits(double bits_per_s);

// "1.50 GB/s", "100 MB/s": decimal byte units (B/s, KB/s, MB/s, GB/s, TB/s, PB/s).
std::string FormatByteRate(double bytes_per_s);

// "10ns", "100us", "250ms", "1.5s", "2m30s", "1h5m": the largest fitting unit below a
// minute (exact, trailing zeros dropped), h/m/s parts from a minute up; negative values get
// a leading '-'. ParseDuration(FormatDuration(d)) == d for every d >= 0.
std::string FormatDuration(std::chrono::nanoseconds d);

}  // namespace railyard::base
