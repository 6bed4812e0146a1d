#include "railyard/vcluster/slurm.h"

#include <gtest/gtest.h>

#include "railyard/base/files.h"
#include "railyard/base/strings.h"
#include "railyard/base/subprocess.h"
#include "railyard/base/temp_dir_testing.h"

namespace railyard::vcluster {
namespace {

ClusterPlan Plan(int hosts, int leaves) {
  ClusterSpec spec;
  spec.prefix = "rsl";
  spec.hosts = hosts;
  spec.leaves = leaves;
  return MakePlan(spec);
}

TEST(SlurmLayoutTest, EverythingUnderOneDirectoryPerPrefix) {
  SlurmLayout l = SlurmLayoutFor("/run/railyard", "rsl");
  EXPECT_EQ(l.dir, "/run/railyard/rsl-slurm");
  EXPECT_EQ(l.conf, "/run/railyard/rsl-slurm/slurm.conf");
  EXPECT_EQ(l.munge_socket, "/run/railyard/rsl-slurm/munge/munge.socket");
  EXPECT_EQ(l.munge_key, "/run/railyard/rsl-slurm/munge/munge.key");
  EXPECT_EQ(l.ctld_pid, "/run/railyard/rsl-slurm/ctld/slurmctld.pid");
  EXPECT_EQ(l.NodeDir("node3"), "/run/railyard/rsl-slurm/nodes/node3");
}

TEST(SlurmNodesTest, EveryHostAllCpusAndAnEqualShareOfMemory) {
  std::vector<SlurmNode> nodes = SlurmNodesFor(Plan(4, 2), 2, 24105);
  ASSERT_EQ(nodes.size(), 4u);
  EXPECT_EQ(nodes[0].name, "node0");
  EXPECT_EQ(nodes[0].address, "198.18.0.1");
  EXPECT_EQ(nodes[3].name, "node3");
  EXPECT_EQ(nodes[3].address, "198.18.1.4");
  for (const auto& n : nodes) {
    EXPECT_EQ(n.cpus, 2) << n.name;
    EXPECT_EQ(n.real_memory_mb, 6026u) << n.name;  // 24105 / 4, rounded down
  }
  // Never zero, which slurmctld would read as "unknown".
  EXPECT_EQ(SlurmNodesFor(Plan(4, 2), 0, 2)[0].cpus, 1);
  EXPECT_EQ(SlurmNodesFor(Plan(4, 2), 0, 2)[0].real_memory_mb, 1u);
}

TEST(SlurmConfTest, EveryLine) {
  SlurmLayout l = SlurmLayoutFor("/s", "rsl");
  SlurmConfOptions o;
  o.cluster_name = "rsl";
  o.controller_host = "vm";
  o.controller_addr = "198.18.255.254";
  o.controller_port = 40123;
  o.nodes = SlurmNodesFor(Plan(4, 2), 2, 8000);
  const std::vector<std::string> want = {
      "# slurm.conf written by `railyard vcluster up --slurm` for cluster 'rsl'; see "
      "docs/slurm.md.",
      "ClusterName=rsl",
      "SlurmctldHost=vm(198.18.255.254)",
      "SlurmctldPort=40123",
      "SlurmdPort=6818",
      "SlurmUser=root",
      "SlurmdUser=root",
      "AuthType=auth/munge",
      "CredType=cred/munge",
      "AuthInfo=socket=/s/rsl-slurm/munge/munge.socket,cred_expire=10",
      "StateSaveLocation=/s/rsl-slurm/ctld/state",
      "SlurmctldPidFile=/s/rsl-slurm/ctld/slurmctld.pid",
      "SlurmctldLogFile=/s/rsl-slurm/ctld/slurmctld.log",
      "SlurmdSpoolDir=/s/rsl-slurm/nodes/%n/spool",
      "SlurmdPidFile=/s/rsl-slurm/nodes/%n/slurmd.pid",
      "SlurmdLogFile=/s/rsl-slurm/nodes/%n/slurmd.log",
      "SlurmctldDebug=info",
      "SlurmdDebug=info",
      "MailProg=/bin/true",
      "ProctrackType=proctrack/linuxproc",
      "TaskPlugin=task/none",
      "JobAcctGatherType=jobacct_gather/none",
      "SelectType=select/cons_tres",
      "SelectTypeParameters=CR_Core",
      "SlurmdParameters=config_overrides",
      "TopologyPlugin=topology/tree",
      "ReturnToService=2",
      "NodeName=node0 NodeAddr=198.18.0.1 CPUs=2 RealMemory=2000 State=UNKNOWN",
      "NodeName=node1 NodeAddr=198.18.0.2 CPUs=2 RealMemory=2000 State=UNKNOWN",
      "NodeName=node2 NodeAddr=198.18.1.3 CPUs=2 RealMemory=2000 State=UNKNOWN",
      "NodeName=node3 NodeAddr=198.18.1.4 CPUs=2 RealMemory=2000 State=UNKNOWN",
      "PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP",
  };
  const std::string text = SlurmConfText(l, o);
  std::vector<std::string_view> got = base::SplitLines(text);
  ASSERT_EQ(got.size(), want.size()) << text;
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(got[i], want[i]) << "line " << i + 1;
}

TEST(SlurmConfTest, HealthCheckLinesOnlyWithAProgram) {
  SlurmLayout l = SlurmLayoutFor("/s", "rsl");
  SlurmConfOptions o;
  o.nodes = SlurmNodesFor(Plan(2, 1), 2, 8000);
  EXPECT_EQ(SlurmConfText(l, o).find("HealthCheck"), std::string::npos);
  o.health_check_program = l.health_check;
  o.health_check_interval_s = 0;  // Slurm's 0 turns the check off: at least 1
  const std::string text = SlurmConfText(l, o);
  EXPECT_NE(text.find("\nReturnToService=2\nHealthCheckProgram=/s/rsl-slurm/health-check\n"
                      "HealthCheckInterval=1\nNodeName=node0 "),
            std::string::npos)
      << text;
}

// The script as slurmd runs it: an environment of SLURMD_NODENAME alone. The command sees
// PATH and SLURM_CONF, its output reaches slurmd and the node's log, and its exit code is the
// script's.
TEST(SlurmHealthCheckTest, ScriptGivesTheCommandItsEnvironmentAndKeepsALog) {
  base::ScopedTempDir dir("slurmhc");
  SlurmLayout l = SlurmLayoutFor(dir.path(), "rsl");
  ASSERT_TRUE(base::MakeDirs(l.NodeDir("node1")).ok());
  ASSERT_TRUE(
      base::WriteFileAtomic(l.health_check,
                            HealthCheckScript(l,
                                              "echo \"$SLURMD_NODENAME conf=$SLURM_CONF\"; "
                                              "command -v sh >/dev/null && echo found-sh; exit 2"),
                            0755)
          .ok());
  base::SpawnOptions o{
      .argv = {l.health_check}, .env = {{"SLURMD_NODENAME", "node1"}}, .inherit_env = false};
  for (int run = 1; run <= 2; ++run) {
    auto r = base::RunCommand(o, base::Deadline::After(std::chrono::seconds(30)));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->exit_code, 2) << r->Describe();
    EXPECT_EQ(r->stdout_text, "node1 conf=" + l.conf + "\nfound-sh\n");
  }
  auto log = base::ReadFile(l.NodeDir("node1") + "/health-check.log");
  ASSERT_TRUE(log.ok()) << log.status().ToString();
  std::vector<std::string_view> lines = base::SplitLines(*log);
  ASSERT_EQ(lines.size(), 6u) << *log;  // per run: a stamp with the exit code, then the output
  EXPECT_TRUE(lines[0].ends_with(" rc=2")) << lines[0];
  EXPECT_EQ(lines[1], "node1 conf=" + l.conf);
  EXPECT_TRUE(lines[3].ends_with(" rc=2")) << lines[3];
}

TEST(SlurmCheckTest, LoopbackIsRefusedBeforeAnythingIsBuilt) {
  ClusterSpec spec;
  spec.prefix = "rsl";
  spec.mode = Mode::kLoopback;
  Status s = CheckSlurmSpec(spec);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("loopback"), std::string::npos) << s.message();
}

