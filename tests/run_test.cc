// `railyard run` end to end on pretend hosts of this machine (local:N): the example trainer
// (examples/train) under the launcher, with a rank killed, a rank frozen, a host's agent
// killed, a spent restart budget and a signal to the launcher; the recovered weights are
// compared byte for byte with an uninterrupted run's.
#include <dirent.h>
#include <gtest/gtest.h>
#include <sched.h>
#include <signal.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "railyard/base/files.h"
#include "railyard/base/subprocess.h"
#include "railyard/base/temp_dir_testing.h"
#include "run_harness.h"

namespace railyard {
namespace {

using testing::Alive;
using testing::Live;
using testing::ParentOf;
using testing::ParseEvents;
using testing::ProcessesWith;
using testing::StartAndWaitFor;

using base::Deadline;
using namespace std::chrono_literals;

constexpr char kRailyard[] = RAILYARD_BINARY;
constexpr char kTrain[] = RAILYARD_TRAIN_BINARY;

int64_t UnixMs() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(
             std::chrono::system_clock::now().time_since_epoch())
      .count();
}

class RunTest : public ::testing::Test {
 protected:
  std::vector<std::string> RunArgs(const std::string& hosts, int spares, int nproc,
                                   const std::string& ckpt, const std::string& out,
                                   const std::vector<std::string>& extra_train,
                                   const std::vector<std::string>& extra_run = {}) {
    std::vector<std::string> argv = {kRailyard,
                                     "run",
                                     "--hosts",
                                     hosts,
                                     "--spares",
                                     std::to_string(spares),
                                     "--nproc-per-host",
                                     std::to_string(nproc),
                                     "--ckpt-dir",
                                     ckpt,
                                     "--events",
                                     "-",
                                     "--heartbeat-timeout",
                                     "3s"};
    argv.insert(argv.end(), extra_run.begin(), extra_run.end());
    argv.insert(argv.end(), {"--", kTrain, "--data", dir_.path() + "/data", "--ckpt-every", "10",
                             "--log-every", "0", "--out", out});
    argv.insert(argv.end(), extra_train.begin(), extra_train.end());
    return argv;
  }

  // Runs to the end; the events (JSON lines on stdout) and how it ended.
  struct Finished {
    base::ExitInfo exit;
    std::vector<nlohmann::json> events;
    std::string Dump() const { return exit.stdout_text + exit.stderr_text; }
    std::vector<nlohmann::json> Of(const std::string& kind) const {
      std::vector<nlohmann::json> out;
      for (const auto& e : events) {
        if (e.value("event", "") == kind) out.push_back(e);
      }
      return out;
    }
  };
  Finished Run(const std::vector<std::string>& argv) {
    auto r = base::RunCommand({.argv = argv}, Deadline::After(150s));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    Finished f{.exit = r.ok() ? *r : base::ExitInfo{}};
    ParseEvents(f.exit.stdout_text, &f.events);
    return f;
  }
  // The uninterrupted run's weights for `nproc` x `hosts` ranks and `steps`.
  std::string Reference(int hosts, int nproc, int steps) {
    std::string out = fmt::format("{}/ref-{}x{}.bin", dir_.path(), hosts, nproc);
    Finished f = Run(RunArgs(fmt::format("local:{}", hosts), 0, nproc,
                             dir_.path() + "/ref-ckpt-" + std::to_string(hosts), out,
                             {"--steps", std::to_string(steps)}));
    EXPECT_EQ(f.exit.exit_code, 0) << f.Dump();
    auto bytes = base::ReadFile(out);
    EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
    return bytes.ok() ? *bytes : "";
  }

