// A real Slurm on the virtual cluster (docs/slurm.md): `railyard vcluster up --slurm` with 4
// hosts on 2 leaves brings up munged, slurmctld and one slurmd per host; sinfo shows every node
// idle, `scontrol show topology` shows the switches Railyard exported, and a 2-node job with
// --switches=1 lands inside one leaf: with node1 busy, only leaf1 (node2, node3) has two free
// nodes. `vcluster down` then leaves no daemon, job step, namespace or file, and neither does
// an `up` that fails once its daemons run.
//
// Needs root (network namespaces) and Debian's slurm-wlm and munge; reports a skip naming what
// is missing otherwise. Fixed prefix "rsl", under the netns lock with every other netns test.
#include <dirent.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "cli_harness.h"
#include "railyard/base/files.h"

namespace railyard::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kPrefix = "rsl";
const std::string kSlurmDir = "/run/railyard/rsl-slurm";

std::string SkipReason() {
  if (::geteuid() != 0) {
    return "needs root for network namespaces (running as uid " + std::to_string(::geteuid()) + ")";
  }
  for (const char* bin : {"/usr/sbin/slurmctld", "/usr/sbin/slurmd", "/usr/sbin/munged",
                          "/usr/bin/sinfo", "/usr/bin/srun", "/usr/bin/scontrol"}) {
    if (::access(bin, X_OK) != 0) {
      return std::string(bin) +
             " not installed (Debian slurm-wlm and munge; scripts/bootstrap "
             "--test installs them)";
    }
  }
  return "";
}

// Live processes (zombies excluded) that belong to the rsl Slurm cluster: a command line that
// names its directory, or a job step (whose command line names none).
std::vector<std::string> LeftoverProcesses() {
  std::vector<std::string> found;
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return {"cannot read /proc"};
  while (dirent* e = ::readdir(proc)) {
    std::string pid = e->d_name;
    if (pid.find_first_not_of("0123456789") != std::string::npos) continue;
    auto stat = base::ReadFile("/proc/" + pid + "/stat");
    auto cmdline = base::ReadFile("/proc/" + pid + "/cmdline");
    if (!stat.ok() || !cmdline.ok()) continue;
    size_t paren = stat->rfind(')');
    if (paren != std::string::npos && paren + 2 < stat->size() && (*stat)[paren + 2] == 'Z') {
      continue;
    }
    std::replace(cmdline->begin(), cmdline->end(), '\0', ' ');
    if (cmdline->find(kSlurmDir + "/") != std::string::npos ||
        cmdline->find("slurmstepd") != std::string::npos) {
      found.push_back(pid + ": " + *cmdline);
    }
  }
  ::closedir(proc);
  return found;
}

std::vector<std::string> LeftoverNamespaces() {
  std::vector<std::string> found;
  if (DIR* d = ::opendir("/run/netns")) {
    while (dirent* e = ::readdir(d)) {
      if (std::string(e->d_name).rfind("rsl-", 0) == 0) found.push_back(e->d_name);
    }
    ::closedir(d);
  }
  return found;
}

void ExpectNothingLeft() {
  EXPECT_TRUE(LeftoverProcesses().empty()) << ::testing::PrintToString(LeftoverProcesses());
  EXPECT_TRUE(LeftoverNamespaces().empty()) << ::testing::PrintToString(LeftoverNamespaces());
  EXPECT_FALSE(base::PathExists(kSlurmDir));
  EXPECT_FALSE(base::PathExists("/run/railyard/vcluster-rsl.json"));
}

class SlurmVclusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason = SkipReason();
    if (!reason.empty()) GTEST_SKIP() << reason;
    auto down = RunRailyard({"vcluster", "down", "--prefix", kPrefix});
    ASSERT_EQ(down.exit_code, 0) << down.err;
  }
  void TearDown() override {
    if (!SkipReason().empty()) return;
    auto down = RunRailyard({"vcluster", "down", "--prefix", kPrefix});
    EXPECT_EQ(down.exit_code, 0) << down.err;
    ExpectNothingLeft();
  }

  // Runs a Slurm client command against the cluster's slurm.conf.
  base::ExitInfo Slurm(const std::vector<std::string>& argv) {
    base::SpawnOptions o{.argv = argv, .env = {{"SLURM_CONF", slurm_conf_}}};
    auto r = base::RunCommand(o, base::Deadline::After(30s));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : base::ExitInfo{};
  }

  std::string slurm_conf_;
};

