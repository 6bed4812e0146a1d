#include "railyard/net/tcp/tcp_transport.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <dirent.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstring>
#include <numeric>

#include "railyard/base/files.h"
#include "railyard/base/hmac.h"
#include "railyard/net/transport_testing.h"

namespace railyard::net {
namespace {

using std::chrono::milliseconds;
using std::chrono::seconds;

base::Deadline Soon() { return base::Deadline::After(seconds(20)); }

std::vector<uint8_t> Pattern(size_t n, uint8_t seed) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 131 + seed + (i >> 12));
  return v;
}

void ExpectAllOk(const std::vector<Status>& st) {
  for (size_t r = 0; r < st.size(); ++r) EXPECT_TRUE(st[r].ok()) << r << ": " << st[r].ToString();
}

TEST(TcpTransport, PingPongAndSizes) {
  TransportOptions o;
  o.streams_per_peer = 3;
  o.tcp_congestion = "reno";  // a named algorithm on every connection
  auto g = StartTransportGroupForTest(NewTcpTransport, 2, o);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  // Sizes around the chunking threshold and a large odd size, in both directions.
  std::vector<size_t> sizes = {0, 1, 7, 4096, (256 << 10) - 1, 256 << 10, (768 << 10) + 1,
                               (16 << 20) + 3};
  ExpectAllOk(RunRanksForTest(g, [&](int rank, Transport& t) -> Status {
    int peer = 1 - rank;
    for (size_t n : sizes) {
      auto out = Pattern(n, static_cast<uint8_t>(rank));
      std::vector<uint8_t> in(n + 5, 0xee);
      RY_ASSIGN_OR_RETURN(Request s, t.PostSend(peer, 7, out.data(), n));
      RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(peer, 7, in.data(), in.size()));
      Request both[] = {s, r};
      RY_RETURN_IF_ERROR(t.WaitAll(both, Soon()));
      if (getenv("DBG")) fprintf(stderr, "rank %d size %zu done\n", rank, n);
      if (t.ReceivedBytes(r) != n) return Internal("size {}: received {}", n, t.ReceivedBytes(r));
      auto want = Pattern(n, static_cast<uint8_t>(peer));
      if (!std::equal(want.begin(), want.end(), in.begin())) return Internal("size {}: bytes", n);
      if (in[n] != 0xee) return Internal("size {}: wrote past the message", n);
    }
    return Status::Ok();
  }));
}

// How many of this process's connected TCP sockets use each congestion control algorithm.
std::map<std::string, int> ConnectedTcpSocketsByAlgorithm() {
  std::map<std::string, int> out;
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return out;
  while (dirent* e = readdir(d)) {
    int fd = std::atoi(e->d_name);
    int type = 0;
    socklen_t len = sizeof type;
    sockaddr_in peer{};
    socklen_t plen = sizeof peer;
    if (fd <= 2 || getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 ||
        type != SOCK_STREAM || getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) != 0 ||
        peer.sin_family != AF_INET) {
      continue;
    }
    char name[16] = {};
    socklen_t nlen = sizeof name;
    if (getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &nlen) == 0) {
      ++out[std::string(name, strnlen(name, nlen))];
    }
  }
  closedir(d);
  return out;
}

// Ranks on one host: every connection a rank opened (2 ranks x 2 streams) runs cubic, or
// reno where cubic cannot be had, whatever the host's default (BBR on the development host,
// where its pacing halved busbw).
TEST(TcpTransport, ConnectionsInsideOneKernelAvoidThePacingDefault) {
  auto g = StartTransportGroupForTest(NewTcpTransport, 2);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  ExpectAllOk(RunRanksForTest(g, [&](int rank, Transport& t) -> Status {
    std::vector<uint8_t> out(1 << 20, 1), in(1 << 20);  // long enough for both streams
    RY_ASSIGN_OR_RETURN(Request s, t.PostSend(1 - rank, 3, out.data(), out.size()));
    RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(1 - rank, 3, in.data(), in.size()));
    Request both[] = {s, r};
    return t.WaitAll(both, Soon());
  }));
  auto by = ConnectedTcpSocketsByAlgorithm();
  std::string seen;
  for (auto& [name, n] : by) seen += fmt::format("{}={} ", name, n);
  EXPECT_GE(by["cubic"] + by["reno"], 4) << seen;
}

