// The transport contract (transport.h), checked on every backend: tcp, shm and ofi (over
// tcp;ofi_rxm on lo; skipped with the reason where the build or the host has no libfabric
// provider for it). Ranks are threads of this process on an in-memory store, except where a
// rank must die: there it is a second process (this binary again) meeting through files.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <regex>
#include <string>
#include <vector>

#include "railyard/base/subprocess.h"
#include "railyard/base/temp_dir_testing.h"
#include "railyard/net/select.h"
#include "railyard/net/store/file_store.h"
#include "railyard/net/transport_testing.h"

namespace railyard::net {
namespace {

using base::Deadline;
using namespace std::chrono_literals;

Deadline Soon() { return Deadline::After(60s); }

constexpr char kChildEnv[] = "RY_CONFORMANCE_CHILD";

Result<std::unique_ptr<Transport>> MakeTransport(const std::string& backend,
                                                 const TransportOptions& options) {
  BackendOptions b;
  b.ofi.provider = "tcp;ofi_rxm";
  b.ofi.domain = "lo";
  return NewTransport(backend, options, b);
}

// Why the ofi case cannot run here; empty when it can.
std::string OfiUnavailable() {
#ifndef RAILYARD_WITH_OFI
  return "built without RAILYARD_WITH_OFI (libfabric headers not found at configure time)";
#else
  auto providers = ListOfiProviders();
  if (!providers.ok()) return "libfabric cannot be used: " + providers.status().ToString();
  for (const auto& p : *providers) {
    if (p == "tcp;ofi_rxm") return "";
  }
  return fmt::format("libfabric offers no tcp;ofi_rxm provider here (it offers: {})",
                     fmt::join(*providers, ", "));
#endif
}

std::vector<char> Pattern(size_t n, uint64_t seed) {
  std::vector<char> v(n);
  uint64_t x = seed * 0x9e3779b97f4a7c15ULL + 1;
  for (auto& b : v) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    b = static_cast<char>(x);
  }
  return v;
}

// `n` as a whole number in `text` ("10" is not found in "100").
bool HasNumber(const std::string& text, size_t n) {
  return std::regex_search(text, std::regex(fmt::format("(^|[^0-9]){}([^0-9]|$)", n)));
}

std::string Who(Transport& t, int rank) { return DescribePeer(t.peer(rank)); }

class TransportConformance : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (GetParam() == "ofi") {
      std::string why = OfiUnavailable();
      if (!why.empty()) GTEST_SKIP() << "ofi: " << why;
    }
  }

  // `n` started ranks of one job, each a thread's transport on an in-memory store.
  TransportGroup Start(int n) {
    static int groups = 0;
    TransportOptions base;
    base.host = "testhost";
    base.key_prefix = fmt::format("conformance/{}/{}", ::getpid(), groups++);
    const std::string backend = GetParam();
    return StartTransportGroupForTest(
        [&](const TransportOptions& o) { return MakeTransport(backend, o); }, n, base);
  }
};

void ExpectAllOk(const std::vector<Status>& st) {
  for (size_t r = 0; r < st.size(); ++r) {
    EXPECT_TRUE(st[r].ok()) << "rank " << r << ": " << st[r].ToString();
  }
}

