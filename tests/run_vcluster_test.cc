// `railyard run` on the virtual cluster: a host whose link is cut in the middle of training
// is found lost, its ranks move to the spare, and the job ends with the weights of an
// uninterrupted run. Fixed prefix "rrv" and the netns lock.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <string>
#include <vector>

#include "railyard/base/files.h"
#include "railyard/base/subprocess.h"
#include "railyard/base/temp_dir_testing.h"
#include "run_harness.h"

namespace railyard {
namespace {

using base::Deadline;
using namespace std::chrono_literals;

constexpr char kRailyard[] = RAILYARD_BINARY;
constexpr char kTrain[] = RAILYARD_TRAIN_BINARY;
constexpr char kPrefix[] = "rrv";

base::ExitInfo Railyard(std::vector<std::string> args, std::chrono::seconds timeout = 60s) {
  args.insert(args.begin(), kRailyard);
  auto r = base::RunCommand({.argv = args}, Deadline::After(timeout));
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : base::ExitInfo{};
}

class RunVclusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::geteuid() != 0) {
      GTEST_SKIP() << "needs root to create network namespaces (running as uid " << ::geteuid()
                   << ")";
    }
    Railyard({"vcluster", "down", "--prefix", kPrefix});
    auto up = Railyard({"vcluster", "up", "--prefix", kPrefix, "--hosts", "4", "--leaves", "2",
                        "--mode", "netns"});
    ASSERT_EQ(up.exit_code, 0) << up.stderr_text;
    up_ = true;
  }
  void TearDown() override {
    if (!up_) return;
    auto down = Railyard({"vcluster", "down", "--prefix", kPrefix});
    EXPECT_EQ(down.exit_code, 0) << down.stderr_text;
  }

  // `railyard run` up to its "--", then the trainer's command line.
  std::vector<std::string> RunArgs(const std::string& hosts, int nodes, int spares,
                                   const std::string& name) {
    return {kRailyard,
            "run",
            "--hosts",
            hosts,
            "--nodes",
            std::to_string(nodes),
            "--spares",
            std::to_string(spares),
            "--preflight",
            "none",
            "--heartbeat-timeout",
            "4s",
            "--ckpt-dir",
            dir_.Sub("ckpt-" + name),
            "--events",
            "-",
            "--"};
  }
  std::vector<std::string> Args(const std::string& hosts, int nodes, int spares,
                                const std::string& name) {
    std::vector<std::string> args = RunArgs(hosts, nodes, spares, name);
    for (std::string& a :
         testing::TrainCommand(kTrain, 1500, 50, dir_.Sub("data"), dir_.Sub(name + ".bin"))) {
      args.push_back(std::move(a));
    }
    return args;
  }

  base::ScopedTempDir dir_{"run-vc"};
  bool up_ = false;
};

TEST_F(RunVclusterTest, CutHostIsLostAndItsRanksMoveToTheSpare) {
  // The uninterrupted run of the same world (2 ranks) on pretend hosts: the result depends
  // only on the world size and the ring order.
  auto reference =
      base::RunCommand({.argv = Args("local:2", 2, 0, "reference")}, Deadline::After(120s));
  ASSERT_TRUE(reference.ok() && reference->Succeeded())
      << (reference.ok() ? reference->stderr_text : reference.status().ToString());

  auto live = testing::StartAndWaitFor(Args(std::string("vcluster:") + kPrefix, 2, 1, "cut"),
                                       "ranks_running");
  ASSERT_TRUE(live);
  std::vector<nlohmann::json> starts = testing::EventsOf(live->events, "attempt_start");
  ASSERT_EQ(starts.size(), 1u);
  // The second host of the job is the one cut off; its name is in the attempt's message.
  std::string message = starts[0].value("message", "");
  std::string hosts = message.substr(message.rfind(' ') + 1);
  std::string victim = hosts.substr(hosts.find(',') + 1);
  auto cut = Railyard({"vcluster", "cut", victim, "--prefix", kPrefix});
  ASSERT_EQ(cut.exit_code, 0) << cut.stderr_text;

  auto done = live->child.Wait(Deadline::After(120s));
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  testing::ParseEvents(done->stdout_text, &live->events);
  ASSERT_EQ(done->exit_code, 0) << done->stdout_text << done->stderr_text;
  auto failures = testing::EventsOf(live->events, "failure");
  ASSERT_EQ(failures.size(), 1u) << done->stdout_text;
  EXPECT_EQ(failures[0].value("host", ""), victim) << failures[0].dump();
  EXPECT_NE(failures[0].value("message", "").find("lost"), std::string::npos) << failures[0].dump();
  auto restarts = testing::EventsOf(live->events, "restart");
  ASSERT_EQ(restarts.size(), 1u);
  EXPECT_NE(restarts[0].value("host", ""), victim);
  auto a = base::ReadFile(dir_.Sub("reference.bin"));
  auto b = base::ReadFile(dir_.Sub("cut.bin"));
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_TRUE(*a == *b) << "weights after the move to the spare differ from the reference";
}

