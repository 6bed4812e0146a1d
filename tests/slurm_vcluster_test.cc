// A real Slurm on the virtual cluster (docs/slurm.md): `railyard vcluster up --slurm` with 4
// hosts on 2 leaves brings up munged, slurmctld and one slurmd per host; sinfo shows every node
// idle, `scontrol show topology` shows the switches Railyard exported, and a 2-node job with
// --switches=1 lands inside one leaf: with node1 busy, only leaf1 (node2, node3) has two free
// nodes. `vcluster down` then leaves no daemon, job step, namespace or file, and neither does
// an `up` that fails once its daemons run.
//
// Inside it, Railyard's own Slurm integration: `railyard validate node --slurm-drain` as the
// HealthCheckProgram drains a node whose scratch fills up with Reason "railyard: ..." and
// resumes it once the fault is gone, never lifting a drain someone else set; `sbatch` runs
// `railyard run --slurm` for the example trainer, whose ranks go to the hosts in the leaf order
// Railyard computes (not Slurm's node order), whose killed rank is recovered on the spare inside
// the allocation, with the weights of an uninterrupted run; and a job that Slurm requeues after
// a node failure resumes from its last checkpoint, again to the same weights.
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
#include "railyard/base/strings.h"
#include "railyard/base/temp_dir_testing.h"
#include "run_harness.h"