// Ranks 1 and 2 each send rank 0 forty messages alternating between two tags, short and
// longer than 4 KiB (ofi's clear-to-send threshold); rank 0 posts every tag-2 receive
// before any tag-1 one. Each (peer, tag) must arrive in the order it was sent.
TEST_P(TransportConformance, MessagesOfOnePeerAndTagArriveInOrder) {
  TransportGroup g = Start(3);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  constexpr int kCount = 40;
  constexpr size_t kLong = 8 << 10;
  auto size_of = [](int i) { return i % 4 == 3 ? kLong : size_t{16} + i; };
  auto message = [&](int sender, int i) { return Pattern(size_of(i), sender * 1000 + i); };
  auto st = RunRanksForTest(g, [&](int rank, Transport& t) -> Status {
    if (rank != 0) {
      std::vector<std::vector<char>> out;
      std::vector<Request> reqs;
      for (int i = 0; i < kCount; ++i) out.push_back(message(rank, i));
      for (int i = 0; i < kCount; ++i) {
        RY_ASSIGN_OR_RETURN(Request s, t.PostSend(0, 1 + i % 2, out[i].data(), out[i].size()));
        reqs.push_back(s);
      }
      return t.WaitAll(reqs, Soon());
    }
    std::vector<std::vector<char>> in(3 * kCount, std::vector<char>(kLong));
    std::vector<Request> reqs(3 * kCount);
    for (int sender = 1; sender <= 2; ++sender) {
      for (Tag tag : {Tag{2}, Tag{1}}) {
        for (int i = static_cast<int>(tag) - 1; i < kCount; i += 2) {
          int slot = sender * kCount + i;
          RY_ASSIGN_OR_RETURN(reqs[slot], t.PostRecv(sender, tag, in[slot].data(), kLong));
        }
      }
    }
    std::vector<Request> wait(reqs.begin() + kCount, reqs.end());
    RY_RETURN_IF_ERROR(t.WaitAll(wait, Soon()));
    for (int sender = 1; sender <= 2; ++sender) {
      for (int i = 0; i < kCount; ++i) {
        int slot = sender * kCount + i;
        auto expect = message(sender, i);
        if (t.ReceivedBytes(reqs[slot]) != expect.size() ||
            !std::equal(expect.begin(), expect.end(), in[slot].begin())) {
          return Internal("receive {} of tag {} from rank {} did not get message {} ({} bytes)",
                          i / 2, 1 + i % 2, sender, i, t.ReceivedBytes(reqs[slot]));
        }
      }
    }
    return Status::Ok();
  });
  ExpectAllOk(st);
}

// A receive takes the oldest unmatched message of its (peer, tag), whether the messages came
// before it (they wait unexpected) or after it.
TEST_P(TransportConformance, ReceiveMatchesTheOldestUnmatchedMessage) {
  TransportGroup g = Start(2);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  const auto long_a = Pattern(64 << 10, 1), long_b = Pattern(64 << 10, 2);
  auto st = RunRanksForTest(g, [&](int rank, Transport& t) -> Status {
    uint8_t marker = 1;
    if (rank == 0) {
      // Messages first; the marker (another tag) tells rank 1 they were sent.
      const uint64_t v[3] = {1, 2, 3};
      std::vector<Request> reqs;
      for (const uint64_t& x : v) {
        RY_ASSIGN_OR_RETURN(Request s, t.PostSend(1, 5, &x, sizeof x));
        reqs.push_back(s);
      }
      for (const auto* m : {&long_a, &long_b}) {
        RY_ASSIGN_OR_RETURN(Request s, t.PostSend(1, 8, m->data(), m->size()));
        reqs.push_back(s);
      }
      RY_ASSIGN_OR_RETURN(Request m, t.PostSend(1, 4, &marker, 1));
      reqs.push_back(m);
      // Then the other way round: rank 1's receives are posted before these are sent.
      RY_ASSIGN_OR_RETURN(Request posted, t.PostRecv(1, 7, &marker, 1));
      RY_RETURN_IF_ERROR(t.WaitAll({&posted, 1}, Soon()));
      const uint64_t w[2] = {10, 20};
      for (const uint64_t& x : w) {
        RY_ASSIGN_OR_RETURN(Request s, t.PostSend(1, 6, &x, sizeof x));
        reqs.push_back(s);
      }
      return t.WaitAll(reqs, Soon());
    }
    uint64_t a = 0, b = 0;
    RY_ASSIGN_OR_RETURN(Request ra, t.PostRecv(0, 6, &a, sizeof a));
    RY_ASSIGN_OR_RETURN(Request rb, t.PostRecv(0, 6, &b, sizeof b));
    RY_ASSIGN_OR_RETURN(Request m, t.PostRecv(0, 4, &marker, 1));
    RY_RETURN_IF_ERROR(t.WaitAll({&m, 1}, Soon()));
    uint64_t x = 0, y = 0, z = 0;
    RY_ASSIGN_OR_RETURN(Request rx, t.PostRecv(0, 5, &x, sizeof x));
    RY_RETURN_IF_ERROR(t.WaitAll({&rx, 1}, Soon()));
    RY_ASSIGN_OR_RETURN(Request ry, t.PostRecv(0, 5, &y, sizeof y));
    RY_ASSIGN_OR_RETURN(Request rz, t.PostRecv(0, 5, &z, sizeof z));
    Request yz[] = {ry, rz};
    RY_RETURN_IF_ERROR(t.WaitAll(yz, Soon()));
    if (x != 1 || y != 2 || z != 3) return Internal("tag 5 matched {} {} {}", x, y, z);
    std::vector<char> first(64 << 10), second(64 << 10);
    RY_ASSIGN_OR_RETURN(Request r1, t.PostRecv(0, 8, first.data(), first.size()));
    RY_RETURN_IF_ERROR(t.WaitAll({&r1, 1}, Soon()));
    RY_ASSIGN_OR_RETURN(Request r2, t.PostRecv(0, 8, second.data(), second.size()));
    RY_RETURN_IF_ERROR(t.WaitAll({&r2, 1}, Soon()));
    if (first != long_a || second != long_b) return Internal("tag 8 matched out of order");
    RY_ASSIGN_OR_RETURN(Request go, t.PostSend(0, 7, &marker, 1));
    Request rest[] = {go, ra, rb};
    RY_RETURN_IF_ERROR(t.WaitAll(rest, Soon()));
    if (a != 10 || b != 20) return Internal("tag 6 matched {} {}", a, b);
    return Status::Ok();
  });
  ExpectAllOk(st);
}

