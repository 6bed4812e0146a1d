#include "railyard/storage/data_reader.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "railyard/base/files.h"
#include "railyard/base/temp_dir_testing.h"
#include "railyard/storage/data_pack.h"

namespace railyard::storage {
namespace {

namespace fs = std::filesystem;

std::unique_ptr<DataReader> MustOpen(const std::string& dir, const DataReaderOptions& o) {
  Result<std::unique_ptr<DataReader>> r = DataReader::Open(dir, o);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? std::move(r).value() : nullptr;
}

// Reads `batches` batches and returns the samples in delivery order.
std::vector<Sample> ReadBatches(DataReader* reader, int batches) {
  std::vector<Sample> out;
  for (int b = 0; b < batches; ++b) {
    Result<std::vector<Sample>> batch = reader->NextBatch();
    EXPECT_TRUE(batch.ok()) << batch.status().ToString();
    if (!batch.ok()) break;
    for (Sample& s : *batch) out.push_back(std::move(s));
  }
  return out;
}

std::vector<uint64_t> Indices(const std::vector<Sample>& samples) {
  std::vector<uint64_t> out;
  for (const Sample& s : samples) out.push_back(s.index);
  return out;
}

class DataReaderTest : public ::testing::Test {
 protected:
  static constexpr uint64_t kSamples = 1000;

  void SetUp() override {
    spec_ = {.samples = kSamples, .min_bytes = 1, .max_bytes = 200, .seed = 42};
    PackOptions opts;
    opts.shard_bytes = 16 << 10;  // several shards
    Result<PackStats> st = PackSynthetic(spec_, tmp_.Sub("ds"), opts);
    ASSERT_TRUE(st.ok()) << st.status().ToString();
    ASSERT_GT(st->shards, 3u);
    dir_ = tmp_.Sub("ds");
  }

  DataReaderOptions Options(int rank, int world, size_t batch) const {
    DataReaderOptions o;
    o.rank = rank;
    o.world_size = world;
    o.seed = 1234;
    o.batch = batch;
    o.prefetch = 3;
    o.threads = 2;
    return o;
  }

  void ExpectSyntheticBytes(const std::vector<Sample>& samples) const {
    std::string want;
    for (const Sample& s : samples) {
      FillSyntheticSample(spec_, s.index, &want);
      ASSERT_EQ(s.data, want) << "sample " << s.index;
    }
  }

