#include "railyard/base/checksum.h"

#include <gtest/gtest.h>
#include <xxhash.h>  // the library's own XXH3, the reference for every variant

#include <algorithm>
#include <cstring>
#include <memory>
#include <new>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "railyard/base/checksum_variants.h"

namespace railyard::base {
namespace {

// Published XXH3-64 (seed 0) values, so a silent change of algorithm or seed is caught.
TEST(Xxh3, KnownVectors) {
  EXPECT_EQ(Xxh3(""), 0x2D06800538D394C2u);
  EXPECT_EQ(Xxh3(nullptr, 0), 0x2D06800538D394C2u);
  EXPECT_EQ(Xxh3("a"), 0xE6C632B61E964E1Fu);
  EXPECT_EQ(Xxh3("abc"), 0x78AF5F94892F3950u);
}

TEST(Xxh3, PointerAndStringViewAgree) {
  std::string s = "railyard shard 0007";
  EXPECT_EQ(Xxh3(s.data(), s.size()), Xxh3(s));
  EXPECT_NE(Xxh3(s), Xxh3(std::string_view(s).substr(1)));
}

std::string RandomBytes(size_t n, std::mt19937_64& rng) {
  std::string out(n, '\0');
  for (char& c : out) c = static_cast<char>(rng());
  return out;
}

TEST(Xxh3Stream, EmptyStreamIsEmptyDigest) {
  Xxh3Stream stream;
  EXPECT_EQ(stream.Digest(), Xxh3(""));
  stream.Update(nullptr, 0);
  EXPECT_EQ(stream.Digest(), Xxh3(""));
}

TEST(Xxh3Stream, MatchesOneShotAcrossRandomSplits) {
  std::mt19937_64 rng(1234);
  // Sizes straddle XXH3's internal paths (<=16, <=128, <=240, one stripe, one block).
  for (size_t size : {1, 3, 16, 17, 128, 129, 240, 241, 1024, 1025, 4096, 100000}) {
    std::string data = RandomBytes(size, rng);
    uint64_t expected = Xxh3(data);
    for (int trial = 0; trial < 20; ++trial) {
      Xxh3Stream stream;
      size_t pos = 0;
      while (pos < data.size()) {
        size_t n = std::min<size_t>(data.size() - pos, rng() % 300);  // includes empty updates
        stream.Update(data.data() + pos, n);
        pos += n;
      }
      ASSERT_EQ(stream.Digest(), expected) << "size " << size << " trial " << trial;
    }
  }
}

TEST(Xxh3Stream, DigestDoesNotEndTheStream) {
  Xxh3Stream stream;
  stream.Update("hello ");
  EXPECT_EQ(stream.Digest(), Xxh3("hello "));
  stream.Update("world");
  EXPECT_EQ(stream.Digest(), Xxh3("hello world"));
  EXPECT_EQ(stream.Digest(), Xxh3("hello world"));  // Digest is repeatable
}

TEST(Xxh3Stream, ResetStartsOver) {
  Xxh3Stream stream;
  stream.Update("junk");
  stream.Reset();
  stream.Update("abc");
  EXPECT_EQ(stream.Digest(), Xxh3("abc"));
}

TEST(Xxh3Stream, MoveKeepsState) {
  Xxh3Stream a;
  a.Update("ab");
  Xxh3Stream b(std::move(a));
  b.Update("c");
  EXPECT_EQ(b.Digest(), Xxh3("abc"));

  Xxh3Stream c;
  c.Update("unrelated");
  c = std::move(b);
  EXPECT_EQ(c.Digest(), Xxh3("abc"));

  std::vector<Xxh3Stream> streams;
  streams.emplace_back();
  streams.emplace_back();  // reallocation moves the first
  streams[0].Update("a");
  EXPECT_EQ(streams[0].Digest(), Xxh3("a"));
}

// Every variant compiled in and usable on this CPU, and its name for failure messages.
std::vector<const checksum_internal::Xxh3Variant*> Variants() {
  std::vector<const checksum_internal::Xxh3Variant*> out = {&checksum_internal::Xxh3Baseline(),
                                                            &checksum_internal::Xxh3Library()};
  if (const auto* avx2 = checksum_internal::Xxh3Avx2()) out.push_back(avx2);
  return out;
}

TEST(Xxh3Variants, ChoiceIsTheBestSupportedUnlessABenchmarkPicksOne) {
  const auto* avx2 = checksum_internal::Xxh3Avx2();
  const auto* best = avx2 != nullptr ? avx2 : &checksum_internal::Xxh3Baseline();
  EXPECT_EQ(&checksum_internal::Xxh3Best(), best);
  EXPECT_EQ(&checksum_internal::Xxh3Selected(), best);
  EXPECT_EQ(Xxh3Implementation(), best->name);
  EXPECT_EQ(checksum_internal::Xxh3Named("avx2"), avx2);  // null where the CPU lacks it
  EXPECT_EQ(checksum_internal::Xxh3Named("no-such"), nullptr);

  const uint64_t expected = Xxh3("abc");
  ASSERT_TRUE(UseXxh3Implementation("library").ok());
  EXPECT_EQ(Xxh3Implementation(), "library");
  EXPECT_EQ(Xxh3("abc"), expected);
  ASSERT_TRUE(UseXxh3Implementation("baseline").ok());
  EXPECT_EQ(&checksum_internal::Xxh3Selected(), &checksum_internal::Xxh3Baseline());
  Status bad = UseXxh3Implementation("sse9");
  EXPECT_EQ(bad.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.message().find("'sse9'"), std::string::npos) << bad.ToString();
  EXPECT_EQ(&checksum_internal::Xxh3Selected(), &checksum_internal::Xxh3Baseline());
  ASSERT_TRUE(UseXxh3Implementation("best").ok());
  EXPECT_EQ(&checksum_internal::Xxh3Selected(), best);
#if defined(__x86_64__)
  EXPECT_EQ(std::string_view(checksum_internal::Xxh3Baseline().name), "sse2");
  if (avx2 != nullptr) {
    EXPECT_EQ(std::string_view(avx2->name), "avx2");
  }
#endif
}

TEST(Xxh3Variants, KnownVectors) {
  for (const auto* v : Variants()) {
    EXPECT_EQ(v->hash(nullptr, 0), 0x2D06800538D394C2u) << v->name;
    EXPECT_EQ(v->hash("a", 1), 0xE6C632B61E964E1Fu) << v->name;
    EXPECT_EQ(v->hash("abc", 3), 0x78AF5F94892F3950u) << v->name;
  }
}

// Lengths across every internal path of XXH3 (0-16, 17-128, 129-240, stripes, blocks of
// 1 KiB, and long inputs), each from starts at every alignment within 64 bytes.
std::vector<size_t> Lengths() {
  std::vector<size_t> out;
  for (size_t n = 0; n <= 300; ++n) out.push_back(n);
  for (size_t n : {511, 512, 513, 1023, 1024, 1025, 4095, 4096, 4097, 65536, 65599, 1 << 20,
                   (1 << 20) + 7, 3 << 20}) {
    out.push_back(n);
  }
  return out;
}

TEST(Xxh3Variants, OneShotMatchesTheLibraryAtEveryLengthAndAlignment) {
  std::mt19937_64 rng(42);
  const std::string data = RandomBytes((3 << 20) + 64, rng);
  for (const auto* v : Variants()) {
    for (size_t n : Lengths()) {
      for (size_t start : {0, 1, 3, 7, 8, 15, 16, 31, 33, 63}) {
        const char* p = data.data() + start;
        ASSERT_EQ(v->hash(p, n), XXH3_64bits(p, n))
            << v->name << ": length " << n << " at offset " << start;
      }
    }
  }
}

TEST(Xxh3Variants, StreamingMatchesTheLibraryAcrossSplits) {
  std::mt19937_64 rng(7);
  const std::string data = RandomBytes((3 << 20) + 64, rng);
  for (const auto* v : Variants()) {
    auto deleter = [v](void* p) { ::operator delete(p, std::align_val_t(v->state_align)); };
    std::unique_ptr<void, decltype(deleter)> state(
        ::operator new(v->state_size, std::align_val_t(v->state_align)), deleter);
    for (size_t n : Lengths()) {
      const size_t start = rng() % 64;
      const char* p = data.data() + start;
      // Pieces from 0 bytes up to several internal blocks (1 KiB stripes, 256-byte buffer).
      v->reset(state.get());
      size_t pos = 0;
      while (pos < n) {
        size_t piece = std::min<size_t>(n - pos, rng() % (n < 4096 ? 300 : 200000));
        v->update(state.get(), p + pos, piece);
        pos += piece;
      }
      ASSERT_EQ(v->digest(state.get()), XXH3_64bits(p, n))
          << v->name << ": length " << n << " at offset " << start;
    }
  }
}

TEST(ChecksumHex, FormatsSixteenLowercaseDigits) {
  EXPECT_EQ(ChecksumHex(0), "0000000000000000");
  EXPECT_EQ(ChecksumHex(0x2d), "000000000000002d");
  EXPECT_EQ(ChecksumHex(0x2D06800538D394C2), "2d06800538d394c2");
  EXPECT_EQ(ChecksumHex(~uint64_t{0}), "ffffffffffffffff");
}

TEST(ChecksumHex, RoundTrips) {
  std::mt19937_64 rng(99);
  for (int i = 0; i < 1000; ++i) {
    uint64_t v = rng() >> (rng() % 64);
    Result<uint64_t> parsed = ParseChecksumHex(ChecksumHex(v));
    ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
    EXPECT_EQ(*parsed, v);
  }
}

TEST(ChecksumHex, AcceptsUppercase) {
  Result<uint64_t> parsed = ParseChecksumHex("2D06800538D394C2");
  ASSERT_TRUE(parsed.ok());
  EXPECT_EQ(*parsed, 0x2D06800538D394C2u);
}

TEST(ChecksumHex, RejectsBadText) {
  auto error = [](std::string_view text) {
    Result<uint64_t> r = ParseChecksumHex(text);
    EXPECT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    return r.status().message();
  };
  EXPECT_EQ(error(""), "invalid checksum '': expected 16 hex digits, got 0 characters");
  EXPECT_EQ(error("2d06800538d394c"),
            "invalid checksum '2d06800538d394c': expected 16 hex digits, got 15 characters");
  EXPECT_EQ(error("2d06800538d394c20"),
            "invalid checksum '2d06800538d394c20': expected 16 hex digits, got 17 characters");
  EXPECT_EQ(error("2d06800538g394c2"),
            "invalid checksum '2d06800538g394c2': character 11 is 'g', not a hex digit");
  EXPECT_EQ(
      error(std::string_view("2d06800538d394\0\x01", 16)),
      "invalid checksum '2d06800538d394\\x00\\x01': character 15 is '\\x00', not a hex digit");
  error("0x06800538d394c2");
  error(" d06800538d394c2");
  error("-d06800538d394c2");
}

}  // namespace
}  // namespace railyard::base