  base::ScopedTempDir dir_{"run"};
};

TEST_F(RunTest, KilledRankIsNamedReplacedByTheSpareAndTheWeightsAreIdentical) {
  const std::string reference = Reference(2, 2, 40);
  const std::string out = dir_.path() + "/killed.bin";
  Finished f =
      Run(RunArgs("local:3", 1, 2, dir_.path() + "/ckpt", out,
                  {"--steps", "40", "--fail-at-step-for-test", "25", "--fail-rank-for-test", "1"}));
  ASSERT_EQ(f.exit.exit_code, 0) << f.Dump();
  auto failures = f.Of("failure");
  ASSERT_EQ(failures.size(), 1u) << f.Dump();
  // Rank 1 killed itself; its peers' errors name it, and the launcher blames rank 1.
  EXPECT_EQ(failures[0].value("rank", -1), 1) << failures[0].dump();
  EXPECT_EQ(failures[0].value("host", ""), "local0");
  EXPECT_NE(failures[0].value("message", "").find("killed by SIGKILL"), std::string::npos)
      << failures[0].dump();
  auto restarts = f.Of("restart");
  ASSERT_EQ(restarts.size(), 1u);
  EXPECT_EQ(restarts[0].value("host", ""), "local2");  // the spare
  EXPECT_EQ(restarts[0].value("step", -1), 20);        // the newest verified checkpoint
  auto starts = f.Of("attempt_start");
  ASSERT_EQ(starts.size(), 2u);
  EXPECT_NE(starts[1].value("message", "").find("local2,local1"), std::string::npos)
      << "the spare takes the failed host's place, so rank order is kept: " << starts[1].dump();
  auto bytes = base::ReadFile(out);
  ASSERT_TRUE(bytes.ok()) << bytes.status().ToString();
  EXPECT_TRUE(*bytes == reference) << "recovered weights differ from the uninterrupted run's";
}

TEST_F(RunTest, FrozenRankIsHungAndNamedNotItsWaitingPeers) {
  const std::string out = dir_.path() + "/frozen.bin";
  auto live = StartAndWaitFor(RunArgs("local:2", 0, 2, dir_.path() + "/ckpt", out,
                                      {"--steps", "100000"}, {"--max-restarts", "0"}),
                              "ranks_running");
  ASSERT_TRUE(live);
  // Rank 2 (local1's first) is frozen once it has stepped: SIGSTOP, as a debugger would.
  auto deadline = Deadline::After(30s);
  std::vector<pid_t> rank2;
  while (rank2.empty() && !deadline.Expired()) {
    rank2 = ProcessesWith("\nRAILYARD_RANK=2\n", false, "RAILYARD_RESTART_COUNT=0");
    for (auto it = rank2.begin(); it != rank2.end();) {
      auto env = base::ReadFile(fmt::format("/proc/{}/environ", *it));
      it = env.ok() &&
                   env->find(std::string("RAILYARD_CKPT_DIR=") + dir_.path()) != std::string::npos
               ? it + 1
               : rank2.erase(it);
    }
  }
  ASSERT_EQ(rank2.size(), 1u);
  const int64_t frozen_at_ms = UnixMs();
  ASSERT_EQ(::kill(rank2[0], SIGSTOP), 0);
  auto done = live->child.Wait(Deadline::After(60s));
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  ParseEvents(done->stdout_text, &live->events);
  std::vector<nlohmann::json> failures;
  for (const auto& e : live->events) {
    if (e.value("event", "") == "failure") failures.push_back(e);
  }
  ASSERT_EQ(failures.size(), 1u) << done->stdout_text << done->stderr_text;
  EXPECT_EQ(failures[0].value("rank", -1), 2) << failures[0].dump();
  EXPECT_EQ(failures[0].value("host", ""), "local1");
  EXPECT_NE(failures[0].value("message", "").find("hung"), std::string::npos) << failures[0].dump();
  // No restarts allowed: the job fails with the budget spent, and the frozen rank is gone.
  EXPECT_EQ(done->exit_code, 3) << done->stderr_text;
  EXPECT_FALSE(Alive(rank2[0]));
  // Found within twice the heartbeat timeout (3 s): a bound on behaviour with a wide margin,
  // not a speed figure (bench recover measures that).
  EXPECT_LE(failures[0].value("time_ms", int64_t{0}) - frozen_at_ms, 2 * 3000)
      << failures[0].dump();
}

TEST_F(RunTest, LostHostIsReplacedByTheSpare) {
  const std::string reference = Reference(2, 1, 2000);
  const std::string out = dir_.path() + "/lost.bin";
  auto live = StartAndWaitFor(
      RunArgs("local:3", 1, 1, dir_.path() + "/ckpt", out, {"--steps", "2000"}), "ranks_running");
  ASSERT_TRUE(live);
  // local1's agent dies with its ranks (they die with their parent): the host is gone.
  // Only this run's agent (a child of its launcher): other tests run local1 agents too.
  std::vector<pid_t> agent;
  for (pid_t pid : ProcessesWith("\nagent\n", true, "\nlocal1\n")) {
    if (ParentOf(pid) == live->child.pid()) agent.push_back(pid);
  }
  ASSERT_FALSE(agent.empty());
  for (pid_t pid : agent) ::kill(pid, SIGKILL);
  auto done = live->child.Wait(Deadline::After(120s));
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  ParseEvents(done->stdout_text, &live->events);
  std::vector<nlohmann::json> restarts;
  for (const auto& e : live->events) {
    if (e.value("event", "") == "restart") restarts.push_back(e);
  }
  ASSERT_EQ(done->exit_code, 0) << done->stdout_text << done->stderr_text;
  ASSERT_EQ(restarts.size(), 1u) << done->stdout_text;
  EXPECT_EQ(restarts[0].value("host", ""), "local2");
  EXPECT_NE(restarts[0].value("message", "").find("local1"), std::string::npos)
      << restarts[0].dump();
  auto bytes = base::ReadFile(out);
  ASSERT_TRUE(bytes.ok());
  EXPECT_TRUE(*bytes == reference) << "recovered weights differ from the uninterrupted run's";
}

TEST_F(RunTest, SpentRestartBudgetEndsTheJobWithItsExitCode) {
  // The command fails every time: one restart, then the job fails with exit code 3.
  Finished f = Run({kRailyard, "run", "--hosts", "local:2", "--max-restarts", "1", "--events", "-",
                    "--heartbeat-timeout", "0", "--", "sh", "-c",
                    "echo 'railyard: error: disk full on purpose' >&2; exit 7"});
  EXPECT_EQ(f.exit.exit_code, 3) << f.Dump();
  EXPECT_EQ(f.Of("failure").size(), 2u) << f.Dump();
  auto give_up = f.Of("give_up");
  ASSERT_EQ(give_up.size(), 1u) << f.Dump();
  EXPECT_NE(give_up[0].value("message", "").find("exited with 7"), std::string::npos)
      << give_up[0].dump();
  EXPECT_NE(f.Of("failure")[0].value("message", "").find("disk full on purpose"), std::string::npos)
      << "the rank's own error line is part of the cause";
}

TEST_F(RunTest, SignalToTheLauncherStopsEveryRankAndAgent) {
  auto live = StartAndWaitFor(RunArgs("local:2", 0, 2, dir_.path() + "/ckpt",
                                      dir_.path() + "/w.bin", {"--steps", "100000"}),
                              "ranks_running");
  ASSERT_TRUE(live);
  // The launcher's children are its host agents.
  std::vector<pid_t> agents;
  for (pid_t pid : ProcessesWith("\nagent\n", true)) {
    if (ParentOf(pid) == live->child.pid()) agents.push_back(pid);
  }
  EXPECT_EQ(agents.size(), 2u);
  // Every rank is its own process group (its pid); none may be left after the signal.
  std::vector<pid_t> ranks = ProcessesWith("RAILYARD_CKPT_DIR=" + dir_.path(), false);
  EXPECT_EQ(ranks.size(), 4u);
  ASSERT_EQ(::kill(live->child.pid(), SIGTERM), 0);
  auto done = live->child.Wait(Deadline::After(30s));
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->exit_code, 128 + SIGTERM) << done->stderr_text;
  EXPECT_NE(done->stdout_text.find("\"event\":\"interrupted\""), std::string::npos);
  // Nothing of this job is left: no rank (its checkpoint directory is in its environment),
  // no agent.
  const std::string marker = "RAILYARD_CKPT_DIR=" + dir_.path();
  EXPECT_TRUE(ProcessesWith(marker, false).empty());
  for (pid_t pid : agents) EXPECT_FALSE(Alive(pid)) << "agent " << pid << " outlived the run";
  for (pid_t pgid : ranks) {
    EXPECT_TRUE(::kill(-pgid, 0) != 0 && errno == ESRCH)
        << "rank process group " << pgid << " outlived the run";
  }
}