// A consuming receive gets every byte exactly once, in runs of whole 8-byte units at unit
// offsets (the trailing part of an odd-sized message aside), whichever of the 3 streams
// carried them and in whatever order; also for a message that arrived before its receive, and
// for one from self.
TEST(TcpTransport, ConsumingReceiveGetsEveryByteOnceInWholeUnits) {
  TransportOptions o;
  o.streams_per_peer = 3;
  auto g = StartTransportGroupForTest(NewTcpTransport, 2, o);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  constexpr size_t kUnit = 8;
  struct Sink {
    std::vector<uint8_t> bytes;
    std::vector<uint8_t> seen;
    std::string error;
    explicit Sink(size_t n) : bytes(n), seen(n) {}
    Transport::Consumer Consumer() {
      return [this](size_t at, const char* data, size_t n) {
        if (at % kUnit != 0 || (n % kUnit != 0 && at + n != bytes.size()) ||
            at + n > bytes.size()) {
          error = fmt::format("run of {} bytes at {} of {}", n, at, bytes.size());
          return;
        }
        std::memcpy(bytes.data() + at, data, n);
        for (size_t i = at; i < at + n; ++i) ++seen[i];
      };
    }
    Status Check(const std::vector<uint8_t>& want) const {
      if (!error.empty()) return Internal("{}", error);
      for (size_t i = 0; i < seen.size(); ++i) {
        if (seen[i] != 1) return Internal("byte {} of {} delivered {} times", i, seen.size(), seen[i]);
      }
      if (bytes != want) return Internal("{} bytes: contents differ", want.size());
      return Status::Ok();
    }
  };
  const std::vector<size_t> sizes = {13, (1 << 20) + 24, (16 << 20) + 4};
  ExpectAllOk(RunRanksForTest(g, [&](int rank, Transport& t) -> Status {
    if (!t.SupportsConsume()) return Internal("tcp must support consuming receives");
    if (rank == 0) {
      std::vector<std::vector<uint8_t>> out;
      std::vector<Request> reqs;
      for (size_t i = 0; i < sizes.size(); ++i) out.push_back(Pattern(sizes[i], uint8_t(i)));
      for (size_t i = 0; i < sizes.size(); ++i) {
        RY_ASSIGN_OR_RETURN(Request s, t.PostSend(1, i, out[i].data(), sizes[i]));
        reqs.push_back(s);
      }
      uint32_t marker = 5;
      RY_ASSIGN_OR_RETURN(Request m, t.PostSend(1, 50, &marker, 4));
      reqs.push_back(m);
      auto self = Pattern(100, 7);
      RY_ASSIGN_OR_RETURN(Request ss, t.PostSend(0, 60, self.data(), self.size()));
      Sink self_sink(100);
      RY_ASSIGN_OR_RETURN(Request sr, t.PostRecvConsume(0, 60, 100, kUnit, self_sink.Consumer()));
      reqs.push_back(ss);
      reqs.push_back(sr);
      RY_RETURN_IF_ERROR(t.WaitAll(reqs, Soon()));
      return self_sink.Check(self);
    }
    // The largest, streamed into a waiting consumer.
    Sink big(sizes[2]);
    std::vector<Sink> early;
    early.emplace_back(sizes[0]);
    early.emplace_back(sizes[1]);
    // The marker comes after all three: once it is in, the two small ones wait as unexpected
    // messages. The big one is received first so that the marker can get through.
    RY_ASSIGN_OR_RETURN(Request b, t.PostRecvConsume(0, 2, sizes[2], kUnit, big.Consumer()));
    uint32_t marker = 0;
    RY_ASSIGN_OR_RETURN(Request m, t.PostRecv(0, 50, &marker, 4));
    Request bm[] = {b, m};
    RY_RETURN_IF_ERROR(t.WaitAll(bm, Soon()));
    std::vector<Request> reqs;
    for (size_t i = 0; i < 2; ++i) {
      RY_ASSIGN_OR_RETURN(Request r, t.PostRecvConsume(0, i, sizes[i], kUnit, early[i].Consumer()));
      reqs.push_back(r);
    }
    RY_RETURN_IF_ERROR(t.WaitAll(reqs, Soon()));
    RY_RETURN_IF_ERROR(big.Check(Pattern(sizes[2], 2)));
    for (size_t i = 0; i < 2; ++i) RY_RETURN_IF_ERROR(early[i].Check(Pattern(sizes[i], uint8_t(i))));
    if (t.PostRecvConsume(0, 70, 8, 3, big.Consumer()).ok()) {
      return Internal("a 3-byte granule was accepted");
    }
    return Status::Ok();
  }));
}

