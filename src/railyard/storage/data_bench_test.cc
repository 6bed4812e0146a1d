#include "railyard/storage/data_bench.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include "railyard/base/files.h"
#include "railyard/base/temp_dir_testing.h"
#include "railyard/storage/data_pack.h"

namespace railyard::storage {
namespace {

namespace fs = std::filesystem;

DataBenchOptions SmallRun(const std::string& dir) {
  DataBenchOptions o;
  o.dir = dir;
  o.samples = 2001;
  o.min_bytes = 100;
  o.max_bytes = 400;
  o.readers = 3;
  o.batch = 16;
  o.shard_bytes = 64 << 10;
  o.drop_caches = false;  // a test must not flush the machine's caches
  return o;
}

TEST(DataBenchTest, BothPhasesReadEveryByteOnce) {
  base::ScopedTempDir tmp("data-bench");
  DataBenchOptions o = SmallRun(tmp.path());
  std::vector<std::string> stages;
  o.progress = [&](std::string_view line) { stages.emplace_back(line); };
  Result<DataBenchResult> r = RunDataBench(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->samples, 2001u);
  EXPECT_EQ(r->readers, 3);
  EXPECT_GT(r->shards, 1u);
  EXPECT_EQ(r->packed.samples, 2001u);
  EXPECT_EQ(r->small.samples, 2001u);
  EXPECT_EQ(r->packed.bytes, r->bytes);
  EXPECT_EQ(r->small.bytes, r->bytes);
  EXPECT_GT(r->packed.samples_per_s, 0);
  EXPECT_GT(r->small.bytes_per_s, 0);
  EXPECT_GT(r->speedup, 0);
  EXPECT_FALSE(r->caches_dropped);
  EXPECT_FALSE(r->cache_note.empty());
  EXPECT_EQ(stages.size(), 4u);
  // Generated data is removed unless asked to keep it.
  EXPECT_TRUE(fs::is_empty(tmp.path()));

  nlohmann::json j = ToJson(*r);
  for (const char* key : {"samples", "bytes", "shards", "readers", "write_small_s", "pack_s",
                          "speedup", "caches", "cache_note"}) {
    EXPECT_TRUE(j.contains(key)) << key;
  }
  EXPECT_EQ(j["packed"]["samples"], 2001);
  EXPECT_TRUE(j["small"].contains("mb_per_s"));
  EXPECT_EQ(j["caches"], "warm");
}

TEST(DataBenchTest, KeepLeavesALoadableDataset) {
  base::ScopedTempDir tmp("data-bench");
  DataBenchOptions o = SmallRun(tmp.path());
  o.samples = 50;
  o.readers = 7;
  o.keep = true;
  Result<DataBenchResult> r = RunDataBench(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->packed.samples, 50u);
  EXPECT_EQ(r->small.samples, 50u);
  Result<DatasetIndex> index = DatasetIndex::Load(tmp.path() + "/ry-bench-packed");
  ASSERT_TRUE(index.ok()) << index.status().ToString();
  EXPECT_EQ(index->num_samples(), 50u);
  // A second run over the kept data starts afresh.
  o.samples = 20;
  r = RunDataBench(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->small.samples, 20u);
}

TEST(DataBenchTest, BadOptions) {
  base::ScopedTempDir tmp("data-bench");
  DataBenchOptions o = SmallRun(tmp.path());
  o.readers = 0;
  EXPECT_EQ(RunDataBench(o).status().code(), StatusCode::kInvalidArgument);
  o = SmallRun(tmp.path());
  o.samples = 0;
  EXPECT_EQ(RunDataBench(o).status().code(), StatusCode::kInvalidArgument);
  o = SmallRun("");
  EXPECT_EQ(RunDataBench(o).status().code(), StatusCode::kInvalidArgument);
}

// More readers than samples: the extra readers have nothing to read and must not block.
TEST(DataBenchTest, MoreReadersThanSamples) {
  base::ScopedTempDir tmp("data-bench");
  DataBenchOptions o = SmallRun(tmp.path());
  o.samples = 3;
  o.readers = 5;
  Result<DataBenchResult> r = RunDataBench(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->packed.samples, 3u);
  EXPECT_EQ(r->small.samples, 3u);
}

}  // namespace
}  // namespace railyard::storage
