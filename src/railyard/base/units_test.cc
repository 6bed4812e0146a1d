#include "railyard/base/units.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <limits>
#include <random>

namespace railyard::base {
namespace {

using std::chrono::nanoseconds;
using namespace std::chrono_literals;

constexpr uint64_t kKi = 1024, kMi = kKi * 1024, kGi = kMi * 1024, kTi = kGi * 1024;

uint64_t Bytes(std::string_view s) {
  Result<uint64_t> r = ParseBytes(s);
  EXPECT_TRUE(r.ok()) << s << ": " << r.status().ToString();
  return r.value_or(0);
}

uint64_t Rate(std::string_view s) {
  Result<uint64_t> r = ParseRateBits(s);
  EXPECT_TRUE(r.ok()) << s << ": " << r.status().ToString();
  return r.value_or(0);
}

nanoseconds Dur(std::string_view s) {
  Result<nanoseconds> r = ParseDuration(s);
  EXPECT_TRUE(r.ok()) << s << ": " << r.status().ToString();
  return r.value_or(nanoseconds(-1));
}

// The error message, or "OK" when the parse unexpectedly succeeded.
template <typename T>
std::string ErrorOf(const Result<T>& r) {
  if (r.ok()) return "OK";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

TEST(ParseBytes, PlainAndByteSuffix) {
  EXPECT_EQ(Bytes("512"), 512u);
  EXPECT_EQ(Bytes("512B"), 512u);
  EXPECT_EQ(Bytes("0"), 0u);
  EXPECT_EQ(Bytes("  7 B  "), 7u);
}

TEST(ParseBytes, BinaryUnits) {
  EXPECT_EQ(Bytes("4KiB"), 4 * kKi);
  EXPECT_EQ(Bytes("64MiB"), 64 * kMi);
  EXPECT_EQ(Bytes("1GiB"), kGi);
  EXPECT_EQ(Bytes("2TiB"), 2 * kTi);
  EXPECT_EQ(Bytes("3PiB"), 3 * kTi * 1024);
  EXPECT_EQ(Bytes("15EiB"), 15 * kTi * 1024 * 1024);
  EXPECT_EQ(Bytes("1.5GiB"), kGi + kGi / 2);
  EXPECT_EQ(Bytes("64 MiB"), 64 * kMi);
  EXPECT_EQ(Bytes("64mib"), 64 * kMi);
  EXPECT_EQ(Bytes("1kib"), kKi);
  EXPECT_EQ(Bytes("1gib"), kGi);
  EXPECT_EQ(Bytes("1tib"), kTi);
}

TEST(ParseBytes, DecimalUnits) {
  EXPECT_EQ(Bytes("1KB"), 1000u);
  EXPECT_EQ(Bytes("1kB"), 1000u);
  EXPECT_EQ(Bytes("2MB"), 2'000'000u);
  EXPECT_EQ(Bytes("3GB"), 3'000'000'000u);
  EXPECT_EQ(Bytes("1TB"), 1'000'000'000'000u);
}

TEST(ParseBytes, FractionsRoundToNearestByte) {
  EXPECT_EQ(Bytes("1.5"), 2u);
  EXPECT_EQ(Bytes("1.4"), 1u);
  EXPECT_EQ(Bytes("0.001KiB"), 1u);     // 1.024
  EXPECT_EQ(Bytes("1.0005KB"), 1001u);  // exactly 1000.5, halves round up
  EXPECT_EQ(Bytes("0.1GB"), 100'000'000u);
  // Digits past the 18th are ignored rather than rejected.
  EXPECT_EQ(Bytes("1.0000000000000000000001MiB"), kMi);
}

TEST(ParseBytes, Maximum) {
  EXPECT_EQ(Bytes("18446744073709551615"), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(Bytes("16777215TiB"), 16777215 * kTi);
  EXPECT_EQ(Bytes("18EB"), 18'000'000'000'000'000'000u);
}

TEST(ParseBytes, Rejects) {
  EXPECT_EQ(ErrorOf(ParseBytes("10XB")),
            "invalid size '10XB': unknown unit 'XB' (expected one of B, KB, MB, GB, TB, PB, EB, "
            "KiB, MiB, GiB, TiB, PiB, EiB)");
  EXPECT_EQ(ErrorOf(ParseBytes("")), "invalid size '': empty (expected a value like 64MiB)");
  EXPECT_EQ(ErrorOf(ParseBytes("-1MiB")), "invalid size '-1MiB': a size cannot be negative");
  EXPECT_EQ(ErrorOf(ParseBytes("MiB")),
            "invalid size 'MiB': expected a number at 'MiB' (like 64MiB)");
  EXPECT_EQ(ErrorOf(ParseBytes("1.MiB")),
            "invalid size '1.MiB': expected digits after '.' (like 64MiB)");
  EXPECT_EQ(ErrorOf(ParseBytes("18446744073709551616")),
            "invalid size '18446744073709551616': number too large");
  EXPECT_EQ(ErrorOf(ParseBytes("16EiB")),
            "invalid size '16EiB': larger than the maximum of 2^64-1 bytes (16 EiB)");
  EXPECT_NE(ErrorOf(ParseBytes("19EB")), "OK");
  // Lowercase decimal units read like bits; only the binary ones are accepted in lowercase.
  EXPECT_NE(ErrorOf(ParseBytes("1kb")), "OK");
  EXPECT_NE(ErrorOf(ParseBytes("1mb")), "OK");
  EXPECT_NE(ErrorOf(ParseBytes("1b")), "OK");
  EXPECT_NE(ErrorOf(ParseBytes("1 2MiB")), "OK");
  EXPECT_NE(ErrorOf(ParseBytes("+1MiB")), "OK");
  EXPECT_NE(ErrorOf(ParseBytes(".5MiB")), "OK");
  EXPECT_NE(ErrorOf(ParseBytes("1e3")), "OK");
  EXPECT_NE(ErrorOf(ParseBytes("1MiBs")), "OK");
}

TEST(ParseRateBits, BitUnits) {
  EXPECT_EQ(Rate("10Gbit"), 10'000'000'000u);
  EXPECT_EQ(Rate("10gbit"), 10'000'000'000u);
  EXPECT_EQ(Rate("10Gbit/s"), 10'000'000'000u);
  EXPECT_EQ(Rate("500Mbit"), 500'000'000u);
  EXPECT_EQ(Rate("500mbit/s"), 500'000'000u);
  EXPECT_EQ(Rate("100kbit"), 100'000u);
  EXPECT_EQ(Rate("100Kbit"), 100'000u);
  EXPECT_EQ(Rate("1.5Gbit"), 1'500'000'000u);
  EXPECT_EQ(Rate("800bit"), 800u);
  EXPECT_EQ(Rate("800bit/s"), 800u);
  EXPECT_EQ(Rate("2Tbit"), 2'000'000'000'000u);
  EXPECT_EQ(Rate("25 Gbit"), 25'000'000'000u);
}

TEST(ParseRateBits, ByteRatesAreTimesEight) {
  EXPECT_EQ(Rate("1.5GB/s"), 12'000'000'000u);
  EXPECT_EQ(Rate("100MB/s"), 800'000'000u);
  EXPECT_EQ(Rate("1GiB/s"), 8 * kGi);
  EXPECT_EQ(Rate("512B/s"), 4096u);
  EXPECT_EQ(Rate("1mib/s"), 8 * kMi);
}

TEST(ParseRateBits, Rejects) {
  EXPECT_EQ(ErrorOf(ParseRateBits("10gbits")),
            "invalid rate '10gbits': unknown unit 'gbits' (expected one of bit, kbit, Mbit, Gbit, "
            "Tbit, or a byte rate like MB/s, GiB/s)");
  EXPECT_EQ(ErrorOf(ParseRateBits("10Gb")),
            "invalid rate '10Gb': unit 'Gb' is ambiguous (write Gbit for bits per second or GB/s "
            "for bytes per second)");
  EXPECT_EQ(ErrorOf(ParseRateBits("10kb/s")),
            "invalid rate '10kb/s': unit 'kb/s' is ambiguous (write kbit for bits per second or "
            "KB/s for bytes per second)");
  EXPECT_EQ(ErrorOf(ParseRateBits("10b")),
            "invalid rate '10b': unit 'b' is ambiguous (write bit for bits per second or B/s for "
            "bytes per second)");
  EXPECT_EQ(ErrorOf(ParseRateBits("10")),
            "invalid rate '10': missing unit (expected one of bit, kbit, Mbit, Gbit, Tbit, or a "
            "byte rate like MB/s, GiB/s)");
  EXPECT_EQ(ErrorOf(ParseRateBits("fast")),
            "invalid rate 'fast': expected a number at 'fast' (like 10Gbit)");
  EXPECT_EQ(ErrorOf(ParseRateBits("-1Gbit")), "invalid rate '-1Gbit': a rate cannot be negative");
  EXPECT_EQ(ErrorOf(ParseRateBits("0bit")),
            "invalid rate '0bit': a rate must be greater than zero");
  EXPECT_EQ(ErrorOf(ParseRateBits("0.1bit")),
            "invalid rate '0.1bit': a rate must be greater than zero");
  EXPECT_EQ(ErrorOf(ParseRateBits("10GB")),
            "invalid rate '10GB': 'GB' is a size, not a rate (write GB/s for bytes per second)");
  EXPECT_NE(ErrorOf(ParseRateBits("")), "OK");
  EXPECT_NE(ErrorOf(ParseRateBits("10Gbit/h")), "OK");
  EXPECT_NE(ErrorOf(ParseRateBits("3000000000TB/s")), "OK");  // overflows after the x8
}

TEST(ParseDuration, SingleUnits) {
  EXPECT_EQ(Dur("30s"), 30s);
  EXPECT_EQ(Dur("250ms"), 250ms);
  EXPECT_EQ(Dur("1.5s"), 1500ms);
  EXPECT_EQ(Dur("100us"), 100us);
  EXPECT_EQ(Dur("100\u00b5s"), 100us);
  EXPECT_EQ(Dur("10ns"), 10ns);
  EXPECT_EQ(Dur("2m"), 2min);
  EXPECT_EQ(Dur("1h"), 1h);
  EXPECT_EQ(Dur("0s"), 0s);
  EXPECT_EQ(Dur("1.5ns"), 2ns);  // rounds to nearest
  EXPECT_EQ(Dur("10 s"), 10s);
}

TEST(ParseDuration, Compounds) {
  EXPECT_EQ(Dur("1m30s"), 90s);
  EXPECT_EQ(Dur("1h30m"), 90min);
  EXPECT_EQ(Dur("1h2m3s4ms5us6ns"), 1h + 2min + 3s + 4ms + 5us + 6ns);
  EXPECT_EQ(Dur("1m 30s"), 90s);
  EXPECT_EQ(Dur("1m0.5s"), 60500ms);
}

TEST(ParseDuration, Rejects) {
  EXPECT_EQ(ErrorOf(ParseDuration("30")),
            "invalid duration '30': missing unit (expected one of ns, us, ms, s, m, h, like 30s "
            "or 1m30s)");
  EXPECT_EQ(ErrorOf(ParseDuration("10 sec")),
            "invalid duration '10 sec': unknown unit 'sec' (expected one of ns, us, ms, s, m, h, "
            "like 1m30s)");
  EXPECT_EQ(ErrorOf(ParseDuration("s")),
            "invalid duration 's': expected a number at 's' (like 1m30s)");
  EXPECT_EQ(ErrorOf(ParseDuration("-1s")), "invalid duration '-1s': a duration cannot be negative");
  EXPECT_EQ(ErrorOf(ParseDuration("30s1m")),
            "invalid duration '30s1m': unit 'm' repeated or out of order (write parts from the "
            "largest unit to the smallest, like 1h30m)");
  EXPECT_NE(ErrorOf(ParseDuration("1s1s")), "OK");
  EXPECT_NE(ErrorOf(ParseDuration("1us1\u00b5s")), "OK");
  EXPECT_NE(ErrorOf(ParseDuration("")), "OK");
  EXPECT_NE(ErrorOf(ParseDuration("1m30")), "OK");
  EXPECT_NE(ErrorOf(ParseDuration("1s.5")), "OK");
  EXPECT_NE(ErrorOf(ParseDuration("3000000h")), "OK");  // past int64 nanoseconds
}

TEST(FormatBytes, Examples) {
  EXPECT_EQ(FormatBytes(0), "0 B");
  EXPECT_EQ(FormatBytes(512), "512 B");
  EXPECT_EQ(FormatBytes(1023), "1023 B");
  EXPECT_EQ(FormatBytes(kKi), "1 KiB");
  EXPECT_EQ(FormatBytes(64 * kMi), "64 MiB");
  EXPECT_EQ(FormatBytes(1000 * kMi), "1000 MiB");
  EXPECT_EQ(FormatBytes(kGi + kGi / 2), "1.50 GiB");
  EXPECT_EQ(FormatBytes(kMi + 1), "1.00 MiB");
  EXPECT_EQ(FormatBytes(15 * kMi + kMi / 2), "15.5 MiB");
  EXPECT_EQ(FormatBytes(150 * kMi + kMi / 4), "150 MiB");
  EXPECT_EQ(FormatBytes(kMi - 1), "1.00 MiB");       // not "1024 KiB"
  EXPECT_EQ(FormatBytes(10 * kKi - 1), "10.0 KiB");  // not "10.00 KiB"
  EXPECT_EQ(FormatBytes(std::numeric_limits<uint64_t>::max()), "16.0 EiB");
  EXPECT_EQ(FormatBytes(uint64_t{1} << 60), "1 EiB");
  EXPECT_EQ(FormatBytes((uint64_t{1} << 60) + 1), "1.00 EiB");
}

TEST(FormatBytes, ExactValuesRoundTrip) {
  for (uint64_t x : {uint64_t{0}, uint64_t{1}, uint64_t{512}, 4 * kKi, 64 * kMi, kGi, 3 * kTi,
                     kGi + kGi / 2, 1000 * kMi, uint64_t{1} << 62}) {
    EXPECT_EQ(Bytes(FormatBytes(x)), x) << FormatBytes(x);
  }
  std::mt19937_64 rng(42);
  for (int i = 0; i < 1000; ++i) {
    uint64_t x = (rng() % 100000) << (10 * (rng() % 5));
    std::string text = FormatBytes(x);
    if (text.find('.') == std::string::npos) {
      EXPECT_EQ(Bytes(text), x) << text;
    }
  }
}

TEST(FormatRateBits, Examples) {
  EXPECT_EQ(FormatRateBits(10e9), "10 Gbit/s");
  EXPECT_EQ(FormatRateBits(512e6), "512 Mbit/s");
  EXPECT_EQ(FormatRateBits(1.25e9), "1.25 Gbit/s");
  EXPECT_EQ(FormatRateBits(1.5e9), "1.50 Gbit/s");
  EXPECT_EQ(FormatRateBits(9.87654e9), "9.88 Gbit/s");
  EXPECT_EQ(FormatRateBits(999.9e6), "1.00 Gbit/s");
  EXPECT_EQ(FormatRateBits(800), "800 bit/s");
  EXPECT_EQ(FormatRateBits(0), "0 bit/s");
  EXPECT_EQ(FormatRateBits(-2e3), "-2 kbit/s");
  EXPECT_EQ(Rate(FormatRateBits(25e9)), 25'000'000'000u);
}

TEST(FormatByteRate, Examples) {
  EXPECT_EQ(FormatByteRate(1.5e9), "1.50 GB/s");
  EXPECT_EQ(FormatByteRate(100e6), "100 MB/s");
  EXPECT_EQ(FormatByteRate(12.345e3), "12.3 KB/s");
  EXPECT_EQ(FormatByteRate(3), "3 B/s");
  EXPECT_EQ(Rate(FormatByteRate(100e6)), 800'000'000u);
}

TEST(FormatDuration, Examples) {
  EXPECT_EQ(FormatDuration(0ns), "0s");
  EXPECT_EQ(FormatDuration(10ns), "10ns");
  EXPECT_EQ(FormatDuration(100us), "100us");
  EXPECT_EQ(FormatDuration(1500ns), "1.5us");
  EXPECT_EQ(FormatDuration(250ms), "250ms");
  EXPECT_EQ(FormatDuration(30s), "30s");
  EXPECT_EQ(FormatDuration(1500ms), "1.5s");
  EXPECT_EQ(FormatDuration(150s), "2m30s");
  EXPECT_EQ(FormatDuration(1h), "1h");
  EXPECT_EQ(FormatDuration(1h + 5min), "1h5m");
  EXPECT_EQ(FormatDuration(1h + 5s), "1h5s");
  EXPECT_EQ(FormatDuration(60500ms), "1m0.5s");
  EXPECT_EQ(FormatDuration(-250ms), "-250ms");
}

TEST(FormatDuration, RoundTrips) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 2000; ++i) {
    nanoseconds d(static_cast<int64_t>(rng() >> (rng() % 64)) & 0x7fffffffffffffff);
    EXPECT_EQ(Dur(FormatDuration(d)), d) << FormatDuration(d);
  }
  nanoseconds max(std::numeric_limits<int64_t>::max());
  EXPECT_EQ(Dur(FormatDuration(max)), max);
  EXPECT_EQ(FormatDuration(nanoseconds(std::numeric_limits<int64_t>::min())),
            "-2562047h47m16.854775808s");
}

}  // namespace
}  // namespace railyard::base