TEST_F(RunVclusterTest, RanksAreToldTheInterfaceTheirHostIsReachedAt) {
  const std::string logs = dir_.Sub("logs");
  auto r =
      Railyard({"run", "--vcluster", kPrefix, "--nodes", "2", "--preflight", "none",
                "--heartbeat-timeout", "0", "--log-dir", logs, "--events", "-", "--", "sh", "-c",
                "echo \"IF=$NCCL_SOCKET_IFNAME ADDR=$RAILYARD_VHOST_ADDR\"; ip -4 -o addr "
                "show dev \"${NCCL_SOCKET_IFNAME#=}\""});
  ASSERT_EQ(r.exit_code, 0) << r.stdout_text << r.stderr_text;
  for (int rank = 0; rank < 2; ++rank) {
    auto log = base::ReadFile(fmt::format("{}/rank-{}.log", logs, rank));
    ASSERT_TRUE(log.ok()) << log.status().ToString();
    // An exact interface name (NCCL's '=' form), the one holding the host's own address.
    size_t at = log->find("IF==");
    ASSERT_NE(at, std::string::npos) << *log;
    size_t addr = log->find("ADDR=");
    ASSERT_NE(addr, std::string::npos) << *log;
    std::string address = log->substr(addr + 5, log->find('\n', addr) - addr - 5);
    EXPECT_NE(log->find("inet " + address + "/"), std::string::npos) << *log;
  }
}

TEST_F(RunVclusterTest, SigintStopsEveryRankAndAgentOnEveryHost) {
  auto live = testing::StartAndWaitFor(Args(std::string("vcluster:") + kPrefix, 3, 0, "sigint"),
                                       "ranks_running");
  ASSERT_TRUE(live);
  // The ranks of this run, on whichever virtual host: their environment names its checkpoint
  // directory. Each is its own process group.
  const std::string marker = "RAILYARD_CKPT_DIR=" + dir_.Sub("ckpt-sigint");
  std::vector<pid_t> ranks = testing::ProcessesWith(marker, false);
  EXPECT_EQ(ranks.size(), 3u);
  ASSERT_EQ(::kill(live->child.pid(), SIGINT), 0);
  auto done = live->child.Wait(Deadline::After(60s));
  ASSERT_TRUE(done.ok()) << done.status().ToString();
  EXPECT_EQ(done->exit_code, 130) << done->stderr_text;
  EXPECT_NE(done->stdout_text.find("\"event\":\"interrupted\""), std::string::npos);
  EXPECT_TRUE(testing::ProcessesWith(marker, false).empty());
  for (pid_t pgid : ranks) {
    EXPECT_TRUE(::kill(-pgid, 0) != 0 && errno == ESRCH)
        << "rank process group " << pgid << " outlived the run";
  }
  // No agent of the cluster is left either (they run `railyard run agent` in the hosts).
  for (pid_t pid : testing::ProcessesWith("\nagent\n", true, "\n--launcher\n")) {
    auto environ = base::ReadFile(fmt::format("/proc/{}/environ", pid));
    EXPECT_FALSE(environ.ok() && environ->find(std::string("RAILYARD_VCLUSTER_PREFIX=") +
                                               kPrefix) != std::string::npos)
        << "agent " << pid << " outlived the run";
  }
}

}  // namespace
}  // namespace railyard
