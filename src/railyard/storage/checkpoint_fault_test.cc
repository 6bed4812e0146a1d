// Crash consistency, full disks and read-only directories: the previous checkpoint must
// always survive, bit for bit, and nothing half-written may ever load.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <thread>

#include "railyard/base/files.h"
#include "railyard/base/temp_dir_testing.h"
#include "railyard/storage/checkpoint.h"
#include "railyard/storage/checkpoint_reader.h"
#include "railyard/storage/fault_injection_fs.h"
#include "railyard/storage/fs_util.h"

namespace railyard::storage {
namespace {

namespace fs = std::filesystem;

std::vector<float> Values(size_t n, int seed) {
  std::vector<float> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<float>(seed * 1000003 + static_cast<int>(i));
  return v;
}

std::vector<float> AsFloats(const std::vector<uint8_t>& bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  std::memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

// The contents of every file under `dir`, by relative path.
std::map<std::string, std::string> Snapshot(const std::string& dir) {
  std::map<std::string, std::string> out;
  for (auto& e : fs::recursive_directory_iterator(dir)) {
    if (e.is_regular_file()) {
      out[fs::relative(e.path(), dir).string()] = *base::ReadFile(e.path().string());
    }
  }
  return out;
}

class FaultTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(root_.empty()); }
  // Undoes what would keep the temporary directory from being removed.
  void TearDown() override {
    if (!mount_.empty()) ::umount2(mount_.c_str(), MNT_DETACH);
    fs::permissions(root_, fs::perms::owner_all, fs::perm_options::add);
    if (fs::exists(dir_)) fs::permissions(dir_, fs::perms::owner_all, fs::perm_options::add);
  }

  WriterOptions Options(Fs* fs = nullptr) {
    WriterOptions o;
    o.dir = dir_;
    o.fs = fs;
    o.io_threads = 2;
    o.extent_bytes = 16384;
    return o;
  }

  // Two tensors; `seed` changes every value.
  Status Save(int64_t step, int seed, WriterOptions options, size_t floats = 20000) {
    auto writer = CheckpointWriter::Open(options);
    if (!writer.ok()) return writer.status();
    w_ = Values(floats, seed);
    b_ = Values(300, seed + 1);
    std::vector<TensorView> views = {
        {"w", DType::kF32, {static_cast<int64_t>(floats)}, {}, {}, w_.data()},
        {"b", DType::kF32, {3, 100}, {}, {}, b_.data()},
    };
    return (*writer)->Save(step, views, {{"seed", std::to_string(seed)}});
  }

  void ExpectStepHolds(int64_t step, int seed, size_t floats = 20000) {
    auto reader = CheckpointReader::Open(dir_, step);
    ASSERT_TRUE(reader.ok()) << reader.status().ToString();
    EXPECT_EQ(AsFloats(*(*reader)->ReadTensor("w")), Values(floats, seed));
    EXPECT_EQ(AsFloats(*(*reader)->ReadTensor("b")), Values(300, seed + 1));
    EXPECT_EQ((*reader)->manifest().metadata.at("seed"), std::to_string(seed));
  }

  void ExpectNoLeftovers() {
    for (auto& e : fs::directory_iterator(dir_)) {
      std::string name = e.path().filename().string();
      EXPECT_FALSE(name.starts_with(".tmp")) << name;
      EXPECT_EQ(name.find(".tmp."), std::string::npos) << name;
    }
  }

  // Mounts a tmpfs of `size` at root_/ckpt. False (and a skip reason) when not possible.
  bool MountTmpfs(const char* size, std::string* why) {
    if (::geteuid() != 0) {
      *why = "not root: cannot mount a small tmpfs";
      return false;
    }
    fs::create_directories(dir_);
    std::string opts = std::string("size=") + size;
    if (::mount("tmpfs", dir_.c_str(), "tmpfs", 0, opts.c_str()) != 0) {
      *why = std::string("mount tmpfs failed: ") + std::strerror(errno);
      return false;
    }
    mount_ = dir_;
    return true;
  }