TEST_F(RunTest, BadInputIsRefusedBeforeAnythingStarts) {
  auto run = [](std::vector<std::string> args) {
    std::vector<std::string> argv = {kRailyard, "run"};
    argv.insert(argv.end(), args.begin(), args.end());
    auto r = base::RunCommand({.argv = argv}, Deadline::After(30s));
    EXPECT_TRUE(r.ok());
    return r.ok() ? *r : base::ExitInfo{};
  };
  auto missing = run({"--hosts", "local:2", "--", "/no/such/trainer"});
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_NE(missing.stderr_text.find("command '/no/such/trainer' not found"), std::string::npos)
      << missing.stderr_text;
  auto too_many = run({"--hosts", "local:2", "--nproc-per-host", "100000", "--", "true"});
  EXPECT_EQ(too_many.exit_code, 2);
  EXPECT_NE(too_many.stderr_text.find("--nproc-per-host 100000"), std::string::npos)
      << too_many.stderr_text;
  auto both = run({"--hosts", "local:2", "--vcluster", "--", "true"});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_NE(both.stderr_text.find("give one of --vcluster, --hosts"), std::string::npos)
      << both.stderr_text;
  auto no_command = run({"--hosts", "local:2"});
  EXPECT_EQ(no_command.exit_code, 2);
  EXPECT_NE(no_command.stderr_text.find("put it after --"), std::string::npos);
  auto spares = run({"--hosts", "local:2", "--spares", "2", "--", "true"});
  EXPECT_EQ(spares.exit_code, 2);
  EXPECT_NE(spares.stderr_text.find("leave none for the job"), std::string::npos)
      << spares.stderr_text;
}