TEST(TcpTransport, TagsMatchInOrderAndUnexpectedMessagesAreKept) {
  auto g = StartTransportGroupForTest(NewTcpTransport, 2);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  constexpr int kMessages = 1000;
  ExpectAllOk(RunRanksForTest(g, [&](int rank, Transport& t) -> Status {
    if (rank == 0) {
      // All sends first: most arrive before their receives are posted.
      std::vector<uint32_t> vals(kMessages);
      std::vector<Request> reqs;
      for (int i = 0; i < kMessages; ++i) {
        vals[i] = static_cast<uint32_t>(i);
        RY_ASSIGN_OR_RETURN(Request s, t.PostSend(1, i % 3, &vals[i], sizeof(uint32_t)));
        reqs.push_back(s);
      }
      // A large message after the small ones, received before them.
      auto big = Pattern(3 << 20, 9);
      RY_ASSIGN_OR_RETURN(Request b, t.PostSend(1, 99, big.data(), big.size()));
      reqs.push_back(b);
      return t.WaitAll(reqs, Soon());
    }
    std::vector<uint8_t> big(3 << 20);
    RY_ASSIGN_OR_RETURN(Request b, t.PostRecv(0, 99, big.data(), big.size()));
    RY_RETURN_IF_ERROR(t.WaitAll({&b, 1}, Soon()));
    if (big != Pattern(3 << 20, 9)) return Internal("big message corrupted");
    // Receive tag 2 first, then 1, then 0: order within a tag must hold.
    std::vector<uint32_t> got(kMessages, 0xffffffff);
    std::vector<Request> reqs;
    for (int tag : {2, 1, 0}) {
      for (int i = tag; i < kMessages; i += 3) {
        RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(0, tag, &got[i], sizeof(uint32_t)));
        reqs.push_back(r);
      }
    }
    RY_RETURN_IF_ERROR(t.WaitAll(reqs, Soon()));
    for (int i = 0; i < kMessages; ++i) {
      if (got[i] != static_cast<uint32_t>(i)) return Internal("message {} got {}", i, got[i]);
    }
    return Status::Ok();
  }));
}

TEST(TcpTransport, AllToAllEightRanksAndSelf) {
  auto g = StartTransportGroupForTest(NewTcpTransport, 8);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  ExpectAllOk(RunRanksForTest(g, [&](int rank, Transport& t) -> Status {
    std::vector<std::vector<uint8_t>> out(8), in(8);
    std::vector<Request> reqs;
    for (int p = 0; p < 8; ++p) {
      out[p] = Pattern(1000 + p * 300000, static_cast<uint8_t>(rank * 8 + p));
      in[p].resize(1000 + rank * 300000);
      RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(p, 5, in[p].data(), in[p].size()));
      RY_ASSIGN_OR_RETURN(Request s, t.PostSend(p, 5, out[p].data(), out[p].size()));
      reqs.push_back(r);
      reqs.push_back(s);
    }
    RY_RETURN_IF_ERROR(t.WaitAll(reqs, Soon()));
    for (int p = 0; p < 8; ++p) {
      if (in[p] != Pattern(1000 + rank * 300000, static_cast<uint8_t>(p * 8 + rank))) {
        return Internal("from {}: wrong bytes", p);
      }
    }
    return Status::Ok();
  }));
}

