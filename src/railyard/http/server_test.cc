// The extender over HTTP, driven as clients and attackers would: real sockets on loopback,
// every wait bounded by a deadline, every load bounded in count.
#include "railyard/http/server.h"

#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <thread>

#include "railyard/base/clock.h"
#include "railyard/base/files.h"

namespace railyard::http {
namespace {

using nlohmann::json;
using namespace std::chrono_literals;

// Every wait in these tests ends by this; none is expected to come near it.
constexpr auto kWait = 20s;

topo::Cluster Small() {
  topo::ClusterBuilder b("test");
  b.SetLevels({"leaf"});
  b.AddSwitch("leaf0", "leaf", "", 0);
  b.AddSwitch("leaf1", "leaf", "", 0);
  for (int i = 0; i < 4; ++i) {
    topo::Node n;
    n.name = "n" + std::to_string(i);
    b.AddNode(n, i < 2 ? "leaf0" : "leaf1");
  }
  return *std::move(b).Finish();
}

const char kFilterBody[] = R"({"Pod":{"metadata":{"name":"p","labels":{"railyard.io/group":"g"}}},
                              "Nodes":null,"NodeNames":["n0","n2","zz"]})";

// A raw TCP client: what a slow or hostile one sends, byte for byte.
class RawClient {
 public:
  explicit RawClient(int port) : fd_(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    connected_ = ::connect(fd_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
  }
  bool connected() const { return connected_; }
  bool Send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd_.get(), data.data(), data.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }
  // Whether the server sent something (or closed) within `wait`.
  bool Readable(std::chrono::milliseconds wait) {
    pollfd p{fd_.get(), POLLIN, 0};
    return ::poll(&p, 1, static_cast<int>(wait.count())) == 1;
  }
  // One whole response (head and Content-Length body); "" on EOF or at the deadline.
  std::string ReadResponse() {
    const base::Deadline deadline = base::Deadline::After(kWait);
    while (true) {
      size_t head = buf_.find("\r\n\r\n");
      if (head != std::string::npos) {
        size_t len = 0;
        size_t cl = buf_.find("Content-Length: ");
        if (cl != std::string::npos && cl < head) len = std::stoul(buf_.substr(cl + 16));
        if (buf_.size() >= head + 4 + len) {
          std::string out = buf_.substr(0, head + 4 + len);
          buf_.erase(0, head + 4 + len);
          return out;
        }
      }
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, deadline.PollTimeoutMs()) != 1) return "";
      char chunk[4096];
      ssize_t n = ::recv(fd_.get(), chunk, sizeof chunk, 0);
      if (n <= 0) return "";
      buf_.append(chunk, static_cast<size_t>(n));
    }
  }
  // Whether the server closed the connection (EOF) before the deadline.
  bool ClosedByServer() {
    const base::Deadline deadline = base::Deadline::After(kWait);
    char chunk[4096];
    while (true) {
      pollfd p{fd_.get(), POLLIN, 0};
      if (::poll(&p, 1, deadline.PollTimeoutMs()) != 1) return false;
      ssize_t n = ::recv(fd_.get(), chunk, sizeof chunk, 0);
      if (n <= 0) return true;
    }
  }

 private:
  base::UniqueFd fd_;
  bool connected_ = false;
  std::string buf_;
};

int StatusOf(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0) return -1;
  return std::stoi(response.substr(9, 3));
}

std::string BodyOf(const std::string& response) {
  size_t head = response.find("\r\n\r\n");
  return head == std::string::npos ? "" : response.substr(head + 4);
}

std::string Post(std::string_view path, std::string_view body, std::string_view extra = "") {
  return fmt::format(
      "POST {} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n{}"
      "Content-Length: {}\r\n\r\n{}",
      path, extra, body.size(), body);
}

