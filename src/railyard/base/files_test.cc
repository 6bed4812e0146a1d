#include "railyard/base/files.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "railyard/base/temp_dir_testing.h"

namespace railyard::base {
namespace {

class FilesTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.empty()); }
  ScopedTempDir tmp_{"files-test"};
  const std::string dir_ = tmp_.path();
};

TEST_F(FilesTest, AppendThenReadTheTail) {
  const std::string path = dir_ + "/log";
  ASSERT_TRUE(AppendToFile(path, "first line\n").ok());
  ASSERT_TRUE(AppendToFile(path, "second line\n").ok());
  EXPECT_EQ(*ReadFile(path), "first line\nsecond line\n");
  EXPECT_EQ(*ReadFileTail(path, 12), "second line\n");
  EXPECT_EQ(*ReadFileTail(path, 1000), "first line\nsecond line\n");
  EXPECT_EQ(ReadFileTail(dir_ + "/missing", 10).status().code(), StatusCode::kNotFound);
  Status st = AppendToFile(dir_ + "/no/such/dir/log", "x");
  EXPECT_NE(st.message().find("no/such/dir/log"), std::string::npos) << st.ToString();
}

TEST_F(FilesTest, AtomicWriteReplacesContentAndLeavesNoTemp) {
  std::string path = dir_ + "/state.json";
  ASSERT_TRUE(WriteFileAtomic(path, "first").ok());
  ASSERT_TRUE(WriteFileAtomic(path, "second, longer").ok());
  EXPECT_EQ(*ReadFile(path), "second, longer");
  int entries = 0;
  for (auto& e : std::filesystem::directory_iterator(dir_)) {
    (void)e;
    ++entries;
  }
  EXPECT_EQ(entries, 1);
}

TEST_F(FilesTest, AtomicWriteAppliesMode) {
  std::string path = dir_ + "/secret";
  ASSERT_TRUE(WriteFileAtomic(path, "x", 0600).ok());
  struct stat st;
  ASSERT_EQ(::stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
}

TEST_F(FilesTest, AtomicWriteIntoMissingDirectoryNamesThePath) {
  Status s = WriteFileAtomic(dir_ + "/no/such/dir/file", "x");
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_NE(s.message().find("/no/such/dir/file"), std::string::npos) << s.message();
}

TEST_F(FilesTest, ReadTrimmedFileStripsWhitespaceAndIsEmptyWhenUnreadable) {
  std::string path = dir_ + "/value";
  ASSERT_TRUE(WriteFileAtomic(path, " \t1f57b20a-341e cubic\n\n").ok());
  EXPECT_EQ(ReadTrimmedFile(path), "1f57b20a-341e cubic");
  ASSERT_TRUE(WriteFileAtomic(path, "\n").ok());
  EXPECT_EQ(ReadTrimmedFile(path), "");
  EXPECT_EQ(ReadTrimmedFile(dir_ + "/absent"), std::nullopt);
}

TEST_F(FilesTest, ReadMissingFileIsNotFound) {
  auto r = ReadFile(dir_ + "/absent");
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("absent"), std::string::npos);
}

TEST_F(FilesTest, CrashMidWriteKeepsOldContent) {
  // A writer that dies after creating its temporary file (before rename) must leave the
  // committed file untouched; the stale temporary is then recognised and removed.
  std::string path = dir_ + "/ckpt";
  ASSERT_TRUE(WriteFileAtomic(path, "committed").ok());
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    std::string tmp = path + ".tmp." + std::to_string(::getpid()) + ".0";
    FILE* f = std::fopen(tmp.c_str(), "w");
    if (f) std::fputs("half-writ", f);
    std::_Exit(f ? 0 : 1);  // "crash": never renames
  }
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  ASSERT_EQ(WEXITSTATUS(status), 0);
  EXPECT_EQ(*ReadFile(path), "committed");
  // The dead writer's temporary file is recognised as stale; a live process's is not.
  EXPECT_TRUE(IsStaleTempFileName("ckpt.tmp." + std::to_string(pid) + ".0"));
  EXPECT_FALSE(IsStaleTempFileName("ckpt.tmp." + std::to_string(::getpid()) + ".0"));
  EXPECT_FALSE(IsStaleTempFileName("ckpt.tmp.12x.0"));
  EXPECT_FALSE(IsStaleTempFileName("ckpt.tmp..0"));
  EXPECT_FALSE(IsStaleTempFileName("ckpt"));
}