TEST(TcpTransport, LongerMessageThanPostedIsDataLossNamingThePeer) {
  auto g = StartTransportGroupForTest(NewTcpTransport, 2);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  auto st = RunRanksForTest(g, [&](int rank, Transport& t) -> Status {
    std::vector<char> buf(100);
    if (rank == 0) {
      RY_ASSIGN_OR_RETURN(Request s, t.PostSend(1, 3, buf.data(), 100));
      return t.WaitAll({&s, 1}, Soon());
    }
    RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(0, 3, buf.data(), 40));
    return t.WaitAll({&r, 1}, Soon());
  });
  EXPECT_TRUE(st[0].ok()) << st[0].ToString();
  EXPECT_EQ(st[1].code(), StatusCode::kDataLoss) << st[1].ToString();
  EXPECT_NE(st[1].message().find("rank 0"), std::string::npos) << st[1].ToString();
  EXPECT_NE(st[1].message().find("100 bytes"), std::string::npos) << st[1].ToString();
}

TEST(TcpTransport, DeadlineNamesThePendingPeer) {
  auto g = StartTransportGroupForTest(NewTcpTransport, 3);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  char c;
  auto r = g.ranks[0]->PostRecv(2, 1, &c, 1);
  ASSERT_TRUE(r.ok());
  Status st = g.ranks[0]->WaitAll({&*r, 1}, base::Deadline::After(milliseconds(200)));
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
  EXPECT_NE(st.message().find("rank 2"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("receive tag 0x1"), std::string::npos) << st.ToString();
  // The transport is failed from now on, with the same error.
  EXPECT_EQ(g.ranks[0]->PostSend(1, 1, &c, 1).status().code(), StatusCode::kDeadlineExceeded);
}

TEST(TcpTransport, ProbeSeesARankInsideWaitAllAndItsActivity) {
  auto g = StartTransportGroupForTest(NewTcpTransport, 2);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  ExpectAllOk(RunRanksForTest(g, [&](int rank, Transport& t) -> Status {
    char c = 'p';
    if (rank == 0) {
      t.SetActivity("allreduce #3 waiting for rank 1");
      RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(1, 1, &c, 1));
      return t.WaitAll({&r, 1}, Soon());
    }
    int who[] = {0};
    auto res = t.Probe(who, Soon());
    if (res.size() != 1 || res[0].state != ProbeResult::State::kAlive) {
      return Internal("rank 0 is not reported alive: {}", res.empty() ? "" : res[0].detail);
    }
    if (res[0].activity != "allreduce #3 waiting for rank 1") {
      return Internal("activity '{}'", res[0].activity);
    }
    RY_ASSIGN_OR_RETURN(Request s, t.PostSend(0, 1, &c, 1));
    return t.WaitAll({&s, 1}, Soon());
  }));
}

TEST(TcpTransport, AbortReachesEveryRank) {
  auto g = StartTransportGroupForTest(NewTcpTransport, 4);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  auto st = RunRanksForTest(g, [&](int rank, Transport& t) -> Status {
    if (rank == 2) {
      t.Abort("disk full on this rank", base::Deadline::After(seconds(10)));
      return Status::Ok();
    }
    char c;
    RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(2, 1, &c, 1));
    return t.WaitAll({&r, 1}, base::Deadline::After(seconds(20)));
  });
  for (int r : {0, 1, 3}) {
    EXPECT_EQ(st[r].code(), StatusCode::kAborted) << st[r].ToString();
    EXPECT_NE(st[r].message().find("rank 2"), std::string::npos) << st[r].ToString();
    EXPECT_NE(st[r].message().find("disk full on this rank"), std::string::npos) << st[r].ToString();
  }
}

