#include "railyard/comm/bootstrap.h"

#include <gtest/gtest.h>

#include <map>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "railyard/base/temp_dir_testing.h"

namespace railyard::comm {
namespace {

using Env = std::map<std::string, std::string>;

bool Contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

// The smallest environment that parses: rank 1 of 4 on a tcp store.
Env Minimal() {
  return {{"RAILYARD_RANK", "1"},
          {"RAILYARD_WORLD_SIZE", "4"},
          {"RAILYARD_STORE", "10.0.0.1:29400"},
          {"RAILYARD_JOB_SECRET", "s3cret"}};
}

// Parses `env`, expecting INVALID_ARGUMENT whose message contains every one of `names`.
void ExpectInvalidNaming(const Env& env, std::vector<std::string_view> names) {
  auto c = BootstrapConfigFromEnvironment(&env);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << c.status().ToString();
  for (std::string_view n : names) {
    EXPECT_TRUE(Contains(c.status().message(), n)) << n << " not in: " << c.status().message();
  }
}

TEST(BootstrapConfigTest, MinimalEnvironmentGivesDefaults) {
  Env env = Minimal();
  auto c = BootstrapConfigFromEnvironment(&env);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rank, 1);
  EXPECT_EQ(c->world_size, 4);
  EXPECT_EQ(c->store_address, "10.0.0.1:29400");
  EXPECT_EQ(c->store_dir, "");
  EXPECT_EQ(c->secret, "s3cret");
  EXPECT_EQ(c->transport, "auto");
  EXPECT_EQ(c->socket_ifname, "");
  EXPECT_EQ(c->ofi_provider, "tcp;ofi_rxm");
  EXPECT_EQ(c->ofi_domain, "");
  EXPECT_EQ(c->job_id, "job");
  EXPECT_FALSE(c->serve_store);
  EXPECT_EQ(c->host, "");
  EXPECT_TRUE(c->hierarchy);
  EXPECT_EQ(c->tcp.streams_per_peer, 2);
  EXPECT_EQ(c->tcp.socket_buffer_bytes, size_t{4} << 20);
  // The map replaces the process environment entirely, RAILYARD_COMM_* included.
  EXPECT_EQ(c->comm.timeout, CommOptions{}.timeout);
}

TEST(BootstrapConfigTest, EachMissingRequiredVariableIsNamed) {
  for (const char* var : {"RAILYARD_RANK", "RAILYARD_WORLD_SIZE"}) {
    Env env = Minimal();
    env.erase(var);
    ExpectInvalidNaming(env, {var});
    env[var] = "";  // set but empty counts as missing
    ExpectInvalidNaming(env, {var});
  }
  Env env = Minimal();
  env.erase("RAILYARD_STORE");
  ExpectInvalidNaming(env, {"RAILYARD_STORE", "RAILYARD_STORE_DIR", "MASTER_ADDR"});
  env = Minimal();
  env.erase("RAILYARD_JOB_SECRET");
  ExpectInvalidNaming(env, {"RAILYARD_JOB_SECRET"});
  ExpectInvalidNaming({}, {"RAILYARD_RANK", "RAILYARD_WORLD_SIZE"});
}

TEST(BootstrapConfigTest, TorchrunRankAndWorldSizeAreAccepted) {
  Env env = Minimal();
  env.erase("RAILYARD_RANK");
  env.erase("RAILYARD_WORLD_SIZE");
  env["RANK"] = "3";
  env["WORLD_SIZE"] = "8";
  auto c = BootstrapConfigFromEnvironment(&env);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rank, 3);
  EXPECT_EQ(c->world_size, 8);
  // Railyard's own names win over torchrun's.
  env["RAILYARD_RANK"] = "0";
  env["RAILYARD_WORLD_SIZE"] = "2";
  c = BootstrapConfigFromEnvironment(&env);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->rank, 0);
  EXPECT_EQ(c->world_size, 2);
  // A bad torchrun value is named as torchrun's.
  env.erase("RAILYARD_RANK");
  env["RANK"] = "x";
  ExpectInvalidNaming(env, {"RANK='x'"});
}

