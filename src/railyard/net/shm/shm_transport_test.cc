#include "railyard/net/shm/shm_transport.h"

#include <dirent.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <functional>
#include <thread>

#include "railyard/base/files.h"
#include "railyard/base/temp_dir_testing.h"
#include "railyard/net/store/file_store.h"

namespace railyard::net {
namespace {

using base::Deadline;
using namespace std::chrono_literals;

Deadline Soon() { return Deadline::After(60s); }

std::vector<std::string> ShmNamesWithPrefix(const std::string& prefix) {
  std::vector<std::string> out;
  if (DIR* dir = ::opendir("/dev/shm")) {
    while (struct dirent* e = ::readdir(dir)) {
      if (std::string_view(e->d_name).starts_with(prefix)) out.push_back(e->d_name);
    }
    ::closedir(dir);
  }
  return out;
}

// Deterministic contents, so a receiver can tell a misplaced byte.
void Fill(std::vector<char>& v, uint64_t seed) {
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<char>((i * 131 + seed * 7919) >> 3);
}
bool Matches(const std::vector<char>& v, uint64_t seed, size_t n) {
  for (size_t i = 0; i < n; ++i) {
    if (v[i] != static_cast<char>((i * 131 + seed * 7919) >> 3)) return false;
  }
  return true;
}

// A forked child, killed and reaped on destruction whatever the test's outcome.
class Child {
 public:
  explicit Child(const std::function<int()>& body) {
    pid_ = ::fork();
    if (pid_ == 0) ::_exit(body());
  }
  ~Child() {
    if (pid_ > 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
  }
  pid_t pid() const { return pid_; }
  // The exit code, or 128 + signal.
  int Wait() {
    int status = 0;
    if (::waitpid(pid_, &status, 0) != pid_) return -1;
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

 private:
  pid_t pid_ = -1;
};

class ShmTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static int n = 0;
    prefix_ = fmt::format("shmtest/{}/{}/{}", ::getpid(), n++,
                          ::testing::UnitTest::GetInstance()->current_test_info()->name());
  }
  void TearDown() override {
    transports_.clear();
    for (const std::string& name : ShmNamesWithPrefix(ShmSegmentNamePrefix(prefix_))) {
      ADD_FAILURE() << "leftover shm segment /dev/shm/" << name;
      ::shm_unlink(("/" + name).c_str());
    }
  }

  TransportOptions Options(int rank, int size, Store* store) {
    TransportOptions o;
    o.rank = rank;
    o.size = size;
    o.store = store;
    o.key_prefix = prefix_;
    o.secret = "job-secret";
    o.host = "testhost";
    return o;
  }

  // Creates and starts `n` ranks, each Start() in its own thread.
  void StartAll(int n, ShmOptions shm = {}) {
    store_ = NewInMemoryStore();
    transports_.clear();
    for (int r = 0; r < n; ++r) {
      auto t = NewShmTransport(Options(r, n, store_.get()), shm);
      ASSERT_TRUE(t.ok()) << t.status().ToString();
      transports_.push_back(std::move(*t));
    }
    std::vector<Status> st = RunRanks([](Transport& t) { return t.Start(Soon()); });
    for (int r = 0; r < n; ++r) ASSERT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].ToString();
  }

  // Runs fn for every rank in its own thread; returns each rank's Status.
  std::vector<Status> RunRanks(const std::function<Status(Transport&)>& fn) {
    std::vector<Status> st(transports_.size());
    std::vector<std::thread> threads;
    for (size_t r = 0; r < transports_.size(); ++r) {
      threads.emplace_back([&, r] { st[r] = fn(*transports_[r]); });
    }
    for (auto& t : threads) t.join();
    return st;
  }

  Transport& T(int r) { return *transports_[static_cast<size_t>(r)]; }

