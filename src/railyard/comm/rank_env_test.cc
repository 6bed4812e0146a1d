#include "railyard/comm/rank_env.h"

#include <gtest/gtest.h>

#include <map>
#include <string>
#include <vector>

namespace railyard::comm {
namespace {

using Env = std::map<std::string, std::string>;

Env ToMap(const EnvList& list) {
  Env env;
  for (const auto& [k, v] : list) {
    EXPECT_FALSE(env.contains(k)) << k << " written twice";
    env[k] = v;
  }
  return env;
}

// Every field set to a value other than its default.
RankEnvironment Full() {
  RankEnvironment e;
  e.rank = 0;
  e.world_size = 8;
  e.local_rank = 0;
  e.local_world_size = 4;
  e.group_rank = 0;
  e.restart_count = 2;
  e.store_address = "10.0.0.1:29400";
  e.store_dir = "/shared/rdzv";
  e.serve_store = true;
  e.master_addr = "10.0.0.1";
  e.master_port = 29500;
  e.job_secret = "s3cret";
  e.job_id = "job-7";
  e.host = "gpu17";
  e.virtual_host = "node1";
  e.ckpt_dir = "/ckpt/job-7";
  e.progress = "/run/railyard/job-7/progress.sock";
  e.transport = {.transport = "tcp",
                 .socket_ifname = "=eth0",
                 .ofi_provider = "verbs;ofi_rxm",
                 .ofi_domain = "mlx5_0",
                 .tcp_congestion = "reno"};
  return e;
}

// Parses `env`, expecting INVALID_ARGUMENT whose message contains every one of `names`.
void ExpectInvalidNaming(const Env& env, std::vector<std::string_view> names) {
  auto e = RankEnvironment::FromEnv(MapEnv(env));
  ASSERT_FALSE(e.ok());
  EXPECT_EQ(e.status().code(), StatusCode::kInvalidArgument) << e.status().ToString();
  for (std::string_view n : names) {
    EXPECT_NE(e.status().message().find(n), std::string::npos)
        << n << " not in: " << e.status().message();
  }
}

TEST(RankEnvironmentTest, EveryFieldSurvivesToEnvAndFromEnv) {
  RankEnvironment full = Full();
  Env env = ToMap(full.ToEnv());
  auto back = RankEnvironment::FromEnv(MapEnv(env));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, full);
  // Each field on its own: a rank other than 0 (which never serves), defaults elsewhere.
  RankEnvironment minimal;
  minimal.rank = 5;
  minimal.world_size = 8;
  minimal.store_dir = "/shared/rdzv";
  minimal.job_secret = "s";
  Env menv = ToMap(minimal.ToEnv());
  back = RankEnvironment::FromEnv(MapEnv(menv));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, minimal);
  EXPECT_FALSE(menv.contains("LOCAL_RANK"));
  EXPECT_FALSE(menv.contains("MASTER_PORT"));
  EXPECT_FALSE(menv.contains("RAILYARD_TRANSPORT"));
}

TEST(RankEnvironmentTest, ToEnvWritesTorchrunsNamesBesideRailyards) {
  RankEnvironment e = Full();
  e.rank = 6;
  e.serve_store = false;
  e.local_rank = 2;
  e.group_rank = 1;
  Env env = ToMap(e.ToEnv());
  for (auto [ours, theirs, want] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"RAILYARD_RANK", "RANK", "6"},
           {"RAILYARD_WORLD_SIZE", "WORLD_SIZE", "8"},
           {"RAILYARD_LOCAL_RANK", "LOCAL_RANK", "2"},
           {"RAILYARD_LOCAL_WORLD_SIZE", "LOCAL_WORLD_SIZE", "4"},
           {"RAILYARD_GROUP_RANK", "GROUP_RANK", "1"},
           {"RAILYARD_RESTART_COUNT", "TORCHELASTIC_RESTART_COUNT", "2"}}) {
    EXPECT_EQ(env[ours], want) << ours;
    EXPECT_EQ(env[theirs], want) << theirs;
  }
  EXPECT_EQ(env["MASTER_ADDR"], "10.0.0.1");
  EXPECT_EQ(env["MASTER_PORT"], "29500");
  EXPECT_EQ(env["RAILYARD_STORE_SERVE"], "0");
  EXPECT_EQ(env["RAILYARD_CKPT_DIR"], "/ckpt/job-7");
  EXPECT_EQ(env["RAILYARD_PROGRESS"], "/run/railyard/job-7/progress.sock");
  EXPECT_EQ(env["RAILYARD_TCP_CC"], "reno");
}