TEST(BootstrapConfigTest, NonIntegerRankOrWorldSizeIsNamed) {
  for (const char* var : {"RAILYARD_RANK", "RAILYARD_WORLD_SIZE"}) {
    for (const char* bad : {"one", "1.5", "2x", " 1", "+1", "99999999999"}) {
      Env env = Minimal();
      env[var] = bad;
      SCOPED_TRACE(std::string(var) + "=" + bad);
      ExpectInvalidNaming(env, {var, bad});
    }
  }
}

TEST(BootstrapConfigTest, RankOutsideWorldSizeIsNamed) {
  for (auto [rank, size] : std::vector<std::pair<const char*, const char*>>{
           {"4", "4"}, {"5", "4"}, {"-1", "4"}, {"0", "0"}, {"0", "-2"}}) {
    Env env = Minimal();
    env["RAILYARD_RANK"] = rank;
    env["RAILYARD_WORLD_SIZE"] = size;
    SCOPED_TRACE(std::string(rank) + " of " + size);
    ExpectInvalidNaming(
        env, {"RAILYARD_RANK=" + std::string(rank), "RAILYARD_WORLD_SIZE=" + std::string(size)});
  }
  Env env = Minimal();
  env["RAILYARD_RANK"] = "3";  // the last rank is inside
  EXPECT_TRUE(BootstrapConfigFromEnvironment(&env).ok());
}

TEST(BootstrapConfigTest, MasterAddrAndPortBecomeTheStoreAddress) {
  Env env = Minimal();
  env.erase("RAILYARD_STORE");
  env["MASTER_ADDR"] = "10.1.2.3";
  ExpectInvalidNaming(env, {"MASTER_ADDR", "MASTER_PORT"});
  env["MASTER_PORT"] = "29500";
  auto c = BootstrapConfigFromEnvironment(&env);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->store_address, "10.1.2.3:29500");
  // RAILYARD_STORE takes precedence over torchrun's pair.
  env["RAILYARD_STORE"] = "10.9.9.9:1234";
  c = BootstrapConfigFromEnvironment(&env);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->store_address, "10.9.9.9:1234");
}

TEST(BootstrapConfigTest, StoreDirSelectsTheFileStore) {
  Env env = Minimal();
  env.erase("RAILYARD_STORE");
  env["RAILYARD_STORE_DIR"] = "/shared/rdzv";
  env["MASTER_ADDR"] = "10.1.2.3";  // ignored (without a port, too) when a store dir is given
  auto c = BootstrapConfigFromEnvironment(&env);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->store_dir, "/shared/rdzv");
  EXPECT_EQ(c->store_address, "");
}

TEST(BootstrapConfigTest, HostComesFromRailyardHostElseVhost) {
  Env env = Minimal();
  env["RAILYARD_VHOST"] = "node2";
  auto c = BootstrapConfigFromEnvironment(&env);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->host, "node2");
  EXPECT_TRUE(c->virtual_host);
  env["RAILYARD_HOST"] = "gpu17";
  c = BootstrapConfigFromEnvironment(&env);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->host, "gpu17");
  EXPECT_TRUE(c->virtual_host);
  env.erase("RAILYARD_VHOST");
  c = BootstrapConfigFromEnvironment(&env);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->virtual_host);
}

TEST(BootstrapConfigTest, TransportInterfaceOfiAndJobSettingsAreRead) {
  Env env = Minimal();
  env["RAILYARD_TRANSPORT"] = "tcp";
  env["RAILYARD_SOCKET_IFNAME"] = "^docker,lo";
  env["RAILYARD_OFI_PROVIDER"] = "verbs;ofi_rxm";
  env["RAILYARD_OFI_DOMAIN"] = "mlx5_0";
  env["RAILYARD_JOB_ID"] = "job-42";
  auto c = BootstrapConfigFromEnvironment(&env);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->transport, "tcp");
  EXPECT_EQ(c->socket_ifname, "^docker,lo");
  EXPECT_EQ(c->ofi_provider, "verbs;ofi_rxm");
  EXPECT_EQ(c->ofi_domain, "mlx5_0");
  EXPECT_EQ(c->job_id, "job-42");
  EXPECT_TRUE(c->hierarchy);
}