  base::ScopedTempDir tmp_{"ckpt-fault"};
  std::string root_ = tmp_.path();
  std::string dir_ = root_ + "/ckpt";
  std::string mount_;
  std::vector<float> w_, b_;
};

// SIGKILL the writer of step 2 at every mutating file operation of its save (blocked in the
// fault-injection hook, killed by the parent through a pipe handshake): step 1 must always
// load bit-identical, step 2 must either be absent or complete, and the next writer start
// must remove every leftover.
TEST_F(FaultTest, SigkillAtEveryPointOfASaveKeepsThePreviousStep) {
  ASSERT_TRUE(Save(1, 1, Options()).ok());
  const auto step1 = Snapshot(dir_ + "/" + StepDirName(1));

  // How many operations a save of step 2 makes (in a scratch copy of the directory).
  uint64_t total = 0;
  {
    std::string scratch = root_ + "/scratch";
    fs::copy(dir_, scratch, fs::copy_options::recursive);
    FaultInjectionFs counter(DefaultFs());
    WriterOptions o = Options(&counter);
    o.dir = scratch;
    ASSERT_TRUE(Save(2, 2, o).ok());
    total = counter.op_count();
    fs::remove_all(scratch);
  }
  ASSERT_GT(total, 15u);

  int committed_seen = 0;
  for (uint64_t n = 1; n <= total + 1; ++n) {
    int pipefd[2];
    ASSERT_EQ(::pipe(pipefd), 0);
    pid_t pid = ::fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      ::close(pipefd[0]);
      FaultInjectionFs faulty(DefaultFs());
      faulty.SetHook([&](const FsOpInfo& info) {
        if (info.seq == n) {
          char c = 'k';
          (void)!::write(pipefd[1], &c, 1);
          for (;;) ::pause();  // wait here for SIGKILL
        }
        return Status::Ok();
      });
      Status st = Save(2, 2, Options(&faulty));
      ::_exit(st.ok() ? 0 : 1);
    }
    ::close(pipefd[1]);
    char c = 0;
    ssize_t got = ::read(pipefd[0], &c, 1);  // 1: child is blocked at op n; 0: it finished
    ::close(pipefd[0]);
    if (got == 1) ::kill(pid, SIGKILL);
    int status = 0;
    ASSERT_EQ(::waitpid(pid, &status, 0), pid);
    if (n <= total) {
      // Killed by us while blocked at op n, not crashed on its own.
      ASSERT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)
          << "op " << n << " status " << status;
    } else {
      ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << status;
    }

    // Step 1 is intact, byte for byte, and loads.
    ASSERT_EQ(Snapshot(dir_ + "/" + StepDirName(1)), step1) << "after kill at op " << n;
    ExpectStepHolds(1, 1);
    // Whatever loads is complete: step 2 with its data, or step 1.
    auto latest = LoadLatest(dir_);
    ASSERT_TRUE(latest.ok()) << latest.status().ToString();
    if ((*latest)->step() == 2) {
      ++committed_seen;
      ExpectStepHolds(2, 2);
    } else {
      ASSERT_EQ((*latest)->step(), 1);
    }
    // The next writer start cleans up; then reset to "only step 1" for the next round.
    ASSERT_TRUE(CheckpointWriter::Open(Options()).ok());
    ExpectNoLeftovers();
    fs::remove_all(dir_ + "/" + StepDirName(2));
    ASSERT_TRUE(base::WriteFileAtomic(dir_ + "/latest", "1\n").ok());
  }
  std::cerr << "killed the writer at " << total << " points; step 2 was committed after "
            << committed_seen << " of them\n";
  // The last operations (after the rename into place) leave a committed step 2.
  EXPECT_GE(committed_seen, 2);
  EXPECT_LT(committed_seen, static_cast<int>(total));
}

TEST_F(FaultTest, InjectedNoSpaceFailsCleanly) {
  ASSERT_TRUE(Save(1, 1, Options()).ok());
  struct Case {
    FsOp op;
    uint64_t nth;
    const char* what;
  };
  // The 1st and 3rd data write, the shard fsync, the manifest's fsync (the 2nd), the step
  // directory's fsync before its rename, and the rename of the step directory into place.
  for (const Case& c : {Case{FsOp::kWrite, 1, "write"}, Case{FsOp::kWrite, 3, "write"},
                        Case{FsOp::kSync, 1, "fsync"}, Case{FsOp::kSync, 2, "fsync"},
                        Case{FsOp::kSyncDir, 1, "fsync-dir"}, Case{FsOp::kRename, 1, "rename"}}) {
    FaultInjectionFs faulty(DefaultFs());
    faulty.FailNth(c.op, c.nth, ENOSPC);
    Status st = Save(2, 2, Options(&faulty));
    EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << c.what << c.nth << st.ToString();
    EXPECT_NE(st.message().find("No space left on device"), std::string::npos) << st.ToString();
    EXPECT_NE(st.message().find(dir_), std::string::npos) << st.ToString();  // names the file
    EXPECT_FALSE(fs::exists(dir_ + "/" + StepDirName(2))) << c.what << c.nth;
    ExpectNoLeftovers();
    ExpectStepHolds(1, 1);
    EXPECT_EQ(*base::ReadFile(dir_ + "/latest"), "1\n");
  }
}

