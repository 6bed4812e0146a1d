#include "railyard/storage/manifest.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "railyard/storage/fs.h"

namespace railyard::storage {
namespace {

Manifest Sample() {
  Manifest m;
  m.step = 42;
  m.world_size = 2;
  m.created = "2026-11-30T19:00:01Z";
  m.tensors.push_back({"w", DType::kF32, {4, 3}});
  m.tensors.push_back({"step_count", DType::kI64, {}});
  m.pieces.push_back({"w", {0, 0}, {2, 3}, "rank-00000.bin", 0, 24, 0x0123456789abcdefULL});
  m.pieces.push_back({"w", {2, 0}, {2, 3}, "rank-00001.bin", 0, 24, 0xfedcba9876543210ULL});
  m.pieces.push_back({"step_count", {}, {}, "rank-00000.bin", 4096, 8, 7});
  m.metadata["loader.position"] = "12345";
  m.metadata["note"] = "a \"quoted\" value";
  return m;
}

// Replaces the first occurrence of `from` in the sample's JSON.
std::string SampleWith(std::string_view from, std::string_view to) {
  std::string text = ManifestToJson(Sample());
  size_t at = text.find(from);
  EXPECT_NE(at, std::string::npos) << from;
  if (at != std::string::npos) text.replace(at, from.size(), to);
  return text;
}

void ExpectError(const std::string& text, std::string_view needle,
                 StatusCode code = StatusCode::kInvalidArgument) {
  auto m = ParseManifest(text, "/ckpt/step-00000042/manifest.json");
  ASSERT_FALSE(m.ok()) << text;
  EXPECT_EQ(m.status().code(), code) << m.status().ToString();
  EXPECT_NE(m.status().message().find(needle), std::string::npos) << m.status().ToString();
  // Every error names the file.
  EXPECT_NE(m.status().message().find("/ckpt/step-00000042/manifest.json"), std::string::npos)
      << m.status().ToString();
}

TEST(DTypeTest, NamesSizesAndUnknown) {
  EXPECT_EQ(DTypeName(DType::kBF16), "BF16");
  EXPECT_EQ(DTypeSize(DType::kBF16), 2u);
  EXPECT_EQ(DTypeSize(DType::kF64), 8u);
  EXPECT_EQ(DTypeSize(DType::kBool), 1u);
  EXPECT_EQ(*ParseDType("I32"), DType::kI32);
  auto bad = ParseDType("F8");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'F8'"), std::string::npos);
  EXPECT_NE(bad.status().message().find("BF16"), std::string::npos);  // lists valid names
}

TEST(ManifestTest, RoundTripsThroughJson) {
  Manifest m = Sample();
  std::string text = ManifestToJson(m);
  auto back = ParseManifest(text, "m.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->step, 42);
  EXPECT_EQ(back->world_size, 2);
  EXPECT_EQ(back->rank, -1);
  EXPECT_EQ(back->created, m.created);
  ASSERT_EQ(back->tensors.size(), 2u);
  EXPECT_EQ(back->tensors[1].shape.size(), 0u);
  ASSERT_EQ(back->pieces.size(), 3u);
  EXPECT_EQ(back->pieces[1].offsets, (std::vector<int64_t>{2, 0}));
  EXPECT_EQ(back->pieces[1].xxh3, 0xfedcba9876543210ULL);
  EXPECT_EQ(back->pieces[2].byte_offset, 4096u);
  EXPECT_EQ(back->metadata, m.metadata);
  EXPECT_TRUE(ValidateCoverage(*back, "m.json").ok());
  // Stable text: serialising the parsed manifest gives the same bytes.
  EXPECT_EQ(ManifestToJson(*back), text);
  // Checksums are 16 lowercase hex digits.
  EXPECT_NE(text.find("\"xxh3\":\"0123456789abcdef\""), std::string::npos) << text;
}

TEST(ManifestTest, RankFieldRoundTrips) {
  Manifest m = Sample();
  m.rank = 1;
  auto back = ParseManifest(ManifestToJson(m), "rank-00001.json");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->rank, 1);
}

TEST(ManifestTest, NonStringMetadataIsKeptAsJsonText) {
  std::string text = SampleWith("\"metadata\": {", "\"metadata\": {\"rng\": {\"seed\": 7}, ");
  auto m = ParseManifest(text, "m.json");
  ASSERT_TRUE(m.ok()) << m.status().ToString();
  EXPECT_EQ(m->metadata.at("rng"), "{\"seed\":7}");
}

TEST(ManifestTest, TruncatedFileNamesFileAndPosition) {
  std::string text = ManifestToJson(Sample());
  ExpectError(text.substr(0, text.size() / 2), "truncated or not JSON");
  ExpectError("", "truncated or not JSON");
}

TEST(ManifestTest, FutureFormatVersion) {
  ExpectError(SampleWith("\"format_version\": 1", "\"format_version\": 7"),
              "format_version 7 is newer than this railyard understands (1)");
  ExpectError(SampleWith("\"format_version\": 1", "\"format_version\": 0"), "format_version 0");
}

TEST(ManifestTest, NotAManifest) {
  ExpectError("{\"nodes\": []}", "not a checkpoint manifest");
  ExpectError("[1, 2, 3]", "not a checkpoint manifest");
}

TEST(ManifestTest, MissingAndMistypedFields) {
  ExpectError(SampleWith("\"step\": 42,", ""), "missing required key 'step'");
  ExpectError(SampleWith("\"world_size\": 2,", "\"world_size\": 0,"), "world_size");
  ExpectError(SampleWith("\"name\":\"w\",", ""), "tensors[0]");
  ExpectError(SampleWith("\"dtype\":\"F32\"", "\"dtype\":\"F31\""), "unknown dtype 'F31'");
  ExpectError(SampleWith("\"shape\":[4,3]", "\"shape\":[4,-3]"), "tensors[0].shape[1]");
  ExpectError(SampleWith("\"shape\":[4,3]", "\"shape\":[4,\"3\"]"), "tensors[0].shape[1]");
  ExpectError(SampleWith("\"xxh3\":\"0123456789abcdef\"", "\"xxh3\":\"0123\""), "pieces[0].xxh3");
  ExpectError(SampleWith("\"byte_offset\":0,", ""), "missing required key 'byte_offset'");
}

TEST(ManifestTest, PiecesAreCheckedAgainstTheirTensor) {
  ExpectError(SampleWith("\"tensor\":\"w\"", "\"tensor\":\"v\""), "unknown tensor 'v'");
  ExpectError(SampleWith("\"offsets\":[2,0]", "\"offsets\":[3,0]"), "outside tensor 'w'");
  ExpectError(SampleWith("\"offsets\":[2,0]", "\"offsets\":[2]"), "has 2 dimensions");
  ExpectError(SampleWith("\"length\":24", "\"length\":25"), "pieces[0].length");
  ExpectError(SampleWith("\"file\":\"rank-00000.bin\"", "\"file\":\"../../etc/passwd\""),
              "not a plain file name");
  ExpectError(SampleWith("\"name\":\"step_count\"", "\"name\":\"w\""), "duplicate tensor 'w'");
}

TEST(ManifestTest, CoverageDetectsGapsAndOverlaps) {
  Manifest m = Sample();
  m.pieces.erase(m.pieces.begin() + 1);
  Status gap = ValidateCoverage(m, "m.json");
  ASSERT_FALSE(gap.ok());
  EXPECT_NE(gap.message().find("cover 6 of 12 elements"), std::string::npos) << gap.ToString();

  m = Sample();
  m.pieces[1].offsets = {1, 0};
  Status overlap = ValidateCoverage(m, "m.json");
  ASSERT_FALSE(overlap.ok());
  EXPECT_NE(overlap.message().find("overlap"), std::string::npos) << overlap.ToString();

  // The same extent twice (a replica saved by two ranks) is fine.
  m = Sample();
  m.pieces.push_back(m.pieces[0]);
  m.pieces.back().file = "rank-00001.bin";
  EXPECT_TRUE(ValidateCoverage(m, "m.json").ok());

  // A scalar with no piece is a gap.
  m = Sample();
  m.pieces.pop_back();
  EXPECT_FALSE(ValidateCoverage(m, "m.json").ok());
}

TEST(ManifestTest, LoadManifestNamesMissingFile) {
  auto m = LoadManifest(*DefaultFs(), "/nonexistent-railyard/manifest.json");
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), StatusCode::kNotFound);
  EXPECT_NE(m.status().message().find("/nonexistent-railyard/manifest.json"), std::string::npos);
}

TEST(ManifestTest, ElementCountAndExtent) {
  EXPECT_EQ(*ElementCount(std::vector<int64_t>{}), 1u);
  EXPECT_EQ(*ElementCount(std::vector<int64_t>{3, 0, 5}), 0u);
  EXPECT_FALSE(ElementCount(std::vector<int64_t>{1LL << 40, 1LL << 40}).ok());
  std::vector<int64_t> off{0, 8}, size{4, 8};
  EXPECT_EQ(FormatExtent(off, size), "[0:4, 8:16]");
}

}  // namespace
}  // namespace railyard::storage
