#include <arpa/inet.h>
#include <fcntl.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <latch>
#include <mutex>
#include <random>
#include <thread>
#include <vector>

#include "railyard/base/files.h"
#include "railyard/base/hmac.h"
#include "railyard/base/logging.h"
#include "railyard/net/handshake.h"
#include "railyard/net/store/tcp_store_client.h"
#include "railyard/net/store/tcp_store_server.h"
#include "railyard/net/transport_testing.h"

namespace railyard::net {
namespace {

using base::Deadline;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr std::string_view kSecret = "job-secret-0123456789";
// The store's side of net/handshake.h, spelled out here so the test also pins the wire.
constexpr HandshakeProtocol kStoreProtocol = {.magic = 0x52595354,
                                              .version = 2,
                                              .domain = "railyard-store",
                                              .acceptor = "Railyard's store",
                                              .context_bytes = 0};

Deadline Soon() { return Deadline::After(seconds(20)); }

bool Contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

class TcpStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server =
        TcpStoreServer::Start({.bind_ip = "127.0.0.1", .port = 0, .secret = std::string(kSecret)});
    ASSERT_TRUE(server.ok()) << server.status().ToString();
    server_ = std::move(server).value();
  }

  std::unique_ptr<Store> Connect() {
    auto store = ConnectTcpStore(server_->address(), kSecret, Soon());
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  std::unique_ptr<TcpStoreServer> server_;
};

// A raw TCP connection to the server, for speaking the protocol wrongly on purpose.
class RawClient {
 public:
  explicit RawClient(int port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    connected_ = ::connect(fd_.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0;
    socklen_t len = sizeof(a);
    ::getsockname(fd_.get(), reinterpret_cast<sockaddr*>(&a), &len);
    local_ = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  }
  bool connected() const { return connected_; }
  const std::string& local() const { return local_; }

  std::string Read(size_t n) {
    std::string out(n, '\0');
    size_t got = 0;
    Deadline d = Soon();
    while (got < n) {
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, d.PollTimeoutMs()) <= 0) break;
      ssize_t r = ::recv(fd_.get(), out.data() + got, n - got, 0);
      if (r <= 0) break;
      got += static_cast<size_t>(r);
    }
    out.resize(got);
    return out;
  }
  void Write(std::string_view data) {
    ASSERT_EQ(::send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL),
              static_cast<ssize_t>(data.size()));
  }
  // Runs the client's side of the handshake; the store's verdict on its secret.
  Status Authenticate(std::string_view secret) {
    Handshake h(kStoreProtocol, secret);
    Write(h.ConnectorHello(""));
    std::string challenge = Read(kChallengeBytes);
    if (challenge.size() != kChallengeBytes) return Unavailable("no challenge");
    RY_ASSIGN_OR_RETURN(std::string answer, h.ConnectorAnswer(challenge, "store"));
    Write(answer);
    return Status::Ok();
  }
  // True when the server closed the connection (EOF or reset) before the deadline.
  bool ClosedByServer() {
    Deadline d = Soon();
    char buf[256];
    for (;;) {
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, d.PollTimeoutMs()) <= 0) return false;
      ssize_t r = ::recv(fd_.get(), buf, sizeof(buf), 0);
      if (r <= 0) return true;
    }
  }

 private:
  base::UniqueFd fd_;
  bool connected_ = false;
  std::string local_;
};

std::string BigEndian32(uint32_t v) {
  std::string s;
  for (int i = 3; i >= 0; --i) s += static_cast<char>(v >> (8 * i));
  return s;
}