// After the step directory's rename and the fsync of its parent the step is committed: a
// failure to rewrite `latest` (the 2nd rename of a save) is a warning, not a failed save.
TEST_F(FaultTest, FailedLatestUpdateLeavesTheStepCommitted) {
  ASSERT_TRUE(Save(1, 1, Options()).ok());
  FaultInjectionFs faulty(DefaultFs());
  faulty.FailNth(FsOp::kRename, 2, EIO);
  auto writer = CheckpointWriter::Open(Options(&faulty));
  ASSERT_TRUE(writer.ok()) << writer.status().ToString();
  w_ = Values(20000, 2);
  b_ = Values(300, 3);
  std::vector<TensorView> views = {{"w", DType::kF32, {20000}, {}, {}, w_.data()},
                                   {"b", DType::kF32, {3, 100}, {}, {}, b_.data()}};
  Status st = (*writer)->Save(2, views, {{"seed", "2"}});
  ASSERT_TRUE(st.ok()) << st.ToString();
  const std::string& warning = (*writer)->last_stats().warning;
  EXPECT_NE(warning.find("step 2 is committed"), std::string::npos) << warning;
  EXPECT_NE(warning.find("latest"), std::string::npos) << warning;
  EXPECT_NE(warning.find("Input/output error"), std::string::npos) << warning;
  ExpectStepHolds(2, 2);
  EXPECT_EQ(*base::ReadFile(dir_ + "/latest"), "1\n");  // the old content, not a torn file
  ExpectNoLeftovers();
  auto latest = LoadLatest(dir_);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ((*latest)->step(), 2);
}

TEST_F(FaultTest, FullTmpfsFailsCleanly) {
  std::string why;
  if (!MountTmpfs("1m", &why)) GTEST_SKIP() << why;
  ASSERT_TRUE(Save(1, 1, Options(), 20000).ok());  // 80 KB
  Status st = Save(2, 2, Options(), 400000);       // 1.6 MB: does not fit
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted) << st.ToString();
  EXPECT_NE(st.message().find("No space left on device"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("rank-00000.bin"), std::string::npos) << st.ToString();
  EXPECT_FALSE(fs::exists(dir_ + "/" + StepDirName(2)));
  ExpectNoLeftovers();  // the partial shard was removed, so the space is free again
  ExpectStepHolds(1, 1);
  auto latest = LoadLatest(dir_);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ((*latest)->step(), 1);
  // With the space back, a smaller step 2 fits.
  ASSERT_TRUE(Save(2, 2, Options(), 20000).ok());
}

TEST_F(FaultTest, DirectIoOnTmpfs) {
  std::string why;
  if (!MountTmpfs("8m", &why)) GTEST_SKIP() << why;
  WriterOptions o = Options();
  o.direct_io = true;  // tmpfs may refuse O_DIRECT (EINVAL): the writer falls back
  ASSERT_TRUE(Save(1, 1, o, 12345).ok());
  ExpectStepHolds(1, 1, 12345);
}

