#include "railyard/base/checksum.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <utility>
#include <vector>

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