  std::string prefix_;
  std::unique_ptr<Store> store_;
  std::vector<std::unique_ptr<Transport>> transports_;
};

TEST_F(ShmTransportTest, PingPong) {
  StartAll(2);
  EXPECT_EQ(T(0).name(), "shm");
  EXPECT_EQ(T(1).peer(0).host, "testhost");
  EXPECT_EQ(T(1).peer(0).pid, ::getpid());
  auto st = RunRanks([](Transport& t) -> Status {
    int other = 1 - t.rank();
    for (uint64_t i = 0; i < 200; ++i) {
      uint64_t out = i * 10 + t.rank(), in = 0;
      if (t.rank() == 0) {
        RY_ASSIGN_OR_RETURN(Request s, t.PostSend(other, 5, &out, sizeof(out)));
        RY_RETURN_IF_ERROR(t.WaitAll({{s}}, Soon()));
      }
      RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(other, 5, &in, sizeof(in)));
      RY_RETURN_IF_ERROR(t.WaitAll({{r}}, Soon()));
      if (t.ReceivedBytes(r) != sizeof(in) || in != i * 10 + other) {
        return Internal("round {}: got {}", i, in);
      }
      if (t.rank() == 1) {
        RY_ASSIGN_OR_RETURN(Request s, t.PostSend(other, 5, &out, sizeof(out)));
        RY_RETURN_IF_ERROR(t.WaitAll({{s}}, Soon()));
      }
    }
    return Status::Ok();
  });
  EXPECT_TRUE(st[0].ok()) << st[0].ToString();
  EXPECT_TRUE(st[1].ok()) << st[1].ToString();
}

TEST_F(ShmTransportTest, ThousandMessagesMixedTagsArriveInOrderPerTag) {
  StartAll(2, ShmOptions{.ring_bytes = 16 << 10});
  constexpr int kMessages = 1000, kTags = 7;
  std::vector<std::vector<char>> out(kMessages), in(kMessages);
  for (int i = 0; i < kMessages; ++i) {
    out[i].resize(8 + (i * 37) % 300);
    Fill(out[i], i);
    in[i].resize(400);
  }
  auto st = RunRanks([&](Transport& t) -> Status {
    std::vector<Request> reqs;
    if (t.rank() == 0) {
      for (int i = 0; i < kMessages; ++i) {
        RY_ASSIGN_OR_RETURN(Request r, t.PostSend(1, i % kTags, out[i].data(), out[i].size()));
        reqs.push_back(r);
      }
      return t.WaitAll(reqs, Soon());
    }
    // Receives posted tag by tag, highest first: matching must follow (peer, tag) order only.
    std::vector<std::pair<int, Request>> posted;
    for (int tag = kTags - 1; tag >= 0; --tag) {
      for (int i = tag; i < kMessages; i += kTags) {
        RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(0, tag, in[i].data(), in[i].size()));
        posted.push_back({i, r});
        reqs.push_back(r);
      }
    }
    RY_RETURN_IF_ERROR(t.WaitAll(reqs, Soon()));
    for (auto [i, r] : posted) {
      if (t.ReceivedBytes(r) != out[i].size() || !Matches(in[i], i, out[i].size())) {
        return Internal("message {} arrived wrong ({} bytes)", i, t.ReceivedBytes(r));
      }
    }
    return Status::Ok();
  });
  EXPECT_TRUE(st[0].ok()) << st[0].ToString();
  EXPECT_TRUE(st[1].ok()) << st[1].ToString();
}

TEST_F(ShmTransportTest, UnexpectedMessagesAreBufferedUntilReceived) {
  StartAll(2, ShmOptions{.ring_bytes = 64 << 10});
  // Sends that fit in the ring complete without the receiver doing anything.
  uint32_t a = 11, b = 22, c = 33;
  auto s1 = T(0).PostSend(1, 1, &a, 4);
  auto s2 = T(0).PostSend(1, 2, &b, 4);
  auto s3 = T(0).PostSend(1, 1, &c, 4);
  ASSERT_TRUE(s1.ok() && s2.ok() && s3.ok());
  ASSERT_TRUE(T(0).WaitAll({{*s1, *s2, *s3}}, Soon()).ok());
  // Tag 2 first: both tag-1 messages before it must be buffered, then matched in order.
  uint32_t rb = 0, ra = 0, rc = 0;
  auto r2 = T(1).PostRecv(0, 2, &rb, 4);
  ASSERT_TRUE(r2.ok());
  ASSERT_TRUE(T(1).WaitAll({{*r2}}, Soon()).ok());
  auto r1 = T(1).PostRecv(0, 1, &ra, 4);
  auto r3 = T(1).PostRecv(0, 1, &rc, 4);
  ASSERT_TRUE(r1.ok() && r3.ok());
  ASSERT_TRUE(T(1).WaitAll({{*r1, *r3}}, Soon()).ok());
  EXPECT_EQ(ra, 11u);
  EXPECT_EQ(rb, 22u);
  EXPECT_EQ(rc, 33u);

  // A message larger than the ring, sent before one its receiver waits for first.
  std::vector<char> big(1 << 20), big_in(1 << 20);
  Fill(big, 5);
  uint32_t small = 7, small_in = 0;
  auto st = RunRanks([&](Transport& t) -> Status {
    if (t.rank() == 0) {
      RY_ASSIGN_OR_RETURN(Request x, t.PostSend(1, 10, big.data(), big.size()));
      RY_ASSIGN_OR_RETURN(Request y, t.PostSend(1, 11, &small, 4));
      return t.WaitAll({{x, y}}, Soon());
    }
    RY_ASSIGN_OR_RETURN(Request y, t.PostRecv(0, 11, &small_in, 4));
    RY_RETURN_IF_ERROR(t.WaitAll({{y}}, Soon()));
    RY_ASSIGN_OR_RETURN(Request x, t.PostRecv(0, 10, big_in.data(), big_in.size()));
    return t.WaitAll({{x}}, Soon());
  });
  EXPECT_TRUE(st[0].ok()) << st[0].ToString();
  EXPECT_TRUE(st[1].ok()) << st[1].ToString();
  EXPECT_EQ(small_in, 7u);
  EXPECT_TRUE(Matches(big_in, 5, big.size()));
}