TEST(TcpTransport, DeadPeerFailsPendingReceiveNamingIt) {
  auto g = StartTransportGroupForTest(NewTcpTransport, 2);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  // Rank 1 connects (one message) and then goes away as if its process ended.
  auto st = RunRanksForTest(g, [&](int rank, Transport& t) -> Status {
    char c = 'x';
    if (rank == 1) {
      RY_ASSIGN_OR_RETURN(Request s, t.PostSend(0, 1, &c, 1));
      return t.WaitAll({&s, 1}, Soon());
    }
    RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(1, 1, &c, 1));
    return t.WaitAll({&r, 1}, Soon());
  });
  ExpectAllOk(st);
  g.ranks[1].reset();
  char c;
  auto r = g.ranks[0]->PostRecv(1, 2, &c, 1);
  ASSERT_TRUE(r.ok());
  Status s = g.ranks[0]->WaitAll({&*r, 1}, base::Deadline::After(seconds(20)));
  EXPECT_EQ(s.code(), StatusCode::kUnavailable) << s.ToString();
  EXPECT_NE(s.message().find("rank 1"), std::string::npos) << s.ToString();
  auto probe = g.ranks[0]->Probe(std::vector<int>{1}, base::Deadline::After(seconds(5)));
  ASSERT_EQ(probe.size(), 1u);
  EXPECT_EQ(probe[0].state, ProbeResult::State::kDead) << probe[0].detail;
}

TEST(TcpTransport, ConnectionWithoutTheSecretIsRefused) {
  LogCapture log;
  TransportOptions o;
  auto g = StartTransportGroupForTest(NewTcpTransport, 1, o);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  // An intruder connects, reads the greeting and answers with a wrong proof.
  sockaddr_in a{};
  a.sin_family = AF_INET;
  std::string addr = g.ranks[0]->peer(0).address;
  inet_pton(AF_INET, addr.substr(0, addr.rfind(':')).c_str(), &a.sin_addr);
  a.sin_port = htons(static_cast<uint16_t>(std::stoi(addr.substr(addr.rfind(':') + 1))));
  base::UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  ASSERT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  // Drive rank 0's progress so it accepts, with a short deadline on a receive that never
  // completes.
  char c;
  auto r = g.ranks[0]->PostRecv(0, 1, &c, 1);
  ASSERT_TRUE(r.ok());
  std::thread driver([&] {
    (void)g.ranks[0]->WaitAll({&*r, 1}, base::Deadline::After(milliseconds(500)));
  });
  char greeting[24];
  ASSERT_EQ(::recv(fd.get(), greeting, sizeof greeting, MSG_WAITALL), 24);
  std::vector<char> hello(56, 0);
  uint32_t magic = 0x31545952, version = 1;
  std::memcpy(hello.data(), &magic, 4);
  std::memcpy(hello.data() + 4, &version, 4);
  int32_t rank = 0;
  std::memcpy(hello.data() + 8, &rank, 4);  // claims to be rank 0 (itself): refused anyway
  uint32_t streams = 2;
  std::memcpy(hello.data() + 16, &streams, 4);
  ASSERT_EQ(::send(fd.get(), hello.data(), hello.size(), 0), 56);
  char byte;
  timeval tv{5, 0};
  setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  EXPECT_EQ(::recv(fd.get(), &byte, 1, 0), 0) << "the transport must close the connection";
  driver.join();
  // The refusal is logged with the intruder's address, for the operator to trace.
  sockaddr_in mine{};
  socklen_t len = sizeof mine;
  ASSERT_EQ(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&mine), &len), 0);
  std::string intruder = fmt::format("127.0.0.1:{}", ntohs(mine.sin_port));
  std::string lines = log.Lines();
  EXPECT_NE(lines.find("refused connection from " + intruder), std::string::npos) << lines;
}