TEST_P(TransportConformance, ShorterMessageCompletesWithItsLength) {
  TransportGroup g = Start(2);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  const auto small = Pattern(5, 3), large = Pattern(100 << 10, 4);
  auto st = RunRanksForTest(g, [&](int rank, Transport& t) -> Status {
    if (rank == 0) {
      RY_ASSIGN_OR_RETURN(Request a, t.PostSend(1, 1, small.data(), small.size()));
      RY_ASSIGN_OR_RETURN(Request b, t.PostSend(1, 2, large.data(), large.size()));
      Request both[] = {a, b};
      return t.WaitAll(both, Soon());
    }
    std::vector<char> in_small(64, 'z'), in_large(1 << 20, 'z');
    RY_ASSIGN_OR_RETURN(Request a, t.PostRecv(0, 1, in_small.data(), in_small.size()));
    RY_ASSIGN_OR_RETURN(Request b, t.PostRecv(0, 2, in_large.data(), in_large.size()));
    Request both[] = {a, b};
    RY_RETURN_IF_ERROR(t.WaitAll(both, Soon()));
    if (t.ReceivedBytes(a) != small.size() || t.ReceivedBytes(b) != large.size()) {
      return Internal("received {} and {} bytes", t.ReceivedBytes(a), t.ReceivedBytes(b));
    }
    if (!std::equal(small.begin(), small.end(), in_small.begin()) || in_small[5] != 'z' ||
        !std::equal(large.begin(), large.end(), in_large.begin()) ||
        in_large[large.size()] != 'z') {
      return Internal("contents corrupted or overrun");
    }
    return Status::Ok();
  });
  ExpectAllOk(st);
}