TEST_F(ShmTransportTest, SizesAroundTheRingAndLargeMessages) {
  constexpr size_t kRing = 256 << 10;
  StartAll(2, ShmOptions{.ring_bytes = kRing});
  const std::vector<size_t> sizes = {0, 1, 7, 64, kRing - 1, kRing, kRing + 1, (64 << 20) + 3};
  std::vector<std::vector<char>> out[2], in[2];
  for (int r = 0; r < 2; ++r) {
    for (size_t i = 0; i < sizes.size(); ++i) {
      out[r].emplace_back(sizes[i]);
      Fill(out[r].back(), i + 100 * r);
      in[r].emplace_back(sizes[i] + 16);
    }
  }
  auto st = RunRanks([&](Transport& t) -> Status {
    int me = t.rank(), other = 1 - me;
    std::vector<Request> reqs, recvs;
    for (size_t i = 0; i < sizes.size(); ++i) {
      RY_ASSIGN_OR_RETURN(Request s, t.PostSend(other, i, out[me][i].data(), sizes[i]));
      RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(other, i, in[me][i].data(), in[me][i].size()));
      reqs.push_back(s);
      reqs.push_back(r);
      recvs.push_back(r);
    }
    RY_RETURN_IF_ERROR(t.WaitAll(reqs, Soon()));
    for (size_t i = 0; i < sizes.size(); ++i) {
      if (t.ReceivedBytes(recvs[i]) != sizes[i]) {
        return Internal("size {}: received {} bytes", sizes[i], t.ReceivedBytes(recvs[i]));
      }
      if (!Matches(in[me][i], i + 100 * other, sizes[i])) {
        return Internal("size {}: contents differ", sizes[i]);
      }
    }
    return Status::Ok();
  });
  EXPECT_TRUE(st[0].ok()) << st[0].ToString();
  EXPECT_TRUE(st[1].ok()) << st[1].ToString();
}