TEST_F(TcpStoreTest, SetGetAddCompareAndSetWait) {
  auto store = Connect();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->Describe(), "tcp store " + server_->address());
  ASSERT_TRUE(store->Set("a", "1", Soon()).ok());
  ASSERT_TRUE(store->Set("a", "alpha", Soon()).ok());
  EXPECT_EQ(*store->Get("a", Soon()), "alpha");
  ASSERT_TRUE(store->Set("empty", "", Soon()).ok());
  EXPECT_EQ(*store->Get("empty", Soon()), "");
  std::string binary("\0\xff\n", 3);
  ASSERT_TRUE(store->Set(binary, binary, Soon()).ok());
  EXPECT_EQ(*store->Get(binary, Soon()), binary);

  EXPECT_EQ(*store->Add("n", 5, Soon()), 5);
  EXPECT_EQ(*store->Add("n", -7, Soon()), -2);
  auto bad = store->Add("a", 1, Soon());
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(Contains(bad.status().message(), "'a'")) << bad.status().message();
  EXPECT_EQ(*store->Get("a", Soon()), "alpha");  // untouched by the failed Add

  EXPECT_EQ(*store->CompareAndSet("c", "", "first", Soon()), "first");   // absent matches ""
  EXPECT_EQ(*store->CompareAndSet("c", "wrong", "x", Soon()), "first");  // unchanged
  EXPECT_EQ(*store->CompareAndSet("c", "first", "second", Soon()), "second");
  EXPECT_EQ(*store->Get("c", Soon()), "second");

  std::vector<std::string> keys = {"a", "n", "c"};
  EXPECT_TRUE(store->Wait(keys, Soon()).ok());
  EXPECT_TRUE(store->Wait({}, Soon()).ok());
}

TEST_F(TcpStoreTest, LargestValueRoundTrips) {
  auto store = Connect();
  ASSERT_NE(store, nullptr);
  std::string big(kMaxStoreValueBytes, 'v');
  big[12345] = 'x';
  ASSERT_TRUE(store->Set("big", big, Soon()).ok());
  EXPECT_EQ(*store->Get("big", Soon()), big);
  auto too_big = store->Set("big", big + "!", Soon());
  EXPECT_EQ(too_big.code(), StatusCode::kInvalidArgument);
  auto long_key = store->Set(std::string(kMaxStoreKeyBytes + 1, 'k'), "v", Soon());
  EXPECT_EQ(long_key.code(), StatusCode::kInvalidArgument);
}

TEST_F(TcpStoreTest, ThreadsShareClientsAtomically) {
  auto shared = Connect();
  ASSERT_NE(shared, nullptr);
  constexpr int kThreads = 8;
  constexpr int kAdds = 50;
  constexpr int kCasIncrements = 20;
  std::vector<std::thread> threads;
  std::vector<Status> errors(kThreads);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      // Half the threads share one client; the others each have their own (a thread whose
      // own client cannot connect fails, rather than quietly using the shared one).
      std::unique_ptr<Store> own;
      if (t % 2) {
        auto c = ConnectTcpStore(server_->address(), kSecret, Soon());
        if (!c.ok()) {
          errors[t] = c.status();
          return;
        }
        own = std::move(c).value();
      }
      Store* store = own ? own.get() : shared.get();
      for (int i = 0; i < kAdds; ++i) {
        auto r = store->Add("adds", 1, Soon());
        if (!r.ok()) errors[t] = r.status();
      }
      for (int i = 0; i < kCasIncrements;) {  // a read-modify-write loop on CompareAndSet
        auto cur = store->CompareAndSet("cas", "", "0", Soon());
        if (!cur.ok()) {
          errors[t] = cur.status();
          return;
        }
        // The thread's name in the value makes success unambiguous: CompareAndSet returns the
        // present value on failure, which could otherwise equal another thread's `next`.
        std::string next = std::to_string(std::stoi(*cur) + 1) + "/t" + std::to_string(t);
        auto r = store->CompareAndSet("cas", *cur, next, Soon());
        if (r.ok() && *r == next) ++i;
      }
      Status s = store->Set("done/" + std::to_string(t), "1", Soon());
      if (!s.ok()) errors[t] = s;
      std::vector<std::string> all;
      for (int k = 0; k < kThreads; ++k) all.push_back("done/" + std::to_string(k));
      s = store->Wait(all, Soon());
      if (!s.ok()) errors[t] = s;
    });
  }
  for (auto& th : threads) th.join();
  for (const auto& e : errors) EXPECT_TRUE(e.ok()) << e.ToString();
  EXPECT_EQ(*shared->Get("adds", Soon()), std::to_string(kThreads * kAdds));
  EXPECT_EQ(std::stoi(*shared->Get("cas", Soon())), kThreads * kCasIncrements);
}

