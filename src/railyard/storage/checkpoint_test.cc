#include "railyard/storage/checkpoint.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "railyard/base/files.h"
#include "railyard/base/temp_dir_testing.h"
#include "railyard/storage/aligned_buffer.h"
#include "railyard/storage/checkpoint_catalog.h"
#include "railyard/storage/checkpoint_reader.h"

namespace railyard::storage {
namespace {

namespace fs = std::filesystem;

// Deterministic, distinct values: element i of tensor `seed`.
std::vector<float> Values(size_t n, int seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(seed * 100000 + static_cast<int>(i));
  return v;
}

// A row-major block [r0, r0+rows) x [c0, c0+cols) of a matrix with `total_cols` columns.
std::vector<float> Block(const std::vector<float>& full, int64_t total_cols, int64_t r0,
                         int64_t rows, int64_t c0, int64_t cols) {
  std::vector<float> out;
  for (int64_t r = r0; r < r0 + rows; ++r) {
    for (int64_t c = c0; c < c0 + cols; ++c) out.push_back(full[r * total_cols + c]);
  }
  return out;
}

std::vector<float> AsFloats(const std::vector<uint8_t>& bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

class CheckpointTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.empty()); }

  WriterOptions Options(int rank = 0, int world = 1, RankAgreement* agree = nullptr) {
    WriterOptions o;
    o.dir = dir_;
    o.rank = rank;
    o.world_size = world;
    o.agreement = agree;
    o.io_threads = 2;
    o.extent_bytes = 8192;  // several extents per piece, so the pool really splits work
    return o;
  }

  // Saves `w` [rows, cols] F32 (full) and a scalar I64 from one rank.
  Status SaveSingle(int64_t step, const std::vector<float>& w, int64_t rows, int64_t cols,
                    WriterOptions options) {
    auto writer = CheckpointWriter::Open(options);
    if (!writer.ok()) return writer.status();
    int64_t counter = step * 7;
    std::vector<TensorView> views = {
        {"w", DType::kF32, {rows, cols}, {}, {}, w.data()},
        {"counter", DType::kI64, {}, {}, {}, &counter},
    };
    return (*writer)->Save(step, views, {{"loader.position", std::to_string(step * 10)}});
  }

  // Runs `world` ranks as threads, each saving the rows [r*rows/world, ...) of `full`.
  void SaveRowSharded(int64_t step, int world, const std::vector<float>& full, int64_t rows,
                      int64_t cols) {
    InProcessAgreementGroup group(world);
    std::vector<Status> results(world);
    std::vector<std::thread> threads;
    for (int r = 0; r < world; ++r) {
      threads.emplace_back([&, r] {
        auto writer = CheckpointWriter::Open(Options(r, world, group.ForRank(r)));
        if (!writer.ok()) {
          results[r] = writer.status();
          return;
        }
        int64_t r0 = rows * r / world, r1 = rows * (r + 1) / world;
        std::vector<float> mine = Block(full, cols, r0, r1 - r0, 0, cols);
        // A column-split tensor too: rank r holds columns [c0, c1) of "v" (= full^T layout).
        int64_t c0 = cols * r / world, c1 = cols * (r + 1) / world;
        std::vector<float> vcols = Block(full, cols, 0, rows, c0, c1 - c0);
        std::vector<float> bias = Values(static_cast<size_t>(cols), 9);  // replicated
        std::vector<TensorView> views = {
            {"w", DType::kF32, {rows, cols}, {r0, 0}, {r1 - r0, cols}, mine.data()},
            {"v", DType::kF32, {rows, cols}, {0, c0}, {rows, c1 - c0}, vcols.data()},
            {"bias", DType::kF32, {cols}, {}, {}, bias.data()},
        };
        results[r] = (*writer)->Save(step, views, {{fmt::format("rng.rank{}", r), "s"}});
      });
    }
    for (auto& t : threads) t.join();
    for (int r = 0; r < world; ++r) ASSERT_TRUE(results[r].ok()) << r << results[r].ToString();
  }

  std::string StepFile(int64_t step, const std::string& name) {
    return dir_ + "/" + StepDirName(step) + "/" + name;
  }

  void FlipByte(const std::string& path, uint64_t offset) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    ASSERT_TRUE(f.good()) << path;
    f.seekg(static_cast<std::streamoff>(offset));
    char c = 0;
    f.read(&c, 1);
    c ^= 0x20;
    f.seekp(static_cast<std::streamoff>(offset));
    f.write(&c, 1);
  }

  base::ScopedTempDir tmp_{"ckpt-test"};
  std::string dir_ = tmp_.path();
};