// A message longer than its receive fails the receiver's wait at once (the deadline is a
// minute away) with DATA_LOSS naming the sender, the tag and both lengths; the transport
// stays failed. Short and long messages (ofi holds those over 4 KiB for a clear-to-send),
// receive posted before or after the send.
TEST_P(TransportConformance, LongerMessageIsDataLossAtOnce) {
  struct Case {
    size_t message, receive;
  };
  for (Case c : {Case{100, 10}, Case{64 << 10, 10}, Case{64 << 10, 16 << 10},
                 Case{(1 << 20) + 1, 1 << 20}}) {
    for (bool receive_first : {true, false}) {
      SCOPED_TRACE(fmt::format("{}-byte message, {}-byte receive, {} first", c.message, c.receive,
                               receive_first ? "receive" : "send"));
      TransportGroup g = Start(2);
      ASSERT_TRUE(g.status.ok()) << g.status.ToString();
      Status recv_status, again, send_status;
      std::string sender;
      auto st = RunRanksForTest(g, [&](int rank, Transport& t) -> Status {
        if (rank == 0) {
          auto out = Pattern(c.message, 5);
          if (receive_first) RY_RETURN_IF_ERROR(g.store->Get("posted", Soon()).status());
          RY_ASSIGN_OR_RETURN(Request s, t.PostSend(1, 0x5, out.data(), out.size()));
          RY_RETURN_IF_ERROR(g.store->Set("sent", "1", Soon()));
          send_status = t.WaitAll({&s, 1}, Soon());
          return Status::Ok();
        }
        sender = Who(t, 0);
        std::vector<char> in(c.receive);
        if (!receive_first) RY_RETURN_IF_ERROR(g.store->Get("sent", Soon()).status());
        RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(0, 0x5, in.data(), in.size()));
        if (receive_first) RY_RETURN_IF_ERROR(g.store->Set("posted", "1", Soon()));
        recv_status = t.WaitAll({&r, 1}, Soon());
        again = t.PostRecv(0, 0x5, in.data(), in.size()).status();
        // As the communicator does after any error: the sender, perhaps still sending into
        // a buffer this rank no longer drains, learns at once.
        t.Abort("the receive failed", Soon());
        return Status::Ok();
      });
      ExpectAllOk(st);
      const std::string& m = recv_status.message();
      EXPECT_EQ(recv_status.code(), StatusCode::kDataLoss) << recv_status.ToString();
      EXPECT_NE(m.find(sender), std::string::npos) << m;
      EXPECT_NE(m.find("tag 0x5"), std::string::npos) << m;
      EXPECT_TRUE(HasNumber(m, c.message)) << "message length not named: " << m;
      EXPECT_TRUE(HasNumber(m, c.receive)) << "receive length not named: " << m;
      EXPECT_EQ(again, recv_status);
      // The sender may finish (its bytes left), fail too, or learn of the abort; it is not
      // left waiting.
      EXPECT_NE(send_status.code(), StatusCode::kDeadlineExceeded) << send_status.ToString();
    }
  }
}

TEST_P(TransportConformance, ZeroSizeMessagesAreMessages) {
  TransportGroup g = Start(2);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  auto st = RunRanksForTest(g, [&](int rank, Transport& t) -> Status {
    const int peer = 1 - rank;
    char out = static_cast<char>('a' + rank), in[3][16];
    std::vector<Request> reqs;
    // zero bytes, one byte, zero bytes, all with one tag: order and lengths must hold.
    for (size_t n : {0, 1, 0}) {
      RY_ASSIGN_OR_RETURN(Request s, t.PostSend(peer, 3, &out, n));
      reqs.push_back(s);
    }
    std::vector<Request> recvs;
    for (size_t i = 0; i < 3; ++i) {
      RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(peer, 3, in[i], i == 0 ? 0 : sizeof in[i]));
      recvs.push_back(r);
      reqs.push_back(r);
    }
    RY_RETURN_IF_ERROR(t.WaitAll(reqs, Soon()));
    size_t got[3] = {t.ReceivedBytes(recvs[0]), t.ReceivedBytes(recvs[1]),
                     t.ReceivedBytes(recvs[2])};
    if (got[0] != 0 || got[1] != 1 || got[2] != 0 || in[1][0] != 'a' + peer) {
      return Internal("received {}, {} and {} bytes", got[0], got[1], got[2]);
    }
    return Status::Ok();
  });
  ExpectAllOk(st);
}

// A rank's messages to itself follow the same rules: the oldest message of the tag matches
// the oldest receive, in either posting order, and one longer than its receive fails the
// wait with DATA_LOSS.
TEST_P(TransportConformance, MessagesToSelfMatchInOrderAndALongerOneIsDataLoss) {
  TransportGroup g = Start(2);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  Status too_long;
  auto st = RunRanksForTest(g, [&](int rank, Transport& t) -> Status {
    if (rank != 0) return Status::Ok();
    uint64_t out[4] = {1, 2, 3, 4}, in[4] = {};
    std::vector<Request> reqs;
    RY_ASSIGN_OR_RETURN(Request r0, t.PostRecv(0, 7, &in[0], 8));
    reqs.push_back(r0);
    for (int i = 0; i < 3; ++i) {
      RY_ASSIGN_OR_RETURN(Request s, t.PostSend(0, 7, &out[i], 8));
      reqs.push_back(s);
    }
    for (int i = 1; i < 3; ++i) {
      RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(0, 7, &in[i], 8));
      reqs.push_back(r);
    }
    RY_RETURN_IF_ERROR(t.WaitAll(reqs, Soon()));
    if (in[0] != 1 || in[1] != 2 || in[2] != 3) {
      return Internal("received {} {} {} from self", in[0], in[1], in[2]);
    }
    RY_ASSIGN_OR_RETURN(Request s, t.PostSend(0, 8, out, sizeof out));
    RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(0, 8, in, 8));
    Request both[] = {s, r};
    too_long = t.WaitAll(both, Soon());
    return Status::Ok();
  });
  ExpectAllOk(st);
  EXPECT_EQ(too_long.code(), StatusCode::kDataLoss) << too_long.ToString();
  EXPECT_TRUE(HasNumber(too_long.message(), 32)) << too_long.message();
}