TEST_F(RunTest, DryRunPrintsPlacementSparesAndRankLayout) {
  auto r = base::RunCommand({.argv = {kRailyard, "run", "--hosts", "local:3", "--spares", "1",
                                      "--nproc-per-host", "2", "--dry-run", "--", "true"}},
                            Deadline::After(30s));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->exit_code, 0) << r->stderr_text;
  EXPECT_NE(r->stdout_text.find("job: 2 hosts x 2 ranks = 4 ranks: local0,local1"),
            std::string::npos)
      << r->stdout_text;
  EXPECT_NE(r->stdout_text.find("spares: local2"), std::string::npos) << r->stdout_text;
  EXPECT_NE(r->stdout_text.find("local1 runs ranks 2-3"), std::string::npos) << r->stdout_text;
}

TEST_F(RunTest, RanksRunOnTheCpusOfTheirNumaNodeAndLogToTheirOwnFiles) {
  // Two NUMA nodes made of CPUs this process may use: the first and the last.
  cpu_set_t mine;
  ASSERT_EQ(::sched_getaffinity(0, sizeof mine, &mine), 0);
  std::vector<int> cpus;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &mine)) cpus.push_back(c);
  }
  if (cpus.size() < 2) GTEST_SKIP() << "needs 2 CPUs to bind 2 ranks apart; this process has 1";
  const int first = cpus.front(), last = cpus.back();
  const std::string topology = dir_.Sub("topology.yaml");
  ASSERT_TRUE(
      base::WriteFileAtomic(
          topology, fmt::format("version: 2\nname: two-numa\nlevels: [leaf]\nprofiles:\n"
                                "  two-numa:\n    numa:\n    - {{id: 0, cpus: \"{}\"}}\n"
                                "    - {{id: 1, cpus: \"{}\"}}\n"
                                "switches:\n  - {{name: leaf0, level: leaf, nodes: \"local[0-1]\", "
                                "profile: two-numa}}\n",
                                first, last))
          .ok());
  const std::string logs = dir_.Sub("logs");
  auto r = base::RunCommand(
      {.argv = {kRailyard, "run", "--hosts", "local:2", "--topology", topology, "--nproc-per-host",
                "2", "--heartbeat-timeout", "0", "--log-dir", logs, "--events", "-",
                // An --env just before `--`: the command keeps its own dashed arguments (-c).
                "--env", "RY_TEST_WORD=bound", "--", "sh", "-c",
                "grep Cpus_allowed_list /proc/self/status; "
                "echo rank $RANK local $LOCAL_RANK $RY_TEST_WORD"}},
      Deadline::After(60s));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->exit_code, 0) << r->stdout_text << r->stderr_text;
  // Local rank 0 of each host on NUMA node 0's CPU, local rank 1 on node 1's: what the
  // model says and sched_getaffinity (the kernel's Cpus_allowed_list) agree.
  for (int rank = 0; rank < 4; ++rank) {
    auto log = base::ReadFile(fmt::format("{}/rank-{}.log", logs, rank));
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    EXPECT_NE(log->find(fmt::format("Cpus_allowed_list:\t{}\n", rank % 2 == 0 ? first : last)),
              std::string::npos)
        << "rank " << rank << ": " << *log;
    EXPECT_NE(log->find(fmt::format("rank {} local {} bound", rank, rank % 2)), std::string::npos)
        << *log;
  }
  auto dry =
      base::RunCommand({.argv = {kRailyard, "run", "--hosts", "local:2", "--topology", topology,
                                 "--nproc-per-host", "2", "--dry-run", "--", "true"}},
                       Deadline::After(30s));
  ASSERT_TRUE(dry.ok());
  EXPECT_NE(dry->stdout_text.find("host local1"), std::string::npos) << dry->stdout_text;
  EXPECT_NE(dry->stdout_text.find(std::to_string(last)), std::string::npos) << dry->stdout_text;
}