TEST_F(CheckpointTest, SingleRankRoundTrip) {
  std::vector<float> w = Values(40 * 100, 1);
  ASSERT_TRUE(SaveSingle(1, w, 40, 100, Options()).ok());

  EXPECT_EQ(*base::ReadFile(dir_ + "/latest"), "1\n");
  EXPECT_TRUE(fs::exists(StepFile(1, "rank-00000.bin")));
  EXPECT_TRUE(fs::exists(StepFile(1, "rank-00000.json")));
  for (auto& e : fs::directory_iterator(dir_)) {
    EXPECT_FALSE(e.path().filename().string().starts_with(".tmp")) << e.path();
  }

  auto reader = LoadLatest(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->step(), 1);
  EXPECT_TRUE((*reader)->fallback_notes().empty());
  const Manifest& m = (*reader)->manifest();
  EXPECT_EQ(m.world_size, 1);
  EXPECT_EQ(m.metadata.at("loader.position"), "10");
  ASSERT_EQ(m.pieces.size(), 2u);
  for (const PieceInfo& p : m.pieces) EXPECT_EQ(p.byte_offset % 4096, 0u) << p.tensor;

  EXPECT_EQ(AsFloats(*(*reader)->ReadTensor("w")), w);
  auto counter = (*reader)->ReadTensor("counter");
  ASSERT_TRUE(counter.ok());
  int64_t c = 0;
  std::memcpy(&c, counter->data(), 8);
  EXPECT_EQ(c, 7);

  // A sub-block, read without the open-time verification (checksums checked on first read).
  ReaderOptions lazy;
  lazy.verify_on_open = false;
  auto r2 = CheckpointReader::Open(dir_, 1, lazy);
  ASSERT_TRUE(r2.ok());
  std::vector<float> block(3 * 5);
  std::vector<int64_t> off{10, 20}, size{3, 5};
  ASSERT_TRUE((*r2)->ReadSlice("w", off, size, block.data(), block.size() * 4).ok());
  EXPECT_EQ(block, Block(w, 100, 10, 3, 20, 5));
}

