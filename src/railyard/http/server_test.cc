#include "railyard/http/server.h"

#include <thread>

#include <gtest/gtest.h>
#include <httplib.h>

namespace railyard::http {
namespace {

using nlohmann::json;

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

class ServerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(server_.Bind("127.0.0.1", 0).ok());
    thread_ = std::thread([this] { server_.Serve().IgnoreError(); });
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_.port());
    client_->set_connection_timeout(5, 0);
    client_->set_read_timeout(5, 0);
  }
  void TearDown() override {
    server_.Stop();
    thread_.join();
  }
  Extender ext_{Small()};
  ExtenderServer server_{&ext_};
  std::thread thread_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(ServerTest, AnswersTheExtenderVerbsOverHttp) {
  // A request body as kube-scheduler marshals it (Go field names, nodeCacheCapable).
  const std::string body = R"({"Pod":{"metadata":{"name":"p","labels":{"railyard.io/group":"g"}}},
                               "Nodes":null,"NodeNames":["n0","n2","zz"]})";
  ASSERT_EQ(client_->Post("/bound", R"({"group":"g","node":"n1"})", "application/json")->status,
            200);
  auto f = client_->Post("/filter", body, "application/json");
  ASSERT_TRUE(f);
  ASSERT_EQ(f->status, 200) << f->body;
  json fr = json::parse(f->body);
  EXPECT_EQ(fr["NodeNames"], json({"n0", "n2"}));
  EXPECT_TRUE(fr["FailedNodes"].contains("zz"));

  auto p = client_->Post("/prioritize", body, "application/json");
  ASSERT_TRUE(p);
  ASSERT_EQ(p->status, 200) << p->body;
  json pr = json::parse(p->body);
  ASSERT_EQ(pr.size(), 3u);
  EXPECT_EQ(pr[0]["Host"], "n0");
  EXPECT_EQ(pr[0]["Score"], 10);  // shares leaf0 with the bound n1
  EXPECT_EQ(pr[1]["Score"], 0);
}

TEST_F(ServerTest, GarbageGetsA400WithTheError) {
  auto r = client_->Post("/filter", "{\"Pod\": [", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(json::parse(r->body)["Error"].get<std::string>().find("not valid JSON"),
            std::string::npos);
  auto b = client_->Post("/bound", R"({"group":"g","node":"nope"})", "application/json");
  EXPECT_EQ(b->status, 400);
}

TEST_F(ServerTest, HealthAndMetrics) {
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
}

TEST(ServerBindTest, BusyPortIsAClearError) {
  Extender ext(Small());
  ExtenderServer a(&ext), b(&ext);
  ASSERT_TRUE(a.Bind("127.0.0.1", 0).ok());
  Status s = b.Bind("127.0.0.1", a.port());
  EXPECT_EQ(s.code(), StatusCode::kUnavailable);
  EXPECT_NE(s.message().find("127.0.0.1:"), std::string::npos);
}

}  // namespace
}  // namespace railyard::http