// PostRecvConsume hands over whole units in order, joining a unit that the ring's end splits
// (a 12-byte unit cannot line up with a 16 KiB ring), from the ring as from the buffer of a
// message that arrived before its receive.
TEST_F(ShmTransportTest, ConsumingReceiveGetsWholeUnitsInOrder) {
  StartAll(2, ShmOptions{.ring_bytes = 16 << 10});
  constexpr size_t kUnit = 12;
  std::vector<char> streamed((100 << 10) + 4), buffered((1 << 20) + 4);
  Fill(streamed, 1);
  Fill(buffered, 2);
  uint32_t marker = 9, marker_in = 0;
  struct Got {
    std::vector<char> bytes;
    size_t calls = 0;
    std::string error;
  } got[2];
  auto consumer = [](Got& g, size_t total) {
    return [&g, total](size_t at, const char* data, size_t n) {
      ++g.calls;
      if (at != g.bytes.size()) g.error = fmt::format("offset {} after {}", at, g.bytes.size());
      if (n % kUnit != 0 && at + n != total) g.error = fmt::format("{} bytes at {}", n, at);
      g.bytes.insert(g.bytes.end(), data, data + n);
    };
  };
  auto st = RunRanks([&](Transport& t) -> Status {
    if (t.rank() == 0) {
      RY_ASSIGN_OR_RETURN(Request a, t.PostSend(1, 2, streamed.data(), streamed.size()));
      RY_ASSIGN_OR_RETURN(Request b, t.PostSend(1, 3, buffered.data(), buffered.size()));
      RY_ASSIGN_OR_RETURN(Request c, t.PostSend(1, 4, &marker, 4));
      return t.WaitAll({{a, b, c}}, Soon());
    }
    ConsumingReceiver* consuming = t.consuming_receiver();
    if (consuming == nullptr) return Internal("shm must support consuming receives");
    RY_ASSIGN_OR_RETURN(Request a, consuming->PostRecvConsume(0, 2, streamed.size(), kUnit,
                                                              consumer(got[0], streamed.size())));
    RY_RETURN_IF_ERROR(t.WaitAll({{a}}, Soon()));
    // Tag 3 arrives whole into the unexpected buffer before the marker can be read.
    RY_ASSIGN_OR_RETURN(Request c, t.PostRecv(0, 4, &marker_in, 4));
    RY_RETURN_IF_ERROR(t.WaitAll({{c}}, Soon()));
    RY_ASSIGN_OR_RETURN(Request b, consuming->PostRecvConsume(0, 3, buffered.size(), kUnit,
                                                              consumer(got[1], buffered.size())));
    RY_RETURN_IF_ERROR(t.WaitAll({{b}}, Soon()));
    if (t.ReceivedBytes(b) != buffered.size()) return Internal("tag 3: wrong length");
    return Status::Ok();
  });
  ASSERT_TRUE(st[0].ok()) << st[0].ToString();
  ASSERT_TRUE(st[1].ok()) << st[1].ToString();
  EXPECT_EQ(marker_in, 9u);
  EXPECT_EQ(got[0].error, "");
  EXPECT_EQ(got[0].bytes, streamed);
  EXPECT_GT(got[0].calls, 2u);  // streamed through the ring in several runs
  EXPECT_EQ(got[1].error, "");
  EXPECT_EQ(got[1].bytes, buffered);
  // A consumer needs a unit of 1 to 16 bytes.
  EXPECT_EQ(
      T(0).consuming_receiver()->PostRecvConsume(1, 5, 8, 0, consumer(got[0], 8)).status().code(),
      StatusCode::kInvalidArgument);
}

