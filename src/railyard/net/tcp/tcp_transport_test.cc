#include "railyard/net/tcp/tcp_transport.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cstring>
#include <future>
#include <numeric>

#include "railyard/base/files.h"
#include "railyard/base/hmac.h"
#include "railyard/net/handshake.h"
#include "railyard/net/tcp/connection.h"
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

// The data connections' side of net/handshake.h, spelled out so the tests pin the wire.
constexpr HandshakeProtocol kTcpProtocol = {.magic = 0x52595432,
                                            .version = 2,
                                            .domain = "railyard-tcp",
                                            .acceptor = "a Railyard rank of this job",
                                            .context_bytes = 16};

// "ip:port" as a socket address.
sockaddr_in SocketAddress(const std::string& addr) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, addr.substr(0, addr.rfind(':')).c_str(), &a.sin_addr);
  a.sin_port = htons(static_cast<uint16_t>(std::stoi(addr.substr(addr.rfind(':') + 1))));
  return a;
}

// A blocking loopback connection to a rank's published "ip:port" (5 s receive timeout).
base::UniqueFd RawConnect(const std::string& addr) {
  sockaddr_in a = SocketAddress(addr);
  base::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) fd.Reset();
  timeval tv{5, 0};
  if (fd.valid()) setsockopt(fd.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  return fd;
}

std::string LocalAddress(int fd) {
  sockaddr_in mine{};
  socklen_t len = sizeof mine;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&mine), &len);
  return fmt::format("127.0.0.1:{}", ntohs(mine.sin_port));
}

// Sends the hello for rank `from` -> `to`, stream 0 of 2, and reads the acceptor's challenge.
std::string RawHello(int fd, Handshake& h, int from, int to) {
  int32_t ctx[4] = {from, to, 0, 2};
  std::string hello = h.ConnectorHello(std::string_view(reinterpret_cast<char*>(ctx), 16));
  if (::send(fd, hello.data(), hello.size(), MSG_NOSIGNAL) != static_cast<ssize_t>(hello.size())) {
    return "";
  }
  std::string challenge(kChallengeBytes, '\0');
  ssize_t n = ::recv(fd, challenge.data(), challenge.size(), MSG_WAITALL);
  return n == static_cast<ssize_t>(challenge.size()) ? challenge : "";
}

// Proves the secret as rank `from` to rank `to` on a raw connection: OK when both sides
// accepted, so that the caller may speak frames next.
Status RawAuthenticate(int fd, std::string_view secret, int from, int to) {
  Handshake h(kTcpProtocol, secret);
  std::string challenge = RawHello(fd, h, from, to);
  if (challenge.empty()) return Unavailable("no challenge");
  RY_ASSIGN_OR_RETURN(std::string answer, h.ConnectorAnswer(challenge, "rank"));
  if (::send(fd, answer.data(), answer.size(), MSG_NOSIGNAL) != kAnswerBytes) {
    return Unavailable("answer not sent");
  }
  return Status::Ok();
}

// True when the other end closed (EOF or reset) within the socket's receive timeout.
bool ClosedByPeer(int fd) {
  char buf[64];
  for (;;) {
    ssize_t r = ::recv(fd, buf, sizeof buf, 0);
    if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) return true;
    if (r < 0 && errno == EAGAIN) return false;
  }
}