TEST(SlurmStateTest, SlurmConfSurvivesTheStateFileAndIsOptional) {
  ClusterState s;
  ClusterSpec spec;
  spec.prefix = "rsl";
  s.plan = MakePlan(spec);
  auto plain = StateFromJson(StateToJson(s), "state.json");
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  EXPECT_EQ(plain->slurm_conf, "");
  EXPECT_EQ(StateToJson(s).find("slurm_conf"), std::string::npos);
  s.slurm_conf = "/run/railyard/rsl-slurm/slurm.conf";
  auto back = StateFromJson(StateToJson(s), "state.json");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->slurm_conf, s.slurm_conf);
}

TEST(SlurmStopTest, RemovesTheDirectoryAndIsIdempotent) {
  // A prefix no other test uses: StopSlurm also stops processes in the prefix's namespaces.
  base::ScopedTempDir dir("slurmstop");
  SlurmLayout l = SlurmLayoutFor(dir.path(), "rsu");
  ASSERT_TRUE(base::MakeDirs(l.NodeDir("node0") + "/spool").ok());
  ASSERT_TRUE(base::MakeDirs(l.munge_dir).ok());
  // A stale pid file from a crash: the pid is ours, whose command line names no Slurm file.
  ASSERT_TRUE(base::WriteFileAtomic(l.munged_pid, std::to_string(::getpid()) + "\n").ok());
  ASSERT_TRUE(StopSlurm(dir.path(), "rsu", {}).ok());
  EXPECT_FALSE(base::PathExists(l.dir));
  EXPECT_TRUE(StopSlurm(dir.path(), "rsu", {}).ok());
}

}  // namespace
}  // namespace railyard::vcluster