TEST_F(CheckpointTest, DirectIoRoundTrip) {
  std::vector<float> w = Values(33 * 77, 2);  // odd sizes: padded tail writes
  WriterOptions o = Options();
  o.direct_io = true;
  auto writer = CheckpointWriter::Open(o);
  ASSERT_TRUE(writer.ok());
  std::vector<TensorView> views = {{"w", DType::kF32, {33, 77}, {}, {}, w.data()}};
  ASSERT_TRUE((*writer)->Save(3, views).ok());
  // On /tmp (ext4, xfs) O_DIRECT works; on tmpfs it may fall back. Either way the data is right.
  auto reader = LoadLatest(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ(AsFloats(*(*reader)->ReadTensor("w")), w);
}

TEST_F(CheckpointTest, WriteBehindAndDirectReadsRoundTrip) {
  const int64_t rows = 64, cols = 1000;  // 256 KB: 32 extents, 16 write-behind windows
  std::vector<float> w = Values(rows * cols, 4);
  for (bool preallocate : {true, false}) {
    WriterOptions o = Options();
    o.io_threads = 3;  // three regions, each with its own write-behind
    o.write_behind_bytes = 16384;
    o.preallocate = preallocate;
    const int64_t step = preallocate ? 1 : 2;
    ASSERT_TRUE(SaveSingle(step, w, rows, cols, o).ok());
    for (bool verify_on_open : {true, false}) {
      ReaderOptions ro;
      ro.direct_io = true;
      ro.verify_on_open = verify_on_open;
      auto reader = CheckpointReader::Open(dir_, step, ro);
      ASSERT_TRUE(reader.ok()) << reader.status().ToString();
      // Unaligned in the file and in memory: the bounce path.
      std::vector<float> block(10 * 7);
      std::vector<int64_t> off{5, 3}, size{10, 7};
      ASSERT_TRUE((*reader)->ReadSlice("w", off, size, block.data(), block.size() * 4).ok());
      EXPECT_EQ(block, Block(w, cols, 5, 10, 3, 7));
      // The whole tensor into aligned memory: read in place.
      AlignedBuffer all;
      ASSERT_TRUE(all.Resize(w.size() * 4).ok());
      std::vector<int64_t> zero{0, 0}, shape{rows, cols};
      ASSERT_TRUE((*reader)->ReadSlice("w", zero, shape, all.data(), all.size()).ok());
      EXPECT_EQ(std::memcmp(all.data(), w.data(), all.size()), 0) << preallocate;
      auto counter = (*reader)->ReadTensor("counter");
      ASSERT_TRUE(counter.ok());
      int64_t c = 0;
      std::memcpy(&c, counter->data(), 8);
      EXPECT_EQ(c, step * 7);
    }
  }
}

TEST_F(CheckpointTest, MultiRankCommitMergesPiecesAndMetadata) {
  const int64_t rows = 12, cols = 10;
  std::vector<float> full = Values(rows * cols, 3);
  SaveRowSharded(5, 4, full, rows, cols);
  auto reader = LoadLatest(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  const Manifest& m = (*reader)->manifest();
  EXPECT_EQ(m.world_size, 4);
  EXPECT_EQ(m.pieces.size(), 12u);  // w, v, bias(replica) per rank
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(m.metadata.at(fmt::format("rng.rank{}", r)), "s");
    EXPECT_TRUE(fs::exists(StepFile(5, ShardFileName(r))));
  }
  EXPECT_EQ(AsFloats(*(*reader)->ReadTensor("w")), full);
  EXPECT_EQ(AsFloats(*(*reader)->ReadTensor("v")), full);
  EXPECT_EQ(AsFloats(*(*reader)->ReadTensor("bias")), Values(cols, 9));
}

// Loads every block of a `world`-way split (rows and columns) and compares exactly.
void ExpectReshardedReads(const CheckpointReader& reader, int world, const std::vector<float>& full,
                          int64_t rows, int64_t cols) {
  for (int r = 0; r < world; ++r) {
    int64_t r0 = rows * r / world, r1 = rows * (r + 1) / world;
    std::vector<float> mine((r1 - r0) * cols);
    std::vector<int64_t> off{r0, 0}, size{r1 - r0, cols};
    ASSERT_TRUE(reader.ReadSlice("w", off, size, mine.data(), mine.size() * 4).ok());
    EXPECT_EQ(mine, Block(full, cols, r0, r1 - r0, 0, cols)) << "w rank " << r;
    ASSERT_TRUE(reader.ReadSlice("v", off, size, mine.data(), mine.size() * 4).ok());
    EXPECT_EQ(mine, Block(full, cols, r0, r1 - r0, 0, cols)) << "v rank " << r;
    int64_t c0 = cols * r / world, c1 = cols * (r + 1) / world;
    std::vector<float> colblock(rows * (c1 - c0));
    std::vector<int64_t> coff{0, c0}, csize{rows, c1 - c0};
    ASSERT_TRUE(reader.ReadSlice("w", coff, csize, colblock.data(), colblock.size() * 4).ok());
    EXPECT_EQ(colblock, Block(full, cols, 0, rows, c0, c1 - c0)) << "w cols rank " << r;
  }
  // An odd block crossing every piece boundary.
  std::vector<float> odd(5 * 3);
  std::vector<int64_t> off{rows / 2 - 2, cols / 2 - 1}, size{5, 3};
  ASSERT_TRUE(reader.ReadSlice("v", off, size, odd.data(), odd.size() * 4).ok());
  EXPECT_EQ(odd, Block(full, cols, rows / 2 - 2, 5, cols / 2 - 1, 3));
}

TEST_F(CheckpointTest, ReshardFourToTwoAndThree) {
  const int64_t rows = 13, cols = 11;  // not divisible: uneven pieces
  std::vector<float> full = Values(rows * cols, 4);
  SaveRowSharded(1, 4, full, rows, cols);
  auto reader = LoadLatest(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  ExpectReshardedReads(**reader, 2, full, rows, cols);
  ExpectReshardedReads(**reader, 3, full, rows, cols);
}

TEST_F(CheckpointTest, ReshardTwoToThree) {
  const int64_t rows = 9, cols = 7;
  std::vector<float> full = Values(rows * cols, 5);
  SaveRowSharded(1, 2, full, rows, cols);
  ReaderOptions lazy;  // also through the first-touch checksum path
  lazy.verify_on_open = false;
  auto reader = CheckpointReader::Open(dir_, 1, lazy);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  ExpectReshardedReads(**reader, 3, full, rows, cols);
}

TEST_F(CheckpointTest, BadSliceRequests) {
  std::vector<float> w = Values(4 * 6, 1);
  ASSERT_TRUE(SaveSingle(1, w, 4, 6, Options()).ok());
  auto reader = LoadLatest(dir_);
  ASSERT_TRUE(reader.ok());
  std::vector<float> out(100);
  std::vector<int64_t> off{0, 0}, size{2, 2};
  Status st = (*reader)->ReadSlice("nope", off, size, out.data(), 16);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("'nope'"), std::string::npos) << st.ToString();

  std::vector<int64_t> far{3, 0}, big{2, 6};
  st = (*reader)->ReadSlice("w", far, big, out.data(), 48);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("out of bounds in dim 0"), std::string::npos) << st.ToString();

  std::vector<int64_t> one{0};
  st = (*reader)->ReadSlice("w", one, one, out.data(), 0);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("2 dimensions"), std::string::npos) << st.ToString();

  st = (*reader)->ReadSlice("w", off, size, out.data(), 15);  // wrong buffer size
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
}

