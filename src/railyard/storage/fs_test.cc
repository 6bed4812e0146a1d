#include "railyard/storage/fs.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>

#include "railyard/base/temp_dir_testing.h"
#include "railyard/storage/aligned_buffer.h"
#include "railyard/storage/fault_injection_fs.h"
#include "railyard/storage/fs_util.h"
#include "railyard/storage/task_pool.h"

namespace railyard::storage {
namespace {

namespace stdfs = std::filesystem;

class FsTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.empty()); }
  base::ScopedTempDir tmp_{"fs-test"};
  std::string dir_ = tmp_.path();
};

TEST_F(FsTest, WriteReadAndAtomicReplace) {
  Fs& fs = *DefaultFs();
  ASSERT_TRUE(WriteFileAtomic(fs, dir_ + "/a", "first").ok());
  ASSERT_TRUE(WriteFileAtomic(fs, dir_ + "/a", "second").ok());
  EXPECT_EQ(*ReadWholeFile(fs, dir_ + "/a"), "second");
  auto entries = fs.ListDir(dir_);
  ASSERT_TRUE(entries.ok());
  ASSERT_EQ(entries->size(), 1u);  // no temporary file left
  auto file = fs.NewReadableFile(dir_ + "/a");
  ASSERT_TRUE(file.ok());
  char buf[10];
  Status st = (*file)->PRead(3, buf, 10);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss);
  EXPECT_NE(st.message().find("truncated"), std::string::npos) << st.ToString();
}

TEST_F(FsTest, MakeDirsAndRemoveTree) {
  Fs& fs = *DefaultFs();
  ASSERT_TRUE(MakeDirs(fs, dir_ + "/x/y/z").ok());
  ASSERT_TRUE(MakeDirs(fs, dir_ + "/x/y/z").ok());  // exists: fine
  ASSERT_TRUE(WriteFileAtomic(fs, dir_ + "/x/y/z/f", "1").ok());
  ASSERT_TRUE(WriteFileAtomic(fs, dir_ + "/x/g", "2").ok());
  ASSERT_TRUE(RemoveTree(fs, dir_ + "/x").ok());
  EXPECT_FALSE(stdfs::exists(dir_ + "/x"));
  EXPECT_TRUE(RemoveTree(fs, dir_ + "/x").ok());  // absent: fine
}

TEST_F(FsTest, FailNthInjectsTheErrorOnce) {
  FaultInjectionFs faulty(DefaultFs());
  faulty.FailNth(FsOp::kWrite, 2, ENOSPC);
  auto file = faulty.NewWritableFile(dir_ + "/f", {});
  ASSERT_TRUE(file.ok());
  EXPECT_TRUE((*file)->Write("a").ok());
  Status st = (*file)->Write("b");
  EXPECT_EQ(st.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(st.message().find(dir_ + "/f"), std::string::npos) << st.ToString();
  EXPECT_TRUE((*file)->Write("c").ok());
  EXPECT_EQ(faulty.op_count(), 4u);  // create + 3 writes
}

TEST_F(FsTest, HookSeesEveryMutatingOperation) {
  FaultInjectionFs faulty(DefaultFs());
  std::vector<FsOp> ops;
  faulty.SetHook([&](const FsOpInfo& info) {
    ops.push_back(info.op);
    return Status::Ok();
  });
  ASSERT_TRUE(WriteFileAtomic(faulty, dir_ + "/m", "x").ok());
  EXPECT_EQ(ops, (std::vector<FsOp>{FsOp::kCreate, FsOp::kWrite, FsOp::kSync, FsOp::kRename,
                                    FsOp::kSyncDir}));
  // A failure at the rename leaves neither the target nor the temporary file.
  faulty.FailNth(FsOp::kRename, 1, EIO);
  EXPECT_FALSE(WriteFileAtomic(faulty, dir_ + "/n", "x").ok());
  auto entries = DefaultFs()->ListDir(dir_);
  ASSERT_EQ(entries->size(), 1u);
}

TEST_F(FsTest, HookSeesReadsAndWithEveryCallTheRestToo) {
  ASSERT_TRUE(WriteFileAtomic(*DefaultFs(), dir_ + "/r", "abc").ok());
  for (bool every_call : {false, true}) {
    FaultInjectionFs faulty(DefaultFs(), every_call);
    std::vector<std::string> ops;
    faulty.SetHook([&](const FsOpInfo& info) {
      ops.emplace_back(FsOpName(info.op));
      return Status::Ok();
    });
    ASSERT_TRUE(ReadWholeFile(faulty, dir_ + "/r").ok());
    EXPECT_TRUE(faulty.Exists(dir_ + "/r"));
    const std::vector<std::string> want =
        every_call ? std::vector<std::string>{"open", "size", "read", "exists"}
                   : std::vector<std::string>{"open", "read"};
    EXPECT_EQ(ops, want) << "every_call " << every_call;
    EXPECT_EQ(faulty.op_count(), want.size());
  }
  // An injected read error comes back from the read, naming the file.
  FaultInjectionFs faulty(DefaultFs());
  faulty.FailNth(FsOp::kRead, 1, EIO);
  Result<std::string> read = ReadWholeFile(faulty, dir_ + "/r");
  EXPECT_EQ(read.status().code(), StatusCode::kInternal) << read.status().ToString();
  EXPECT_NE(read.status().message().find(dir_ + "/r"), std::string::npos);
}

TEST_F(FsTest, DirectWritesWithAlignedBuffers) {
  AlignedBuffer buf;
  ASSERT_TRUE(buf.Resize(10000).ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf.data()) % kDirectIoAlignment, 0u);
  EXPECT_EQ(buf.capacity(), 12288u);
  uint8_t* before = buf.data();
  ASSERT_TRUE(buf.Resize(4096).ok());
  EXPECT_EQ(buf.data(), before);  // shrinking keeps the allocation
  for (size_t i = 0; i < 4096; ++i) buf.data()[i] = static_cast<uint8_t>(i);
  OpenOptions o;
  o.direct = true;
  auto file = DefaultFs()->NewWritableFile(dir_ + "/d", o);
  ASSERT_TRUE(file.ok());
  ASSERT_TRUE((*file)->PWrite(8192, buf.data(), 4096).ok());
  ASSERT_TRUE((*file)->Sync().ok());
  ASSERT_TRUE((*file)->Close().ok());
  EXPECT_EQ(stdfs::file_size(dir_ + "/d"), 12288u);
}

