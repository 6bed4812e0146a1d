#include "railyard/vcluster/slurm.h"

#include <gtest/gtest.h>

#include "railyard/base/files.h"
#include "railyard/base/strings.h"
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
      "AuthInfo=socket=/s/rsl-slurm/munge/munge.socket",
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