class ServerTest : public ::testing::Test {
 protected:
  void Start(ExtenderServerOptions options = {}) {
    server_ = std::make_unique<ExtenderServer>(&ext_, std::move(options));
    ASSERT_TRUE(server_->Bind("127.0.0.1", 0).ok());
    thread_ = std::thread([this] { server_->Serve().IgnoreError(); });
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_connection_timeout(5, 0);
    client_->set_read_timeout(5, 0);
  }
  void TearDown() override {
    if (server_) server_->Stop();
    if (thread_.joinable()) thread_.join();
  }
  uint64_t Invalid(const std::string& reason) {
    auto counts = server_->InvalidCounts();
    auto it = counts.find(reason);
    return it == counts.end() ? 0 : it->second;
  }
  // A request on a fresh connection; the whole response, "" when none came.
  std::string Exchange(const std::string& request) {
    RawClient c(server_->port());
    if (!c.connected() || !c.Send(request)) return "";
    return c.ReadResponse();
  }
  void ExpectHealthyAndFiltering() {
    auto h = client_->Get("/healthz");
    ASSERT_TRUE(h) << httplib::to_string(h.error());
    EXPECT_EQ(h->status, 200);
    EXPECT_EQ(h->body, "ok\n");
    auto f = client_->Post("/filter", kFilterBody, "application/json");
    ASSERT_TRUE(f) << httplib::to_string(f.error());
    EXPECT_EQ(f->status, 200) << f->body;
    EXPECT_EQ(json::parse(f->body)["NodeNames"], json({"n0", "n2"}));
  }

  Extender ext_{Small()};
  std::unique_ptr<ExtenderServer> server_;
  std::thread thread_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(ServerTest, AnswersTheExtenderVerbsOverHttp) {
  Start();
  // A request body as kube-scheduler marshals it (Go field names, nodeCacheCapable).
  ASSERT_EQ(client_->Post("/bound", R"({"group":"g","node":"n1"})", "application/json")->status,
            200);
  auto f = client_->Post("/filter", kFilterBody, "application/json");
  ASSERT_TRUE(f);
  ASSERT_EQ(f->status, 200) << f->body;
  json fr = json::parse(f->body);
  EXPECT_EQ(fr["NodeNames"], json({"n0", "n2"}));
  EXPECT_TRUE(fr["FailedNodes"].contains("zz"));

  auto p = client_->Post("/prioritize", kFilterBody, "application/json");
  ASSERT_TRUE(p);
  ASSERT_EQ(p->status, 200) << p->body;
  json pr = json::parse(p->body);
  ASSERT_EQ(pr.size(), 3u);
  EXPECT_EQ(pr[0]["Host"], "n0");
  EXPECT_EQ(pr[0]["Score"], 10);  // shares leaf0 with the bound n1
  EXPECT_EQ(pr[1]["Score"], 0);

  // Without nodeCacheCapable the passing Node objects come back whole.
  json nodes = {{"Pod", {{"metadata", {{"labels", {{"railyard.io/group", "g"}}}}}}},
                {"Nodes",
                 {{"items",
                   {{{"metadata", {{"name", "n0"}, {"labels", {{"a", "b"}}}}}},
                    {{"metadata", {{"name", "zz"}}}}}}}}};
  auto n = client_->Post("/filter", nodes.dump(), "application/json");
  ASSERT_TRUE(n);
  ASSERT_EQ(n->status, 200) << n->body;
  json nr = json::parse(n->body);
  ASSERT_EQ(nr["Nodes"]["items"].size(), 1u);
  EXPECT_EQ(nr["Nodes"]["items"][0], nodes["Nodes"]["items"][0]);
}

TEST_F(ServerTest, GarbageGetsA400WithTheError) {
  Start();
  auto r = client_->Post("/filter", "{\"Pod\": [", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(json::parse(r->body)["Error"].get<std::string>().find("not valid JSON"),
            std::string::npos);
  auto b = client_->Post("/bound", R"({"group":"g","node":"nope"})", "application/json");
  EXPECT_EQ(b->status, 400);
  EXPECT_EQ(Invalid("malformed_json"), 1u);
  EXPECT_EQ(Invalid("invalid_args"), 1u);
}

TEST_F(ServerTest, HealthAndMetrics) {
  Start();
  auto h = client_->Get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->body, "ok\n");
  client_->Post("/filter", R"({"Pod":{},"NodeNames":["n0"]})", "application/json");
  auto m = client_->Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("railyard_extender_requests_total{verb=\"filter\"} 1"), std::string::npos)
      << m->body;
  EXPECT_NE(m->body.find("railyard_topology_nodes 4"), std::string::npos);
  EXPECT_NE(m->body.find("# TYPE railyard_extender_bound_pods gauge"), std::string::npos);
  EXPECT_NE(m->body.find("railyard_extender_invalid_requests_total{reason=\"too_deep\"} 0"),
            std::string::npos);
}