// A request listed twice in one wait is waited once; one the wait does not know (already
// waited) is the caller's mistake: INVALID_ARGUMENT, and the transport goes on working.
TEST_P(TransportConformance, ARequestListedTwiceIsWaitedOnceAndAStaleOneFailsNothing) {
  TransportGroup g = Start(2);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  Status stale;
  auto st = RunRanksForTest(g, [&](int rank, Transport& t) -> Status {
    const int peer = 1 - rank;
    uint64_t out = 40 + rank, in = 0;
    for (int round = 0; round < 2; ++round) {
      RY_ASSIGN_OR_RETURN(Request s, t.PostSend(peer, 1, &out, sizeof out));
      RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(peer, 1, &in, sizeof in));
      Request twice[] = {r, s, r, s};
      RY_RETURN_IF_ERROR(t.WaitAll(twice, Soon()));
      if (in != 40u + peer || t.ReceivedBytes(r) != sizeof in) {
        return Internal("round {}: received {} ({} bytes)", round, in, t.ReceivedBytes(r));
      }
      if (round == 0 && rank == 0) stale = t.WaitAll({&r, 1}, Soon());
    }
    return Status::Ok();
  });
  ExpectAllOk(st);
  EXPECT_EQ(stale.code(), StatusCode::kInvalidArgument) << stale.ToString();
}

// A probe names what it cannot ask: a rank outside the job is dead, saying so.
TEST_P(TransportConformance, ProbeOfARankOutsideTheJobIsDead) {
  TransportGroup g = Start(2);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  const int ranks[] = {7, -1, 0};
  std::vector<ProbeResult> res = g.ranks[0]->Probe(ranks, Soon());
  ASSERT_EQ(res.size(), 3u);
  EXPECT_EQ(res[0].state, ProbeResult::State::kDead);
  EXPECT_EQ(res[0].detail, "no rank 7 in a job of 2 ranks");
  EXPECT_EQ(res[1].state, ProbeResult::State::kDead);
  EXPECT_EQ(res[2].state, ProbeResult::State::kAlive);
}

TEST_P(TransportConformance, LargeMessagesBothWaysAtOnce) {
  TransportGroup g = Start(2);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  constexpr size_t kBytes = (64 << 20) + 3;
  auto st = RunRanksForTest(g, [&](int rank, Transport& t) -> Status {
    const auto out = Pattern(kBytes, 10 + rank);
    std::vector<char> in(kBytes + 64, 'z');
    RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(1 - rank, 9, in.data(), in.size()));
    RY_ASSIGN_OR_RETURN(Request s, t.PostSend(1 - rank, 9, out.data(), out.size()));
    Request both[] = {s, r};
    RY_RETURN_IF_ERROR(t.WaitAll(both, Soon()));
    const auto expect = Pattern(kBytes, 11 - rank);
    if (t.ReceivedBytes(r) != kBytes || !std::equal(expect.begin(), expect.end(), in.begin()) ||
        in[kBytes] != 'z') {
      return Internal("64 MiB message corrupted or overrun ({} bytes)", t.ReceivedBytes(r));
    }
    return Status::Ok();
  });
  ExpectAllOk(st);
}