TEST_F(FilesTest, ReplaceRunsTheStepsInOrderAndCleansUpAFailedRename) {
  std::vector<std::string> calls;
  AtomicReplaceSteps steps;
  steps.write_synced = [&](const std::string& tmp) {
    calls.push_back("write " + tmp);
    return Status::Ok();
  };
  steps.rename = [&](const std::string& from, const std::string& to) {
    calls.push_back("rename " + from + " " + to);
    return ErrnoStatus(EIO, "rename (injected)");
  };
  steps.sync_dir = [&](const std::string& dir) {
    calls.push_back("sync " + dir);
    return Status::Ok();
  };
  steps.remove = [&](const std::string& tmp) { calls.push_back("remove " + tmp); };
  Status st = ReplaceFileAtomic("/d/f", steps);
  EXPECT_EQ(st.code(), StatusCode::kInternal) << st.ToString();
  ASSERT_EQ(calls.size(), 3u);
  const std::string tmp = calls[0].substr(6);
  EXPECT_EQ(tmp.rfind("/d/f.tmp." + std::to_string(::getpid()) + ".", 0), 0u) << tmp;
  EXPECT_EQ(calls[1], "rename " + tmp + " /d/f");
  EXPECT_EQ(calls[2], "remove " + tmp);  // no directory fsync after a failure

  calls.clear();
  steps.rename = [&](const std::string&, const std::string&) { return Status::Ok(); };
  ASSERT_TRUE(ReplaceFileAtomic("/d/f", steps).ok());
  ASSERT_EQ(calls.size(), 2u);
  EXPECT_EQ(calls[1], "sync /d");
}

TEST(ParentDirTest, Cases) {
  EXPECT_EQ(ParentDir("a/b/c"), "a/b");
  EXPECT_EQ(ParentDir("c"), ".");
  EXPECT_EQ(ParentDir("/c"), "/");
}

TEST_F(FilesTest, MakeDirsIsIdempotent) {
  std::string nested = dir_ + "/a/b/c";
  ASSERT_TRUE(MakeDirs(nested).ok());
  ASSERT_TRUE(MakeDirs(nested).ok());
  EXPECT_TRUE(std::filesystem::is_directory(nested));
}

TEST(UniqueFdTest, ClosesOnDestructionAndMove) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ::close(fds[1]);
  {
    UniqueFd a(fds[0]);
    UniqueFd b(std::move(a));
    EXPECT_FALSE(a.valid());
    EXPECT_TRUE(b.valid());
  }
  EXPECT_EQ(::fcntl(fds[0], F_GETFD), -1);  // closed
}

TEST(WaitFdTest, ReadyAtOnceWhenDataIsWaiting) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  UniqueFd r(fds[0]), w(fds[1]);
  ASSERT_EQ(::write(w.get(), "x", 1), 1);
  EXPECT_TRUE(WaitFd(r.get(), POLLIN, Deadline::After(std::chrono::seconds(10)), "pipe").ok());
  EXPECT_TRUE(WaitFd(w.get(), POLLOUT, Deadline::After(std::chrono::seconds(10)), "pipe").ok());
}

TEST(WaitFdTest, HangUpWakesAReader) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  UniqueFd r(fds[0]);
  ::close(fds[1]);
  EXPECT_TRUE(WaitFd(r.get(), POLLIN, Deadline::After(std::chrono::seconds(10)), "pipe").ok());
}

TEST(WaitFdTest, NothingToReadIsDeadlineExceededNamingWhat) {
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  UniqueFd r(fds[0]), w(fds[1]);
  Status s = WaitFd(r.get(), POLLIN, Deadline::After(std::chrono::milliseconds(0)), "probe pipe");
  ASSERT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(s.message().find("probe pipe"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace railyard::base