TEST_F(TcpStoreTest, GetWaitsUntilAnotherClientSets) {
  auto reader = Connect();
  auto writer = Connect();
  ASSERT_TRUE(reader && writer);
  Result<std::string> got = Status(StatusCode::kInternal, "not run");
  std::thread t([&] { got = reader->Get("late", Soon()); });
  Deadline d = Soon();
  while (server_->ParkedRequestsForTest() == 0 && !d.Expired()) std::this_thread::yield();
  EXPECT_EQ(server_->ParkedRequestsForTest(), 1u);  // parked on the server, not polling
  ASSERT_TRUE(writer->Set("late", "value", Soon()).ok());
  t.join();
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ(*got, "value");
  EXPECT_EQ(server_->ParkedRequestsForTest(), 0u);
}

TEST_F(TcpStoreTest, ParkedThreadDoesNotBlockOthersOnTheSameClient) {
  auto store = Connect();
  ASSERT_NE(store, nullptr);
  Status waited = Status(StatusCode::kInternal, "not run");
  std::thread t([&] {
    std::vector<std::string> keys = {"x", "y"};
    waited = store->Wait(keys, Soon());
  });
  Deadline d = Soon();
  while (server_->ParkedRequestsForTest() == 0 && !d.Expired()) std::this_thread::yield();
  ASSERT_TRUE(store->Set("x", "1", Soon()).ok());
  ASSERT_TRUE(store->Set("y", "2", Soon()).ok());
  t.join();
  EXPECT_TRUE(waited.ok()) << waited.ToString();
}

TEST_F(TcpStoreTest, GetAndWaitDeadlinesNameKeys) {
  auto store = Connect();
  ASSERT_NE(store, nullptr);
  auto r = store->Get("never/set", Deadline::After(milliseconds(200)));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(Contains(r.status().message(), "'never/set'")) << r.status().message();
  EXPECT_TRUE(Contains(r.status().message(), server_->address())) << r.status().message();

  ASSERT_TRUE(store->Set("present", "1", Soon()).ok());
  std::vector<std::string> keys = {"present", "missing1", "missing2"};
  std::vector<std::string> missing;
  Status s = store->Wait(keys, Deadline::After(milliseconds(200)), &missing);
  EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(Contains(s.message(), "missing1, missing2")) << s.message();
  // The server's list, for callers that name ranks from it.
  EXPECT_EQ(missing, (std::vector<std::string>{"missing1", "missing2"}));
  // The client still works after timeouts.
  EXPECT_EQ(*store->Get("present", Soon()), "1");
  EXPECT_EQ(server_->ParkedRequestsForTest(), 0u);
}