TEST(TcpTransport, PingPongAndSizes) {
  TcpOptions tcp;
  tcp.streams_per_peer = 3;
  tcp.congestion = "reno";  // a named algorithm on every connection
  auto g = StartTransportGroupForTest(NewTcpTransport, 2, {}, tcp);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  // Sizes around the chunking threshold and a large odd size, in both directions.
  std::vector<size_t> sizes = {
      0, 1, 7, 4096, (256 << 10) - 1, 256 << 10, (768 << 10) + 1, (16 << 20) + 3};
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
    if (fd <= 2 || getsockopt(fd, SOL_SOCKET, SO_TYPE, &type, &len) != 0 || type != SOCK_STREAM ||
        getpeername(fd, reinterpret_cast<sockaddr*>(&peer), &plen) != 0 ||
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
  auto g = StartTransportGroupForTest(NewTcpTransport, 2, {}, TcpOptions{.streams_per_peer = 3});
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  constexpr size_t kUnit = 8;
  struct Sink {
    std::vector<uint8_t> bytes;
    std::vector<uint8_t> seen;
    std::string error;
    explicit Sink(size_t n) : bytes(n), seen(n) {}
    ConsumingReceiver::Consumer Consumer() {
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
        if (seen[i] != 1)
          return Internal("byte {} of {} delivered {} times", i, seen.size(), seen[i]);
      }
      if (bytes != want) return Internal("{} bytes: contents differ", want.size());
      return Status::Ok();
    }
  };
  const std::vector<size_t> sizes = {13, (1 << 20) + 24, (16 << 20) + 4};
  ExpectAllOk(RunRanksForTest(g, [&](int rank, Transport& t) -> Status {
    ConsumingReceiver* consuming = t.consuming_receiver();
    if (consuming == nullptr) return Internal("tcp must support consuming receives");
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
      RY_ASSIGN_OR_RETURN(Request sr,
                          consuming->PostRecvConsume(0, 60, 100, kUnit, self_sink.Consumer()));
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
    RY_ASSIGN_OR_RETURN(Request b,
                        consuming->PostRecvConsume(0, 2, sizes[2], kUnit, big.Consumer()));
    uint32_t marker = 0;
    RY_ASSIGN_OR_RETURN(Request m, t.PostRecv(0, 50, &marker, 4));
    Request bm[] = {b, m};
    RY_RETURN_IF_ERROR(t.WaitAll(bm, Soon()));
    std::vector<Request> reqs;
    for (size_t i = 0; i < 2; ++i) {
      RY_ASSIGN_OR_RETURN(Request r,
                          consuming->PostRecvConsume(0, i, sizes[i], kUnit, early[i].Consumer()));
      reqs.push_back(r);
    }
    RY_RETURN_IF_ERROR(t.WaitAll(reqs, Soon()));
    RY_RETURN_IF_ERROR(big.Check(Pattern(sizes[2], 2)));
    for (size_t i = 0; i < 2; ++i)
      RY_RETURN_IF_ERROR(early[i].Check(Pattern(sizes[i], uint8_t(i))));
    if (consuming->PostRecvConsume(0, 70, 8, 3, big.Consumer()).ok()) {
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

// The same across streams, with the receive posted first: the chunk on stream 1 has no
// buffer to go to, and must be neither written anywhere nor buffered.
TEST(TcpTransport, LongerMultiStreamMessageThanPostedIsDataLossWithoutWritingAnywhere) {
  auto g = StartTransportGroupForTest(NewTcpTransport, 2);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  constexpr size_t kPosted = 1 << 20, kSent = (2 << 20) + 64;  // two chunks of 1 MiB+
  std::vector<char> guard(kPosted + 4096, 'g');
  Status sent;
  auto st = RunRanksForTest(g, [&](int rank, Transport& t) -> Status {
    if (rank == 0) {
      std::vector<char> out(kSent, 'o');
      RY_RETURN_IF_ERROR(g.store->Get("posted", Soon()).status());
      RY_ASSIGN_OR_RETURN(Request s, t.PostSend(1, 3, out.data(), out.size()));
      sent = t.WaitAll({&s, 1}, Soon());
      return Status::Ok();
    }
    RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(0, 3, guard.data(), kPosted));
    RY_RETURN_IF_ERROR(g.store->Set("posted", "1", Soon()));
    return t.WaitAll({&r, 1}, Soon());
  });
  EXPECT_TRUE(st[0].ok()) << st[0].ToString();
  EXPECT_EQ(st[1].code(), StatusCode::kDataLoss) << st[1].ToString();
  EXPECT_NE(st[1].message().find("rank 0"), std::string::npos) << st[1].ToString();
  EXPECT_NE(sent.code(), StatusCode::kDeadlineExceeded) << sent.ToString();
  EXPECT_EQ(std::count(guard.begin(), guard.end(), 'g'), static_cast<ptrdiff_t>(guard.size()));
}

TEST(TcpTransport, DeadlineNamesThePendingPeer) {
  auto g = StartTransportGroupForTest(NewTcpTransport, 3);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  char c;
  auto r = g.ranks[0]->PostRecv(2, 1, &c, 1);
  ASSERT_TRUE(r.ok());
  Status st = g.ranks[0]->WaitAll({&*r, 1}, base::Deadline::After(milliseconds(200)));
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded) << st.ToString();
  EXPECT_NE(st.message().find("receive from rank 2"), std::string::npos) << st.ToString();
  EXPECT_NE(st.message().find("tag 0x1"), std::string::npos) << st.ToString();
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
    EXPECT_NE(st[r].message().find("disk full on this rank"), std::string::npos)
        << st[r].ToString();
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

// An intruder that claims rank 1 but cannot prove the secret: rank 0 proves itself (the
// intruder learns nothing from that), refuses the intruder's answer, closes, and logs its
// address for the operator to trace.
TEST(TcpTransport, AcceptorRefusesAConnectorWithoutTheSecret) {
  LogCapture log;
  auto g = StartTransportGroupForTest(NewTcpTransport, 2);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  base::UniqueFd fd = RawConnect(g.ranks[0]->peer(0).address);
  ASSERT_TRUE(fd.valid());
  // Drive rank 0's progress so it accepts, with a receive that completes at the end.
  char c = 0;
  auto r = g.ranks[0]->PostRecv(1, 1, &c, 1);
  ASSERT_TRUE(r.ok());
  Status waited;
  std::thread driver([&] { waited = g.ranks[0]->WaitAll({&*r, 1}, Soon()); });
  Handshake h(kTcpProtocol, "not-the-secret");
  std::string challenge = RawHello(fd.get(), h, 1, 0);
  ASSERT_EQ(challenge.size(), kChallengeBytes);
  // The intruder cannot check rank 0's proof, nor answer it: it sends noise.
  EXPECT_EQ(h.ConnectorAnswer(challenge, "rank 0").status().code(), StatusCode::kPermissionDenied);
  std::string noise = base::RandomBytes(kAnswerBytes);
  ASSERT_EQ(::send(fd.get(), noise.data(), noise.size(), MSG_NOSIGNAL), 32);
  EXPECT_TRUE(ClosedByPeer(fd.get())) << "the transport must close the connection";
  // Rank 1 itself is unaffected: its message still arrives.
  char one = 'y';
  auto s = g.ranks[1]->PostSend(0, 1, &one, 1);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(g.ranks[1]->WaitAll({&*s, 1}, Soon()).ok());
  driver.join();
  EXPECT_TRUE(waited.ok()) << waited.ToString();
  EXPECT_EQ(c, 'y');
  std::string lines = log.Lines();
  EXPECT_NE(lines.find("refused connection from " + LocalAddress(fd.get()) +
                       ": claims rank 1 but its answer does not prove the job secret"),
            std::string::npos)
      << lines;
}

// Ranks started with different secrets: the connector finds that the listener at its peer's
// address cannot prove the secret and sends it nothing; the error names the peer, and the
// listener's log names the connection that left without proving itself.
TEST(TcpTransport, ConnectorRefusesAListenerThatCannotProveTheSecret) {
  LogCapture log;
  auto store = NewInMemoryStore();
  std::vector<std::unique_ptr<Transport>> ranks(2);
  for (int r = 0; r < 2; ++r) {
    TransportOptions o;
    o.rank = r;
    o.size = 2;
    o.store = store.get();
    o.key_prefix = "test";
    o.socket_ifname = "=lo";
    o.secret = r == 0 ? "secret-of-rank-0" : "another-secret";
    auto t = NewTcpTransport(o);
    ASSERT_TRUE(t.ok()) << t.status().ToString();
    ranks[r] = std::move(t).value();
  }
  std::vector<Status> started(2);
  std::vector<std::thread> threads;
  for (int r = 0; r < 2; ++r) {
    threads.emplace_back([&, r] { started[r] = ranks[r]->Start(Soon()); });
  }
  for (auto& t : threads) t.join();
  ExpectAllOk(started);
  char out = 'x', in = 0;
  auto recv = ranks[1]->PostRecv(0, 4, &in, 1);
  ASSERT_TRUE(recv.ok());
  Status received;
  std::thread listener([&] {
    received = ranks[1]->WaitAll({&*recv, 1}, base::Deadline::After(seconds(2)));
  });
  auto send = ranks[0]->PostSend(1, 4, &out, 1);
  ASSERT_TRUE(send.ok());
  Status sent = ranks[0]->WaitAll({&*send, 1}, Soon());
  listener.join();
  EXPECT_EQ(sent.code(), StatusCode::kPermissionDenied) << sent.ToString();
  EXPECT_NE(sent.message().find("rank 1"), std::string::npos) << sent.ToString();
  EXPECT_NE(sent.message().find(ranks[0]->peer(1).address + " did not prove the job secret"),
            std::string::npos)
      << sent.ToString();
  // Nothing reached rank 1: its receive ends at its deadline.
  EXPECT_EQ(received.code(), StatusCode::kDeadlineExceeded) << received.ToString();
  EXPECT_EQ(in, 0);
  std::string lines = log.Lines();
  EXPECT_NE(lines.find("without proving the job secret"), std::string::npos) << lines;
}

// A peer that knows the secret but sends a frame whose length does not fit its message is
// cut off and named; the length is never used to allocate or copy.
TEST(TcpTransport, MalformedFrameFromAProvenPeerIsRejected) {
  auto g = StartTransportGroupForTest(NewTcpTransport, 2);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  base::UniqueFd fd = RawConnect(g.ranks[0]->peer(0).address);
  ASSERT_TRUE(fd.valid());
  char c;
  auto r = g.ranks[0]->PostRecv(1, 1, &c, 1);
  ASSERT_TRUE(r.ok());
  Status waited;
  std::thread driver([&] {
    waited = g.ranks[0]->WaitAll({&*r, 1}, base::Deadline::After(seconds(20)));
  });
  Status authed = RawAuthenticate(fd.get(), "test-secret", 1, 0);
  ASSERT_TRUE(authed.ok()) << authed.ToString();
  // A data frame claiming 2^60 bytes: over the limit, must not be trusted.
  uint64_t header[6] = {1, 1, 1, uint64_t{1} << 60, 0, uint64_t{1} << 60};
  ASSERT_EQ(::send(fd.get(), header, sizeof header, 0), static_cast<ssize_t>(sizeof header));
  driver.join();
  EXPECT_EQ(waited.code(), StatusCode::kUnavailable) << waited.ToString();
  EXPECT_NE(waited.message().find("rank 1"), std::string::npos) << waited.ToString();
  EXPECT_NE(waited.message().find("malformed"), std::string::npos) << waited.ToString();
}

// A proven peer announces a 1 TiB message nobody has posted a receive for: the rank fails
// that peer with an error naming it and the size, instead of allocating the buffer (which
// would end this test process).
TEST(TcpTransport, UnexpectedMessageOverTheBudgetFailsThePeerWithoutAllocating) {
  auto g = StartTransportGroupForTest(NewTcpTransport, 2);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  base::UniqueFd fd = RawConnect(g.ranks[0]->peer(0).address);
  ASSERT_TRUE(fd.valid());
  char c;
  auto r = g.ranks[0]->PostRecv(1, 1, &c, 1);  // a different tag: 9 arrives unexpected
  ASSERT_TRUE(r.ok());
  Status waited;
  std::thread driver([&] { waited = g.ranks[0]->WaitAll({&*r, 1}, Soon()); });
  Status authed = RawAuthenticate(fd.get(), "test-secret", 1, 0);
  ASSERT_TRUE(authed.ok()) << authed.ToString();
  // type data, tag 9, msg_id 1, total 1 TiB, offset 0, 64 bytes in this chunk.
  uint64_t header[6] = {1, 9, 1, uint64_t{1} << 40, 0, 64};
  std::string frame(reinterpret_cast<const char*>(header), sizeof header);
  frame += std::string(64, 'z');
  ASSERT_EQ(::send(fd.get(), frame.data(), frame.size(), MSG_NOSIGNAL),
            static_cast<ssize_t>(frame.size()));
  driver.join();
  EXPECT_EQ(waited.code(), StatusCode::kResourceExhausted) << waited.ToString();
  EXPECT_NE(waited.message().find("rank 1"), std::string::npos) << waited.ToString();
  EXPECT_NE(waited.message().find("1099511627776 bytes with tag 0x9 before its receive"),
            std::string::npos)
      << waited.ToString();
  EXPECT_TRUE(ClosedByPeer(fd.get()));
}

// Connections that never speak, three times the cap, queued before the ranks exchange: the
// real ranks still connect, and every idle connection is closed (dropped for a newer one or
// at the handshake deadline) while rank 0 keeps driving progress.
TEST(TcpTransport, IdleConnectionFloodIsCappedAndExpires) {
  auto g = StartTransportGroupForTest(NewTcpTransport, 2);
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  std::vector<base::UniqueFd> idle;
  for (size_t i = 0; i < 3 * kMaxPendingHandshakes; ++i) {
    idle.push_back(RawConnect(g.ranks[0]->peer(0).address));
    ASSERT_TRUE(idle.back().valid()) << i;
    timeval tv{20, 0};  // past the 5 s handshake deadline
    setsockopt(idle.back().get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  }
  ExpectAllOk(RunRanksForTest(g, [&](int rank, Transport& t) -> Status {
    std::vector<uint8_t> out(1 << 20, static_cast<uint8_t>(rank)), in(1 << 20);
    RY_ASSIGN_OR_RETURN(Request s, t.PostSend(1 - rank, 3, out.data(), out.size()));
    RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(1 - rank, 3, in.data(), in.size()));
    Request both[] = {s, r};
    RY_RETURN_IF_ERROR(t.WaitAll(both, Soon()));
    if (in != std::vector<uint8_t>(1 << 20, static_cast<uint8_t>(1 - rank))) {
      return Internal("wrong bytes");
    }
    return Status::Ok();
  }));
  // Rank 0 waits for a last message while the test watches the idle connections close.
  char c = 0, one = 'z';
  auto r = g.ranks[0]->PostRecv(1, 8, &c, 1);
  ASSERT_TRUE(r.ok());
  Status waited;
  std::thread driver([&] { waited = g.ranks[0]->WaitAll({&*r, 1}, Soon()); });
  size_t closed = 0;
  for (auto& fd : idle) closed += ClosedByPeer(fd.get()) ? 1 : 0;
  auto s = g.ranks[1]->PostSend(0, 8, &one, 1);
  ASSERT_TRUE(s.ok());
  EXPECT_TRUE(g.ranks[1]->WaitAll({&*s, 1}, Soon()).ok());
  driver.join();
  EXPECT_EQ(closed, idle.size());
  EXPECT_TRUE(waited.ok()) << waited.ToString();
  EXPECT_EQ(c, 'z');
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
  t = NewTcpTransport(o, TcpOptions{.congestion = "nosuchcc"});
  EXPECT_EQ(t.status().code(), StatusCode::kNotFound) << t.status().ToString();
  EXPECT_NE(t.status().message().find("'nosuchcc' is not available"), std::string::npos)
      << t.status().ToString();
  EXPECT_EQ(NewTcpTransport(o, TcpOptions{.congestion = "cubic;x"}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(NewTcpTransport(o, TcpOptions{.streams_per_peer = 0}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(NewTcpTransport(o, TcpOptions{.spin_polls = -1}).status().code(),
            StatusCode::kInvalidArgument);
}

// With spin_polls 0 every wait sleeps in epoll at once; messages small and large (split
// across streams) still flow both ways.
TEST(TcpTransport, WaitsThatNeverPollStillComplete) {
  auto g = StartTransportGroupForTest(NewTcpTransport, 2, {}, TcpOptions{.spin_polls = 0});
  ASSERT_TRUE(g.status.ok()) << g.status.ToString();
  ExpectAllOk(RunRanksForTest(g, [&](int rank, Transport& t) -> Status {
    const int peer = 1 - rank;
    for (size_t n : {size_t{8}, size_t{1} << 20}) {
      std::vector<char> out(n, static_cast<char>('a' + rank)), in(n);
      RY_ASSIGN_OR_RETURN(Request s, t.PostSend(peer, 4, out.data(), n));
      RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(peer, 4, in.data(), n));
      Request both[] = {s, r};
      RY_RETURN_IF_ERROR(t.WaitAll(both, Soon()));
      if (in != std::vector<char>(n, static_cast<char>('a' + peer))) {
        return Internal("{}-byte message corrupted", n);
      }
    }
    return Status::Ok();
  }));
}

// A bound socket that does not listen at `addr` ("ip:port"): connects to it are refused, and
// no other process can take the port meanwhile.
base::UniqueFd BindWithoutListening(const std::string& addr) {
  sockaddr_in a = SocketAddress(addr);
  base::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  int one = 1;
  setsockopt(fd.get(), SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) fd.Reset();
  return fd;
}

// Two ranks, then rank 1 gone and its port bound by `port_` without listening: rank 0's
// connects to `addr_` are refused. TearDown clears the connect hook, also after a failure.
class TcpConnectRetryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    g_ = StartTransportGroupForTest(NewTcpTransport, 2);
    ASSERT_TRUE(g_.status.ok()) << g_.status.ToString();
    addr_ = g_.ranks[0]->peer(1).address;
    g_.ranks[1].reset();
    port_ = BindWithoutListening(addr_);
    ASSERT_TRUE(port_.valid()) << addr_ << ": " << std::strerror(errno);
  }
  void TearDown() override { tcp::SetConnectFailureHookForTest({}); }

  TransportGroup g_;
  std::string addr_;
  base::UniqueFd port_;
};

// Rank 1's port refuses connections until rank 0's first refusal has been seen, then
// listens: rank 0's connect is retried and reaches it (its hello arrives), instead of
// failing the peer at the first refusal.
TEST_F(TcpConnectRetryTest, ConnectIsRetriedUntilThePeerListens) {
  std::atomic<int> refusals{0};
  std::promise<void> listening;
  tcp::SetConnectFailureHookForTest([&](int err) {
    if (err != ECONNREFUSED || refusals++ > 0) return;
    ASSERT_EQ(::listen(port_.get(), 4), 0) << std::strerror(errno);
    listening.set_value();
  });
  char c = 'x';
  auto s = g_.ranks[0]->PostSend(1, 1, &c, 1);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Status sent;
  std::thread driver([&] { sent = g_.ranks[0]->WaitAll({&*s, 1}, Soon()); });
  ASSERT_EQ(listening.get_future().wait_for(seconds(20)), std::future_status::ready);
  pollfd pf{port_.get(), POLLIN, 0};
  ASSERT_EQ(::poll(&pf, 1, 20'000), 1);
  base::UniqueFd conn(::accept4(port_.get(), nullptr, nullptr, SOCK_CLOEXEC));
  ASSERT_TRUE(conn.valid()) << std::strerror(errno);
  timeval tv{20, 0};
  setsockopt(conn.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  std::string hello(64, '\0');
  ssize_t n = ::recv(conn.get(), hello.data(), hello.size(), 0);
  EXPECT_GT(n, 0) << "rank 0 connected but sent no hello";
  conn.Reset();  // no challenge: rank 0 gives up on this listener
  driver.join();
  EXPECT_GE(refusals.load(), 1);
  EXPECT_FALSE(sent.ok());
  EXPECT_NE(sent.message().find("closed the connection before proving the job secret"),
            std::string::npos)
      << sent.ToString();
}

// A port that never listens: the connect is retried briefly, then the peer fails with the
// errno text, naming its rank and address.
TEST_F(TcpConnectRetryTest, ConnectToAPortThatNeverListensFailsNamingTheAddress) {
  std::atomic<int> refusals{0};
  tcp::SetConnectFailureHookForTest([&](int err) { refusals += err == ECONNREFUSED; });
  char c = 'x';
  auto s = g_.ranks[0]->PostSend(1, 1, &c, 1);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Status sent = g_.ranks[0]->WaitAll({&*s, 1}, Soon());
  EXPECT_FALSE(sent.ok());
  EXPECT_NE(sent.message().find("rank 1"), std::string::npos) << sent.ToString();
  EXPECT_NE(sent.message().find("connect to " + addr_ + ": Connection refused"), std::string::npos)
      << sent.ToString();
  EXPECT_GT(refusals.load(), 1) << "the refused connect was not retried";
  EXPECT_TRUE(tcp::IsTransientConnectError(EHOSTUNREACH));
  EXPECT_TRUE(tcp::IsTransientConnectError(ENETUNREACH));
  EXPECT_TRUE(tcp::IsTransientConnectError(ETIMEDOUT));
  EXPECT_FALSE(tcp::IsTransientConnectError(EACCES));
}

}  // namespace
}  // namespace railyard::net