TEST_F(ShmTransportTest, LongerMessageThanPostedIsDataLossNamingPeerTagAndLengths) {
  StartAll(2);
  std::vector<char> out(100, 'x'), in(100);
  // Shorter than posted: fine, the length is reported.
  auto s = T(0).PostSend(1, 7, out.data(), 40);
  auto r = T(1).PostRecv(0, 7, in.data(), 100);
  ASSERT_TRUE(s.ok() && r.ok());
  ASSERT_TRUE(T(0).WaitAll({{*s}}, Soon()).ok());
  ASSERT_TRUE(T(1).WaitAll({{*r}}, Soon()).ok());
  EXPECT_EQ(T(1).ReceivedBytes(*r), 40u);
  // Longer than posted.
  s = T(0).PostSend(1, 7, out.data(), 100);
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(T(0).WaitAll({{*s}}, Soon()).ok());
  r = T(1).PostRecv(0, 7, in.data(), 50);
  ASSERT_TRUE(r.ok());
  Status st = T(1).WaitAll({{*r}}, Soon());
  EXPECT_EQ(st.code(), StatusCode::kDataLoss) << st.ToString();
  EXPECT_NE(st.message().find("rank 0 (testhost pid"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("tag 0x7"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("100 bytes"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("holds 50"), std::string::npos) << st.message();
  // The transport is unusable afterwards, with the same error.
  auto again = T(1).PostRecv(0, 8, in.data(), 50);
  EXPECT_EQ(again.status(), st);
}

TEST_F(ShmTransportTest, DataLossWhenReceivePostedBeforeArrival) {
  StartAll(2);
  std::vector<char> out(100, 'x'), in(100);
  auto st = RunRanks([&](Transport& t) -> Status {
    if (t.rank() == 0) {
      RY_ASSIGN_OR_RETURN(Request s, t.PostSend(1, 3, out.data(), 100));
      return t.WaitAll({{s}}, Soon());
    }
    RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(0, 3, in.data(), 99));
    return t.WaitAll({{r}}, Soon());
  });
  EXPECT_TRUE(st[0].ok()) << st[0].ToString();
  EXPECT_EQ(st[1].code(), StatusCode::kDataLoss) << st[1].ToString();
  EXPECT_NE(st[1].message().find("holds 99"), std::string::npos) << st[1].message();
}

TEST_F(ShmTransportTest, DeadlineNamesThePendingPeerAndFailsTheTransport) {
  StartAll(3);
  uint64_t v = 0;
  auto r = T(2).PostRecv(1, 9, &v, sizeof(v));
  ASSERT_TRUE(r.ok());
  Status st = T(2).WaitAll({{*r}}, Deadline::After(100ms));
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
  EXPECT_NE(st.message().find("rank 1 (testhost pid"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("tag 0x9"), std::string::npos) << st.message();
  // Failed from here on (transport.h), with the same error, also after an Abort.
  EXPECT_EQ(T(2).PostRecv(1, 9, &v, sizeof(v)).status(), st);
  EXPECT_EQ(T(2).PostSend(0, 9, &v, sizeof(v)).status(), st);
  EXPECT_EQ(T(2).WaitAll({}, Soon()), st);
  T(2).Abort("giving up", Soon());
  EXPECT_EQ(T(2).PostSend(0, 9, &v, sizeof(v)).status(), st);
}

// Each rank writes its own window; a peer sees those bytes once the writer's counter is
// published; a rank that never gets to a step is named at the deadline.
TEST_F(ShmTransportTest, WindowIsSharedAndOrderedByCounters) {
  StartAll(3, ShmOptions{.window_bytes = 64 << 10});
  ASSERT_NE(T(0).shared_window(), nullptr);
  ASSERT_EQ(T(0).shared_window()->WindowBytes(), size_t{64} << 10);
  EXPECT_EQ(T(1).shared_window()->Window(1), T(1).shared_window()->Window(1));
  EXPECT_EQ(T(0).shared_window()->Window(3), nullptr);
  auto st = RunRanks([](Transport& t) -> Status {
    SharedWindow* w = t.shared_window();
    if (w == nullptr) return Internal("rank {} has no window", t.rank());
    for (uint64_t step = 1; step <= 50; ++step) {
      // Peers read the previous step's bytes before this rank overwrites them.
      RY_RETURN_IF_ERROR(w->WaitWindow(2 * step - 2, Soon()));
      std::memset(w->Window(t.rank()), static_cast<int>(step * 3 + t.rank()), 64 << 10);
      w->PublishWindow(2 * step - 1);
      RY_RETURN_IF_ERROR(w->WaitWindow(2 * step - 1, Soon()));
      for (int r = 0; r < t.size(); ++r) {
        const char* win = w->Window(r);
        for (size_t i = 0; i < (64 << 10); i += 4093) {
          if (win[i] != static_cast<char>(step * 3 + r)) {
            return Internal("step {}: rank {}'s window byte {} is {}", step, r, i, int{win[i]});
          }
        }
      }
      w->PublishWindow(2 * step);
    }
    return w->WindowCounter() == 100 ? Status::Ok() : Internal("counter {}", w->WindowCounter());
  });
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].ToString();
  T(0).shared_window()->PublishWindow(101);
  T(1).shared_window()->PublishWindow(101);
  Status late = T(0).shared_window()->WaitWindow(101, Deadline::After(100ms));
  EXPECT_EQ(late.code(), StatusCode::kDeadlineExceeded) << late.ToString();
  EXPECT_NE(late.message().find("rank 2 (testhost pid"), std::string::npos) << late.message();
  EXPECT_NE(late.message().find("at step 100"), std::string::npos) << late.message();
}

TEST_F(ShmTransportTest, NoWindowWhenNotAskedFor) {
  StartAll(2, ShmOptions{.window_bytes = 0});
  EXPECT_EQ(T(0).shared_window(), nullptr);
  EXPECT_EQ(T(1).shared_window(), nullptr);
}

TEST_F(ShmTransportTest, AbortReachesEveryPeerWithTheReason) {
  StartAll(3);
  std::vector<Status> st(3);
  std::vector<std::thread> threads;
  for (int r = 1; r < 3; ++r) {
    threads.emplace_back([&, r] {
      uint64_t v;
      auto req = T(r).PostRecv(0, 1, &v, sizeof(v));
      st[r] = req.ok() ? T(r).WaitAll({{*req}}, Soon()) : req.status();
    });
  }
  T(0).Abort("disk full on node7", Soon());
  for (auto& t : threads) t.join();
  for (int r = 1; r < 3; ++r) {
    EXPECT_EQ(st[r].code(), StatusCode::kAborted) << st[r].ToString();
    EXPECT_NE(st[r].message().find("rank 0 (testhost pid"), std::string::npos) << st[r].message();
    EXPECT_NE(st[r].message().find("disk full on node7"), std::string::npos) << st[r].message();
  }
  uint64_t v = 0;
  EXPECT_EQ(T(0).PostSend(1, 1, &v, 8).status().code(), StatusCode::kAborted);
  EXPECT_EQ(T(1).PostSend(0, 1, &v, 8).status().code(), StatusCode::kAborted);
}

TEST_F(ShmTransportTest, AbortFromAnotherThreadWakesOwnWaitAll) {
  StartAll(2, ShmOptions{.spin = 0us});
  uint64_t v;
  auto req = T(1).PostRecv(0, 1, &v, sizeof(v));
  ASSERT_TRUE(req.ok());
  std::thread aborter([&] { T(1).Abort("watchdog fired", Soon()); });
  Status st = T(1).WaitAll({{*req}}, Soon());
  aborter.join();
  EXPECT_EQ(st.code(), StatusCode::kAborted) << st.ToString();
  EXPECT_NE(st.message().find("watchdog fired"), std::string::npos) << st.message();
}

TEST_F(ShmTransportTest, ProbeReportsActivityOfAWaitingPeerAndSilenceOfAnIdleOne) {
  StartAll(3);
  uint64_t v = 0, out = 1;
  Status waited;
  std::thread waiter([&] {
    T(1).SetActivity("allreduce #57 waiting for rank 0");
    auto r = T(1).PostRecv(0, 4, &v, sizeof(v));
    waited = r.ok() ? T(1).WaitAll({{*r}}, Soon()) : r.status();
  });
  T(0).SetActivity("probing");
  std::vector<int> ranks = {1, 0};
  auto res = T(0).Probe(ranks, Soon());
  ASSERT_EQ(res.size(), 2u);
  EXPECT_EQ(res[0].rank, 1);
  EXPECT_EQ(res[0].state, ProbeResult::State::kAlive) << res[0].detail;
  EXPECT_EQ(res[0].activity, "allreduce #57 waiting for rank 0");
  EXPECT_EQ(res[1].state, ProbeResult::State::kAlive);
  EXPECT_EQ(res[1].activity, "probing");
  auto s = T(0).PostSend(1, 4, &out, sizeof(out));
  ASSERT_TRUE(s.ok());
  ASSERT_TRUE(T(0).WaitAll({{*s}}, Soon()).ok());
  waiter.join();
  EXPECT_TRUE(waited.ok()) << waited.ToString();
  // Rank 2 is in no communication call: no answer, but not dead either.
  std::vector<int> idle = {2};
  res = T(0).Probe(idle, Deadline::After(100ms));
  EXPECT_EQ(res[0].state, ProbeResult::State::kUnresponsive);
  EXPECT_NE(res[0].detail.find("not inside a communication call"), std::string::npos)
      << res[0].detail;
}

TEST_F(ShmTransportTest, AllToAllEightRanks) {
  constexpr int kRanks = 8;
  StartAll(kRanks, ShmOptions{.ring_bytes = 64 << 10});
  auto size_of = [](int from, int to) { return size_t{100000} + 7 * from + 13 * to; };
  auto st = RunRanks([&](Transport& t) -> Status {
    int me = t.rank();
    std::vector<std::vector<char>> out(kRanks), in(kRanks);
    std::vector<Request> reqs;
    for (int p = 0; p < kRanks; ++p) {
      out[p].resize(size_of(me, p));
      Fill(out[p], me * 100 + p);
      in[p].resize(size_of(p, me));
      RY_ASSIGN_OR_RETURN(Request s, t.PostSend(p, 77, out[p].data(), out[p].size()));
      RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(p, 77, in[p].data(), in[p].size()));
      reqs.push_back(s);
      reqs.push_back(r);
    }
    RY_RETURN_IF_ERROR(t.WaitAll(reqs, Soon()));
    for (int p = 0; p < kRanks; ++p) {
      if (!Matches(in[p], p * 100 + me, in[p].size())) return Internal("from {} differs", p);
    }
    return Status::Ok();
  });
  for (int r = 0; r < kRanks; ++r) EXPECT_TRUE(st[r].ok()) << r << ": " << st[r].ToString();
}

TEST_F(ShmTransportTest, StartNamesRanksThatNeverPublished) {
  store_ = NewInMemoryStore();
  auto t = NewShmTransport(Options(0, 3, store_.get()));
  ASSERT_TRUE(t.ok());
  Status st = (*t)->Start(Deadline::After(50ms));
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
  EXPECT_NE(st.message().find("ranks 1,2 did not publish"), std::string::npos) << st.message();
}

TEST_F(ShmTransportTest, WrongSecretIsRefused) {
  store_ = NewInMemoryStore();
  for (int r = 0; r < 2; ++r) {
    TransportOptions o = Options(r, 2, store_.get());
    o.secret = r == 0 ? "secret-a" : "secret-b";
    auto t = NewShmTransport(o);
    ASSERT_TRUE(t.ok());
    transports_.push_back(std::move(*t));
  }
  auto st = RunRanks([](Transport& t) { return t.Start(Deadline::After(5s)); });
  for (int r = 0; r < 2; ++r) {
    EXPECT_EQ(st[r].code(), StatusCode::kPermissionDenied) << st[r].ToString();
    EXPECT_NE(st[r].message().find("job secret"), std::string::npos) << st[r].message();
  }
}

TEST_F(ShmTransportTest, InvalidArguments) {
  store_ = NewInMemoryStore();
  EXPECT_EQ(NewShmTransport(Options(2, 2, store_.get())).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(NewShmTransport(Options(0, 2, nullptr)).status().code(), StatusCode::kInvalidArgument);
  StartAll(2);
  uint64_t v;
  EXPECT_EQ(T(0).PostSend(5, 1, &v, 8).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(T(0).WaitAll({{Request{12345}}}, Soon()).code(), StatusCode::kInvalidArgument);
  // To self works through the same matching.
  uint64_t out = 9, in = 0;
  auto r = T(0).PostRecv(0, 1, &in, 8);
  auto s = T(0).PostSend(0, 1, &out, 8);
  ASSERT_TRUE(r.ok() && s.ok());
  ASSERT_TRUE(T(0).WaitAll({{*s, *r}}, Soon()).ok());
  EXPECT_EQ(in, 9u);
}

// ---- Ranks in separate processes, meeting through files --------------------------------

class ShmForkTest : public ShmTransportTest {
 protected:
  void SetUp() override {
    ShmTransportTest::SetUp();
    ASSERT_FALSE(dir_.path().empty());
    auto store = OpenFileStore(dir_.path());  // files: the forked ranks share no memory
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    file_store_ = std::move(*store);
  }
  std::unique_ptr<Transport> Make(int rank, Store* store) {
    auto t = NewShmTransport(Options(rank, 2, store), ShmOptions{.ring_bytes = 1 << 20});
    return t.ok() ? std::move(*t) : nullptr;
  }
  base::ScopedTempDir dir_{"shm"};
  std::unique_ptr<Store> file_store_;
};

TEST_F(ShmForkTest, PingPongBetweenProcesses) {
  Store& store = *file_store_;
  Child child([&] {
    auto t = Make(1, &store);
    if (!t || !t->Start(Soon()).ok()) return 10;
    std::vector<char> buf(3 << 20);
    auto r = t->PostRecv(0, 1, buf.data(), buf.size());
    if (!r.ok() || !t->WaitAll({{*r}}, Soon()).ok()) return 11;
    auto s = t->PostSend(0, 2, buf.data(), t->ReceivedBytes(*r));
    if (!s.ok() || !t->WaitAll({{*s}}, Soon()).ok()) return 12;
    return 0;
  });
  auto t = Make(0, &store);
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->Start(Soon()).ok());
  EXPECT_EQ(t->peer(1).pid, child.pid());
  std::vector<char> out((3 << 20) - 5), in(3 << 20);
  Fill(out, 3);
  auto s = t->PostSend(1, 1, out.data(), out.size());
  auto r = t->PostRecv(1, 2, in.data(), in.size());
  ASSERT_TRUE(s.ok() && r.ok());
  Status st = t->WaitAll({{*s, *r}}, Soon());
  ASSERT_TRUE(st.ok()) << st.ToString();
  EXPECT_EQ(t->ReceivedBytes(*r), out.size());
  EXPECT_TRUE(Matches(in, 3, out.size()));
  EXPECT_EQ(child.Wait(), 0);
}

TEST_F(ShmForkTest, PeerKilledMidTransferFailsTheWaitNamingIt) {
  Store& store = *file_store_;
  constexpr size_t kFirst = 2 << 20, kSecond = 64 << 20;
  Child child([&] {
    auto t = Make(1, &store);
    if (!t || !t->Start(Soon()).ok()) return 10;
    std::vector<char> first(kFirst), second(kSecond);
    Fill(first, 1);
    uint64_t never;
    auto a = t->PostSend(0, 1, first.data(), first.size());
    auto b = t->PostSend(0, 2, second.data(), second.size());
    auto c = t->PostRecv(0, 99, &never, sizeof(never));
    if (!a.ok() || !b.ok() || !c.ok()) return 11;
    (void)t->WaitAll({{*a, *b, *c}}, Soon());  // killed in here
    return 12;
  });
  auto t = Make(0, &store);
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->Start(Soon()).ok());
  // The first message arrives whole; the second (64 rings long) cannot have, since this rank
  // returns from WaitAll as soon as the first is in.
  std::vector<char> first(kFirst), second(kSecond);
  auto a = t->PostRecv(1, 1, first.data(), first.size());
  ASSERT_TRUE(a.ok());
  ASSERT_TRUE(t->WaitAll({{*a}}, Soon()).ok());
  EXPECT_TRUE(Matches(first, 1, kFirst));
  ASSERT_EQ(::kill(child.pid(), SIGKILL), 0);
  auto b = t->PostRecv(1, 2, second.data(), second.size());
  ASSERT_TRUE(b.ok());
  Status st = t->WaitAll({{*b}}, Deadline::After(300s));
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find(fmt::format("rank 1 (testhost pid {})", child.pid())),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("process exited"), std::string::npos) << st.message();
  EXPECT_EQ(child.Wait(), 128 + SIGKILL);
}