TEST_F(CheckpointTest, CorruptShardIsNamedAndLoadFallsBack) {
  std::vector<float> w1 = Values(64 * 64, 1), w2 = Values(64 * 64, 2);
  ASSERT_TRUE(SaveSingle(1, w1, 64, 64, Options()).ok());
  ASSERT_TRUE(SaveSingle(2, w2, 64, 64, Options()).ok());
  FlipByte(StepFile(2, "rank-00000.bin"), 5000);

  auto reader = LoadLatest(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->step(), 1);
  EXPECT_EQ(AsFloats(*(*reader)->ReadTensor("w")), w1);
  ASSERT_EQ((*reader)->fallback_notes().size(), 1u);
  const std::string& note = (*reader)->fallback_notes()[0];
  EXPECT_NE(note.find("step 2"), std::string::npos) << note;
  EXPECT_NE(note.find("DATA_LOSS"), std::string::npos) << note;
  EXPECT_NE(note.find("rank-00000.bin' bytes [0, 16384)"), std::string::npos) << note;
  EXPECT_NE(note.find("tensor 'w'"), std::string::npos) << note;

  auto report = VerifyCheckpoint(dir_, std::nullopt);
  ASSERT_TRUE(report.ok());
  EXPECT_EQ(report->step, 2);
  EXPECT_EQ(report->status.code(), StatusCode::kDataLoss);
  EXPECT_NE(report->status.message().find("rank-00000.bin"), std::string::npos);
  ASSERT_TRUE(report->fallback_step.has_value());
  EXPECT_EQ(*report->fallback_step, 1);
  auto good = VerifyCheckpoint(dir_, 1);
  ASSERT_TRUE(good.ok());
  EXPECT_TRUE(good->status.ok()) << good->status.ToString();
  EXPECT_EQ(good->bytes_verified, 64u * 64 * 4 + 8);

  // Without open-time verification the first read of the bad piece reports it.
  ReaderOptions lazy;
  lazy.verify_on_open = false;
  auto r2 = CheckpointReader::Open(dir_, 2, lazy);
  ASSERT_TRUE(r2.ok());
  auto bad = (*r2)->ReadTensor("w");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(bad.status().message().find("checksum"), std::string::npos);

  auto list = ListCheckpoints(dir_, /*verify=*/true);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[0].state, StepState::kCommitted);
  EXPECT_EQ((*list)[1].state, StepState::kCorrupt);
  EXPECT_TRUE((*list)[1].latest);
  auto quick = ListCheckpoints(dir_, /*verify=*/false);
  ASSERT_TRUE(quick.ok());
  EXPECT_EQ((*quick)[1].state, StepState::kCommitted);  // a flipped byte needs verification
}

// A first read hashes a piece's extents as they arrive, whatever order the pool finishes them
// in: a clean piece of many extents reads back whole, and a byte flipped in any extent, inside
// the slice or around it, fails the read naming the file and extent.
TEST_F(CheckpointTest, FirstReadOfManyExtentsChecksEveryByte) {
  const int64_t rows = 512, cols = 512;  // 1 MiB: 16 extents of 64 KiB
  std::vector<float> w = Values(rows * cols, 3);
  ASSERT_TRUE(SaveSingle(1, w, rows, cols, Options()).ok());
  ReaderOptions lazy;
  lazy.verify_on_open = false;
  lazy.io_threads = 3;
  lazy.extent_bytes = 64 * 1024;
  for (bool direct : {false, true}) {
    lazy.direct_io = direct;
    auto reader = CheckpointReader::Open(dir_, 1, lazy);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    EXPECT_EQ(AsFloats(*(*reader)->ReadTensor("w")), w) << "direct " << direct;
  }
  const std::string shard = StepFile(1, "rank-00000.bin");
  const uint64_t piece_bytes = rows * cols * 4;
  for (uint64_t at : {uint64_t{100}, piece_bytes / 2 + 7, piece_bytes - 1}) {
    FlipByte(shard, at);
    for (bool direct : {false, true}) {
      lazy.direct_io = direct;
      auto reader = CheckpointReader::Open(dir_, 1, lazy);
      ASSERT_TRUE(reader.ok()) << reader.status().ToString();
      // Rows [200, 300): the flipped byte is before, inside or after the slice.
      std::vector<float> out(100 * cols);
      std::vector<int64_t> off{200, 0}, size{100, cols};
      Status st = (*reader)->ReadSlice("w", off, size, out.data(), out.size() * 4);
      EXPECT_EQ(st.code(), StatusCode::kDataLoss) << "byte " << at << " direct " << direct;
      EXPECT_NE(st.message().find(fmt::format("rank-00000.bin' bytes [0, {})", piece_bytes)),
                std::string::npos)
          << st.ToString();
    }
    FlipByte(shard, at);  // flipped back
  }
}

