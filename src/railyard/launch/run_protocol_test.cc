#include "railyard/launch/run_protocol.h"

#include <gtest/gtest.h>

namespace railyard::launch {
namespace {

AttemptPlan SamplePlan() {
  return {.attempt = 2,
          .world_size = 4,
          .nproc_per_host = 2,
          .hosts = {"node0", "node3"},
          .store_host = "198.18.0.10",
          .store_port = 29404,
          .master_port = 29405,
          .argv = {"train", "--steps", "100"},
          .env = {{"NCCL_SOCKET_IFNAME", "=eth0"}},
          .job_id = "run-1a2b",
          .rank_secret = "00ff",
          .ckpt_dir = "/lustre/ckpt",
          .log_dir = "/lustre/ckpt/logs",
          .setup = {{{.cpus = {0, 1}, .env = {{"CUDA_VISIBLE_DEVICES", "0"}}}, {.cpus = {2, 3}}},
                    {{}, {}}},
          .node_models = {R"({"name":"node0"})", ""}};
}

TEST(RunProtocolTest, PlanRoundTripsAndNamesEachHostsGroup) {
  AttemptPlan plan = SamplePlan();
  auto back = ParseAttemptPlan(ToJson(plan), "job/plan/2");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, plan);
  EXPECT_EQ(back->GroupOf("node3"), 1);
  EXPECT_EQ(back->GroupOf("node7"), -1);  // a spare
}

TEST(RunProtocolTest, PlanWhoseWorldIsNotHostsTimesRanksIsRefused) {
  AttemptPlan plan = SamplePlan();
  plan.world_size = 5;
  auto back = ParseAttemptPlan(ToJson(plan), "job/plan/2");
  ASSERT_FALSE(back.ok());
  EXPECT_NE(back.status().message().find("world_size 5 is not nproc_per_host 2 x 2 hosts"),
            std::string::npos)
      << back.status().ToString();
}

TEST(RunProtocolTest, FieldOfTheWrongTypeIsNamedWithItsKey) {
  auto bad = ParseAttemptPlan(R"({"hosts": ["node0", 3]})", "job/plan/0");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("job/plan/0"), std::string::npos);
  EXPECT_NE(bad.status().message().find("'hosts'"), std::string::npos) << bad.status().ToString();
  EXPECT_NE(bad.status().message().find("expected a list of strings"), std::string::npos)
      << bad.status().ToString();

  auto env = ParseAttemptPlan(R"({"env": [["A"]]})", "job/plan/0");
  ASSERT_FALSE(env.ok());
  EXPECT_NE(env.status().message().find("env[0]"), std::string::npos) << env.status().ToString();
}

TEST(RunProtocolTest, ControlRoundTripsAndRejectsUnknownActions) {
  for (Control c : {Control{.action = Control::Action::kRun, .attempt = 1},
                    Control{.action = Control::Action::kStop, .attempt = 1, .why = "rank 3 died"},
                    Control{.action = Control::Action::kEnd, .attempt = 4, .why = "done"}}) {
    auto back = ParseControl(ToJson(c), "job/control");
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, c);
  }
  auto bad = ParseControl(R"({"action": "pause"})", "job/control");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("expected \"run\", \"stop\" or \"end\", got \"pause\""),
            std::string::npos)
      << bad.status().ToString();
}

TEST(RunProtocolTest, StatusRoundTripsEveryRankField) {
  AgentStatus s{.host = "node1",
                .seq = 77,
                .state = AgentStatus::State::kRunning,
                .attempt = 1,
                .ranks = {{.rank = 2,
                           .pid = 4242,
                           .heard = true,
                           .silent_ms = 120,
                           .last_step = 41,
                           .frozen = true,
                           .step_us = {1000, 1100}},
                          {.rank = 3,
                           .pid = 4243,
                           .exited = true,
                           .signal = 9,
                           .exited_ms_ago = 40,
                           .error_line = "boom",
                           .stopped_why = ""}}};
  auto back = ParseAgentStatus(ToJson(s), "job/status/node1");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, s);

  auto bad = ParseAgentStatus(R"({"state": "sleeping"})", "job/status/node1");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("got \"sleeping\""), std::string::npos);
}

TEST(RunProtocolTest, HelloRoundTrips) {
  RunHello h{.address = "198.18.0.12", .pid = 99};
  auto back = ParseRunHello(ToJson(h), "job/hello/node2");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, h);
  EXPECT_FALSE(ParseRunHello("[1]", "job/hello/node2").ok());
}

}  // namespace
}  // namespace railyard::launch