  base::ScopedTempDir tmp_{"data-reader"};
  SyntheticSpec spec_;
  std::string dir_;
};

TEST(SamplePermutationTest, IsAPermutationForAwkwardSizes) {
  for (uint64_t n : {1, 2, 3, 4, 5, 16, 17, 100, 1000, 4097, 65536}) {
    SamplePermutation p(n, 99, 3);
    std::vector<bool> seen(n, false);
    for (uint64_t i = 0; i < n; ++i) {
      const uint64_t x = p(i);
      ASSERT_LT(x, n);
      ASSERT_FALSE(seen[x]) << "n=" << n << " repeats " << x;
      seen[x] = true;
    }
  }
}

TEST(SamplePermutationTest, DependsOnSeedAndEpochOnly) {
  const uint64_t n = 1000;
  auto order = [&](uint64_t seed, uint64_t epoch) {
    SamplePermutation p(n, seed, epoch);
    std::vector<uint64_t> out;
    for (uint64_t i = 0; i < n; ++i) out.push_back(p(i));
    return out;
  };
  const auto base = order(1, 0);
  EXPECT_EQ(base, order(1, 0));
  EXPECT_NE(base, order(2, 0));
  EXPECT_NE(base, order(1, 1));
  EXPECT_NE(order(1, 1), order(1, 2));
  // A shuffle, not a rotation or the identity: few fixed points and no long in-order runs.
  int fixed = 0, ascending = 0;
  for (uint64_t i = 0; i < n; ++i) {
    fixed += base[i] == i;
    if (i > 0) ascending += base[i] == base[i - 1] + 1;
  }
  EXPECT_LT(fixed, 10);
  EXPECT_LT(ascending, 10);
}

TEST_F(DataReaderTest, UnshuffledReadsEveryByteInPackOrder) {
  DataReaderOptions o = Options(0, 1, 7);
  o.shuffle = false;
  auto reader = MustOpen(dir_, o);
  ASSERT_NE(reader, nullptr);
  std::vector<Sample> got = ReadBatches(reader.get(), 143);  // 1001 samples: into epoch 1
  ASSERT_EQ(got.size(), 1001u);
  for (uint64_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(got[i].position, i);
    EXPECT_EQ(got[i].index, i % kSamples);
    EXPECT_EQ(got[i].epoch, i / kSamples);
  }
  ExpectSyntheticBytes(got);
}

TEST_F(DataReaderTest, ShuffledEpochIsAPermutationWithEveryByte) {
  auto reader = MustOpen(dir_, Options(0, 1, 10));
  ASSERT_NE(reader, nullptr);
  std::vector<Sample> got = ReadBatches(reader.get(), 100);
  std::vector<uint64_t> idx = Indices(got);
  std::vector<uint64_t> sorted = idx;
  std::sort(sorted.begin(), sorted.end());
  for (uint64_t i = 0; i < kSamples; ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_FALSE(std::is_sorted(idx.begin(), idx.end()));
  ExpectSyntheticBytes(got);
}

TEST_F(DataReaderTest, SameSeedSameOrderOtherSeedOrEpochDiffers) {
  auto first = [&](uint64_t seed, uint64_t epoch, int threads) {
    DataReaderOptions o = Options(0, 1, 50);
    o.seed = seed;
    o.epoch = epoch;
    o.threads = threads;
    auto reader = MustOpen(dir_, o);
    return Indices(ReadBatches(reader.get(), 2));
  };
  const auto a = first(1, 0, 2);
  EXPECT_EQ(a, first(1, 0, 2));
  EXPECT_EQ(a, first(1, 0, 0));  // synchronous reading gives the same stream
  EXPECT_EQ(a, first(1, 0, 5));
  EXPECT_NE(a, first(2, 0, 2));
  EXPECT_NE(a, first(1, 1, 2));
}

TEST_F(DataReaderTest, RanksPartitionEachEpoch) {
  for (int world : {1, 3, 4, 7}) {
    std::set<uint64_t> all;
    uint64_t total = 0;
    for (int rank = 0; rank < world; ++rank) {
      auto reader = MustOpen(dir_, Options(rank, world, 1));
      const int per_rank = static_cast<int>((kSamples + world - 1) / world);
      for (const Sample& s : ReadBatches(reader.get(), per_rank)) {
        EXPECT_EQ(s.position % world, static_cast<uint64_t>(rank));
        if (s.epoch != 0) continue;
        EXPECT_TRUE(all.insert(s.index).second) << "world " << world << " repeats " << s.index;
        ++total;
      }
    }
    EXPECT_EQ(all.size(), kSamples) << "world " << world;
    EXPECT_EQ(total, kSamples);
  }
}

TEST_F(DataReaderTest, ResumeWithSameWorldSizeContinuesExactly) {
  const int world = 3;
  std::string saved;
  for (int rank = 0; rank < world; ++rank) {
    // 5 batches of 50 per rank = global position 750; 6 more cross into epoch 1.
    auto uninterrupted = MustOpen(dir_, Options(rank, world, 50));
    std::vector<Sample> all = ReadBatches(uninterrupted.get(), 11);
    auto before = MustOpen(dir_, Options(rank, world, 50));
    ReadBatches(before.get(), 5);
    const std::string position = before->SavePosition();
    if (rank == 0) saved = position;
    EXPECT_EQ(position, saved) << "ranks in lockstep save the same position";
    before.reset();
    auto after = MustOpen(dir_, Options(rank, world, 50));
    ASSERT_TRUE(after->RestorePosition(position).ok());
    std::vector<Sample> next = ReadBatches(after.get(), 6);
    ASSERT_EQ(next.size(), 300u);
    for (size_t i = 0; i < next.size(); ++i) {
      EXPECT_EQ(next[i].index, all[250 + i].index) << "rank " << rank << " sample " << i;
      EXPECT_EQ(next[i].position, all[250 + i].position);
      EXPECT_EQ(next[i].data, all[250 + i].data);
    }
    EXPECT_EQ(next.back().epoch, 1u);
  }
  EXPECT_NE(saved.find("\"offset\":750"), std::string::npos) << saved;
}

// W ranks consume k samples each; the resumed W' ranks together read exactly the global
// positions that an uninterrupted stream would read next.
void CheckWorldChange(const std::string& dir, int old_world, size_t old_batch, int old_batches,
                      int new_world, size_t new_batch, int new_batches) {
  DataReaderOptions o;
  o.seed = 77;
  o.prefetch = 2;
  o.threads = 2;
  o.world_size = old_world;
  o.batch = old_batch;
  std::string saved;
  for (int rank = 0; rank < old_world; ++rank) {
    o.rank = rank;
    auto r = MustOpen(dir, o);
    ReadBatches(r.get(), old_batches);
    if (rank == 0) saved = r->SavePosition();
    ASSERT_EQ(r->SavePosition(), saved);
  }
  const uint64_t resume_at = static_cast<uint64_t>(old_world) * old_batch * old_batches;
  const uint64_t count = static_cast<uint64_t>(new_world) * new_batch * new_batches;

  o.world_size = 1;
  o.rank = 0;
  o.batch = resume_at + count;
  auto single = MustOpen(dir, o);
  std::vector<Sample> reference = ReadBatches(single.get(), 1);

  std::map<uint64_t, const Sample*> by_position;
  std::vector<std::vector<Sample>> resumed(new_world);
  o.world_size = new_world;
  o.batch = new_batch;
  for (int rank = 0; rank < new_world; ++rank) {
    o.rank = rank;
    auto r = MustOpen(dir, o);
    ASSERT_TRUE(r->RestorePosition(saved).ok());
    resumed[rank] = ReadBatches(r.get(), new_batches);
    for (const Sample& s : resumed[rank]) {
      EXPECT_TRUE(by_position.emplace(s.position, &s).second) << "position read twice";
    }
  }
  ASSERT_EQ(by_position.size(), count);
  uint64_t g = resume_at;
  for (const auto& [position, sample] : by_position) {
    ASSERT_EQ(position, g);
    EXPECT_EQ(sample->index, reference[g].index) << "global position " << g;
    EXPECT_EQ(sample->data, reference[g].data);
    ++g;
  }
}

TEST_F(DataReaderTest, ResumeWithFewerRanks) { CheckWorldChange(dir_, 4, 8, 3, 3, 5, 4); }
TEST_F(DataReaderTest, ResumeWithMoreRanks) { CheckWorldChange(dir_, 2, 10, 7, 5, 3, 9); }
TEST_F(DataReaderTest, ResumeAcrossEpochBoundary) { CheckWorldChange(dir_, 3, 37, 9, 2, 100, 3); }

TEST_F(DataReaderTest, RestoreRejectsBadPositions) {
  auto reader = MustOpen(dir_, Options(0, 2, 4));
  ReadBatches(reader.get(), 3);
  const std::string good = reader->SavePosition();
  EXPECT_EQ(reader->RestorePosition("garbage").code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(reader->RestorePosition("[1,2]").code(), StatusCode::kInvalidArgument);
  auto edit = [&](const std::string& from, const std::string& to) {
    std::string s = good;
    s.replace(s.find(from), from.size(), to);
    return s;
  };
  Status out_of_range = reader->RestorePosition(edit("\"offset\":24", "\"offset\":1000"));
  EXPECT_EQ(out_of_range.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(out_of_range.message().find("out of range"), std::string::npos);
  EXPECT_EQ(reader->RestorePosition(edit("\"offset\":24", "\"offset\":-1")).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(reader->RestorePosition(edit("\"epoch\":0", "\"epoch\":18446744073709551615")).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(reader->RestorePosition(edit("\"seed\":1234", "\"seed\":1235")).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(reader->RestorePosition(edit("{", "{\"extra\":1,")).code(),
            StatusCode::kInvalidArgument);

  // A position from another dataset (same size, different content).
  SyntheticSpec other = spec_;
  other.seed = 43;
  ASSERT_TRUE(PackSynthetic(other, tmp_.Sub("other"), PackOptions()).ok());
  auto other_reader = MustOpen(tmp_.Sub("other"), Options(0, 2, 4));
  Status changed = reader->RestorePosition(other_reader->SavePosition());
  EXPECT_EQ(changed.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(changed.message().find(dir_), std::string::npos);

  // After all the rejections the reader still resumes from a good position.
  ASSERT_TRUE(reader->RestorePosition(good).ok());
  EXPECT_EQ(reader->SavePosition(), good);
}

TEST_F(DataReaderTest, FlippedByteIsDataLossNamingShardSampleAndOffset) {
  auto probe = MustOpen(dir_, Options(0, 1, 1));
  const DatasetIndex& index = probe->index();
  const uint64_t victim = 321;
  const DataSampleEntry e = index.entry(victim);
  const std::string shard = dir_ + "/" + index.shards()[e.shard].file;
  {
    std::fstream f(shard, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(static_cast<std::streamoff>(e.offset + e.length / 2));
    char c = 0;
    f.read(&c, 1);
    c ^= 0x10;
    f.seekp(static_cast<std::streamoff>(e.offset + e.length / 2));
    f.write(&c, 1);
  }
  DataReaderOptions o = Options(0, 1, 10);
  o.shuffle = false;
  auto reader = MustOpen(dir_, o);
  Status error;
  for (int b = 0; b < 100 && error.ok(); ++b) {
    Result<std::vector<Sample>> batch = reader->NextBatch();
    if (!batch.ok()) {
      error = batch.status();
      EXPECT_EQ(b, 32) << "the batch holding sample 321";
    }
  }
  ASSERT_EQ(error.code(), StatusCode::kDataLoss);
  EXPECT_NE(error.message().find(index.shards()[e.shard].file), std::string::npos);
  EXPECT_NE(error.message().find("sample 321"), std::string::npos);
  EXPECT_NE(error.message().find(fmt::format("offset {}", e.offset)), std::string::npos);
  EXPECT_EQ(reader->NextBatch().status(), error) << "the error is sticky";
}

TEST_F(DataReaderTest, TruncatedShardIsDataLoss) {
  const std::string shard = dir_ + "/shard-00001.bin";
  fs::resize_file(shard, fs::file_size(shard) - 1);
  Result<std::unique_ptr<DataReader>> r = DataReader::Open(dir_, Options(0, 1, 1));
  ASSERT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("shard-00001.bin"), std::string::npos);
  EXPECT_NE(r.status().message().find("truncated"), std::string::npos);
}

TEST_F(DataReaderTest, ShardTruncatedWhileOpenIsDataLoss) {
  auto reader = MustOpen(dir_, Options(0, 1, 1));
  const uint64_t last = kSamples - 1;
  const DataSampleEntry e = reader->index().entry(last);
  ASSERT_GT(e.length, 0u);
  const std::string shard = dir_ + "/" + reader->index().shards()[e.shard].file;
  fs::resize_file(shard, e.offset + e.length - 1);
  std::string data;
  Status st = reader->ReadSample(last, &data);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("truncated"), std::string::npos);
  EXPECT_NE(st.message().find(fmt::format("sample {}", last)), std::string::npos);
}

TEST_F(DataReaderTest, MissingShardOrIndex) {
  fs::remove(dir_ + "/shard-00002.bin");
  Result<std::unique_ptr<DataReader>> r = DataReader::Open(dir_, Options(0, 1, 1));
  EXPECT_EQ(r.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(r.status().message().find("shard-00002.bin"), std::string::npos);
  fs::remove(dir_ + "/index.bin");
  r = DataReader::Open(dir_, Options(0, 1, 1));
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find("not a packed dataset"), std::string::npos);
  EXPECT_NE(r.status().message().find(dir_), std::string::npos);
}

TEST_F(DataReaderTest, DirectoryDatasetKeepsNames) {
  const std::string src = tmp_.Sub("src");
  ASSERT_TRUE(
      WriteSyntheticFiles({.samples = 30, .min_bytes = 0, .max_bytes = 50, .seed = 1}, src).ok());
  ASSERT_TRUE(PackDirectory(src, tmp_.Sub("named"), PackOptions()).ok());
  auto reader = MustOpen(tmp_.Sub("named"), Options(0, 1, 30));
  for (const Sample& s : ReadBatches(reader.get(), 1)) {
    const std::string name(reader->index().name(s.index));
    EXPECT_EQ(name, SyntheticSampleName(s.index));
    EXPECT_EQ(s.data, base::ReadFile(src + "/" + name).value());
  }
}

TEST_F(DataReaderTest, BadOptions) {
  EXPECT_EQ(DataReader::Open(dir_, Options(3, 3, 1)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DataReader::Open(dir_, Options(0, 0, 1)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DataReader::Open(dir_, Options(0, 1, 0)).status().code(), StatusCode::kInvalidArgument);
  DataReaderOptions o = Options(0, 1, 1);
  o.epoch = ~uint64_t{0};
  EXPECT_EQ(DataReader::Open(dir_, o).status().code(), StatusCode::kInvalidArgument);
}

// Destroying or restoring a reader whose threads are busy or blocked on a full queue returns.
TEST_F(DataReaderTest, ShutdownWhilePrefetchingDoesNotHang) {
  for (int round = 0; round < 20; ++round) {
    DataReaderOptions o = Options(0, 1, 16);
    o.threads = 4;
    o.prefetch = 1 + round % 4;
    auto reader = MustOpen(dir_, o);
    if (round % 2 == 0) {
      ASSERT_TRUE(reader->NextBatch().ok());
    }
    if (round % 3 == 0) {
      ASSERT_TRUE(reader->RestorePosition(reader->SavePosition()).ok());
    }
    reader.reset();
  }
  auto never_started = MustOpen(dir_, Options(0, 1, 1));  // no threads to stop
}

}  // namespace
}  // namespace railyard::storage
