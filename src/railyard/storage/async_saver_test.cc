#include "railyard/storage/async_saver.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <filesystem>
#include <thread>

#include "railyard/base/temp_dir_testing.h"
#include "railyard/storage/checkpoint_reader.h"
#include "railyard/storage/fault_injection_fs.h"

namespace railyard::storage {
namespace {

namespace fs = std::filesystem;

class AsyncSaverTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.empty()); }

  std::unique_ptr<AsyncSaver> MakeSaver(Fs* fs = nullptr, AsyncSaverOptions options = {}) {
    WriterOptions o;
    o.dir = dir_;
    o.fs = fs;
    o.io_threads = 2;
    auto writer = CheckpointWriter::Open(o);
    EXPECT_TRUE(writer.ok()) << writer.status().ToString();
    auto saver = AsyncSaver::Create(std::move(*writer), options);
    EXPECT_TRUE(saver.ok()) << saver.status().ToString();
    return std::move(*saver);
  }

  std::vector<float> ReadW(int64_t step) {
    auto reader = CheckpointReader::Open(dir_, step);
    EXPECT_TRUE(reader.ok()) << reader.status().ToString();
    if (!reader.ok()) return {};
    auto bytes = (*reader)->ReadTensor("w");
    std::vector<float> out(bytes->size() / 4);
    std::memcpy(out.data(), bytes->data(), bytes->size());
    return out;
  }

  base::ScopedTempDir tmp_{"async-test"};
  std::string dir_ = tmp_.path();
};

TEST_F(AsyncSaverTest, SavesTheStateAsOfTheCall) {
  auto saver = MakeSaver();
  std::vector<float> w(10000);
  std::vector<TensorView> views = {{"w", DType::kF32, {10000}, {}, {}, w.data()}};
  for (int step = 1; step <= 3; ++step) {
    std::fill(w.begin(), w.end(), static_cast<float>(step));
    ASSERT_TRUE(saver->SaveAsync(step, views, {{"step", std::to_string(step)}}).ok());
    // Training goes on and changes the state while the save runs.
    std::fill(w.begin(), w.end(), -1.0f);
  }
  ASSERT_TRUE(saver->Wait().ok());
  for (int step = 1; step <= 3; ++step) {
    EXPECT_EQ(ReadW(step), std::vector<float>(10000, static_cast<float>(step))) << step;
  }
  AsyncSaverStats s = saver->stats();
  EXPECT_EQ(s.last_step, 3);
  EXPECT_EQ(s.last_save.step, 3);
  EXPECT_EQ(s.last_save.bytes, 40000u);
  EXPECT_GE(s.last_stall_seconds, s.last_copy_seconds);
  EXPECT_EQ(s.staging_capacity, 40960u);  // one 4 KiB-aligned buffer, reused
}

// kWriteProtect: SaveAsync returns before anything is copied; the training thread then
// rewrites the state at once (an optimizer step), and every checkpoint still holds the state
// as of its SaveAsync call.
TEST_F(AsyncSaverTest, WriteProtectedSavesHoldTheStateAsOfTheCall) {
  AsyncSaverOptions options;
  options.snapshot = SnapshotMode::kWriteProtect;
  auto saver = MakeSaver(nullptr, options);
  const size_t n = 3 << 20;  // 12 MiB: several 2 MiB chunks
  std::vector<float> w(n);
  std::vector<TensorView> views = {{"w", DType::kF32, {static_cast<int64_t>(n)}, {}, {}, w.data()}};
  for (int step = 1; step <= 3; ++step) {
    for (size_t i = 0; i < n; ++i) w[i] = static_cast<float>(step * 1000 + i % 1000);
    ASSERT_TRUE(saver->SaveAsync(step, views).ok());
    std::fill(w.begin(), w.end(), -1.0f);
  }
  ASSERT_TRUE(saver->Wait().ok());
  for (int step = 1; step <= 3; ++step) {
    std::vector<float> got = ReadW(step);
    ASSERT_EQ(got.size(), n);
    size_t wrong = 0;
    for (size_t i = 0; i < n; ++i) wrong += got[i] != static_cast<float>(step * 1000 + i % 1000);
    EXPECT_EQ(wrong, 0u) << "step " << step;
  }
  AsyncSaverStats s = saver->stats();
  if (PageSnapshot::Probe().ok()) {
    EXPECT_TRUE(s.last_write_protected);
  } else {
    EXPECT_FALSE(s.last_write_protected);  // fell back to copying, and said so
  }
  EXPECT_EQ(s.last_save.bytes, n * 4);
}