TEST_F(ServerTest, DeeplyNestedJsonGetsA400AndTheServerSurvives) {
  Start();
  // About 2 MB, a million levels: once enough to crash the extender in json copy and dump.
  constexpr size_t kLevels = 1'000'000;
  std::string arrays = std::string(kLevels, '[') + std::string(kLevels, ']');
  std::string objects;
  for (size_t i = 0; i < kLevels / 10; ++i) objects += "{\"a\":";
  objects += "1" + std::string(kLevels / 10, '}');
  for (const std::string* body : {&arrays, &objects}) {
    for (const char* path : {"/filter", "/prioritize", "/bound"}) {
      std::string r = Exchange(Post(path, *body));
      EXPECT_EQ(StatusOf(r), 400) << path << ": " << r.substr(0, 200);
      EXPECT_NE(BodyOf(r).find("deeper than 64 levels"), std::string::npos) << r.substr(0, 200);
    }
  }
  EXPECT_EQ(Invalid("too_deep"), 6u);
  // 64 levels are fine (a Pod's annotations may hold structured values); 65 are not.
  auto nested = [](int levels) {
    json v = 1;
    for (int i = 0; i < levels; ++i) v = json{{"x", v}};
    return v;
  };
  for (int inner : {60, 61}) {
    // ExtenderArgs, Pod, metadata and annotations are 4 levels around the value.
    json args = {{"Pod", {{"metadata", {{"annotations", {{"a", nested(inner)}}}}}}},
                 {"NodeNames", {"n0"}}};
    std::string r = Exchange(Post("/filter", args.dump()));
    EXPECT_EQ(StatusOf(r), inner == 60 ? 200 : 400) << inner << ": " << r.substr(0, 300);
  }
  ExpectHealthyAndFiltering();
}

TEST_F(ServerTest, OversizedBodyAndHeadAreRefusedBeforeTheyAreRead) {
  ExtenderServerOptions o;
  o.http.max_body_bytes = 1 << 20;
  o.http.max_head_bytes = 4096;
  Start(o);
  // The declared length decides: the body is never sent.
  RawClient big(server_->port());
  ASSERT_TRUE(big.Send("POST /filter HTTP/1.1\r\nContent-Length: 1048577\r\n\r\n{"));
  std::string r = big.ReadResponse();
  EXPECT_EQ(StatusOf(r), 413) << r;
  EXPECT_NE(BodyOf(r).find("exceeds the limit of 1048576 bytes"), std::string::npos);
  EXPECT_TRUE(big.ClosedByServer());

  std::string head = "GET /healthz HTTP/1.1\r\nX-Pad: " + std::string(8192, 'a');
  r = Exchange(head);  // no blank line yet: the head only grows
  EXPECT_EQ(StatusOf(r), 431) << r;
  EXPECT_EQ(Invalid("body_too_large"), 1u);
  EXPECT_EQ(Invalid("header_too_large"), 1u);
  ExpectHealthyAndFiltering();
}