// A peer that knows the secret but sends a frame whose length does not fit its message is
// cut off and named; the length is never used to allocate or copy.
TEST(TcpTransport, MalformedFrameFromAProvenPeerIsRejected) {
  auto g = StartTransportGroupForTest(NewTcpTransport, 2);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  std::string addr = g.ranks[0]->peer(0).address;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, addr.substr(0, addr.rfind(':')).c_str(), &a.sin_addr);
  a.sin_port = htons(static_cast<uint16_t>(std::stoi(addr.substr(addr.rfind(':') + 1))));
  base::UniqueFd fd(::socket(AF_INET, SOCK_STREAM, 0));
  ASSERT_EQ(::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0);
  char c;
  auto r = g.ranks[0]->PostRecv(1, 1, &c, 1);
  ASSERT_TRUE(r.ok());
  Status waited;
  std::thread driver([&] {
    waited = g.ranks[0]->WaitAll({&*r, 1}, base::Deadline::After(seconds(20)));
  });
  unsigned char greeting[24];
  ASSERT_EQ(::recv(fd.get(), greeting, sizeof greeting, MSG_WAITALL), 24);
  // A correct hello for rank 1, stream 0 of 2: proof = HMAC(secret, "railyard-tcp" + nonce +
  // "/1/0/0").
  std::string msg = "railyard-tcp";
  msg.append(reinterpret_cast<const char*>(greeting + 8), 16);
  msg += "/1/0/0";
  auto proof = base::HmacSha256("test-secret", msg);
  std::vector<char> hello(56, 0);
  uint32_t magic = 0x31545952, version = 1, stream = 0, streams = 2;
  int32_t rank = 1;
  std::memcpy(hello.data(), &magic, 4);
  std::memcpy(hello.data() + 4, &version, 4);
  std::memcpy(hello.data() + 8, &rank, 4);
  std::memcpy(hello.data() + 12, &stream, 4);
  std::memcpy(hello.data() + 16, &streams, 4);
  std::memcpy(hello.data() + 24, proof.data(), 32);
  ASSERT_EQ(::send(fd.get(), hello.data(), hello.size(), 0), 56);
  // A data frame claiming 2^60 bytes: over the limit, must not be trusted.
  uint64_t header[6] = {1, 1, 1, uint64_t{1} << 60, 0, uint64_t{1} << 60};
  ASSERT_EQ(::send(fd.get(), header, sizeof header, 0), static_cast<ssize_t>(sizeof header));
  driver.join();
  EXPECT_EQ(waited.code(), StatusCode::kUnavailable) << waited.ToString();
  EXPECT_NE(waited.message().find("rank 1"), std::string::npos) << waited.ToString();
  EXPECT_NE(waited.message().find("malformed"), std::string::npos) << waited.ToString();
}

TEST(TcpTransport, BadOptionsAreRejected) {
  auto store = NewInMemoryStore();
  TransportOptions o;
  o.store = store.get();
  o.rank = 3;
  o.size = 2;
  o.socket_ifname = "=lo";
  EXPECT_EQ(NewTcpTransport(o).status().code(), StatusCode::kInvalidArgument);
  o.rank = 0;
  o.socket_ifname = "=no-such-if0";
  auto t = NewTcpTransport(o);
  EXPECT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("no-such-if0"), std::string::npos) << t.status().ToString();
  o.socket_ifname = "=lo";
  o.tcp_congestion = "nosuchcc";
  t = NewTcpTransport(o);
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound) << t.status().ToString();
  EXPECT_NE(t.status().message().find("'nosuchcc' is not available"), std::string::npos)
      << t.status().ToString();
  o.tcp_congestion = "cubic;x";
  EXPECT_EQ(NewTcpTransport(o).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace railyard::net