TEST_F(CheckpointTest, MissingOrTruncatedShardFallsBack) {
  std::vector<float> w = Values(32 * 32, 1);
  ASSERT_TRUE(SaveSingle(1, w, 32, 32, Options()).ok());
  ASSERT_TRUE(SaveSingle(2, w, 32, 32, Options()).ok());
  ASSERT_TRUE(SaveSingle(3, w, 32, 32, Options()).ok());
  fs::remove(StepFile(3, "rank-00000.bin"));
  fs::resize_file(StepFile(2, "rank-00000.bin"), 100);
  auto reader = LoadLatest(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->step(), 1);
  const auto& notes = (*reader)->fallback_notes();
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_NE(notes[0].find("is missing"), std::string::npos) << notes[0];
  EXPECT_NE(notes[1].find("truncated"), std::string::npos) << notes[1];
  auto list = ListCheckpoints(dir_, false);
  ASSERT_TRUE(list.ok());
  EXPECT_EQ((*list)[2].state, StepState::kCorrupt);  // detectable without reading data
}

TEST_F(CheckpointTest, CorruptReplicaIsCoveredByAnother) {
  const int64_t rows = 8, cols = 6;
  std::vector<float> full = Values(rows * cols, 6);
  SaveRowSharded(1, 2, full, rows, cols);
  // "bias" is saved by both ranks; corrupt rank 1's copy.
  auto m = LoadManifest(*DefaultFs(), StepFile(1, "manifest.json"));
  ASSERT_TRUE(m.ok());
  for (const PieceInfo& p : m->pieces) {
    if (p.tensor == "bias" && p.file == "rank-00001.bin") {
      FlipByte(StepFile(1, p.file), p.byte_offset + 3);
    }
  }
  auto report = VerifyCheckpoint(dir_, 1);
  ASSERT_TRUE(report.ok());
  EXPECT_TRUE(report->status.ok()) << report->status.ToString();
  ASSERT_EQ(report->warnings.size(), 1u);
  EXPECT_NE(report->warnings[0].find("rank-00001.bin"), std::string::npos);
  auto reader = LoadLatest(dir_);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ(AsFloats(*(*reader)->ReadTensor("bias")), Values(cols, 9));
}