// Rank 1 waits for messages nobody sends. Its wait ends at the deadline naming both pending
// peers; afterwards it is failed with that error, but its Probe still sees the other ranks
// (inside their own waits) and its Abort still reaches them.
TEST_P(TransportConformance, DeadlineNamesPendingPeersThenOnlyProbeAndAbortWork) {
  TransportGroup g = Start(3);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  Status late, after_send, after_recv, after_wait, after_abort;
  std::vector<ProbeResult> probes;
  std::vector<Status> aborted(3);
  std::vector<std::string> pending(3), aborter(3);  // as rank 1, and as ranks 0 and 2 name them
  auto st = RunRanksForTest(g, [&](int rank, Transport& t) -> Status {
    uint64_t v = 0, w = 0;
    if (rank != 1) {
      aborter[rank] = Who(t, 1);
      t.SetActivity(fmt::format("rank {} waits for rank 1", rank));
      RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(1, 100, &v, sizeof v));
      aborted[rank] = t.WaitAll({&r, 1}, Soon());
      return Status::Ok();
    }
    pending[0] = Who(t, 0);
    pending[2] = Who(t, 2);
    RY_ASSIGN_OR_RETURN(Request a, t.PostRecv(0, 9, &v, sizeof v));
    RY_ASSIGN_OR_RETURN(Request b, t.PostRecv(2, 9, &w, sizeof w));
    Request both[] = {a, b};
    late = t.WaitAll(both, Deadline::After(300ms));
    after_send = t.PostSend(0, 9, &v, sizeof v).status();
    after_recv = t.PostRecv(2, 9, &w, sizeof w).status();
    after_wait = t.WaitAll({}, Soon());
    const int others[] = {0, 2};
    probes = t.Probe(others, Soon());
    t.Abort("rank 1 gave up", Soon());
    after_abort = t.PostSend(0, 9, &v, sizeof v).status();
    return Status::Ok();
  });
  ExpectAllOk(st);
  EXPECT_EQ(late.code(), StatusCode::kDeadlineExceeded) << late.ToString();
  EXPECT_NE(late.message().find(pending[0]), std::string::npos) << late.message();
  EXPECT_NE(late.message().find(pending[2]), std::string::npos) << late.message();
  EXPECT_EQ(after_send, late);
  EXPECT_EQ(after_recv, late);
  EXPECT_EQ(after_wait, late);
  EXPECT_EQ(after_abort, late) << "the first error stays after Abort";
  ASSERT_EQ(probes.size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(probes[i].state, ProbeResult::State::kAlive) << probes[i].detail;
    EXPECT_EQ(probes[i].activity, fmt::format("rank {} waits for rank 1", 2 * i));
  }
  for (int r : {0, 2}) {
    EXPECT_EQ(aborted[r].code(), StatusCode::kAborted)
        << "rank " << r << ": " << aborted[r].ToString();
    EXPECT_NE(aborted[r].message().find(aborter[r]), std::string::npos) << aborted[r].message();
    EXPECT_NE(aborted[r].message().find("rank 1 gave up"), std::string::npos)
        << aborted[r].message();
  }
}

// An Abort reaches every peer, naming the aborting rank and its reason; afterwards both the
// aborting rank and its peers fail every call with ABORTED.
TEST_P(TransportConformance, AbortNamesTheRankAndItsReason) {
  TransportGroup g = Start(3);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  std::vector<Status> waits(3), later(3);
  std::vector<std::string> names(3);
  auto st = RunRanksForTest(g, [&](int rank, Transport& t) -> Status {
    uint8_t out = 1, in[2] = {};
    if (rank != 1) {
      names[rank] = Who(t, 1);
      // Connected both ways first, so that only the abort is left to arrive.
      auto s = t.PostSend(1, 3, &out, 1);
      auto r = t.PostRecv(1, 3, &in[0], 1);
      // The abort may overtake this exchange's messages: then a call here fails with it.
      if (!s.ok() || !r.ok()) {
        waits[rank] = s.ok() ? r.status() : s.status();
      } else {
        Request both[] = {*s, *r};
        waits[rank] = t.WaitAll(both, Soon());
      }
      if (waits[rank].ok()) {  // a transport may also learn of the abort while posting
        auto never = t.PostRecv(1, 4, &in[1], 1);
        waits[rank] = never.ok() ? t.WaitAll({&*never, 1}, Soon()) : never.status();
      }
      later[rank] = t.PostSend(1, 4, &out, 1).status();
      return Status::Ok();
    }
    std::vector<Request> reqs;
    for (int peer : {0, 2}) {
      RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(peer, 3, &in[peer / 2], 1));
      RY_ASSIGN_OR_RETURN(Request s, t.PostSend(peer, 3, &out, 1));
      reqs.push_back(r);
      reqs.push_back(s);
    }
    RY_RETURN_IF_ERROR(t.WaitAll(reqs, Soon()));
    t.Abort("operator stopped the job", Soon());
    waits[1] = t.WaitAll({}, Soon());
    later[1] = t.PostSend(0, 4, &out, 1).status();
    return Status::Ok();
  });
  ExpectAllOk(st);
  for (int r = 0; r < 3; ++r) {
    EXPECT_EQ(waits[r].code(), StatusCode::kAborted) << "rank " << r << ": " << waits[r].ToString();
    EXPECT_NE(waits[r].message().find("operator stopped the job"), std::string::npos)
        << waits[r].message();
    EXPECT_EQ(later[r].code(), StatusCode::kAborted) << "rank " << r << ": " << later[r].ToString();
    if (r != 1) {
      EXPECT_NE(waits[r].message().find(names[r]), std::string::npos) << waits[r].message();
    }
  }
}

