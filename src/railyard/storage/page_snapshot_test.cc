#include "railyard/storage/page_snapshot.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <thread>
#include <vector>

#include "railyard/storage/task_pool.h"

namespace railyard::storage {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;

// Anonymous private memory, 2 MiB-aligned (so transparent huge pages can back it).
class AnonBuffer {
 public:
  explicit AnonBuffer(size_t size, bool populate = true) : size_(size) {
    void* p =
        ::mmap(nullptr, size + kAlign, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    mapping_ = static_cast<uint8_t*>(p);
    data_ = mapping_ + (kAlign - reinterpret_cast<uintptr_t>(p) % kAlign) % kAlign;
    if (populate) std::memset(data_, 0, size);
  }
  ~AnonBuffer() { ::munmap(mapping_, size_ + kAlign); }
  uint8_t* data() { return data_; }
  size_t size() const { return size_; }

 private:
  static constexpr size_t kAlign = 2 << 20;
  uint8_t* mapping_;
  uint8_t* data_;
  size_t size_;
};

void Fill(uint8_t* p, size_t n, uint32_t seed) {
  for (size_t i = 0; i < n; ++i) p[i] = static_cast<uint8_t>((i * 2654435761u + seed) >> 7);
}

bool HasPattern(const uint8_t* p, size_t n, uint32_t seed, size_t origin = 0) {
  for (size_t i = 0; i < n; ++i) {
    if (p[i] != static_cast<uint8_t>(((origin + i) * 2654435761u + seed) >> 7)) return false;
  }
  return true;
}

// Begins a snapshot of all of `src` into `dst`; null (with a test failure) when it fails.
std::unique_ptr<PageSnapshot> SnapshotAll(AnonBuffer& src, std::vector<uint8_t>& dst) {
  SnapshotSegment seg{src.data(), dst.data(), src.size()};
  auto snap = PageSnapshot::Begin({&seg, 1});
  EXPECT_TRUE(snap.ok()) << snap.status().ToString();
  return snap.ok() ? std::move(*snap) : nullptr;
}

// Snapshots need userfaultfd (root, or the sysctl) and Linux 6.4. Where they are not
// available, Begin must say so with UNAVAILABLE and leave the memory untouched; the tests that
// need a working snapshot then stop there, printing the reason.
class PageSnapshotTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Status probe = PageSnapshot::Probe();
    if (probe.ok()) return;
    ASSERT_EQ(probe.code(), StatusCode::kUnavailable) << probe.ToString();
    AnonBuffer buf(kMiB);
    std::vector<uint8_t> dst(kMiB);
    SnapshotSegment seg{buf.data(), dst.data(), kMiB};
    auto snap = PageSnapshot::Begin({&seg, 1});
    ASSERT_FALSE(snap.ok());
    EXPECT_EQ(snap.status().code(), StatusCode::kUnavailable);
    buf.data()[0] = 1;  // still writable: nothing left protected
    GTEST_SKIP() << "page snapshots unavailable here: " << probe.ToString();
  }
};

TEST_F(PageSnapshotTest, WritesBeforeFinishAreFaultedAndCopiedFirst) {
  AnonBuffer src(16 * kMiB);
  Fill(src.data(), src.size(), 1);
  std::vector<uint8_t> dst(src.size());
  auto snap = SnapshotAll(src, dst);
  ASSERT_NE(snap, nullptr);
  EXPECT_EQ(snap->stats().chunks, 8u);
  EXPECT_EQ(snap->stats().protected_bytes, src.size());
  // The owner writes every page at once: each chunk is copied before its first write lands,
  // by the fault handler (which copies ahead of a sweeping writer, so fewer faults than chunks).
  Fill(src.data(), src.size(), 2);
  EXPECT_GE(snap->stats().faulted_chunks, 1u);
  EXPECT_LE(snap->stats().faulted_chunks, 8u);
  ASSERT_TRUE(snap->Finish(nullptr).ok());
  EXPECT_TRUE(HasPattern(dst.data(), dst.size(), 1));
  EXPECT_TRUE(HasPattern(src.data(), src.size(), 2));
}

TEST_F(PageSnapshotTest, OwnerWritingDuringFinishNeverLeaksIntoTheCopy) {
  AnonBuffer src(64 * kMiB);
  Fill(src.data(), src.size(), 3);
  std::vector<uint8_t> dst(src.size());
  auto snap = SnapshotAll(src, dst);
  ASSERT_NE(snap, nullptr);
  TaskPool pool(2);
  std::thread finisher([&] { EXPECT_TRUE(snap->Finish(&pool).ok()); });
  // Backwards, so that the owner and the copier meet in the middle.
  for (size_t page = src.size() / 4096; page-- > 0;) {
    Fill(src.data() + page * 4096, 4096, 4 + static_cast<uint32_t>(page));
  }
  finisher.join();
  EXPECT_TRUE(HasPattern(dst.data(), dst.size(), 3));
  EXPECT_TRUE(HasPattern(src.data() + 4096, 4096, 5));
}

