#include "railyard/storage/data_pack.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>

#include "railyard/base/checksum.h"
#include "railyard/base/files.h"
#include "railyard/base/temp_dir_testing.h"

namespace railyard::storage {
namespace {

namespace fs = std::filesystem;

void WriteFile(const std::string& path, const std::string& data) {
  fs::create_directories(fs::path(path).parent_path());
  std::ofstream(path, std::ios::binary) << data;
}

std::string ReadRange(const std::string& path, uint64_t offset, uint64_t length) {
  std::string all = base::ReadFile(path).value();
  return all.substr(offset, length);
}

// Every sample of the packed dataset at `dir`, read straight from the shard files.
std::string SampleBytes(const DatasetIndex& index, uint64_t i) {
  const DataSampleEntry& e = index.entry(i);
  return ReadRange(index.dir() + "/" + index.shards()[e.shard].file, e.offset, e.length);
}

bool HasTempFiles(const std::string& dir) {
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().filename().string().find(".tmp.") != std::string::npos) return true;
  }
  return false;
}

TEST(SyntheticTest, SizesInRangeAndBytesDeterministic) {
  SyntheticSpec spec{.samples = 200, .min_bytes = 10, .max_bytes = 40, .seed = 7};
  ASSERT_TRUE(ValidateSyntheticSpec(spec).ok());
  std::string a, b;
  std::map<uint64_t, int> sizes;
  for (uint64_t i = 0; i < spec.samples; ++i) {
    FillSyntheticSample(spec, i, &a);
    FillSyntheticSample(spec, i, &b);
    EXPECT_EQ(a, b);
    EXPECT_EQ(a.size(), SyntheticSampleSize(spec, i));
    EXPECT_GE(a.size(), 10u);
    EXPECT_LE(a.size(), 40u);
    sizes[a.size()]++;
  }
  EXPECT_GT(sizes.size(), 20u);  // the sizes are spread, not constant
  FillSyntheticSample(spec, 1, &a);
  FillSyntheticSample(spec, 2, &b);
  EXPECT_NE(a.substr(0, 8), b.substr(0, 8));
  SyntheticSpec other = spec;
  other.seed = 8;
  FillSyntheticSample(other, 1, &b);
  EXPECT_NE(a.substr(0, 8), b.substr(0, 8));
}