// A rank inside a wait answers probes with its activity; one outside any communication call
// is unresponsive at the probe's deadline; a rank probing itself is alive.
TEST_P(TransportConformance, ProbeTellsAWaitingRankFromAnIdleOne) {
  TransportGroup g = Start(3);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  std::vector<ProbeResult> waiting, idle, self;
  auto st = RunRanksForTest(g, [&](int rank, Transport& t) -> Status {
    uint8_t b = 0;
    if (rank == 1) {
      t.SetActivity("allreduce #57 waiting for rank 0");
      RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(0, 8, &b, 1));
      return t.WaitAll({&r, 1}, Soon());
    }
    if (rank == 2) return g.store->Get("release", Soon()).status();  // in no transport call
    const int one = 1, two = 2, zero = 0;
    waiting = t.Probe({&one, 1}, Soon());
    idle = t.Probe({&two, 1}, Deadline::After(300ms));
    self = t.Probe({&zero, 1}, Soon());
    RY_RETURN_IF_ERROR(g.store->Set("release", "1", Soon()));
    RY_ASSIGN_OR_RETURN(Request s, t.PostSend(1, 8, &b, 1));
    return t.WaitAll({&s, 1}, Soon());
  });
  ExpectAllOk(st);
  ASSERT_EQ(waiting.size(), 1u);
  EXPECT_EQ(waiting[0].rank, 1);
  EXPECT_EQ(waiting[0].state, ProbeResult::State::kAlive) << waiting[0].detail;
  EXPECT_EQ(waiting[0].activity, "allreduce #57 waiting for rank 0");
  ASSERT_EQ(idle.size(), 1u);
  EXPECT_EQ(idle[0].state, ProbeResult::State::kUnresponsive) << idle[0].detail;
  EXPECT_FALSE(idle[0].detail.empty());
  ASSERT_EQ(self.size(), 1u);
  EXPECT_EQ(self[0].state, ProbeResult::State::kAlive);
}

// ---- a rank in a second process, killed mid-transfer ----------------------------------------

TransportOptions ProcessOptions(int rank, Store* store, const std::string& prefix) {
  TransportOptions o;
  o.rank = rank;
  o.size = 2;
  o.store = store;
  o.key_prefix = prefix;
  o.secret = "conformance-secret";
  o.host = "testhost";
  o.socket_ifname = "=lo";
  return o;
}

constexpr size_t kFirstBytes = 1 << 20;
constexpr size_t kSecondBytes = 64 << 20;