TEST_F(ServerTest, SlowClientsHoldingConnectionsDoNotBlockHealthOrFilter) {
  ExtenderServerOptions o;
  o.http.request_deadline = 120s;  // they hold for the whole test
  o.http.workers = 1;
  Start(o);
  // Twice the slow clients that once blocked every thread of the old server: each has sent
  // part of a request and holds its connection.
  constexpr int kSlow = 16;
  std::vector<std::unique_ptr<RawClient>> slow;
  for (int i = 0; i < kSlow; ++i) {
    slow.push_back(std::make_unique<RawClient>(server_->port()));
    ASSERT_TRUE(slow.back()->connected());
    ASSERT_TRUE(slow.back()->Send(i % 2 ? "POST /filter HTTP/1.1\r\nContent-Length: 100\r\n\r\n{"
                                        : "POST /filter HTTP/1.1\r\nHost: x"));
  }
  ExpectHealthyAndFiltering();
  // They were accepted before the health check's connection and are all still open.
  auto m = client_->Get("/metrics");
  ASSERT_TRUE(m);
  const std::string open = "\nrailyard_extender_open_connections ";
  const size_t at = m->body.find(open);
  ASSERT_NE(at, std::string::npos);
  EXPECT_GE(std::stoi(m->body.substr(at + open.size())), kSlow);
  for (auto& c : slow) EXPECT_FALSE(c->Readable(0ms)) << "a slow client was answered early";
}

TEST_F(ServerTest, ARequestMustBeCompleteWithinItsDeadlineHoweverOftenBytesArrive) {
  ExtenderServerOptions o;
  o.http.request_deadline = 300ms;
  Start(o);
  // A client that trickles a header byte at a time: each recv would be on time, the request
  // never is. The pause between bytes only paces the client; the bound is the loop count.
  RawClient trickle(server_->port());
  ASSERT_TRUE(trickle.Send("POST /filter HTTP/1.1\r\nX-Slow: "));
  bool answered = false;
  for (int i = 0; i < 2000 && !answered; ++i) {
    answered = trickle.Readable(20ms);
    if (!answered) {
      ASSERT_TRUE(trickle.Send("a"));
    }
  }
  ASSERT_TRUE(answered);
  std::string r = trickle.ReadResponse();
  EXPECT_EQ(StatusOf(r), 408) << r;
  EXPECT_NE(BodyOf(r).find("not complete within 0.3 s"), std::string::npos) << r;
  EXPECT_TRUE(trickle.ClosedByServer());

  // One that connects and sends nothing is answered the same way.
  RawClient silent(server_->port());
  EXPECT_EQ(StatusOf(silent.ReadResponse()), 408);
  EXPECT_EQ(Invalid("timeout"), 2u);
  ExpectHealthyAndFiltering();
}