TEST(TcpStoreConnectTest, NothingListeningEndsAtDeadlineNamingAddress) {
  // A port bound and closed again: connects are refused (and retried) until the deadline.
  base::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  ASSERT_EQ(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
  fd.Reset();
  std::string address = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  auto r = ConnectTcpStore(address, kSecret, Deadline::After(milliseconds(300)));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(Contains(r.status().message(), address)) << r.status().message();
}

TEST(TcpStoreConnectTest, ListenerThatNeverAnswersEndsAtDeadline) {
  base::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(fd.get(), 4), 0);  // never accepts, never greets
  socklen_t len = sizeof(a);
  ASSERT_EQ(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
  std::string address = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  auto r = ConnectTcpStore(address, kSecret, Deadline::After(milliseconds(300)));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_TRUE(Contains(r.status().message(), address)) << r.status().message();
}

TEST(TcpStoreConnectTest, MalformedAddressIsInvalid) {
  for (std::string_view bad : {"127.0.0.1", "127.0.0.1:", "127.0.0.1:99999", ":80", "h:x"}) {
    auto r = ConnectTcpStore(bad, kSecret, Soon());
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(
      TcpStoreServer::Start({.bind_ip = "localhost", .port = 0, .secret = ""}).status().code(),
      StatusCode::kInvalidArgument);
}

TEST(TcpStoreConnectTest, ClientStartedBeforeServerConnectsWhenItComesUp) {
  // Reserve a port number, free it, and have the client retry until the server takes it.
  base::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  socklen_t len = sizeof(a);
  ASSERT_EQ(::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
  int port = ntohs(a.sin_port);
  fd.Reset();
  Result<std::unique_ptr<Store>> client = Status(StatusCode::kInternal, "not run");
  std::thread t(
      [&] { client = ConnectTcpStore("127.0.0.1:" + std::to_string(port), kSecret, Soon()); });
  auto server =
      TcpStoreServer::Start({.bind_ip = "127.0.0.1", .port = port, .secret = std::string(kSecret)});
  ASSERT_TRUE(server.ok()) << server.status().ToString();
  t.join();
  ASSERT_TRUE(client.ok()) << client.status().ToString();
  EXPECT_TRUE((*client)->Set("k", "v", Soon()).ok());
}

// A client with another secret finds that the store cannot prove it, sends nothing more, and
// the store logs the client that left; a raw peer that answers with a forged proof is
// refused and logged by address.
TEST_F(TcpStoreTest, WrongSecretIsRefusedBothWaysAndLogged) {
  LogCapture logs;
  auto r = ConnectTcpStore(server_->address(), "not-the-secret", Soon());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(r.status().message(), "tcp store " + server_->address() +
                                      " did not prove the job secret: wrong RAILYARD_JOB_SECRET, "
                                      "or not Railyard's store; nothing was sent to it");
  RawClient raw(server_->port());
  ASSERT_TRUE(raw.connected());
  Handshake h(kStoreProtocol, kSecret);
  raw.Write(h.ConnectorHello(""));
  ASSERT_EQ(raw.Read(kChallengeBytes).size(), kChallengeBytes);
  raw.Write(base::RandomBytes(kAnswerBytes));
  EXPECT_TRUE(raw.ClosedByServer());
  // The log sink is called from the server thread: wait for the line, with a deadline.
  Deadline d = Soon();
  while (!(Contains(logs.Lines(), "refused client " + raw.local()) &&
           Contains(logs.Lines(), "without proving the job secret")) &&
         !d.Expired()) {
    std::this_thread::yield();
  }
  EXPECT_TRUE(Contains(logs.Lines(), "refused client " + raw.local())) << logs.Lines();
  EXPECT_TRUE(Contains(logs.Lines(), "without proving the job secret")) << logs.Lines();
  EXPECT_EQ(server_->PendingHandshakesForTest(), 0u);
}

// A server on the store's port that answers the hello with a made-up proof (it does not
// know the secret): the client refuses it, names it, and never sends its answer or a key.
TEST(TcpStoreConnectTest, ClientRefusesAStoreThatCannotProveTheSecret) {
  base::UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)), 0);
  ASSERT_EQ(::listen(listener.get(), 4), 0);
  socklen_t len = sizeof(a);
  ASSERT_EQ(::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len), 0);
  std::string address = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
  std::string after_challenge;  // whatever the client sends once it got the fake proof
  std::thread fake([&] {
    base::UniqueFd c(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    if (!c.valid()) return;
    std::string hello(kHelloHeaderBytes, '\0');
    if (::recv(c.get(), hello.data(), hello.size(), MSG_WAITALL) !=
        static_cast<ssize_t>(hello.size())) {
      return;
    }
    std::string challenge = base::RandomBytes(kChallengeBytes);
    (void)!::send(c.get(), challenge.data(), challenge.size(), MSG_NOSIGNAL);
    char buf[256];
    timeval tv{10, 0};
    ::setsockopt(c.get(), SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    for (;;) {  // until the client closes (or 10 s pass)
      ssize_t n = ::recv(c.get(), buf, sizeof(buf), 0);
      if (n <= 0) break;
      after_challenge.append(buf, static_cast<size_t>(n));
    }
  });
  auto r = ConnectTcpStore(address, kSecret, Soon());
  fake.join();
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kPermissionDenied) << r.status().ToString();
  EXPECT_TRUE(Contains(r.status().message(), "tcp store " + address +
                                                 " did not prove the job "
                                                 "secret"))
      << r.status().message();
  EXPECT_EQ(after_challenge, "") << "the client sent bytes to a store that failed its proof";
}