TEST_F(CheckpointTest, StepsAfterAResumeAreSetAsideSoTheyCanBeSavedAgain) {
  std::vector<float> w = Values(16, 1);
  for (int step = 1; step <= 3; ++step) ASSERT_TRUE(SaveSingle(step, w, 4, 4, Options()).ok());
  FlipByte(StepFile(3, "rank-00000.bin"), 1);
  fs::remove(StepFile(2, "rank-00000.bin"));
  auto reader = LoadLatest(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  ASSERT_EQ((*reader)->step(), 1);
  // Saving step 2 again is refused while the broken one is in place.
  EXPECT_FALSE(SaveSingle(2, w, 4, 4, Options()).ok());
  auto moved = SetAsideStepsAfter(*DefaultFs(), dir_, 1);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(*moved, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(*ListStepDirs(*DefaultFs(), dir_), (std::vector<int64_t>{1}));
  EXPECT_TRUE(fs::exists(dir_ + "/set-aside-step-00000003/rank-00000.bin"));  // kept as evidence
  ASSERT_TRUE(SaveSingle(2, w, 4, 4, Options()).ok());
  EXPECT_EQ((*LoadLatest(dir_))->step(), 2);
  // A second set-aside of the same step number does not overwrite the first.
  moved = SetAsideStepsAfter(*DefaultFs(), dir_, 1);
  ASSERT_TRUE(moved.ok()) << moved.status().ToString();
  EXPECT_EQ(*moved, (std::vector<int64_t>{2}));
  EXPECT_TRUE(fs::exists(dir_ + "/set-aside-step-00000002"));
  EXPECT_TRUE(fs::exists(dir_ + "/set-aside-step-00000002-2"));
  EXPECT_TRUE(SetAsideStepsAfter(*DefaultFs(), dir_, 1)->empty());
}

TEST_F(CheckpointTest, RetentionKeepsLastK) {
  std::vector<float> w = Values(16, 1);
  WriterOptions o = Options();
  o.keep_last = 2;
  for (int step = 1; step <= 5; ++step) ASSERT_TRUE(SaveSingle(step, w, 4, 4, o).ok());
  auto steps = ListStepDirs(*DefaultFs(), dir_);
  ASSERT_TRUE(steps.ok());
  EXPECT_EQ(*steps, (std::vector<int64_t>{4, 5}));
  for (auto& e : fs::directory_iterator(dir_)) {
    EXPECT_FALSE(e.path().filename().string().starts_with(".tmp")) << e.path();
  }
}

TEST_F(CheckpointTest, RetentionNeverDeletesTheLatestValidStep) {
  std::vector<float> w = Values(16, 1);
  for (int step = 1; step <= 4; ++step) ASSERT_TRUE(SaveSingle(step, w, 4, 4, Options()).ok());
  // Steps 3 and 4 are corrupt; 2 is the newest valid one.
  FlipByte(StepFile(4, "rank-00000.bin"), 1);
  fs::remove(StepFile(3, "rank-00000.bin"));
  auto removed = ApplyRetention(dir_, 1);
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(*removed, (std::vector<int64_t>{1, 3}));
  EXPECT_EQ(*ListStepDirs(*DefaultFs(), dir_), (std::vector<int64_t>{2, 4}));
  auto reader = LoadLatest(dir_);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->step(), 2);
  // keep_last 0 removes nothing.
  EXPECT_TRUE(ApplyRetention(dir_, 0)->empty());
}

TEST_F(CheckpointTest, LeftoversAreRemovedWhenAWriterOpens) {
  std::vector<float> w = Values(16, 1);
  ASSERT_TRUE(SaveSingle(1, w, 4, 4, Options()).ok());
  fs::create_directories(dir_ + "/.tmp-step-00000002/sub");
  std::ofstream(dir_ + "/.tmp-step-00000002/rank-00000.bin") << "partial";
  fs::create_directories(dir_ + "/.tmp-delete-step-00000000");
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ::waitpid(dead, nullptr, 0);
  std::string stale = fmt::format("{}/latest.tmp.{}.0", dir_, dead);
  std::ofstream(stale) << "2";

  auto list = ListCheckpoints(dir_, false);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 2u);
  EXPECT_EQ((*list)[1].step, 2);
  EXPECT_EQ((*list)[1].state, StepState::kIncomplete);

  auto writer = CheckpointWriter::Open(Options());
  ASSERT_TRUE(writer.ok());
  EXPECT_FALSE(fs::exists(dir_ + "/.tmp-step-00000002"));
  EXPECT_FALSE(fs::exists(dir_ + "/.tmp-delete-step-00000000"));
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(StepFile(1, "manifest.json")));
}

TEST_F(CheckpointTest, IncompleteStepIsNeverLoaded) {
  std::vector<float> w = Values(16, 1);
  ASSERT_TRUE(SaveSingle(1, w, 4, 4, Options()).ok());
  ASSERT_TRUE(SaveSingle(2, w, 4, 4, Options()).ok());
  fs::remove(StepFile(2, "manifest.json"));
  auto reader = LoadLatest(dir_);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->step(), 1);
  auto direct = CheckpointReader::Open(dir_, 2);
  ASSERT_FALSE(direct.ok());
  EXPECT_EQ(direct.status().code(), StatusCode::kNotFound);
  EXPECT_NE(direct.status().message().find("not a committed checkpoint"), std::string::npos);
}