// Rank 1 of PeerProcessKilledMidTransferIsNamed: sends a 1 MiB message (tag 1) and a 64 MiB
// one (tag 2, more than any backend buffers) and waits on a receive that never comes, so it
// is killed inside that wait. Returns only when a step failed (10-12, reason on stderr).
int RunDyingRank(const std::string& spec) {
  auto fail = [](int code, const Status& st) {
    fmt::print(stderr, "conformance child: {}\n", st.ToString());
    return code;
  };
  char backend[16], dir[512], prefix[256];
  if (std::sscanf(spec.c_str(), "%15s %511s %255s", backend, dir, prefix) != 3) {
    return fail(10, InvalidArgument("bad {}='{}'", kChildEnv, spec));
  }
  auto store = OpenFileStore(dir);
  if (!store.ok()) return fail(10, store.status());
  auto t = MakeTransport(backend, ProcessOptions(1, store->get(), prefix));
  if (!t.ok()) return fail(11, t.status());
  if (Status st = (*t)->Start(Soon()); !st.ok()) return fail(11, st);
  const auto first = Pattern(kFirstBytes, 1);
  std::vector<char> second(kSecondBytes, 's');
  uint64_t never = 0;
  auto a = (*t)->PostSend(0, 1, first.data(), first.size());
  auto b = (*t)->PostSend(0, 2, second.data(), second.size());
  auto c = (*t)->PostRecv(0, 99, &never, sizeof never);
  if (!a.ok() || !b.ok() || !c.ok()) return fail(12, Internal("posting failed"));
  Request all[] = {*a, *b, *c};
  return fail(12, (*t)->WaitAll(all, Deadline::After(120s)));
}

TEST(TransportConformanceChild, DyingRank) {
  const char* spec = std::getenv(kChildEnv);
  if (spec == nullptr) {
    GTEST_SKIP() << "runs only as the child process of "
                    "TransportConformance.PeerProcessKilledMidTransferIsNamed ("
                 << kChildEnv << " is not set)";
  }
  int code = RunDyingRank(spec);
  FAIL() << "the child's step failed (exit code " << code << ")";
}

// The survivor's wait on the message the dead rank was sending fails before its deadline,
// naming the rank with its pid; a probe then reports it dead.
TEST_P(TransportConformance, PeerProcessKilledMidTransferIsNamed) {
  base::ScopedTempDir dir("conformance");
  ASSERT_FALSE(dir.path().empty());
  const std::string prefix = fmt::format("conformance/{}/process", ::getpid());
  base::SpawnOptions spawn;
  spawn.argv = {"/proc/self/exe", "--gtest_filter=TransportConformanceChild.DyingRank"};
  spawn.env = {{kChildEnv, fmt::format("{} {} {}", GetParam(), dir.path(), prefix)}};
  auto child = base::Child::Spawn(spawn);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  auto store = OpenFileStore(dir.path());
  ASSERT_TRUE(store.ok()) << store.status().ToString();
  auto made = MakeTransport(GetParam(), ProcessOptions(0, store->get(), prefix));
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  Transport& t = **made;
  Status started = t.Start(Soon());
  if (!started.ok()) {
    base::ExitInfo info = child->KillAndReap();
    FAIL() << started.ToString() << "; child: " << info.stderr_text;
  }
  const std::string dead = fmt::format("rank 1 (testhost pid {})", child->pid());
  EXPECT_EQ(DescribePeer(t.peer(1)), dead);
  std::vector<char> first(kFirstBytes);
  auto a = t.PostRecv(1, 1, first.data(), first.size());
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  Status got_first = t.WaitAll({&*a, 1}, Soon());
  if (!got_first.ok()) {
    base::ExitInfo info = child->KillAndReap();
    FAIL() << got_first.ToString() << "; child: " << info.stderr_text;
  }
  EXPECT_EQ(first, Pattern(kFirstBytes, 1));
  // The 64 MiB message is under way (tcp, shm) or held for its receive (ofi) when it dies.
  base::ExitInfo killed = child->KillAndReap();
  EXPECT_EQ(killed.signal, SIGKILL) << killed.Describe() << " " << killed.stderr_text;
  std::vector<char> second(kSecondBytes);
  auto b = t.PostRecv(1, 2, second.data(), second.size());
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  Status st = t.WaitAll({&*b, 1}, Deadline::After(120s));
  EXPECT_FALSE(st.ok());
  EXPECT_NE(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
  EXPECT_NE(st.message().find(dead), std::string::npos) << st.ToString();
  const int one = 1;
  auto probe = t.Probe({&one, 1}, Deadline::After(10s));
  ASSERT_EQ(probe.size(), 1u);
  EXPECT_EQ(probe[0].state, ProbeResult::State::kDead) << probe[0].detail;
}

INSTANTIATE_TEST_SUITE_P(Backends, TransportConformance, ::testing::Values("tcp", "shm", "ofi"),
                         [](const auto& info) { return info.param; });

}  // namespace
}  // namespace railyard::net