// Hundreds of connections that never speak: at most kMaxPendingHandshakes are held, the
// rest are dropped oldest-idle first, a real client still gets in, and idle ones left over
// are closed at the handshake deadline.
TEST_F(TcpStoreTest, IdleConnectionFloodIsCappedAndExpires) {
  constexpr size_t kIdle = 3 * kMaxPendingHandshakes;
  std::vector<std::unique_ptr<RawClient>> idle;
  for (size_t i = 0; i < kIdle; ++i) {
    idle.push_back(std::make_unique<RawClient>(server_->port()));
    ASSERT_TRUE(idle.back()->connected()) << i;
  }
  auto store = Connect();
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(store->Set("k", "v", Soon()).ok());
  EXPECT_EQ(*store->Get("k", Soon()), "v");
  EXPECT_LE(server_->PendingHandshakesForTest(), kMaxPendingHandshakes);
  // Every idle connection is closed by the server: dropped for a newer one, or at the
  // deadline (kHandshakeTimeout) for the last ones. ClosedByServer waits up to 20 s.
  size_t closed = 0;
  for (auto& c : idle) closed += c->ClosedByServer() ? 1 : 0;
  EXPECT_EQ(closed, kIdle);
  EXPECT_EQ(server_->PendingHandshakesForTest(), 0u);
  EXPECT_EQ(*store->Get("k", Soon()), "v");  // the authenticated client is untouched
}

TEST_F(TcpStoreTest, OversizedAndGarbageFramesCloseOnlyThatConnection) {
  LogCapture logs;
  auto good = Connect();
  ASSERT_NE(good, nullptr);
  ASSERT_TRUE(good->Set("k", "v", Soon()).ok());

  RawClient huge(server_->port());
  ASSERT_TRUE(huge.Authenticate(kSecret).ok());
  huge.Write(BigEndian32(0xffffffff));  // claims 4 GiB: must not be allocated
  EXPECT_TRUE(huge.ClosedByServer());
  EXPECT_TRUE(Contains(logs.Lines(), huge.local())) << logs.Lines();
  EXPECT_TRUE(Contains(logs.Lines(), "4294967295 bytes")) << logs.Lines();

  RawClient lying(server_->port());  // a frame whose field count is a lie
  ASSERT_TRUE(lying.Authenticate(kSecret).ok());
  std::string body = std::string(1, '\2') + std::string(8, '\0') + BigEndian32(1000000) + "xy";
  lying.Write(BigEndian32(static_cast<uint32_t>(body.size())) + body);
  EXPECT_TRUE(lying.ClosedByServer());
  EXPECT_TRUE(Contains(logs.Lines(), lying.local())) << logs.Lines();

  RawClient noise(server_->port());
  ASSERT_TRUE(noise.Authenticate(kSecret).ok());
  std::mt19937 rng(42);  // fixed seed: the same garbage every run
  std::string junk(4096, '\0');
  for (char& c : junk) c = static_cast<char>(rng());
  junk.replace(0, 4, BigEndian32(300));  // a plausible length: the body itself is parsed
  noise.Write(junk);
  EXPECT_TRUE(noise.ClosedByServer());

  RawClient unknown_op(server_->port());
  ASSERT_TRUE(unknown_op.Authenticate(kSecret).ok());
  body = std::string(1, '\x7f') + std::string(8, '\0') + BigEndian32(0);
  unknown_op.Write(BigEndian32(static_cast<uint32_t>(body.size())) + body);
  EXPECT_TRUE(unknown_op.ClosedByServer());

  EXPECT_EQ(*good->Get("k", Soon()), "v");  // the server and other clients are fine
  EXPECT_EQ(*good->Add("n", 1, Soon()), 1);
  EXPECT_TRUE(server_->health().ok());
}