TEST_F(FsTest, DirectReadsAcceptAnyOffsetLengthAndBuffer) {
  // 3 blocks and a tail: aligned reads go straight into place, others through the bounce.
  std::string data(3 * 4096 + 1000, '\0');
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<char>(i * 7 + i / 4096);
  ASSERT_TRUE(WriteFileAtomic(*DefaultFs(), dir_ + "/r", data).ok());
  OpenOptions o;
  o.direct = true;
  auto file = DefaultFs()->NewReadableFile(dir_ + "/r", o);
  ASSERT_TRUE(file.ok()) << file.status().ToString();
  // /tmp is ext4 or xfs here; on tmpfs the file falls back to buffered, which must also work.
  SCOPED_TRACE((*file)->direct() ? "direct" : "buffered");
  AlignedBuffer aligned;
  ASSERT_TRUE(aligned.Resize(8192).ok());
  ASSERT_TRUE((*file)->PRead(4096, aligned.data(), 8192).ok());
  EXPECT_EQ(std::string(reinterpret_cast<char*>(aligned.data()), 8192), data.substr(4096, 8192));
  struct Case {
    uint64_t offset;
    size_t n;
  };
  for (Case c : {Case{1, 10}, Case{4095, 2}, Case{100, 9000}, Case{8192, 4096 + 1000},
                 Case{12000, 1288}, Case{0, data.size()}}) {
    std::vector<char> out(c.n + 1);  // +1: out.data() + 1 is misaligned
    ASSERT_TRUE((*file)->PRead(c.offset, out.data() + 1, c.n).ok()) << c.offset << "+" << c.n;
    EXPECT_EQ(std::string(out.data() + 1, c.n), data.substr(c.offset, c.n)) << c.offset;
  }
  // Past the end: named as a truncated file, both through the bounce and straight.
  std::vector<char> out(5000);
  Status st = (*file)->PRead(12000, out.data(), 2000);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
  EXPECT_NE(st.message().find("ends at byte 13288"), std::string::npos) << st.ToString();
  st = (*file)->PRead(12288, aligned.data(), 4096);
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
}

TEST_F(FsTest, WritebackAndDropCacheKeepTheData) {
  auto file = DefaultFs()->NewWritableFile(dir_ + "/w", {});
  ASSERT_TRUE(file.ok());
  std::string chunk(65536, 'a');
  for (int i = 0; i < 4; ++i) {
    chunk.assign(chunk.size(), static_cast<char>('a' + i));
    ASSERT_TRUE((*file)->PWrite(i * chunk.size(), chunk.data(), chunk.size()).ok());
    ASSERT_TRUE((*file)->StartWriteback(i * chunk.size(), chunk.size()).ok());
    if (i >= 1) {
      ASSERT_TRUE((*file)->DropCache((i - 1) * chunk.size(), chunk.size()).ok());
    }
  }
  ASSERT_TRUE((*file)->Sync().ok());
  ASSERT_TRUE((*file)->Close().ok());
  auto back = ReadWholeFile(*DefaultFs(), dir_ + "/w");
  ASSERT_TRUE(back.ok());
  ASSERT_EQ(back->size(), 4 * chunk.size());
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(back->substr(i * chunk.size(), chunk.size()),
              std::string(chunk.size(), static_cast<char>('a' + i)))
        << i;
  }
}

TEST(AlignedBufferTest, LargeBuffersAreHugePageAligned) {
  AlignedBuffer buf;
  ASSERT_TRUE(buf.Resize((4 << 20) + 1).ok());
  EXPECT_EQ(reinterpret_cast<uintptr_t>(buf.data()) % (2 << 20), 0u);
  EXPECT_EQ(buf.capacity(), 6u << 20);
  buf.Prefault();
  EXPECT_EQ(buf.data()[buf.capacity() - 1], 0);  // faulted in (written), and readable
}

TEST(TaskPoolTest, RunsAllAndReportsTheFirstError) {
  TaskPool pool(3);
  std::atomic<int> ran{0};
  std::vector<TaskPool::Task> tasks;
  for (int i = 0; i < 100; ++i) {
    tasks.push_back([&](int worker) -> Status {
      EXPECT_GE(worker, 0);
      EXPECT_LT(worker, 3);
      ++ran;
      return Status::Ok();
    });
  }
  EXPECT_TRUE(pool.RunAll(std::move(tasks)).ok());
  EXPECT_EQ(ran.load(), 100);
  std::vector<TaskPool::Task> failing;
  for (int i = 0; i < 10; ++i) {
    failing.push_back([i](int) { return i == 4 ? Internal("task {}", i) : Status::Ok(); });
  }
  Status st = pool.RunAll(std::move(failing));
  EXPECT_EQ(st.message(), "task 4");
  EXPECT_TRUE(pool.RunAll({}).ok());
}

}  // namespace
}  // namespace railyard::storage
