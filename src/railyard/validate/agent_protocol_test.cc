#include "railyard/validate/agent_protocol.h"

#include <gtest/gtest.h>

namespace railyard::validate {
namespace {

TEST(AgentProtocolTest, KeysLiveUnderTheRun) {
  EXPECT_EQ(HelloKey("run1", "n3"), "run1/hello/n3");
  EXPECT_EQ(TaskKey("run1", "n3", 4), "run1/task/n3/4");
  EXPECT_EQ(ResultKey("run1", "n3", 4), "run1/result/n3/4");
}

TEST(AgentProtocolTest, HelloRoundTrips) {
  Hello h{.address = "198.18.0.3", .probe_port = 40123, .pid = 77};
  Result<Hello> back = HelloFromJson(ToJson(h), "k");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, h);
}

TEST(AgentProtocolTest, EveryTaskKindRoundTrips) {
  Profile p{.name = "gpu",
            .hosts = "n[1-4]",
            .nic_rate_bits = 200'000'000,
            .gpus = 8,
            .rdma = true,
            .fabric_provider = "verbs",
            .memlock_bytes = kUnlimited,
            .mounts = {{"/lustre", "lustre"}},
            .gpu_nic_paths = {{.gpu = 0, .nic = "mlx5_0", .path = topo::PathClass::kPIX}}};
  std::vector<Task> tasks = {
      {.kind = TaskKind::kNode,
       .timeout_ms = 5000,
       .plan = "full",
       .checks = {{.id = "node.swap", .warn = "0B", .fail = "256MiB", .timeout_ms = 2000},
                  {.id = "node.sysctl",
                   .params = {{"socket_buffer_min", "16MiB"}},
                   .timeout_ms = 2000,
                   .profiles = {"gpu"}}},
       .profile = p,
       .shared_dir = true},
      {.kind = TaskKind::kClock},
      {.kind = TaskKind::kLatency,
       .peers = {{"n1", "10.0.0.1", 4000}, {"n2", "10.0.0.2", 4001}},
       .samples = 5},
      {.kind = TaskKind::kSend, .peers = {{"n1", "10.0.0.1", 4000}}, .duration_ms = 1000},
      {.kind = TaskKind::kStorageRead,
       .dir = "/s/n1",
       .neighbour_dir = "/s/n2",
       .bytes_per_file = 1 << 20,
       .block_bytes = 1 << 16,
       .files = 2},
      {.kind = TaskKind::kMetadata, .dir = "/s/n1", .items = 100, .cleanup = true},
      {.kind = TaskKind::kAllreduce,
       .key_prefix = "v/allreduce",
       .rank = 1,
       .world = 4,
       .sizes = {1 << 20, 1ull << 33},
       .hosts = {"a", "b", "c", "d"},
       .warmup = 1,
       .iters = 3},
      {.kind = TaskKind::kExit},
  };
  for (const Task& t : tasks) {
    SCOPED_TRACE(TaskKindName(t.kind));
    Result<Task> back = TaskFromJson(ToJson(t), "k");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, t);
  }
}

TEST(AgentProtocolTest, ResultsRoundTrip) {
  TaskResult r{.ok = true,
               .checks = {{"node.swap", Outcome::Pass("no swap").With("0 B", "warn > 0 B"),
                           std::chrono::milliseconds(3)},
                          {"gpu.count", Outcome::Skipped("no GPU expected"), {}}},
               .abandoned = 1,
               .realtime_ns = 1'700'000'000'123'456'789,
               .peers = {{"n1", true, 1.5e-4, ""}, {"n2", false, 0, "refused"}},
               .bits_per_s = 1.9e8,
               .bytes_per_s = 9e7,
               .ops_per_s = 1500,
               .note = "buffered",
               .figures = {{.bytes = 1 << 20,
                            .seconds = 0.1,
                            .algbw_bytes_per_s = 1e7,
                            .busbw_bytes_per_s = 1.5e7}}};
  Result<TaskResult> back = TaskResultFromJson(ToJson(r), "k");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(back->ok);
  ASSERT_EQ(back->checks.size(), 2u);
  EXPECT_EQ(back->checks[0].id, "node.swap");
  EXPECT_EQ(back->checks[0].outcome, r.checks[0].outcome);
  EXPECT_EQ(back->checks[0].elapsed, std::chrono::milliseconds(3));
  EXPECT_EQ(back->checks[1].outcome, r.checks[1].outcome);
  EXPECT_EQ(back->abandoned, 1);
  EXPECT_EQ(back->realtime_ns, r.realtime_ns);
  EXPECT_EQ(back->peers, r.peers);
  EXPECT_EQ(back->bits_per_s, r.bits_per_s);
  EXPECT_EQ(back->note, "buffered");
  ASSERT_EQ(back->figures.size(), 1u);
  EXPECT_EQ(back->figures[0].busbw_bytes_per_s, 1.5e7);
}

TEST(AgentProtocolTest, FailureKeepsItsCode) {
  TaskResult r = TaskResult::Failed(PermissionDenied("/s/n1: read-only file system"));
  Result<TaskResult> back = TaskResultFromJson(ToJson(r), "k");
  ASSERT_TRUE(back.ok());
  EXPECT_FALSE(back->ok);
  EXPECT_EQ(back->AsStatus(), PermissionDenied("/s/n1: read-only file system"));
  EXPECT_EQ(TaskResult{.ok = true}.AsStatus(), Status::Ok());
}

TEST(AgentProtocolTest, BadInputNamesTheKeyAndField) {
  auto message = [](const Status& s) { return s.message(); };
  EXPECT_EQ(message(TaskFromJson(R"({"kind": "dance"})", "v/task/n1/3").status()),
            "v/task/n1/3: field 'kind': unknown task kind 'dance' (expected one of node, clock, "
            "reach, latency, send, storage_write, storage_read, metadata, allreduce, exit)");
  Status s =
      TaskFromJson(R"({"kind": "send", "peers": [{"host": "a", "address": 3}]})", "v/task/n1/3")
          .status();
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("peers[0].address"), std::string::npos) << s.message();
  s = TaskFromJson(R"({"kind": "send", "peers": []})", "k").status();
  EXPECT_NE(s.message().find("exactly one peer"), std::string::npos) << s.message();
  s = TaskFromJson(R"({"kind": "node", "checks": []})", "k").status();
  EXPECT_NE(s.message().find("profile"), std::string::npos) << s.message();
  s = TaskResultFromJson(R"({"ok": true, "checks": [{"id": "x", "verdict": "FINE"}]})",
                         "v/result/n2/1")
          .status();
  EXPECT_NE(s.message().find("checks[0].verdict"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("v/result/n2/1"), std::string::npos) << s.message();
  EXPECT_EQ(TaskResultFromJson(R"({"error": "x"})", "k").status().code(),
            StatusCode::kInvalidArgument);  // "ok" is required
  EXPECT_EQ(TaskResultFromJson("[1, 2]", "k").status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(TaskResultFromJson("{", "k").status().code(), StatusCode::kInvalidArgument);
  s = HelloFromJson(R"({"address": "a", "version": 9})", "v/hello/n1").status();
  EXPECT_NE(s.message().find("protocol version 9"), std::string::npos) << s.message();
}

}  // namespace
}  // namespace railyard::validate