TEST_F(TcpStoreTest, SixtyFourClientsConnectAtOnce) {
  constexpr int kClients = 64;
  std::latch start(kClients);
  std::vector<Status> results(kClients);
  std::vector<std::thread> threads;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      start.arrive_and_wait();
      auto store = ConnectTcpStore(server_->address(), kSecret, Soon());
      if (!store.ok()) {
        results[i] = store.status();
        return;
      }
      results[i] = (*store)->Add("arrived", 1, Soon()).status();
    });
  }
  for (auto& t : threads) t.join();
  for (const auto& r : results) EXPECT_TRUE(r.ok()) << r.ToString();
  auto store = Connect();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(*store->Get("arrived", Soon()), std::to_string(kClients));
}

TEST_F(TcpStoreTest, StoppingServerReleasesConnectedAndWaitingClients) {
  auto idle = Connect();
  auto waiter = Connect();
  ASSERT_TRUE(idle && waiter);
  Result<std::string> got = Status(StatusCode::kInternal, "not run");
  std::thread t([&] { got = waiter->Get("never", Deadline::After(seconds(60))); });
  Deadline d = Soon();
  while (server_->ParkedRequestsForTest() == 0 && !d.Expired()) std::this_thread::yield();
  ASSERT_EQ(server_->ParkedRequestsForTest(), 1u);
  std::string address = server_->address();
  server_.reset();  // joins its thread while clients are connected
  t.join();
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kUnavailable) << got.status().ToString();
  EXPECT_TRUE(Contains(got.status().message(), address)) << got.status().message();
  Status s = idle->Set("k", "v", Deadline::After(milliseconds(200)));
  EXPECT_FALSE(s.ok());
  EXPECT_TRUE(Contains(s.message(), address)) << s.message();
}

// A TcpStoreServer in a forked child, so that the test can freeze it (SIGSTOP) while clients
// stay connected: the kernel keeps the sockets open and even completes new connections, but
// nothing answers. The child is SIGKILLed and reaped on destruction, also when a test fails.
class StoppableServerProcess {
 public:
  StoppableServerProcess() = default;
  StoppableServerProcess(const StoppableServerProcess&) = delete;
  StoppableServerProcess& operator=(const StoppableServerProcess&) = delete;
  ~StoppableServerProcess() {
    if (pid_ <= 0) return;
    ::kill(pid_, SIGKILL);  // works on a stopped process too
    while (::waitpid(pid_, nullptr, 0) < 0 && errno == EINTR) {
    }
  }

