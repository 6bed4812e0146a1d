#include "railyard/net/shm/shm_ring.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <vector>

namespace railyard::net::shm {
namespace {

std::string TestName(std::string_view what) {
  static int n = 0;
  return fmt::format("/railyard-shm-ringtest-{}-{}-p{}", what, n++, ::getpid());
}

TEST(SegmentTest, CreateOpenSignVerifyAndUnlink) {
  std::string name = TestName("seg");
  auto created = Segment::Create(name, SegmentLayout::For(3, 64 << 10));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  created->header()->rank = 2;
  created->Sign("secret");
  created->header()->magic.store(kSegmentMagic);

  struct stat st {};
  ASSERT_EQ(::stat(("/dev/shm" + name).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);
  // O_EXCL: a second creator of the same name is refused.
  EXPECT_EQ(Segment::Create(name, SegmentLayout::For(3, 64 << 10)).status().code(),
            StatusCode::kAlreadyExists);

  auto opened = Segment::Open(name, "rank 2 (h pid 1)");
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  EXPECT_EQ(opened->header()->rank, 2);
  EXPECT_EQ(opened->header()->pid, ::getpid());
  EXPECT_EQ(opened->layout().ring_bytes, 64u << 10);
  EXPECT_TRUE(opened->Verify("secret"));
  EXPECT_FALSE(opened->Verify("other"));
  // Both mappings see the same memory.
  created->ring_data(1)[5] = 'x';
  EXPECT_EQ(opened->ring_data(1)[5], 'x');

  created->Unlink();
  EXPECT_NE(::access(("/dev/shm" + name).c_str(), F_OK), 0);
  auto gone = Segment::Open(name, "rank 2 (h pid 1)");
  EXPECT_EQ(gone.status().code(), StatusCode::kNotFound);
  EXPECT_NE(gone.status().message().find("rank 2 (h pid 1)"), std::string::npos);
  EXPECT_NE(gone.status().message().find("another host"), std::string::npos);
}

TEST(SegmentTest, WindowIsPreallocatedAndSeenByPeers) {
  std::string name = TestName("win");
  auto created = Segment::Create(name, SegmentLayout::For(2, 4096, 64 << 10));
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  created->header()->magic.store(kSegmentMagic);
  struct stat st {};
  ASSERT_EQ(::stat(("/dev/shm" + name).c_str(), &st), 0);
  // Preallocated: the window's pages exist before anyone touches them.
  EXPECT_GE(static_cast<uint64_t>(st.st_blocks) * 512, uint64_t{64} << 10);
  auto opened = Segment::Open(name, "rank 0");
  ASSERT_TRUE(opened.ok()) << opened.status().ToString();
  ASSERT_NE(opened->window(), nullptr);
  EXPECT_EQ(opened->layout().window_bytes, uint64_t{64} << 10);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(opened->window()) % 4096, 0u);
  created->window()[(64 << 10) - 1] = 'w';
  EXPECT_EQ(opened->window()[(64 << 10) - 1], 'w');
  auto plain = Segment::Create(TestName("nowin"), SegmentLayout::For(2, 4096));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->window(), nullptr);
}

TEST(SegmentTest, WindowOnlyWhenEveryRanksSegmentFits) {
  const uint64_t one = SegmentLayout::For(4, 1 << 20, 4 << 20).total_bytes;
  EXPECT_EQ(WindowThatFits(4, 1 << 20, 4 << 20, 4 * one), uint64_t{4} << 20);
  EXPECT_EQ(WindowThatFits(4, 1 << 20, 4 << 20, 4 * one - 1), 0u);
  // A container's default 64 MiB /dev/shm with 8 ranks: rings alone fit, windows would not.
  EXPECT_EQ(WindowThatFits(8, 1 << 20, 4 << 20, uint64_t{64} << 20), 0u);
}

TEST(SegmentTest, DestructorUnlinksAndOpenRefusesAnUnpublishedSegment) {
  std::string name = TestName("dtor");
  {
    auto created = Segment::Create(name, SegmentLayout::For(2, 4096));
    ASSERT_TRUE(created.ok());
    // No magic yet: a peer must not use it.
    auto opened = Segment::Open(name, "rank 0");
    EXPECT_EQ(opened.status().code(), StatusCode::kFailedPrecondition);
  }
  EXPECT_NE(::access(("/dev/shm" + name).c_str(), F_OK), 0);
}

TEST(RingTest, RecordsAndBytesWrapAroundInOrder) {
  std::string name = TestName("ring");
  auto seg = Segment::Create(name, SegmentLayout::For(2, 4096));
  ASSERT_TRUE(seg.ok());
  RingWriter w(seg->ring_control(1), seg->ring_data(1), 4096, seg->header());
  RingReader r(seg->ring_control(1), seg->ring_data(1), 4096, seg->header());
  uint64_t expect_byte = 0, next_byte = 0;
  for (int round = 0; round < 50; ++round) {
    uint64_t rec = round;
    ASSERT_TRUE(w.WriteRecord(&rec, sizeof(rec)));
    std::vector<char> payload(1000 + round * 37);
    for (char& c : payload) c = static_cast<char>(next_byte++ * 7);
    size_t written = w.Write(payload.data(), payload.size());
    w.Publish();
    ASSERT_TRUE(r.Snapshot());
    uint64_t got_rec = 0;
    ASSERT_TRUE(r.ReadRecord(&got_rec, sizeof(got_rec)));
    EXPECT_EQ(got_rec, rec);
    // Drain whatever did not fit through the reader, which frees space for the writer.
    std::vector<char> out(payload.size());
    size_t read = r.Read(out.data(), out.size());
    r.Publish();
    while (read < payload.size()) {
      written += w.Write(payload.data() + written, payload.size() - written);
      w.Publish();
      ASSERT_TRUE(r.Snapshot());
      read += r.Read(out.data() + read, out.size() - read);
      r.Publish();
    }
    for (char c : out) ASSERT_EQ(c, static_cast<char>(expect_byte++ * 7)) << "round " << round;
  }
  EXPECT_FALSE(r.HasData());
}

TEST(RingTest, WriterStopsWhenFull) {
  std::string name = TestName("full");
  auto seg = Segment::Create(name, SegmentLayout::For(2, 4096));
  ASSERT_TRUE(seg.ok());
  RingWriter w(seg->ring_control(0), seg->ring_data(0), 4096, seg->header());
  std::vector<char> big(10000, 'a');
  EXPECT_EQ(w.Write(big.data(), big.size()), 4096u);
  EXPECT_FALSE(w.WriteRecord("x", 1));
  EXPECT_FALSE(w.SpaceFreed());
}

TEST(PeerRecordTest, RoundTripAndMalformed) {
  PeerRecord rec{"node1", 42, "/railyard-shm-x"};
  auto back = PeerRecord::Parse(rec.Format());
  ASSERT_TRUE(back.has_value());
  EXPECT_EQ(back->host, "node1");
  EXPECT_EQ(back->pid, 42);
  EXPECT_EQ(back->segment, "/railyard-shm-x");
  EXPECT_FALSE(PeerRecord::Parse("host=a\npid=0\nsegment=/x\n").has_value());
  EXPECT_FALSE(PeerRecord::Parse("host=a\npid=5\n").has_value());
}

TEST(ProcessWatchTest, RunningStoppedExited) {
  pid_t pid = ::fork();
  if (pid == 0) {
    ::pause();
    ::_exit(0);
  }
  ASSERT_GT(pid, 0);
  ProcessWatch watch(pid);
  EXPECT_EQ(watch.State(), ProcessState::kRunning);
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, WUNTRACED), pid);
  EXPECT_EQ(watch.State(), ProcessState::kStopped);
  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  // Killed but not reaped: a zombie still counts as exited.
  siginfo_t info{};
  ASSERT_EQ(::waitid(P_PID, pid, &info, WEXITED | WNOWAIT), 0);
  EXPECT_EQ(watch.State(), ProcessState::kExited);
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  EXPECT_EQ(watch.State(), ProcessState::kExited);
}

TEST(RemoveStaleSegmentsTest, RemovesOnlySegmentsOfDeadCreators) {
  pid_t dead = ::fork();
  if (dead == 0) ::_exit(0);
  ASSERT_GT(dead, 0);
  ASSERT_EQ(::waitpid(dead, nullptr, 0), dead);
  std::string prefix = fmt::format("railyard-shm-staletest{}-", ::getpid());
  std::string stale = fmt::format("/{}r0-p{}-0", prefix, dead);
  std::string live = fmt::format("/{}r1-p{}-0", prefix, ::getpid());
  for (const std::string& n : {stale, live}) {
    int fd = ::shm_open(n.c_str(), O_CREAT | O_EXCL | O_RDWR, 0600);
    ASSERT_GE(fd, 0) << n;
    ::close(fd);
  }
  EXPECT_EQ(RemoveStaleSegments(prefix), 1);
  EXPECT_NE(::access(("/dev/shm" + stale).c_str(), F_OK), 0);
  EXPECT_EQ(::access(("/dev/shm" + live).c_str(), F_OK), 0);
  ::shm_unlink(live.c_str());
  ::shm_unlink(stale.c_str());
}

}  // namespace
}  // namespace railyard::net::shm