namespace railyard::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char* kPrefix = "rsl";
const std::string kSlurmDir = "/run/railyard/rsl-slurm";
const std::string kSharedDir = "/run/railyard/rsl-shared";  // the hosts' scratch directories
const std::string kTopology = "/run/railyard/vcluster-rsl-topology.yaml";
constexpr char kTrain[] = RAILYARD_TRAIN_BINARY;

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

  // Brings the cluster up with `extra` flags and reads its SLURM_CONF.
  void Up(const std::vector<std::string>& extra = {}) {
    std::vector<std::string> args = {"vcluster", "up", "--prefix", kPrefix, "--hosts", "4",
                                     "--leaves", "2",  "--mode",   "netns", "--slurm"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto up = RunRailyard(args, {}, 60s);
    ASSERT_EQ(up.exit_code, 0) << up.out << up.err;
    auto status = RunRailyard({"vcluster", "status", "--prefix", kPrefix, "--json"});
    ASSERT_EQ(status.exit_code, 0) << status.err;
    slurm_conf_ = nlohmann::json::parse(status.out).value("slurm_conf", "");
    ASSERT_EQ(slurm_conf_, kSlurmDir + "/slurm.conf");
  }

  // `scontrol show node H -o`'s State= and Reason= fields.
  std::pair<std::string, std::string> NodeState(const std::string& host) {
    base::ExitInfo shown = Slurm({"scontrol", "show", "node", host, "-o"});
    auto field = [&](const std::string& key) -> std::string {
      size_t at = shown.stdout_text.find(" " + key + "=");
      if (at == std::string::npos) return "";
      at += key.size() + 2;
      // Reason runs to its "[user@time]" stamp; the other fields to the next space.
      size_t end =
          key == "Reason" ? shown.stdout_text.find(" [", at) : shown.stdout_text.find(' ', at);
      return shown.stdout_text.substr(at, end == std::string::npos ? std::string::npos : end - at);
    };
    return {field("State"), field("Reason")};
  }

  // Polls until `want` holds for `host`'s (state, reason), at most `timeout`; returns the last.
  std::pair<std::string, std::string> WaitNode(
      const std::string& host,
      const std::function<bool(const std::pair<std::string, std::string>&)>& want,
      std::chrono::seconds timeout) {
    const base::Deadline deadline = base::Deadline::After(timeout);
    std::pair<std::string, std::string> now = NodeState(host);
    while (!want(now) && !deadline.Expired()) {
      std::this_thread::sleep_for(200ms);  // a poll interval, bounded by the deadline
      now = NodeState(host);
    }
    return now;
  }

  // How many times the health check has run on `host` (its log has a stamp line per run).
  int HealthRuns(const std::string& host) {
    auto log = base::ReadFile(kSlurmDir + "/nodes/" + host + "/health-check.log");
    if (!log.ok()) return 0;
    int runs = 0;
    for (std::string_view line : base::SplitLines(*log)) runs += line.find(" rc=") != line.npos;
    return runs;
  }
  // Waits until the health check has run `more` times on `host` after `seen` runs.
  bool WaitHealthRuns(const std::string& host, int seen, int more, std::chrono::seconds timeout) {
    const base::Deadline deadline = base::Deadline::After(timeout);
    while (HealthRuns(host) < seen + more) {
      if (deadline.Expired()) return false;
      std::this_thread::sleep_for(200ms);  // a poll interval, bounded by the deadline
    }
    return true;
  }

  // The example trainer's flags: the same data, steps and seed for every run of a test.
  std::vector<std::string> TrainArgs(const std::string& name, int steps) {
    return testing::TrainCommand(kTrain, steps, 10, dir_.Sub("data"), dir_.Sub(name + ".bin"));
  }

  // The uninterrupted run of a 4-rank world on pretend hosts: the weights depend only on the
  // world size and the ring order.
  std::string Reference(int steps) {
    std::vector<std::string> args = {
        "run",         "--hosts", "local:2",    "--nproc-per-host",         "2",
        "--preflight", "none",    "--ckpt-dir", dir_.Sub("ckpt-reference"), "--events",
        "-",           "--"};
    for (const std::string& a : TrainArgs("reference", steps)) args.push_back(a);
    auto ran = RunRailyard(args, {}, 60s);
    EXPECT_EQ(ran.exit_code, 0) << ran.err;
    auto bytes = base::ReadFile(dir_.Sub("reference.bin"));
    EXPECT_TRUE(bytes.ok()) << bytes.status().ToString();
    return bytes.ok() ? *bytes : "";
  }

  // A batch script running `railyard run --slurm` around the trainer (`train`), its events
  // in EVENTS, and each rank's "RANK SLURMD_NODENAME" appended to RANKS.
  std::string BatchScript(const std::string& name, const std::vector<std::string>& run_flags,
                          const std::vector<std::string>& train) {
    std::vector<std::string> argv = {RAILYARD_BINARY,
                                     "run",
                                     "--slurm",
                                     "--topology",
                                     kTopology,
                                     "--nproc-per-host",
                                     "2",
                                     "--preflight",
                                     "none",
                                     "--heartbeat-timeout",
                                     "5s",
                                     "--ckpt-dir",
                                     dir_.Sub("ckpt-" + name),
                                     "--events",
                                     dir_.Sub(name + ".events")};
    argv.insert(argv.end(), run_flags.begin(), run_flags.end());
    argv.insert(argv.end(),
                {"--", "sh", "-c",
                 "echo \"$RANK $SLURMD_NODENAME\" >>" + dir_.Sub(name + ".ranks") + "; exec \"$@\"",
                 "rank"});
    argv.insert(argv.end(), train.begin(), train.end());
    return "#!/bin/sh\nexec " + base::CommandLine(argv) + "\n";
  }

  std::vector<nlohmann::json> Events(const std::string& name) {
    std::vector<nlohmann::json> events;
    auto text = base::ReadFile(dir_.Sub(name + ".events"));
    if (text.ok()) testing::ParseEvents(*text, &events);
    return events;
  }

  // A plan of one check: free space on each host's own scratch directory.
  static std::string ScratchPlan() {
    std::string plan = "version: 1\nname: vcluster-scratch\nprofiles:\n";
    for (const char* h : {"node0", "node1", "node2", "node3"}) {
      plan += fmt::format("  - name: {}\n    hosts: {}\n    mounts: [{{path: {}/{}}}]\n", h, h,
                          kSharedDir, h);
    }
    return plan + "checks:\n  - id: node.free_space\n    params: {paths: \"\"}\n";
  }

  std::string slurm_conf_;
  base::ScopedTempDir dir_{"slurm-vc"};
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

// The integration case (issue budget: at most 60 s, the test's timeout): up with Railyard's
// health check, a 2-node training job with a spare under sbatch, drain and resume, down.
TEST_F(SlurmVclusterTest, HealthCheckDrainsAndResumesAndSbatchTrainsThroughAKilledRank) {
  ASSERT_TRUE(base::WriteFileAtomic(dir_.Sub("health.yaml"), ScratchPlan()).ok());
  Up({"--slurm-health-check", dir_.Sub("health.yaml"), "--slurm-health-interval", "2s"});
  const std::string reference = Reference(120);
  ASSERT_FALSE(reference.empty());

  // The job: 3 nodes of 2 leaves, node0 in leaf0 and node2, node3 in leaf1. Slurm's task order
  // puts node0 first; Railyard places the 2-host job inside leaf1 and keeps node0 as the spare.
  // Rank 1 (on node2) kills itself at step 45; the spare takes node2's ranks.
  std::vector<std::string> train = TrainArgs("slurm", 120);
  train.insert(train.end(), {"--fail-at-step-for-test", "45", "--fail-rank-for-test", "1"});
  ASSERT_TRUE(base::WriteFileAtomic(dir_.Sub("job.sh"),
                                    BatchScript("slurm", {"--spares", "1"}, train), 0755)
                  .ok());
  base::ExitInfo job = Slurm({"sbatch", "--wait", "--exclusive", "-N3", "-w", "node0,node2,node3",
                              "-o", dir_.Sub("job.out"), dir_.Sub("job.sh")});
  auto out = base::ReadFile(dir_.Sub("job.out"));
  ASSERT_TRUE(job.Succeeded()) << job.Describe() << job.stderr_text << (out.ok() ? *out : "");
  std::vector<nlohmann::json> events = Events("slurm");
  auto starts = testing::EventsOf(events, "attempt_start");
  ASSERT_EQ(starts.size(), 2u) << (out.ok() ? *out : "");
  EXPECT_TRUE(starts[0].value("message", "").ends_with(" node2,node3")) << starts[0].dump();
  auto failures = testing::EventsOf(events, "failure");
  ASSERT_EQ(failures.size(), 1u);
  EXPECT_EQ(failures[0].value("rank", -1), 1) << failures[0].dump();
  EXPECT_EQ(failures[0].value("host", ""), "node2") << failures[0].dump();
  auto restarts = testing::EventsOf(events, "restart");
  ASSERT_EQ(restarts.size(), 1u);
  EXPECT_EQ(restarts[0].value("host", ""), "node0") << restarts[0].dump();
  EXPECT_TRUE(starts[1].value("message", "").ends_with(" node0,node3")) << starts[1].dump();
  // Where each rank really ran, by Slurm's own name for its node: both attempts.
  auto ranks = base::ReadFile(dir_.Sub("slurm.ranks"));
  ASSERT_TRUE(ranks.ok());
  std::vector<std::string_view> lines = base::SplitLines(*ranks);
  std::multiset<std::string> got(lines.begin(), lines.end());
  EXPECT_EQ(got, (std::multiset<std::string>{"0 node2", "1 node2", "2 node3", "3 node3", "0 node0",
                                             "1 node0", "2 node3", "3 node3"}))
      << *ranks;
  auto weights = base::ReadFile(dir_.Sub("slurm.bin"));
  ASSERT_TRUE(weights.ok());
  EXPECT_TRUE(*weights == reference) << "weights after the recovery differ from the reference";

  // Someone else's drain on node1, which stays through the health check's passes.
  ASSERT_TRUE(
      Slurm({"scontrol", "update", "NodeName=node1", "State=DRAIN", "Reason=admin: new DIMM"})
          .Succeeded());
  const int node1_runs = HealthRuns("node1");

  // node3's scratch fills up: the health check drains it, naming the check.
  auto fault = RunRailyard({"vcluster", "fault", "scratch-full", "node3", "--prefix", kPrefix});
  ASSERT_EQ(fault.exit_code, 0) << fault.err;
  auto drained = WaitNode(
      "node3", [](const auto& s) { return s.first.find("DRAIN") != std::string::npos; }, 15s);
  EXPECT_NE(drained.first.find("DRAIN"), std::string::npos) << drained.first;
  EXPECT_TRUE(drained.second.starts_with("railyard: node.free_space")) << drained.second;
  // Gone: Railyard resumes its own drain and node3 is idle again.
  auto clear = RunRailyard({"vcluster", "fault", "clear", "node3", "--prefix", kPrefix});
  ASSERT_EQ(clear.exit_code, 0) << clear.err;
  // (IDLE, or IDLE+NOT_RESPONDING for a moment when a ping met a busy slurmd.)
  auto back = WaitNode(
      "node3",
      [](const auto& s) {
        return s.first.starts_with("IDLE") && s.first.find("DRAIN") == s.first.npos;
      },
      15s);
  EXPECT_TRUE(back.first.starts_with("IDLE")) << back.first << " " << back.second;
  EXPECT_EQ(back.first.find("DRAIN"), std::string::npos) << back.first << " " << back.second;

  ASSERT_TRUE(WaitHealthRuns("node1", node1_runs, 2, 15s));
  auto admin = NodeState("node1");
  EXPECT_NE(admin.first.find("DRAIN"), std::string::npos) << admin.first;
  EXPECT_EQ(admin.second, "admin: new DIMM");
}

// A node failure as slurmctld handles it: the host is cut off (its slurmd can no longer answer)
// and set DOWN, as slurmctld does once SlurmdTimeout passes; that kills the job's steps on the
// other node and requeues the --requeue batch job. The job starts again on two other nodes and
// its trainer resumes from the last checkpoint it committed, to the reference's weights.
TEST_F(SlurmVclusterTest, JobRequeuedAfterANodeFailureResumesFromTheLastCheckpoint) {
  Up();
  const int steps = 2000;
  const std::string reference = Reference(steps);
  ASSERT_FALSE(reference.empty());
  ASSERT_TRUE(base::WriteFileAtomic(dir_.Sub("job.sh"),
                                    BatchScript("requeue", {}, TrainArgs("requeue", steps)), 0755)
                  .ok());
  base::ExitInfo submitted = Slurm({"sbatch", "--parsable", "--requeue", "--exclusive", "-N2", "-o",
                                    dir_.Sub("job.out"), dir_.Sub("job.sh")});
  ASSERT_TRUE(submitted.Succeeded()) << submitted.stderr_text;
  const std::string id(base::StripAsciiWhitespace(submitted.stdout_text));

  // Once a checkpoint past step 200 has committed, the host of ranks 2 and 3 fails.
  const base::Deadline deadline = base::Deadline::After(30s);
  auto committed = [&] {
    auto latest = base::ReadTrimmedFile(dir_.Sub("ckpt-requeue/latest"));
    return latest && std::atoi(latest->c_str()) >= 200;
  };
  while (!committed() && !deadline.Expired()) std::this_thread::sleep_for(100ms);  // a poll
  ASSERT_TRUE(committed()) << "no checkpoint past step 200";
  auto first = base::ReadFile(dir_.Sub("requeue.ranks"));
  ASSERT_TRUE(first.ok());
  std::string victim;
  for (std::string_view line : base::SplitLines(*first)) {
    if (line.starts_with("2 ")) victim = std::string(line.substr(2));
  }
  ASSERT_FALSE(victim.empty()) << *first;
  auto cut = RunRailyard({"vcluster", "cut", victim, "--prefix", kPrefix});
  ASSERT_EQ(cut.exit_code, 0) << cut.err;
  ASSERT_TRUE(Slurm({"scontrol", "update", "NodeName=" + victim, "State=DOWN",
                     "Reason=railyard-test: host failure"})
                  .Succeeded());

  // Requeued, then run again on two nodes other than the failed one, to the end: the job leaves the
  // queue.
  const base::Deadline end = base::Deadline::After(40s);
  while (!Slurm({"squeue", "-h", "-j", id, "-o", "%T"}).stdout_text.empty() && !end.Expired()) {
    std::this_thread::sleep_for(200ms);  // a poll interval, bounded by `end`
  }
  auto out = base::ReadFile(dir_.Sub("job.out"));
  std::vector<nlohmann::json> events = Events("requeue");
  // Two launcher runs: the first ends when Slurm kills it, the second succeeds.
  auto succeeded = testing::EventsOf(events, "succeeded");
  ASSERT_EQ(succeeded.size(), 1u) << (out.ok() ? *out : "");
  EXPECT_EQ(testing::EventsOf(events, "attempt_start").size(), 2u) << (out.ok() ? *out : "");
  // Rank 0 of the second run resumed from a checkpoint, not from the start.
  auto log = base::ReadFile(dir_.Sub("ckpt-requeue/logs/rank-0.log"));
  ASSERT_TRUE(log.ok());
  EXPECT_NE(log->find("resumed from step"), std::string::npos) << *log;
  auto weights = base::ReadFile(dir_.Sub("requeue.bin"));
  ASSERT_TRUE(weights.ok());
  EXPECT_TRUE(*weights == reference) << "weights after the requeue differ from the reference";
  // The second run's ranks: not on the failed host.
  auto ranks = base::ReadFile(dir_.Sub("requeue.ranks"));
  ASSERT_TRUE(ranks.ok());
  std::vector<std::string_view> lines = base::SplitLines(*ranks);
  ASSERT_EQ(lines.size(), 8u) << *ranks;
  for (size_t i = 4; i < lines.size(); ++i) EXPECT_FALSE(lines[i].ends_with(victim)) << *ranks;
}

// `railyard validate --slurm-drain` over every host, run from the machine: the same rule as
// the health check, against the real slurmctld.
TEST_F(SlurmVclusterTest, ValidateSlurmDrainDrainsAFailingHostAndResumesOnlyItsOwnDrain) {
  Up();
  ASSERT_TRUE(base::WriteFileAtomic(dir_.Sub("scratch.yaml"), ScratchPlan()).ok());
  ASSERT_TRUE(
      Slurm({"scontrol", "update", "NodeName=node1", "State=DRAIN", "Reason=admin: new DIMM"})
          .Succeeded());
  auto fault = RunRailyard({"vcluster", "fault", "scratch-full", "node2", "--prefix", kPrefix});
  ASSERT_EQ(fault.exit_code, 0) << fault.err;
  const std::vector<std::string> validate = {"validate",
                                             "--plan",
                                             dir_.Sub("scratch.yaml"),
                                             "--hosts",
                                             std::string("vcluster:") + kPrefix,
                                             "--slurm-drain"};
  auto failing = RunRailyard(validate, {{"SLURM_CONF", slurm_conf_}}, 60s);
  EXPECT_EQ(failing.exit_code, 2) << failing.out << failing.err;  // FAIL
  auto node2 = NodeState("node2");
  EXPECT_NE(node2.first.find("DRAIN"), std::string::npos) << node2.first;
  EXPECT_TRUE(node2.second.starts_with("railyard: node.free_space")) << node2.second;

  auto clear = RunRailyard({"vcluster", "fault", "clear", "node2", "--prefix", kPrefix});
  ASSERT_EQ(clear.exit_code, 0) << clear.err;
  auto passing = RunRailyard(validate, {{"SLURM_CONF", slurm_conf_}}, 60s);
  EXPECT_EQ(passing.exit_code, 0) << passing.out << passing.err;
  node2 = NodeState("node2");
  EXPECT_EQ(node2.first.find("DRAIN"), std::string::npos) << node2.first << " " << node2.second;
  auto node1 = NodeState("node1");
  EXPECT_NE(node1.first.find("DRAIN"), std::string::npos) << node1.first;
  EXPECT_EQ(node1.second, "admin: new DIMM");
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