TEST(SyntheticTest, RejectsBadSpecs) {
  EXPECT_EQ(ValidateSyntheticSpec({.samples = 0}).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateSyntheticSpec({.samples = 1, .min_bytes = 5, .max_bytes = 4}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateSyntheticSpec({.samples = 1, .min_bytes = 1, .max_bytes = 2ull << 30}).code(),
            StatusCode::kInvalidArgument);
}

TEST(PackTest, SyntheticRoundTripAcrossShards) {
  base::ScopedTempDir tmp("data-pack");
  SyntheticSpec spec{.samples = 500, .min_bytes = 0, .max_bytes = 300, .seed = 3};
  PackOptions opts;
  opts.shard_bytes = 8 << 10;
  uint64_t last_progress = 0;
  opts.progress = [&](uint64_t done, uint64_t total) {
    EXPECT_EQ(total, 500u);
    last_progress = done;
  };
  Result<PackStats> st = PackSynthetic(spec, tmp.path(), opts);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(last_progress, 500u);
  EXPECT_EQ(st->samples, 500u);
  EXPECT_GT(st->shards, 5u);

  Result<DatasetIndex> index = DatasetIndex::Load(tmp.path());
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  EXPECT_EQ(index->id(), st->dataset_id);
  EXPECT_EQ(index->num_samples(), 500u);
  EXPECT_EQ(index->shards().size(), st->shards);
  EXPECT_EQ(index->total_bytes(), st->bytes);
  EXPECT_EQ(index->source().rfind("synthetic", 0), 0u);
  std::string want;
  for (uint64_t i = 0; i < 500; ++i) {
    FillSyntheticSample(spec, i, &want);
    ASSERT_EQ(SampleBytes(*index, i), want) << "sample " << i;
    EXPECT_EQ(index->entry(i).xxh3, base::Xxh3(want));
    EXPECT_TRUE(index->name(i).empty());
  }
  for (const DataShardInfo& s : index->shards()) {
    EXPECT_EQ(fs::file_size(tmp.Sub(s.file)), s.bytes);
    EXPECT_LE(s.bytes, opts.shard_bytes);
  }
  EXPECT_EQ(index->shards()[0].file, "shard-00000.bin");
  EXPECT_FALSE(HasTempFiles(tmp.path()));
}

TEST(PackTest, DirectoryRoundTripSortedByPath) {
  base::ScopedTempDir tmp("data-pack");
  const std::string src = tmp.Sub("src"), out = tmp.Sub("out");
  // Created out of order: the pack order must be the sorted relative paths.
  std::map<std::string, std::string> files = {
      {"b/z.txt", "zzz"}, {"a.bin", std::string("\0\1\2", 3)}, {"b/a/deep.dat", "deep"},
      {"empty", ""},      {"B", std::string(5000, 'x')},       {"b/y.txt", "y"}};
  for (const auto& [name, data] : files) WriteFile(src + "/" + name, data);
  fs::create_directory_symlink(src + "/b", src + "/link-to-b");  // not followed
  PackOptions opts;
  opts.shard_bytes = 4096;  // "B" gets a shard of its own
  Result<PackStats> st = PackDirectory(src, out, opts);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  Result<DatasetIndex> index = DatasetIndex::Load(out);
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  ASSERT_EQ(index->num_samples(), files.size());
  uint64_t i = 0;
  for (const auto& [name, data] : files) {  // std::map iterates in bytewise order
    EXPECT_EQ(index->name(i), name);
    EXPECT_EQ(SampleBytes(*index, i), data) << name;
    ++i;
  }
  EXPECT_EQ(index->source(), "dir");
  EXPECT_GE(index->shards().size(), 2u);
}

TEST(PackTest, SyntheticFilesPackBackIntoIndexOrder) {
  base::ScopedTempDir tmp("data-pack");
  SyntheticSpec spec{.samples = 1203, .min_bytes = 1, .max_bytes = 64, .seed = 11};
  ASSERT_TRUE(WriteSyntheticFiles(spec, tmp.Sub("small")).ok());
  Result<PackStats> st = PackDirectory(tmp.Sub("small"), tmp.Sub("packed"), PackOptions());
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  Result<DatasetIndex> index = DatasetIndex::Load(tmp.Sub("packed"));
  ASSERT_TRUE(index.ok());
  ASSERT_EQ(index->num_samples(), spec.samples);
  std::string want;
  for (uint64_t i = 0; i < spec.samples; ++i) {
    FillSyntheticSample(spec, i, &want);
    ASSERT_EQ(index->name(i), SyntheticSampleName(i));
    ASSERT_EQ(SampleBytes(*index, i), want);
  }
}

TEST(PackTest, ExistingDatasetNeedsOverwriteAndLosesExtraShards) {
  base::ScopedTempDir tmp("data-pack");
  PackOptions opts;
  opts.shard_bytes = 1024;
  SyntheticSpec big{.samples = 100, .min_bytes = 100, .max_bytes = 100, .seed = 1};
  ASSERT_TRUE(PackSynthetic(big, tmp.path(), opts).ok());
  ASSERT_TRUE(base::PathExists(tmp.Sub("shard-00009.bin")));
  SyntheticSpec small{.samples = 10, .min_bytes = 100, .max_bytes = 100, .seed = 2};
  Result<PackStats> again = PackSynthetic(small, tmp.path(), opts);
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(again.status().message().find(tmp.path()), std::string::npos);
  opts.overwrite = true;
  ASSERT_TRUE(PackSynthetic(small, tmp.path(), opts).ok());
  Result<DatasetIndex> index = DatasetIndex::Load(tmp.path());
  ASSERT_TRUE(index.ok());
  EXPECT_EQ(index->num_samples(), 10u);
  EXPECT_EQ(index->shards().size(), 1u);
  EXPECT_FALSE(base::PathExists(tmp.Sub("shard-00009.bin")));
}

TEST(PackTest, BadSources) {
  base::ScopedTempDir tmp("data-pack");
  EXPECT_EQ(PackDirectory(tmp.Sub("nope"), tmp.Sub("out"), {}).status().code(),
            StatusCode::kNotFound);
  fs::create_directory(tmp.Sub("empty"));
  Result<PackStats> empty = PackDirectory(tmp.Sub("empty"), tmp.Sub("out"), {});
  EXPECT_EQ(empty.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(empty.status().message().find("no files"), std::string::npos);
  WriteFile(tmp.Sub("src/a"), "a");
  Result<PackStats> inside = PackDirectory(tmp.Sub("src"), tmp.Sub("src/out"), {});
  EXPECT_EQ(inside.status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(base::PathExists(tmp.Sub("src/out")));
}

TEST(IndexTest, MissingIndexIsNotADataset) {
  base::ScopedTempDir tmp("data-pack");
  WriteFile(tmp.Sub("shard-00000.bin"), "leftover");
  Result<DatasetIndex> index = DatasetIndex::Load(tmp.path());
  EXPECT_EQ(index.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(index.status().message().find("not a packed dataset"), std::string::npos);
  EXPECT_NE(index.status().message().find(tmp.path()), std::string::npos);
  EXPECT_EQ(DatasetIndex::Load(tmp.Sub("missing")).status().code(), StatusCode::kNotFound);
}

class IndexCorruptionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(PackSynthetic({.samples = 50, .min_bytes = 1, .max_bytes = 9, .seed = 5},
                              tmp_.path(), PackOptions())
                    .ok());
    path_ = tmp_.Sub("index.bin");
    bytes_ = base::ReadFile(path_).value();
  }
  void Rewrite(std::string bytes, bool fix_trailer) {
    if (fix_trailer) {
      const uint64_t sum = base::Xxh3(bytes.data(), bytes.size() - 8);
      std::memcpy(bytes.data() + bytes.size() - 8, &sum, 8);
    }
    std::ofstream(path_, std::ios::binary | std::ios::trunc) << bytes;
  }
  base::ScopedTempDir tmp_{"data-pack"};
  std::string path_, bytes_;
};

TEST_F(IndexCorruptionTest, FlippedByteIsDataLoss) {
  std::string bad = bytes_;
  bad[bad.size() / 2] ^= 0x01;
  Rewrite(bad, false);
  Result<DatasetIndex> index = DatasetIndex::Load(tmp_.path());
  EXPECT_EQ(index.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(index.status().message().find(path_), std::string::npos);
}

TEST_F(IndexCorruptionTest, TruncatedIsDataLoss) {
  for (size_t keep : {size_t{0}, size_t{7}, size_t{30}, bytes_.size() - 1}) {
    Rewrite(bytes_.substr(0, keep), false);
    EXPECT_EQ(DatasetIndex::Load(tmp_.path()).status().code(), StatusCode::kDataLoss) << keep;
  }
}

TEST_F(IndexCorruptionTest, FutureVersionIsRejected) {
  std::string bad = bytes_;
  const size_t at = bad.find("\"version\":1");
  ASSERT_NE(at, std::string::npos);
  bad[at + 10] = '7';
  Rewrite(bad, true);
  Result<DatasetIndex> index = DatasetIndex::Load(tmp_.path());
  EXPECT_EQ(index.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(index.status().message().find("version 7"), std::string::npos);
}

TEST_F(IndexCorruptionTest, EntryOutsideShardIsDataLoss) {
  // A consistent checksum over a wrong entry: the bounds check still catches it.
  std::string bad = bytes_;
  uint64_t header_len = 0;
  std::memcpy(&header_len, bad.data() + 8, 8);
  const size_t table = (16 + header_len + 7) / 8 * 8;
  const uint64_t huge = 1ull << 40;
  std::memcpy(bad.data() + table + 3 * kDataRecordBytes, &huge, 8);  // sample 3's offset
  Rewrite(bad, true);
  Result<DatasetIndex> index = DatasetIndex::Load(tmp_.path());
  EXPECT_EQ(index.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(index.status().message().find("sample 3"), std::string::npos);
}

// A packer killed in the middle leaves no dataset; the next pack cleans up and succeeds.
TEST(PackCrashTest, KilledPackLeavesNoDatasetAndRepackWorks) {
  base::ScopedTempDir tmp("data-pack");
  SyntheticSpec spec{.samples = 20000, .min_bytes = 8, .max_bytes = 64, .seed = 9};
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    PackOptions opts;
    opts.shard_bytes = 64 << 10;
    opts.progress = [](uint64_t done, uint64_t) {
      if (done >= 8192) ::raise(SIGKILL);  // mid-pack: shards written, index not yet
    };
    (void)PackSynthetic(spec, tmp.path(), opts);
    ::_exit(0);
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_TRUE(WIFSIGNALED(status));
  EXPECT_TRUE(base::PathExists(tmp.Sub("shard-00000.bin")));
  EXPECT_TRUE(HasTempFiles(tmp.path()));
  EXPECT_EQ(DatasetIndex::Load(tmp.path()).status().code(), StatusCode::kInvalidArgument);

  ASSERT_TRUE(PackSynthetic(spec, tmp.path(), PackOptions()).ok());
  EXPECT_FALSE(HasTempFiles(tmp.path()));
  Result<DatasetIndex> index = DatasetIndex::Load(tmp.path());
  ASSERT_TRUE(index.ok());
  EXPECT_EQ(index->num_samples(), spec.samples);
  std::string want;
  FillSyntheticSample(spec, 12345, &want);
  EXPECT_EQ(SampleBytes(*index, 12345), want);
}

}  // namespace
}  // namespace railyard::storage