TEST_F(FaultTest, ReadOnlyDirectory) {
  ASSERT_TRUE(Save(1, 1, Options()).ok());
  const auto before = Snapshot(dir_);
  if (::geteuid() == 0) {
    // Root ignores permission bits: make the directory a read-only bind mount instead.
    if (::mount(dir_.c_str(), dir_.c_str(), nullptr, MS_BIND, nullptr) != 0) {
      GTEST_SKIP() << "root without a bind mount: " << std::strerror(errno);
    }
    mount_ = dir_;
    if (::mount(nullptr, dir_.c_str(), nullptr, MS_REMOUNT | MS_BIND | MS_RDONLY, nullptr) != 0) {
      GTEST_SKIP() << "cannot remount read-only: " << std::strerror(errno);
    }
  } else {
    fs::permissions(dir_, fs::perms(0555));
  }
  Status st = Save(2, 2, Options());
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(st.code() == StatusCode::kPermissionDenied ||
              st.message().find("Read-only file system") != std::string::npos)
      << st.ToString();
  EXPECT_NE(st.message().find(dir_), std::string::npos) << st.ToString();
  // Loading still works from a read-only directory.
  ExpectStepHolds(1, 1);
  auto latest = LoadLatest(dir_);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ((*latest)->step(), 1);
  EXPECT_EQ(Snapshot(dir_), before);
}

TEST_F(FaultTest, PermissionDeniedThroughTheFsWrapper) {
  // Always runs, root or not: the wrapper refuses every mkdir as a read-only directory would.
  ASSERT_TRUE(Save(1, 1, Options()).ok());
  FaultInjectionFs faulty(DefaultFs());
  faulty.SetHook([](const FsOpInfo& info) -> Status {
    if (info.op == FsOp::kMkdir || info.op == FsOp::kCreate) {
      return ErrnoStatus(EACCES, fmt::format("cannot create '{}'", info.path));
    }
    return Status::Ok();
  });
  Status st = Save(2, 2, Options(&faulty));
  EXPECT_EQ(st.code(), StatusCode::kPermissionDenied) << st.ToString();
  EXPECT_NE(st.message().find(TempStepDirName(2)), std::string::npos) << st.ToString();
  ExpectStepHolds(1, 1);
}

// Saves `step` of a 30-element tensor split over `world` threads (rank r owns [10r, 10r+10)),
// rank r using fs_for(r) (nullptr: the default). Returns each rank's Save status.
template <typename FsFor>
std::vector<Status> SaveOnThreads(int world, int64_t step, int seed, FsFor fs_for,
                                  const std::function<WriterOptions(Fs*)>& options) {
  InProcessAgreementGroup group(world);
  std::vector<std::thread> threads;
  std::vector<Status> results(world);
  std::vector<float> w = Values(30, seed);
  for (int r = 0; r < world; ++r) {
    threads.emplace_back([&, r] {
      WriterOptions o = options(fs_for(r));
      o.rank = r;
      o.world_size = world;
      o.agreement = group.ForRank(r);
      auto writer = CheckpointWriter::Open(o);
      if (!writer.ok()) {
        results[r] = writer.status();
        return;
      }
      std::vector<int64_t> off{r * 10}, size{10};
      std::vector<TensorView> views = {{"w", DType::kF32, {30}, off, size, w.data() + r * 10}};
      results[r] = (*writer)->Save(step, views);
    });
  }
  for (auto& t : threads) t.join();
  return results;
}

TEST_F(FaultTest, OneRankOutOfSpaceAbortsTheStepEverywhere) {
  const int world = 3;
  auto options = [this](Fs* fs) { return Options(fs); };
  for (const Status& s : SaveOnThreads(
           world, 1, 1, [](int) -> Fs* { return nullptr; }, options)) {
    ASSERT_TRUE(s.ok()) << s.ToString();
  }
  FaultInjectionFs full(DefaultFs());
  full.FailNth(FsOp::kWrite, 1, ENOSPC);
  std::vector<Status> results = SaveOnThreads(
      world, 2, 2, [&](int r) -> Fs* { return r == 2 ? &full : nullptr; }, options);
  EXPECT_EQ(results[2].code(), StatusCode::kResourceExhausted) << results[2].ToString();
  for (int r : {0, 1}) {
    EXPECT_EQ(results[r].code(), StatusCode::kAborted) << results[r].ToString();
    EXPECT_NE(results[r].message().find("rank 2 failed: RESOURCE_EXHAUSTED"), std::string::npos)
        << results[r].ToString();
  }
  EXPECT_FALSE(fs::exists(dir_ + "/" + StepDirName(2)));
  auto latest = LoadLatest(dir_);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ((*latest)->step(), 1);
  EXPECT_EQ(AsFloats(*(*latest)->ReadTensor("w")), Values(30, 1));
}

}  // namespace
}  // namespace railyard::storage