TEST(RankEnvironmentTest, TorchrunsNamesAloneAreEnough) {
  Env env = {{"RANK", "3"},
             {"WORLD_SIZE", "8"},
             {"LOCAL_RANK", "1"},
             {"LOCAL_WORLD_SIZE", "2"},
             {"GROUP_RANK", "1"},
             {"TORCHELASTIC_RESTART_COUNT", "4"},
             {"MASTER_ADDR", "10.1.2.3"},
             {"MASTER_PORT", "29500"},
             {"RAILYARD_JOB_SECRET", "s"}};
  auto e = RankEnvironment::FromEnv(MapEnv(env));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->rank, 3);
  EXPECT_EQ(e->world_size, 8);
  EXPECT_EQ(e->local_rank, 1);
  EXPECT_EQ(e->local_world_size, 2);
  EXPECT_EQ(e->group_rank, 1);
  EXPECT_EQ(e->restart_count, 4);
  EXPECT_EQ(e->StoreAddress(), "10.1.2.3:29500");
  // Railyard's names win over torchrun's.
  env["RAILYARD_LOCAL_RANK"] = "0";
  env["RAILYARD_RESTART_COUNT"] = "5";
  env["RAILYARD_STORE"] = "10.9.9.9:1234";
  e = RankEnvironment::FromEnv(MapEnv(env));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_EQ(e->local_rank, 0);
  EXPECT_EQ(e->restart_count, 5);
  EXPECT_EQ(e->StoreAddress(), "10.9.9.9:1234");
  EXPECT_EQ(e->master_port, 29500);  // kept for the program's own store
}

TEST(RankEnvironmentTest, BadValuesNameTheVariable) {
  Env good = ToMap(Full().ToEnv());
  for (auto [var, bad, expect] : std::vector<std::tuple<std::string, std::string, std::string>>{
           {"RAILYARD_LOCAL_RANK", "x", "RAILYARD_LOCAL_RANK='x'"},
           {"RAILYARD_LOCAL_WORLD_SIZE", "-1", "RAILYARD_LOCAL_WORLD_SIZE=-1"},
           {"RAILYARD_GROUP_RANK", "1.5", "RAILYARD_GROUP_RANK='1.5'"},
           {"RAILYARD_RESTART_COUNT", "many", "RAILYARD_RESTART_COUNT='many'"},
           {"RAILYARD_LOCAL_RANK", "4", "RAILYARD_LOCAL_RANK"},
           {"MASTER_PORT", "70000", "MASTER_PORT=70000"},
           {"MASTER_PORT", "http", "MASTER_PORT='http'"},
           {"RAILYARD_TCP_CC", "cubic;rm", "RAILYARD_TCP_CC"},
           {"RAILYARD_RANK", "8", "RAILYARD_RANK=8"}}) {
    Env env = good;
    env[var] = bad;
    SCOPED_TRACE(var + "=" + bad);
    ExpectInvalidNaming(env, {expect});
  }
  // With Railyard's name unset, torchrun's is read and named.
  Env env = good;
  env.erase("RAILYARD_GROUP_RANK");
  env["GROUP_RANK"] = "two";
  ExpectInvalidNaming(env, {"GROUP_RANK='two'"});
  env = good;
  env.erase("RAILYARD_RESTART_COUNT");
  env["TORCHELASTIC_RESTART_COUNT"] = "-3";
  ExpectInvalidNaming(env, {"TORCHELASTIC_RESTART_COUNT=-3"});
}

TEST(RankEnvironmentTest, TransportEnvironmentAloneNeedsNoRank) {
  Env env = {{"RAILYARD_TRANSPORT", "ofi"}, {"RAILYARD_OFI_DOMAIN", "lo"}};
  auto te = TransportEnvironment::FromEnv(MapEnv(env));
  ASSERT_TRUE(te.ok()) << te.status().ToString();
  EXPECT_EQ(te->transport, "ofi");
  EXPECT_EQ(te->ofi_domain, "lo");
  EnvList out;
  te->AppendTo(out);
  EXPECT_EQ(ToMap(out), env);
}

}  // namespace
}  // namespace railyard::comm