TEST(BootstrapConfigTest, StoreServeAppliesToRankZeroWithAnAddress) {
  Env env = Minimal();
  env["RAILYARD_STORE_SERVE"] = "1";
  auto c = BootstrapConfigFromEnvironment(&env);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->serve_store);  // rank 1 only connects
  env["RAILYARD_RANK"] = "0";
  c = BootstrapConfigFromEnvironment(&env);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_TRUE(c->serve_store);
  env.erase("RAILYARD_STORE");
  env["RAILYARD_STORE_DIR"] = "/shared/rdzv";
  ExpectInvalidNaming(env, {"RAILYARD_STORE_SERVE", "RAILYARD_STORE"});
  env["RAILYARD_STORE_SERVE"] = "yes";  // only "1" means serve
  c = BootstrapConfigFromEnvironment(&env);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_FALSE(c->serve_store);
}

TEST(BootstrapConfigTest, TcpCongestionControlDefaultsToAutoAndRejectsNonNames) {
  Env env = Minimal();
  auto c = BootstrapConfigFromEnvironment(&env);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->tcp.congestion, "auto");
  env["RAILYARD_TCP_CC"] = "reno";
  c = BootstrapConfigFromEnvironment(&env);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->tcp.congestion, "reno");
  env["RAILYARD_TCP_CC"] = "cubic;rm";
  ExpectInvalidNaming(env, {"RAILYARD_TCP_CC", "cubic;rm", "expected auto, system"});
}

// Three ranks in threads of this process, meeting through a file store in a temp directory.
TEST(BootstrapTest, ThreeRanksOverTcpThroughAFileStoreAllreduce) {
  constexpr int kRanks = 3;
  constexpr size_t kCount = 1000;
  base::ScopedTempDir tmp("bootstrap");
  ASSERT_FALSE(tmp.path().empty());
  std::vector<Status> results(kRanks, Status(StatusCode::kInternal, "not run"));
  std::vector<std::vector<int32_t>> data(kRanks);
  // Kept until every rank is done: a rank that closed its sockets early could cut a
  // peer's last message.
  std::vector<std::optional<Bootstrapped>> ranks(kRanks);
  std::vector<std::thread> threads;
  for (int r = 0; r < kRanks; ++r) {
    threads.emplace_back([&, r] {
      Env env;
      env["RAILYARD_RANK"] = std::to_string(r);
      env["RAILYARD_WORLD_SIZE"] = std::to_string(kRanks);
      env["RAILYARD_STORE_DIR"] = tmp.Sub("rdzv");
      env["RAILYARD_JOB_SECRET"] = "bootstrap-test-secret";
      env["RAILYARD_TRANSPORT"] = "tcp";
      env["RAILYARD_SOCKET_IFNAME"] = "=lo";
      auto config = BootstrapConfigFromEnvironment(&env);
      if (!config.ok()) {
        results[r] = config.status();
        return;
      }
      auto b = Bootstrap(*config, base::Deadline::After(std::chrono::seconds(30)));
      if (!b.ok()) {
        results[r] = b.status();
        return;
      }
      ranks[r] = std::move(*b);
      data[r].resize(kCount);
      for (size_t i = 0; i < kCount; ++i) data[r][i] = static_cast<int32_t>(i) * (r + 1);
      results[r] = ranks[r]->comm->Allreduce(data[r].data(), data[r].data(), kCount, DataType::kI32,
                                             ReduceOp::kSum);
    });
  }
  for (auto& t : threads) t.join();
  for (int r = 0; r < kRanks; ++r) {
    ASSERT_TRUE(results[r].ok()) << "rank " << r << ": " << results[r].ToString();
    EXPECT_EQ(ranks[r]->transport, "tcp");
    EXPECT_EQ(ranks[r]->comm->size(), kRanks);
    for (size_t i = 0; i < kCount; ++i) {
      ASSERT_EQ(data[r][i], static_cast<int32_t>(i) * (1 + 2 + 3)) << "rank " << r << " at " << i;
    }
  }
}

}  // namespace
}  // namespace railyard::comm