// Memory that cannot be write-protected (a file mapping) is copied instead: same result.
TEST_F(AsyncSaverTest, WriteProtectFallsBackToCopyingForFileMappings) {
  AsyncSaverOptions options;
  options.snapshot = SnapshotMode::kWriteProtect;
  auto saver = MakeSaver(nullptr, options);
  const std::string path = dir_ + "/mapped-state";
  const int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0600);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(::ftruncate(fd, 40000), 0);
  void* p = ::mmap(nullptr, 40000, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(p, MAP_FAILED);
  auto* w = static_cast<float*>(p);
  std::fill(w, w + 10000, 7.0f);
  std::vector<TensorView> views = {{"w", DType::kF32, {10000}, {}, {}, w}};
  ASSERT_TRUE(saver->SaveAsync(1, views).ok());
  EXPECT_FALSE(saver->stats().last_write_protected);
  std::fill(w, w + 10000, -1.0f);
  ASSERT_TRUE(saver->Wait().ok());
  EXPECT_EQ(ReadW(1), std::vector<float>(10000, 7.0f));
  ::munmap(p, 40000);
  ::close(fd);
}

TEST_F(AsyncSaverTest, ImmutableViewsAreWrittenInPlace) {
  AsyncSaverOptions options;
  options.reserve_bytes = 100000;
  auto saver = MakeSaver(nullptr, options);
  EXPECT_GE(saver->stats().staging_capacity, 100000u);  // reserved before any save
  std::vector<float> w(10000, 1.0f);
  std::vector<float> snapshot(3000, 2.0f);
  std::vector<TensorView> views = {{"w", DType::kF32, {10000}, {}, {}, w.data()},
                                   {"s", DType::kF32, {3000}, {}, {}, snapshot.data()}};
  views[1].immutable = true;
  ASSERT_TRUE(saver->SaveAsync(1, views).ok());
  std::fill(w.begin(), w.end(), -1.0f);                 // allowed: w was copied
  EXPECT_EQ(saver->stats().last_copied_bytes, 40960u);  // w only, rounded up to 4 KiB
  ASSERT_TRUE(saver->Wait().ok());
  EXPECT_EQ(ReadW(1), std::vector<float>(10000, 1.0f));
  auto reader = CheckpointReader::Open(dir_, 1);
  ASSERT_TRUE(reader.ok());
  auto s = (*reader)->ReadTensor("s");
  ASSERT_TRUE(s.ok());
  std::vector<float> back(3000);
  std::memcpy(back.data(), s->data(), s->size());
  EXPECT_EQ(back, snapshot);
}