TEST_F(CheckpointTest, NotACheckpointDirectory) {
  auto missing = LoadLatest(dir_ + "/nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("does not exist"), std::string::npos);
  std::ofstream(dir_ + "/README") << "hello";
  auto empty = LoadLatest(dir_);
  ASSERT_FALSE(empty.ok());
  EXPECT_EQ(empty.status().code(), StatusCode::kNotFound);
  EXPECT_NE(empty.status().message().find("holds no checkpoint"), std::string::npos);
  auto step = CheckpointReader::Open(dir_, 3);
  ASSERT_FALSE(step.ok());
  EXPECT_NE(step.status().message().find("step 3 is not in"), std::string::npos);
  // A manifest from a future version is a reason to fall back, with the version named.
  std::vector<float> w = Values(16, 1);
  ASSERT_TRUE(SaveSingle(1, w, 4, 4, Options()).ok());
  ASSERT_TRUE(SaveSingle(2, w, 4, 4, Options()).ok());
  std::string text = *base::ReadFile(StepFile(2, "manifest.json"));
  text.replace(text.find("\"format_version\": 1"), 19, "\"format_version\": 7");
  std::ofstream(StepFile(2, "manifest.json"), std::ios::trunc) << text;
  auto reader = LoadLatest(dir_);
  ASSERT_TRUE(reader.ok());
  EXPECT_EQ((*reader)->step(), 1);
  EXPECT_NE((*reader)->fallback_notes()[0].find("format_version 7 is newer"), std::string::npos);
}

TEST_F(CheckpointTest, SavingACommittedStepAgainFails) {
  std::vector<float> w = Values(16, 1);
  ASSERT_TRUE(SaveSingle(1, w, 4, 4, Options()).ok());
  Status again = SaveSingle(1, w, 4, 4, Options());
  EXPECT_EQ(again.code(), StatusCode::kAlreadyExists) << again.ToString();
}

TEST_F(CheckpointTest, MalformedPiecesAreRejected) {
  auto writer = CheckpointWriter::Open(Options());
  ASSERT_TRUE(writer.ok());
  std::vector<float> w(16);
  std::vector<TensorView> oob = {{"w", DType::kF32, {4, 4}, {3, 0}, {2, 4}, w.data()}};
  Status st = (*writer)->Save(1, oob);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("out of bounds in dim 0"), std::string::npos) << st.ToString();
  std::vector<TensorView> null_data = {{"w", DType::kF32, {4, 4}, {}, {}, nullptr}};
  EXPECT_EQ((*writer)->Save(1, null_data).code(), StatusCode::kInvalidArgument);
  std::vector<TensorView> gap = {{"w", DType::kF32, {4, 4}, {0, 0}, {2, 4}, w.data()}};
  st = (*writer)->Save(1, gap);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("cover 8 of 16"), std::string::npos) << st.ToString();
  EXPECT_FALSE(fs::exists(dir_ + "/" + StepDirName(1)));
  EXPECT_FALSE(fs::exists(dir_ + "/" + TempStepDirName(1)));
}

TEST_F(CheckpointTest, OneRankFailingAbortsEveryRank) {
  const int world = 3;
  InProcessAgreementGroup group(world);
  std::vector<Status> results(world);
  std::vector<std::thread> threads;
  std::vector<float> w = Values(world * 4, 1);
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto writer = CheckpointWriter::Open(Options(r, world, group.ForRank(r)));
      if (!writer.ok()) {
        results[r] = writer.status();
        return;
      }
      // Rank 1 disagrees about the dtype; rank 2 gives a malformed piece.
      DType dt = r == 1 ? DType::kI32 : DType::kF32;
      std::vector<int64_t> off{r * 4}, size{r == 2 ? 9 : 4};
      std::vector<TensorView> views = {{"w", dt, {world * 4}, off, size, w.data() + r * 4}};
      results[r] = (*writer)->Save(1, views);
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(results[2].code(), StatusCode::kInvalidArgument) << results[2].ToString();
  EXPECT_EQ(results[0].code(), StatusCode::kAborted) << results[0].ToString();
  EXPECT_NE(results[0].message().find("rank 2 failed"), std::string::npos);
  EXPECT_EQ(results[1].code(), StatusCode::kAborted);
  EXPECT_FALSE(fs::exists(dir_ + "/" + StepDirName(1)));
}

TEST_F(CheckpointTest, ConflictingTensorsAcrossRanksFailTheCommit) {
  const int world = 2;
  InProcessAgreementGroup group(world);
  std::vector<Status> results(world);
  std::vector<std::thread> threads;
  std::vector<float> w = Values(8, 1);
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      auto writer = CheckpointWriter::Open(Options(r, world, group.ForRank(r)));
      ASSERT_TRUE(writer.ok());
      DType dt = r == 1 ? DType::kI32 : DType::kF32;
      std::vector<int64_t> off{r * 4}, size{4};
      std::vector<TensorView> views = {{"w", dt, {8}, off, size, w.data() + r * 4}};
      results[r] = (*writer)->Save(1, views, {{"same", r == 0 ? "a" : "a"}});
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(results[0].code(), StatusCode::kInvalidArgument) << results[0].ToString();
  EXPECT_NE(results[0].message().find("tensor 'w' is I32 [8] on rank 1"), std::string::npos)
      << results[0].ToString();
  EXPECT_EQ(results[1].code(), StatusCode::kAborted) << results[1].ToString();
  EXPECT_FALSE(fs::exists(dir_ + "/" + StepDirName(1)));
  EXPECT_FALSE(fs::exists(dir_ + "/" + TempStepDirName(1)));
}