TEST_F(RunTest, RanksGetTheirGpuNicAndNcclTopologyFromTheNodeModel) {
  const std::string topology = dir_.Sub("gpus.yaml");
  ASSERT_TRUE(base::WriteFileAtomic(topology, R"(version: 2
name: two-gpus
levels: [leaf]
profiles:
  two-gpus:
    gpus:
    - {index: 0, pci_bus_id: 0000:18:00.0, numa_node: 0}
    - {index: 1, pci_bus_id: 0000:2a:00.0, numa_node: 0}
    nics:
    - {name: mlx5_0, pci_bus_id: 0000:17:00.0, numa_node: 0, rdma: true}
    - {name: mlx5_1, pci_bus_id: 0000:29:00.0, numa_node: 0, rdma: true}
    gpu_nic_paths:
    - {gpu: 0, nic: mlx5_0, path: PIX}
    - {gpu: 1, nic: mlx5_1, path: PIX}
switches:
  - {name: leaf0, level: leaf, nodes: "local[0-1]", profile: two-gpus}
)")
                  .ok());
  const std::string logs = dir_.Sub("logs");
  auto r = base::RunCommand(
      {.argv = {kRailyard, "run", "--hosts", "local:2", "--topology", topology, "--nproc-per-host",
                "2", "--heartbeat-timeout", "0", "--log-dir", logs, "--events", "-", "--", "sh",
                "-c",
                "echo CVD=$CUDA_VISIBLE_DEVICES HCA=$NCCL_IB_HCA; grep -c 'busid=\"0000:2a:00.0\"' "
                "\"$NCCL_TOPO_FILE\""}},
      Deadline::After(60s));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->exit_code, 0) << r->stdout_text << r->stderr_text;
  for (int rank = 0; rank < 4; ++rank) {
    auto log = base::ReadFile(fmt::format("{}/rank-{}.log", logs, rank));
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    // Local rank i: GPU i and the RDMA NIC on its PCI switch; NCCL's topology file names
    // GPU 1's bus id.
    EXPECT_NE(log->find(fmt::format("CVD={} HCA==mlx5_{}\n1\n", rank % 2, rank % 2)),
              std::string::npos)
        << "rank " << rank << ": " << *log;
  }
}

}  // namespace
}  // namespace railyard