TEST_F(PageSnapshotTest, UnalignedSegmentsSharingPages) {
  AnonBuffer src(8 * kMiB);
  Fill(src.data(), src.size(), 6);
  // Three pieces of one buffer: two sharing a page, one crossing chunk boundaries.
  const std::vector<std::pair<size_t, size_t>> parts = {
      {100, 900}, {1000, 4000}, {9000, 3 * kMiB + 17}};
  std::vector<std::vector<uint8_t>> dsts;
  std::vector<SnapshotSegment> segs;
  for (auto [off, len] : parts) {
    dsts.emplace_back(len);
    segs.push_back({src.data() + off, dsts.back().data(), len});
  }
  auto snap = PageSnapshot::Begin(segs);
  ASSERT_TRUE(snap.ok()) << snap.status().ToString();
  Fill(src.data(), src.size(), 7);  // including the bytes between the pieces
  ASSERT_TRUE((*snap)->Finish(nullptr).ok());
  for (size_t i = 0; i < parts.size(); ++i) {
    EXPECT_TRUE(HasPattern(dsts[i].data(), parts[i].second, 6, parts[i].first)) << i;
  }
  EXPECT_TRUE(HasPattern(src.data(), src.size(), 7));
}

TEST_F(PageSnapshotTest, UnpopulatedMemorySnapshotsAsZeros) {
  AnonBuffer src(8 * kMiB, /*populate=*/false);
  std::vector<uint8_t> dst(src.size(), 0xff);
  auto snap = SnapshotAll(src, dst);
  ASSERT_NE(snap, nullptr);
  Fill(src.data(), src.size(), 8);  // first touch of every page
  ASSERT_TRUE(snap->Finish(nullptr).ok());
  EXPECT_EQ(std::count(dst.begin(), dst.end(), 0), static_cast<ptrdiff_t>(dst.size()));
}

// A kernel-mode write (read(2) into the buffer) waits for the copy, as a user-mode one does,
// instead of failing with EFAULT.
TEST_F(PageSnapshotTest, SystemCallWritingIntoProtectedMemoryWaits) {
  AnonBuffer src(4 * kMiB);
  Fill(src.data(), src.size(), 9);
  std::vector<uint8_t> dst(src.size());
  auto snap = SnapshotAll(src, dst);
  ASSERT_NE(snap, nullptr);
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const char msg[] = "from the kernel";
  ASSERT_EQ(::write(fds[1], msg, sizeof(msg)), static_cast<ssize_t>(sizeof(msg)));
  EXPECT_EQ(::read(fds[0], src.data() + kMiB, sizeof(msg)), static_cast<ssize_t>(sizeof(msg)));
  ::close(fds[0]);
  ::close(fds[1]);
  EXPECT_STREQ(reinterpret_cast<char*>(src.data() + kMiB), msg);
  ASSERT_TRUE(snap->Finish(nullptr).ok());
  EXPECT_TRUE(HasPattern(dst.data(), dst.size(), 9));
}

TEST_F(PageSnapshotTest, FileMappingIsRefusedAndLeftWritable) {
  char path[] = "/tmp/railyard-snapshot-XXXXXX";
  const int fd = ::mkstemp(path);
  ASSERT_GE(fd, 0);
  ::unlink(path);
  ASSERT_EQ(::ftruncate(fd, 4 * kMiB), 0);
  void* p = ::mmap(nullptr, 4 * kMiB, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  ASSERT_NE(p, MAP_FAILED);
  AnonBuffer anon(2 * kMiB);
  std::vector<uint8_t> dst(6 * kMiB);
  // Whatever was registered before the file mapping failed is released again.
  SnapshotSegment segs[] = {{anon.data(), dst.data(), 2 * kMiB},
                            {p, dst.data() + 2 * kMiB, 4 * kMiB}};
  auto snap = PageSnapshot::Begin(segs);
  ASSERT_FALSE(snap.ok());
  EXPECT_EQ(snap.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(snap.status().message().find("private anonymous"), std::string::npos)
      << snap.status().ToString();
  std::memset(p, 1, 4 * kMiB);  // would hang if anything were left protected
  std::memset(anon.data(), 1, 2 * kMiB);
  ::munmap(p, 4 * kMiB);
  ::close(fd);
  // Nothing stays registered: the same memory can be snapshotted again.
  SnapshotSegment again{anon.data(), dst.data(), 2 * kMiB};
  auto snap2 = PageSnapshot::Begin({&again, 1});
  ASSERT_TRUE(snap2.ok()) << snap2.status().ToString();
}

TEST_F(PageSnapshotTest, DestroyingWithoutFinishLiftsProtection) {
  AnonBuffer src(4 * kMiB);
  Fill(src.data(), src.size(), 10);
  std::vector<uint8_t> dst(src.size());
  {
    auto snap = SnapshotAll(src, dst);
    ASSERT_NE(snap, nullptr);
  }
  EXPECT_TRUE(HasPattern(dst.data(), dst.size(), 10));
  Fill(src.data(), src.size(), 11);  // no handler any more: must not be protected
  EXPECT_TRUE(HasPattern(src.data(), src.size(), 11));
}

}  // namespace
}  // namespace railyard::storage
