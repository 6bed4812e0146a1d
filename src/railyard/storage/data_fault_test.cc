// Faults under packed training data, injected through the storage::Fs seam: a full disk
// while the packer writes a shard or the index, EIO and short reads under the reader, and a
// power cut at every call of a pack on the in-memory Fs. The rule each test checks: the
// index is the commit point, so a failed pack leaves no dataset (never a broken one), and a
// failed read is an error naming the shard and sample, never wrong bytes.
#include <gtest/gtest.h>

#include <cerrno>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "railyard/storage/data_pack.h"
#include "railyard/storage/data_reader.h"
#include "railyard/storage/fault_injection_fs.h"
#include "railyard/storage/fs_util.h"
#include "railyard/storage/mem_fs.h"
#include "railyard/storage/power_cut_fs.h"

namespace railyard::storage {
namespace {

constexpr char kDir[] = "/data/ds";
const SyntheticSpec kSpec{.samples = 60, .min_bytes = 1, .max_bytes = 300, .seed = 9};

PackOptions Pack(Fs* fs) {
  PackOptions o;
  o.shard_bytes = 4 << 10;  // several shards
  o.fs = fs;
  return o;
}

DataReaderOptions Read(Fs* fs) {
  DataReaderOptions o;
  o.shuffle = false;
  o.batch = 1;
  o.threads = 0;  // reads in NextBatch: the failing read is the one under test
  o.fs = fs;
  return o;
}

// Names in `dir` that a crashed or failed write left behind.
std::vector<std::string> TempFiles(Fs& fs, const std::string& dir) {
  std::vector<std::string> out;
  Result<std::vector<DirEntry>> entries = fs.ListDir(dir);
  if (!entries.ok()) return out;
  for (const DirEntry& e : *entries) {
    if (e.name.find(".tmp.") != std::string::npos) out.push_back(e.name);
  }
  return out;
}

// Every sample of the dataset at kDir in `fs` holds the synthetic bytes.
void ExpectEverySample(Fs* fs) {
  auto reader = DataReader::Open(kDir, Read(fs));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  ASSERT_EQ((*reader)->num_samples(), kSpec.samples);
  std::string got, want;
  for (uint64_t i = 0; i < kSpec.samples; ++i) {
    ASSERT_TRUE((*reader)->ReadSample(i, &got).ok()) << "sample " << i;
    FillSyntheticSample(kSpec, i, &want);
    ASSERT_EQ(got, want) << "sample " << i;
  }
}

TEST(DataFaultTest, PacksIntoAndReadsFromTheInMemoryFs) {
  std::unique_ptr<MemFs> mem = NewMemFs();
  Result<PackStats> st = PackSynthetic(kSpec, kDir, Pack(mem.get()));
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  ASSERT_GT(st->shards, 2u);
  mem->PowerCut();  // a committed pack is durable
  ExpectEverySample(mem.get());
  EXPECT_TRUE(TempFiles(*mem, kDir).empty());
}

TEST(DataFaultTest, FullDiskAtTheIndexLeavesNoDataset) {
  std::unique_ptr<MemFs> mem = NewMemFs();
  ASSERT_TRUE(PackSynthetic(kSpec, kDir, Pack(mem.get())).ok());
  FaultInjectionFs faulty(mem.get());
  faulty.SetHook([](const FsOpInfo& info) -> Status {
    if (info.op == FsOp::kWrite && info.path.find("/index.bin.tmp.") != std::string::npos) {
      return ErrnoStatus(ENOSPC, fmt::format("write to '{}' (injected)", info.path));
    }
    return Status::Ok();
  });
  PackOptions o = Pack(&faulty);
  o.overwrite = true;
  SyntheticSpec other = kSpec;
  other.seed = 10;
  Result<PackStats> st = PackSynthetic(other, kDir, o);
  ASSERT_EQ(st.status().code(), StatusCode::kResourceExhausted) << st.status().ToString();
  EXPECT_NE(st.status().message().find("index.bin"), std::string::npos) << st.status().ToString();
  // The old index was withdrawn before the new shards were written, and the new one never
  // landed: no dataset, rather than the old index over new shards.
  Result<DatasetIndex> index = DatasetIndex::Load(kDir, mem.get());
  EXPECT_EQ(index.status().code(), StatusCode::kInvalidArgument) << index.status().ToString();
  EXPECT_NE(index.status().message().find("not a packed dataset"), std::string::npos);
  EXPECT_TRUE(TempFiles(*mem, kDir).empty());
  // Room again: the same pack commits.
  faulty.SetHook(nullptr);
  ASSERT_TRUE(PackSynthetic(kSpec, kDir, o).ok());
  ExpectEverySample(mem.get());
}

TEST(DataFaultTest, FullDiskInAShardLeavesNoDatasetAndNoTemporaryFile) {
  std::unique_ptr<MemFs> mem = NewMemFs();
  FaultInjectionFs faulty(mem.get());
  faulty.FailNth(FsOp::kWrite, 2, ENOSPC);  // the second shard's data
  Result<PackStats> st = PackSynthetic(kSpec, kDir, Pack(&faulty));
  ASSERT_EQ(st.status().code(), StatusCode::kResourceExhausted) << st.status().ToString();
  EXPECT_NE(st.status().message().find("shard-00001.bin.tmp."), std::string::npos)
      << st.status().ToString();
  EXPECT_FALSE(mem->Exists(std::string(kDir) + "/index.bin"));
  EXPECT_TRUE(TempFiles(*mem, kDir).empty());
}

TEST(DataFaultTest, ReadErrorIsReturnedNamingShardAndSampleAndIsSticky) {
  std::unique_ptr<MemFs> mem = NewMemFs();
  ASSERT_TRUE(PackSynthetic(kSpec, kDir, Pack(mem.get())).ok());
  FaultInjectionFs faulty(mem.get());
  faulty.SetHook([](const FsOpInfo& info) -> Status {
    if (info.op == FsOp::kRead && info.path.ends_with("/shard-00001.bin")) {
      return ErrnoStatus(EIO, fmt::format("read of '{}' (injected)", info.path));
    }
    return Status::Ok();
  });
  auto reader = DataReader::Open(kDir, Read(&faulty));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  uint64_t first_in_shard1 = 0;
  while ((*reader)->index().entry(first_in_shard1).shard != 1) ++first_in_shard1;
  Status error;
  uint64_t delivered = 0;
  for (uint64_t b = 0; b < kSpec.samples && error.ok(); ++b) {
    Result<std::vector<Sample>> batch = (*reader)->NextBatch();
    if (batch.ok()) ++delivered;
    if (!batch.ok()) error = batch.status();
  }
  EXPECT_EQ(delivered, first_in_shard1) << "every sample before shard 1 was delivered";
  EXPECT_NE(error.message().find("Input/output error"), std::string::npos) << error.ToString();
  EXPECT_NE(error.message().find(fmt::format("sample {}", first_in_shard1)), std::string::npos)
      << error.ToString();
  EXPECT_NE(error.message().find("shard-00001.bin"), std::string::npos) << error.ToString();
  EXPECT_EQ((*reader)->NextBatch().status(), error) << "the error is sticky";
}

TEST(DataFaultTest, FailedShardOpenNamesTheShard) {
  std::unique_ptr<MemFs> mem = NewMemFs();
  ASSERT_TRUE(PackSynthetic(kSpec, kDir, Pack(mem.get())).ok());
  FaultInjectionFs faulty(mem.get());
  faulty.SetHook([](const FsOpInfo& info) -> Status {
    if (info.op == FsOp::kOpen && info.path.ends_with("/shard-00002.bin")) {
      return ErrnoStatus(EACCES, fmt::format("cannot open '{}' (injected)", info.path));
    }
    return Status::Ok();
  });
  auto reader = DataReader::Open(kDir, Read(&faulty));
  EXPECT_EQ(reader.status().code(), StatusCode::kPermissionDenied) << reader.status().ToString();
  EXPECT_NE(reader.status().message().find("shard-00002.bin"), std::string::npos);
}

// A shard that is shorter than the index says: refused at open, and a short read of a shard
// cut after open is DATA_LOSS naming the sample.
TEST(DataFaultTest, ShortShardIsDataLoss) {
  std::unique_ptr<MemFs> mem = NewMemFs();
  ASSERT_TRUE(PackSynthetic(kSpec, kDir, Pack(mem.get())).ok());
  auto reader = DataReader::Open(kDir, Read(mem.get()));
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  const uint64_t last = kSpec.samples - 1;
  const DataSampleEntry e = (*reader)->index().entry(last);
  ASSERT_GT(e.length, 1u);
  const std::string shard = std::string(kDir) + "/" + (*reader)->index().shards()[e.shard].file;
  Result<std::string> bytes = ReadWholeFile(*mem, shard);
  ASSERT_TRUE(bytes.ok());
  // Rewrite the shard in place, one byte short: the open reader's handle sees the cut.
  {
    auto file = mem->NewWritableFile(shard, {});
    ASSERT_TRUE(file.ok());
    ASSERT_TRUE((*file)->Write(std::string_view(*bytes).substr(0, e.offset + e.length - 1)).ok());
  }
  std::string data;
  Status st = (*reader)->ReadSample(last, &data);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
  EXPECT_NE(st.message().find("truncated"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find(fmt::format("sample {}", last)), std::string::npos);

  auto reopened = DataReader::Open(kDir, Read(mem.get()));
  EXPECT_EQ(reopened.status().code(), StatusCode::kDataLoss) << reopened.status().ToString();
  EXPECT_NE(reopened.status().message().find("truncated"), std::string::npos);
}

// The power goes at every call a pack makes: afterwards there is either no dataset or a
// complete one, and a complete one whenever the pack had returned OK.
TEST(DataFaultTest, PowerCutAtEveryCallOfAPack) {
  uint64_t total = 0;
  {
    std::unique_ptr<MemFs> mem = NewMemFs();
    PowerCutFs fs(mem.get());
    ASSERT_TRUE(PackSynthetic(kSpec, kDir, Pack(&fs)).ok());
    total = fs.calls();
  }
  ASSERT_GT(total, 20u);
  int committed = 0;
  for (uint64_t n = 0; n <= total; ++n) {
    std::unique_ptr<MemFs> mem = NewMemFs();
    PowerCutFs fs(mem.get());
    fs.CutPowerAfter(n);
    const bool ok = PackSynthetic(kSpec, kDir, Pack(&fs)).ok();
    fs.PowerCut();
    Result<DatasetIndex> index = DatasetIndex::Load(kDir, mem.get());
    const std::string where = fmt::format("power cut after call {} of {}", n, total);
    if (ok) ASSERT_TRUE(index.ok()) << where << ": " << index.status().ToString();
    if (!index.ok()) {
      // No dataset: never a corrupt one.
      EXPECT_TRUE(index.status().code() == StatusCode::kNotFound ||
                  index.status().code() == StatusCode::kInvalidArgument)
          << where << ": " << index.status().ToString();
      continue;
    }
    ++committed;
    ExpectEverySample(mem.get());
    if (HasFatalFailure()) {
      ADD_FAILURE() << where;
      return;
    }
  }
  std::cerr << "cut the power at " << total + 1 << " points of a pack; a dataset loaded after "
            << committed << " of them\n";
  EXPECT_GE(committed, 1);
}

}  // namespace
}  // namespace railyard::storage