TEST_F(ShmForkTest, PeerKilledBeforeAWindowStepIsNamed) {
  Store& store = *file_store_;
  Child child([&] {
    auto t = Make(1, &store);
    if (!t || !t->Start(Soon()).ok()) return 10;
    SharedWindow* w = t->shared_window();
    if (w == nullptr) return 11;
    w->PublishWindow(1);
    (void)w->WaitWindow(2, Soon());  // killed in here
    return 12;
  });
  auto t = Make(0, &store);
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->Start(Soon()).ok());
  SharedWindow* w = t->shared_window();
  ASSERT_NE(w, nullptr);
  ASSERT_TRUE(w->WaitWindow(1, Soon()).ok());
  ASSERT_EQ(::kill(child.pid(), SIGKILL), 0);
  w->PublishWindow(2);
  Status st = w->WaitWindow(2, Deadline::After(300s));
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find(fmt::format("rank 1 (testhost pid {})", child.pid())),
            std::string::npos)
      << st.message();
  EXPECT_NE(st.message().find("process exited before its shared-window step 2"), std::string::npos)
      << st.message();
  EXPECT_EQ(child.Wait(), 128 + SIGKILL);
}

TEST_F(ShmForkTest, StoppedPeerIsUnresponsiveAndKilledOneDead) {
  Store& store = *file_store_;
  Child child([&] {
    auto t = Make(1, &store);
    if (!t || !t->Start(Soon()).ok()) return 10;
    t->SetActivity("child waiting for tag 99");
    uint64_t never;
    auto c = t->PostRecv(0, 99, &never, sizeof(never));
    if (!c.ok()) return 11;
    (void)t->WaitAll({{*c}}, Soon());
    return 12;
  });
  auto t = Make(0, &store);
  ASSERT_NE(t, nullptr);
  ASSERT_TRUE(t->Start(Soon()).ok());
  std::vector<int> ranks = {1};
  auto res = t->Probe(ranks, Soon());
  EXPECT_EQ(res[0].state, ProbeResult::State::kAlive) << res[0].detail;
  EXPECT_EQ(res[0].activity, "child waiting for tag 99");

  ASSERT_EQ(::kill(child.pid(), SIGSTOP), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(child.pid(), &status, WUNTRACED), child.pid());
  ASSERT_TRUE(WIFSTOPPED(status));
  res = t->Probe(ranks, Soon());
  EXPECT_EQ(res[0].state, ProbeResult::State::kUnresponsive);
  EXPECT_EQ(res[0].detail, "process is stopped (SIGSTOP)");

  ASSERT_EQ(::kill(child.pid(), SIGKILL), 0);
  res = t->Probe(ranks, Soon());
  EXPECT_EQ(res[0].state, ProbeResult::State::kDead);
  EXPECT_EQ(res[0].detail, "process exited");
  EXPECT_EQ(child.Wait(), 128 + SIGKILL);
}

}  // namespace
}  // namespace railyard::net