TEST_F(AsyncSaverTest, ReserveAboveTheLimitIsRejected) {
  WriterOptions o;
  o.dir = dir_;
  auto writer = CheckpointWriter::Open(o);
  ASSERT_TRUE(writer.ok());
  AsyncSaverOptions options;
  options.max_staging_bytes = 4096;
  options.reserve_bytes = 8192;
  auto saver = AsyncSaver::Create(std::move(*writer), options);
  EXPECT_EQ(saver.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(saver.status().message().find("reserve_bytes"), std::string::npos);
}

TEST_F(AsyncSaverTest, ANewSaveWaitsForThePreviousOne) {
  std::atomic<bool> second_called{false};
  std::atomic<bool> first_committed{false};
  std::atomic<bool> order_ok{true};
  FaultInjectionFs gate(DefaultFs());
  gate.SetHook([&](const FsOpInfo& info) {
    // Hold the first save's first data write until SaveAsync(2) has been called.
    if (info.op == FsOp::kWrite && info.path.find("step-00000001") != std::string::npos) {
      while (!second_called.load()) std::this_thread::yield();
    }
    // The first save's update of `latest`: its last step.
    if (info.op == FsOp::kRename && info.path.find("latest.tmp") != std::string::npos) {
      first_committed = true;
    }
    return Status::Ok();
  });
  auto saver = MakeSaver(&gate);
  std::vector<float> w(1000, 1.0f);
  std::vector<TensorView> views = {{"w", DType::kF32, {1000}, {}, {}, w.data()}};
  ASSERT_TRUE(saver->SaveAsync(1, views).ok());
  std::thread t([&] {
    second_called = true;
    Status st = saver->SaveAsync(2, views);
    // Back-pressure: by the time SaveAsync(2) returns, save 1 has committed.
    if (!first_committed.load() || !fs::exists(dir_ + "/step-00000001/manifest.json")) {
      order_ok = false;
    }
    EXPECT_TRUE(st.ok()) << st.ToString();
  });
  t.join();
  EXPECT_TRUE(order_ok.load());
  ASSERT_TRUE(saver->Wait().ok());
  EXPECT_EQ(ReadW(2), w);
}

TEST_F(AsyncSaverTest, BackgroundErrorIsReturnedByTheNextCallOnce) {
  FaultInjectionFs full(DefaultFs());
  full.FailNth(FsOp::kWrite, 1, ENOSPC);
  auto saver = MakeSaver(&full);
  std::vector<float> w(1000, 2.0f);
  std::vector<TensorView> views = {{"w", DType::kF32, {1000}, {}, {}, w.data()}};
  ASSERT_TRUE(saver->SaveAsync(1, views).ok());  // fails in the background
  Status st = saver->SaveAsync(2, views);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
  EXPECT_NE(st.message().find("background save of step 1"), std::string::npos) << st.ToString();
  EXPECT_FALSE(fs::exists(dir_ + "/step-00000002"));  // the reporting call started nothing
  ASSERT_TRUE(saver->SaveAsync(2, views).ok());       // reported once; now it proceeds
  ASSERT_TRUE(saver->Wait().ok());
  EXPECT_EQ(ReadW(2), w);
  EXPECT_FALSE(fs::exists(dir_ + "/step-00000001"));
}

TEST_F(AsyncSaverTest, WaitReportsTheError) {
  FaultInjectionFs full(DefaultFs());
  full.FailNth(FsOp::kSync, 1, EIO);
  auto saver = MakeSaver(&full);
  std::vector<float> w(10, 2.0f);
  std::vector<TensorView> views = {{"w", DType::kF32, {10}, {}, {}, w.data()}};
  ASSERT_TRUE(saver->SaveAsync(1, views).ok());
  Status st = saver->Wait();
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.message().find("fsync"), std::string::npos) << st.ToString();
  EXPECT_TRUE(saver->Wait().ok());
}

TEST_F(AsyncSaverTest, StagingIsBounded) {
  AsyncSaverOptions o;
  o.max_staging_bytes = 8192;
  auto saver = MakeSaver(nullptr, o);
  std::vector<float> w(4096);
  std::vector<TensorView> views = {{"w", DType::kF32, {4096}, {}, {}, w.data()}};
  Status st = saver->SaveAsync(1, views);
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find("16 KiB"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("8 KiB"), std::string::npos) << st.ToString();
  std::vector<TensorView> small = {{"w", DType::kF32, {1024}, {}, {}, w.data()}};
  EXPECT_TRUE(saver->SaveAsync(1, small).ok());
  EXPECT_TRUE(saver->Wait().ok());
}

TEST_F(AsyncSaverTest, RanksSaveAsynchronouslyTogether) {
  const int world = 2;
  InProcessAgreementGroup group(world);
  std::vector<std::thread> threads;
  std::vector<Status> results(world);
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      WriterOptions o;
      o.dir = dir_;
      o.rank = r;
      o.world_size = world;
      o.agreement = group.ForRank(r);
      auto writer = CheckpointWriter::Open(o);
      ASSERT_TRUE(writer.ok());
      auto saver = AsyncSaver::Create(std::move(*writer));
      ASSERT_TRUE(saver.ok());
      std::vector<float> mine(50);
      for (int step = 1; step <= 2; ++step) {
        for (int i = 0; i < 50; ++i) mine[i] = static_cast<float>(step * 1000 + r * 50 + i);
        std::vector<int64_t> off{r * 50}, size{50};
        std::vector<TensorView> views = {{"w", DType::kF32, {100}, off, size, mine.data()}};
        Status st = (*saver)->SaveAsync(step, views);
        if (!st.ok()) results[r] = st;
      }
      Status st = (*saver)->Wait();
      if (!st.ok()) results[r] = st;
    });
  }
  for (auto& t : threads) t.join();
  for (const Status& s : results) ASSERT_TRUE(s.ok()) << s.ToString();
  std::vector<float> expect(100);
  for (int i = 0; i < 100; ++i) expect[i] = static_cast<float>(2000 + i);
  EXPECT_EQ(ReadW(2), expect);
}

}  // namespace
}  // namespace railyard::storage