TEST_F(SlurmVclusterTest, TwoNodeJobWithOneSwitchLandsInOneLeafAndDownLeavesNothing) {
  auto up = RunRailyard({"vcluster", "up", "--prefix", kPrefix, "--hosts", "4", "--leaves", "2",
                         "--mode", "netns", "--slurm"},
                        {}, 60s);
  ASSERT_EQ(up.exit_code, 0) << up.out << up.err;
  auto status = RunRailyard({"vcluster", "status", "--prefix", kPrefix, "--json"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  slurm_conf_ = nlohmann::json::parse(status.out).value("slurm_conf", "");
  ASSERT_EQ(slurm_conf_, kSlurmDir + "/slurm.conf");

  // `up` returns once every node is idle.
  base::ExitInfo sinfo = Slurm({"sinfo", "-h", "-N", "-o", "%N %T"});
  EXPECT_EQ(sinfo.stdout_text, "node0 idle\nnode1 idle\nnode2 idle\nnode3 idle\n")
      << sinfo.stderr_text;

  base::ExitInfo topo = Slurm({"scontrol", "show", "topology"});
  for (const char* line :
       {"SwitchName=spine0 Level=1 ", "SwitchName=leaf0 Level=0 ", "SwitchName=leaf1 Level=0 ",
        "Nodes=node[0-1]", "Nodes=node[2-3]", "Switches=leaf[0-1]"}) {
    EXPECT_NE(topo.stdout_text.find(line), std::string::npos) << line << "\n" << topo.stdout_text;
  }

  // `vcluster exec` gives commands on a host the cluster's SLURM_CONF.
  auto exec = RunRailyard(
      {"vcluster", "exec", "--prefix", kPrefix, "node2", "--", "sh", "-c", "echo $SLURM_CONF"});
  EXPECT_EQ(exec.out, slurm_conf_ + "\n") << exec.err;

  // node1 taken whole (--exclusive; CR_Core would share its free core): leaf0 has one free
  // node left, so a 2-node job on one switch must take leaf1.
  // srun, not sbatch: an interactive allocation is scheduled at once, and the task's first line
  // says it runs.
  base::SpawnOptions hold{.argv = {"srun", "-N1", "-w", "node1", "--exclusive", "sh", "-c",
                                   "echo started; exec sleep 600"},
                          .env = {{"SLURM_CONF", slurm_conf_}}};
  auto busy = base::Child::Spawn(hold);
  ASSERT_TRUE(busy.ok()) << busy.status().ToString();
  auto started = busy->ReadLine(base::Deadline::After(30s));
  ASSERT_TRUE(started.ok()) << started.status().ToString();
  ASSERT_EQ(*started, "started");

  base::ExitInfo job = Slurm({"srun", "--nodes=2", "--switches=1", "--label", "sh", "-c",
                              "echo $SLURMD_NODENAME $SLURM_JOB_NODELIST"});
  ASSERT_TRUE(job.Succeeded()) << job.Describe() << job.stderr_text;
  std::set<std::string> lines;
  std::istringstream in(job.stdout_text);
  for (std::string line; std::getline(in, line);) lines.insert(line);
  EXPECT_EQ(lines, (std::set<std::string>{"0: node2 node[2-3]", "1: node3 node[2-3]"}))
      << job.stdout_text;

  // Down with the sleep job still running: its step and task go too (checked in TearDown).
  EXPECT_FALSE(LeftoverProcesses().empty());
  busy->KillAndReap();
}

TEST_F(SlurmVclusterTest, UpThatFailsOnceTheDaemonsRunLeavesNothing) {
  auto up = RunRailyard({"vcluster", "up", "--prefix", kPrefix, "--hosts", "4", "--leaves", "2",
                         "--mode", "netns", "--slurm", "--slurm-fail-for-test"},
                        {}, 60s);
  EXPECT_NE(up.exit_code, 0);
  EXPECT_NE(up.err.find("everything it created was removed"), std::string::npos) << up.err;
  EXPECT_NE(up.out.find("slurm: slurmd on node3"), std::string::npos) << up.out;
  ExpectNothingLeft();
}

}  // namespace
}  // namespace railyard::testing