TEST_F(CheckpointTest, ProcessesAgreeThroughMarkerFiles) {
  const int world = 3;
  const int64_t rows = 9, cols = 4;
  std::vector<float> full = Values(rows * cols, 8);
  std::vector<pid_t> pids;
  for (int r = 0; r < world; ++r) {
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      auto agree = FileAgreement::Create(DefaultFs(), dir_, "run1", r, world);
      if (!agree.ok()) ::_exit(10);
      auto writer = CheckpointWriter::Open(Options(r, world, agree->get()));
      if (!writer.ok()) ::_exit(11);
      for (int64_t step = 1; step <= 2; ++step) {
        std::vector<float> mine = Block(full, cols, r * 3, 3, 0, cols);
        std::vector<TensorView> views = {
            {"w", DType::kF32, {rows, cols}, {r * 3, 0}, {3, cols}, mine.data()}};
        if (!(*writer)->Save(step, views).ok()) ::_exit(12);
      }
      ::_exit(0);
    }
    pids.push_back(pid);
  }
  for (pid_t pid : pids) {
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
  }
  auto reader = LoadLatest(dir_);
  ASSERT_TRUE(reader.ok()) << reader.status().ToString();
  EXPECT_EQ((*reader)->step(), 2);
  EXPECT_EQ(AsFloats(*(*reader)->ReadTensor("w")), full);
}

TEST_F(CheckpointTest, FileAgreementNamesMissingRanks) {
  auto agree = FileAgreement::Create(DefaultFs(), dir_, "run2", 0, 3);
  ASSERT_TRUE(agree.ok());
  Status st = (*agree)->AllOk("step 1 written", Status::Ok(),
                              base::Deadline::After(std::chrono::milliseconds(100)));
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(st.message().find("ranks 1, 2 of 3 did not report"), std::string::npos)
      << st.ToString();
  // A marker of another run does not count, and is removed when rank 0 of a new run starts.
  auto next = FileAgreement::Create(DefaultFs(), dir_, "run3", 0, 1);
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(fs::exists(dir_ + "/.agree/run2"));
  EXPECT_TRUE((*next)->AllOk("x", Status::Ok(), base::Deadline::Never()).ok());
}

TEST_F(CheckpointTest, InProcessAgreementReportsFailuresAndTimeouts) {
  InProcessAgreementGroup group(2);
  Status st0, st1;
  std::thread t([&] {
    st1 = group.ForRank(1)->AllOk("r", Internal("disk on fire"), base::Deadline::Never());
  });
  st0 = group.ForRank(0)->AllOk("r", Status::Ok(), base::Deadline::Never());
  t.join();
  EXPECT_EQ(st1.code(), StatusCode::kInternal);
  EXPECT_EQ(st0.code(), StatusCode::kAborted);
  EXPECT_NE(st0.message().find("rank 1 failed: INTERNAL: disk on fire"), std::string::npos);
  Status late = group.ForRank(0)->AllOk("r2", Status::Ok(),
                                        base::Deadline::After(std::chrono::milliseconds(20)));
  EXPECT_EQ(late.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(late.message().find("rank 1 of 2"), std::string::npos) << late.ToString();
}

TEST_F(CheckpointTest, ListShowsSizesRanksAndLatest) {
  const int64_t rows = 8, cols = 8;
  SaveRowSharded(7, 2, Values(rows * cols, 1), rows, cols);
  auto list = ListCheckpoints(dir_, true);
  ASSERT_TRUE(list.ok());
  ASSERT_EQ(list->size(), 1u);
  const StepInfo& s = (*list)[0];
  EXPECT_EQ(s.step, 7);
  EXPECT_EQ(s.state, StepState::kCommitted);
  EXPECT_EQ(s.world_size, 2);
  EXPECT_TRUE(s.latest);
  EXPECT_GT(s.bytes, 2u * rows * cols * 4);  // w + v + bias, plus manifests
  EXPECT_EQ(StepStateName(s.state), "committed");
}

}  // namespace
}  // namespace railyard::storage