TEST_F(ServerTest, KeptAliveConnectionsIdleQuietlyAndTheNextRequestHasItsOwnDeadline) {
  ExtenderServerOptions o;
  o.http.idle_timeout = 200ms;
  o.http.request_deadline = 120s;
  Start(o);
  RawClient idle(server_->port());
  ASSERT_TRUE(idle.Send("GET /healthz HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(StatusOf(idle.ReadResponse()), 200);
  EXPECT_EQ(idle.ReadResponse(), "");  // closed after the idle timeout, without an answer
  EXPECT_EQ(Invalid("timeout"), 0u);
}

TEST_F(ServerTest, TheDeadlineOfAKeptAliveRequestStartsAtItsFirstByte) {
  ExtenderServerOptions o;
  o.http.idle_timeout = 120s;
  o.http.request_deadline = 200ms;
  Start(o);
  RawClient c(server_->port());
  ASSERT_TRUE(c.Send("GET /healthz HTTP/1.1\r\n\r\n"));
  EXPECT_EQ(StatusOf(c.ReadResponse()), 200);
  ASSERT_TRUE(c.Send("GET /healthz HTTP/1.1\r\n"));  // and never the blank line
  EXPECT_EQ(StatusOf(c.ReadResponse()), 408);
  EXPECT_EQ(Invalid("timeout"), 1u);
}

TEST_F(ServerTest, ConnectionsBeyondTheCapAreAnswered503) {
  ExtenderServerOptions o;
  o.http.max_connections = 4;
  o.http.request_deadline = 120s;
  Start(o);
  std::vector<std::unique_ptr<RawClient>> held;
  for (int i = 0; i < 4; ++i) {
    held.push_back(std::make_unique<RawClient>(server_->port()));
    ASSERT_TRUE(held.back()->Send("GET /healthz HTTP/1.1\r\n"));
  }
  // Accepted in order, so the fifth finds the cap reached.
  RawClient fifth(server_->port());
  std::string r = fifth.ReadResponse();
  EXPECT_EQ(StatusOf(r), 503) << r;
  EXPECT_NE(BodyOf(r).find("at most 4 at once"), std::string::npos) << r;
  EXPECT_EQ(Invalid("connection_limit"), 1u);
  // The held ones are served when they finish their requests.
  for (auto& c : held) {
    ASSERT_TRUE(c->Send("\r\n"));
    EXPECT_EQ(StatusOf(c->ReadResponse()), 200);
  }
}

TEST_F(ServerTest, BindingUpdatesNeedTheBearerToken) {
  ExtenderServerOptions o;
  o.binding_token = "s3cret-token";
  Start(o);
  const std::string bind = R"({"group":"g","node":"n1"})";
  for (const char* path : {"/bound", "/unbound"}) {
    std::string none = Exchange(Post(path, bind));
    EXPECT_EQ(StatusOf(none), 401) << none;
    EXPECT_NE(none.find("WWW-Authenticate: Bearer"), std::string::npos);
    std::string wrong = Exchange(Post(path, bind, "Authorization: Bearer s3cret-tokem\r\n"));
    EXPECT_EQ(StatusOf(wrong), 401) << wrong;
  }
  EXPECT_EQ(ext_.bound_pods(), 0u);
  std::string right = Exchange(Post("/bound", bind, "Authorization: Bearer s3cret-token\r\n"));
  EXPECT_EQ(StatusOf(right), 200) << right;
  EXPECT_EQ(ext_.bound_pods(), 1u);
  EXPECT_EQ(Invalid("unauthorized"), 4u);
  // The scheduler's verbs carry no credentials (its extender config has none to send).
  ExpectHealthyAndFiltering();
}

TEST(AuthorizeBindingUpdateTest, WithoutATokenOnlyLoopbackPeers) {
  HttpRequest r;
  r.method = "POST";
  r.path = "/bound";
  r.peer = "10.1.2.3:4000";
  Status remote = AuthorizeBindingUpdate(r, "");
  EXPECT_EQ(remote.code(), StatusCode::kPermissionDenied);
  EXPECT_NE(remote.message().find("10.1.2.3:4000"), std::string::npos);
  EXPECT_NE(remote.message().find("--token-file"), std::string::npos);
  r.peer_is_loopback = true;
  EXPECT_TRUE(AuthorizeBindingUpdate(r, "").ok());
  // With a token, being local is not enough.
  EXPECT_EQ(AuthorizeBindingUpdate(r, "t").code(), StatusCode::kPermissionDenied);
  r.headers.emplace_back("authorization", "Basic dDp0");
  EXPECT_EQ(AuthorizeBindingUpdate(r, "t").code(), StatusCode::kPermissionDenied);
  r.headers.back().second = "Bearer t";
  EXPECT_TRUE(AuthorizeBindingUpdate(r, "t").ok());
}

TEST_F(ServerTest, MetricsCountEveryKindOfInvalidRequest) {
  Start();
  EXPECT_EQ(StatusOf(Exchange("GET /nope HTTP/1.1\r\n\r\n")), 404);
  EXPECT_EQ(StatusOf(Exchange("GET /filter HTTP/1.1\r\n\r\n")), 405);
  EXPECT_EQ(StatusOf(Exchange("HELLO\r\n\r\n")), 400);
  EXPECT_EQ(StatusOf(Exchange("POST /filter HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n")), 501);
  EXPECT_EQ(StatusOf(Exchange("POST /filter HTTP/1.1\r\nContent-Length: 12x\r\n\r\n")), 400);
  EXPECT_EQ(StatusOf(Exchange("POST /filter HTTP/1.1\r\n\r\n")), 411);
  EXPECT_EQ(StatusOf(Exchange(Post("/filter", "nope"))), 400);
  EXPECT_EQ(StatusOf(Exchange(Post("/filter", "{}"))), 400);
  auto m = client_->Get("/metrics");
  ASSERT_TRUE(m);
  for (const char* line :
       {"{reason=\"not_found\"} 1", "{reason=\"method_not_allowed\"} 1", "{reason=\"bad_http\"} 4",
        "{reason=\"malformed_json\"} 1", "{reason=\"invalid_args\"} 1"}) {
    EXPECT_NE(m->body.find(std::string("railyard_extender_invalid_requests_total") + line),
              std::string::npos)
        << line << "\n"
        << m->body;
  }
}

TEST_F(ServerTest, KeepAlivePipeliningAndExpectContinue) {
  Start();
  RawClient c(server_->port());
  // Two requests in one write, answered in order on the same connection.
  ASSERT_TRUE(c.Send("GET /healthz HTTP/1.1\r\n\r\n" + Post("/filter", kFilterBody)));
  std::string first = c.ReadResponse();
  EXPECT_EQ(StatusOf(first), 200);
  EXPECT_EQ(BodyOf(first), "ok\n");
  std::string second = c.ReadResponse();
  EXPECT_EQ(StatusOf(second), 200) << second;
  EXPECT_EQ(json::parse(BodyOf(second))["NodeNames"], json({"n0", "n2"}));
  // curl's way for large bodies: the head first, the body after "100 Continue".
  const std::string body = R"({"group":"g","node":"n1"})";
  ASSERT_TRUE(c.Send(fmt::format(
      "POST /bound HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: {}\r\n\r\n", body.size())));
  EXPECT_EQ(c.ReadResponse(), "HTTP/1.1 100 Continue\r\n\r\n");
  ASSERT_TRUE(c.Send(body));
  EXPECT_EQ(StatusOf(c.ReadResponse()), 200);
  // "Connection: close" is honoured.
  ASSERT_TRUE(c.Send("GET /healthz HTTP/1.1\r\nConnection: close\r\n\r\n"));
  std::string last = c.ReadResponse();
  EXPECT_NE(last.find("Connection: close"), std::string::npos) << last;
  EXPECT_TRUE(c.ClosedByServer());
}

TEST(ServerBindTest, BusyPortIsAClearError) {
  Extender ext(Small());
  ExtenderServer a(&ext), b(&ext);
  ASSERT_TRUE(a.Bind("127.0.0.1", 0).ok());
  Status s = b.Bind("127.0.0.1", a.port());
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("127.0.0.1:"), std::string::npos);
}

TEST(ServerBindTest, ReportsTheAddressActuallyBound) {
  Extender ext(Small());
  ExtenderServer v4(&ext);
  ASSERT_TRUE(v4.Bind("127.0.0.1", 0).ok());
  EXPECT_EQ(v4.bound_address(), fmt::format("127.0.0.1:{}", v4.port()));
  EXPECT_NE(v4.port(), 0);
  ExtenderServer named(&ext);
  ASSERT_TRUE(named.Bind("localhost", 0).ok());
  const std::string& a = named.bound_address();
  EXPECT_TRUE(a.rfind("127.0.0.1:", 0) == 0 || a.rfind("[::1]:", 0) == 0) << a;
  ExtenderServer v6(&ext);
  Status s = v6.Bind("[::1]", 0);
  if (!s.ok()) GTEST_SKIP() << "no IPv6 loopback here: " << s.message();
  EXPECT_EQ(v6.bound_address(), fmt::format("[::1]:{}", v6.port()));
  EXPECT_EQ(ExtenderServer(&ext).Bind("", 80).code(), StatusCode::kInvalidArgument);
}

TEST(ServerBindTest, StopBeforeServeReturnsAtOnce) {
  Extender ext(Small());
  ExtenderServer s(&ext);
  ASSERT_TRUE(s.Bind("127.0.0.1", 0).ok());
  s.Stop();
  EXPECT_TRUE(s.Serve().ok());
}

}  // namespace
}  // namespace railyard::http