  // Forks the child and waits (until `deadline`) for it to report its port.
  Status Start(Deadline deadline) {
    int fds[2];
    if (::pipe2(fds, O_CLOEXEC) != 0) return ErrnoStatus(errno, "pipe");
    base::UniqueFd read_end(fds[0]);
    base::UniqueFd write_end(fds[1]);
    pid_t parent = ::getpid();
    pid_ = ::fork();
    if (pid_ < 0) return ErrnoStatus(errno, "fork");
    if (pid_ == 0) {
      // Dies with the test process, even if the test crashes before the guard runs.
      ::prctl(PR_SET_PDEATHSIG, SIGKILL);
      if (::getppid() != parent) std::_Exit(1);
      read_end.Reset();
      auto server = TcpStoreServer::Start(
          {.bind_ip = "127.0.0.1", .port = 0, .secret = std::string(kSecret)});
      if (!server.ok()) std::_Exit(2);
      int port = (*server)->port();
      if (::write(write_end.get(), &port, sizeof(port)) != sizeof(port)) std::_Exit(3);
      for (;;) ::pause();  // serves until killed
    }
    write_end.Reset();
    pollfd p{read_end.get(), POLLIN, 0};
    if (::poll(&p, 1, deadline.PollTimeoutMs()) != 1) {
      return DeadlineExceeded("the store child did not report its port");
    }
    int port = 0;
    if (::read(read_end.get(), &port, sizeof(port)) != sizeof(port)) {
      return Internal("the store child exited before serving");
    }
    address_ = "127.0.0.1:" + std::to_string(port);
    return Status::Ok();
  }

  // SIGSTOPs the child and returns once it is really stopped (or at `deadline`).
  Status Freeze(Deadline deadline) {
    if (::kill(pid_, SIGSTOP) != 0) return ErrnoStatus(errno, "kill SIGSTOP");
    for (;;) {
      int status = 0;
      pid_t r = ::waitpid(pid_, &status, WUNTRACED | WNOHANG);
      if (r == pid_ && WIFSTOPPED(status)) return Status::Ok();
      if (r == pid_) return Internal("the store child ended instead of stopping");
      if (r < 0 && errno != EINTR) return ErrnoStatus(errno, "waitpid");
      if (deadline.Expired()) return DeadlineExceeded("the store child did not stop");
      std::this_thread::yield();
    }
  }

  const std::string& address() const { return address_; }

 private:
  pid_t pid_ = -1;
  std::string address_;
};

TEST(TcpStoreStoppedServerTest, EveryOperationEndsAtItsDeadlineNamingServerAndKey) {
  StoppableServerProcess server;
  ASSERT_TRUE(server.Start(Soon()).ok());
  const std::string& address = server.address();
  // One client per operation, each with an authenticated idle connection made while the
  // server still answered: the request goes out and the answer never comes.
  std::vector<std::unique_ptr<Store>> clients;
  for (int i = 0; i < 5; ++i) {
    auto c = ConnectTcpStore(address, kSecret, Soon());
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    clients.push_back(std::move(c).value());
  }
  ASSERT_TRUE(clients[0]->Set("warm", "1", Soon()).ok());  // it does answer before the stop
  Status frozen = server.Freeze(Soon());
  ASSERT_TRUE(frozen.ok()) << frozen.ToString();

  auto brief = [] { return Deadline::After(milliseconds(300)); };
  auto check = [&](const Status& s, std::string_view key) {
    EXPECT_EQ(s.code(), StatusCode::kDeadlineExceeded) << s.ToString();
    EXPECT_TRUE(Contains(s.message(), address)) << s.message();
    EXPECT_TRUE(Contains(s.message(), key)) << s.message();
  };
  check(clients[0]->Set("frozen/set", "v", brief()), "'frozen/set'");
  check(clients[1]->Get("frozen/get", brief()).status(), "'frozen/get'");
  check(clients[2]->Add("frozen/add", 1, brief()).status(), "'frozen/add'");
  check(clients[3]->CompareAndSet("frozen/cas", "", "v", brief()).status(), "'frozen/cas'");
  std::vector<std::string> keys = {"frozen/wait1", "frozen/wait2"};
  check(clients[4]->Wait(keys, brief()), "frozen/wait1, frozen/wait2");

  // The timed-out connections were dropped, so a second call has to connect afresh; the
  // kernel accepts, but no greeting comes. That too ends at the deadline, naming the server
  // and the key.
  check(clients[0]->Set("frozen/set2", "v", brief()), "frozen/set2");
  check(clients[1]->Get("frozen/get2", brief()).status(), "frozen/get2");
}

}  // namespace
}  // namespace railyard::net
