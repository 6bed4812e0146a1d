// Every form of `railyard validate --hosts`: a virtual cluster (from a state file written
// here), a host file (with comments, MPI "slots=" words and hostlist lines), a Slurm hostlist
// expression, and a topology file; and each error, naming the file and line.
#include "railyard/validate/host_list.h"

#include <gtest/gtest.h>

#include <fstream>

#include "railyard/base/temp_dir_testing.h"
#include "railyard/vcluster/spec.h"
#include "railyard/vcluster/topology_file.h"

namespace railyard::validate {
namespace {

using Names = std::vector<std::string>;

class HostListTest : public ::testing::Test {
 protected:
  std::string Write(const std::string& name, const std::string& text) {
    std::string path = dir_.Sub(name);
    std::ofstream(path) << text;
    return path;
  }
  // Two leaves of two nodes under one top switch (Slurm topology.conf).
  std::string Topology() {
    return Write("topology.conf",
                 "SwitchName=leaf0 Nodes=n[1-2]\nSwitchName=leaf1 Nodes=n[3-4]\n"
                 "SwitchName=top Switches=leaf[0-1]\n");
  }
  base::ScopedTempDir dir_{"host-list"};
};

TEST_F(HostListTest, SlurmHostlistExpression) {
  auto list = ResolveHosts("node[01-03],login1");
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->source, HostSource::kHostlist);
  EXPECT_EQ(list->hosts, (Names{"node01", "node02", "node03", "login1"}));
  EXPECT_EQ(list->addresses, (Names{"", "", "", ""}));
  // No topology: one switch over the hosts, so a schedule can still be planned.
  EXPECT_TRUE(list->topology_file.empty());
  ASSERT_EQ(list->cluster.nodes.size(), 4u);
  EXPECT_EQ(list->cluster.nodes[3].name, "login1");
  EXPECT_EQ(list->cluster.switches.size(), 1u);
  // A single name is a hostlist of one when no such file exists.
  auto one = ResolveHosts("gpu17");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->hosts, (Names{"gpu17"}));
}

TEST_F(HostListTest, HostFileByPathOrAt) {
  std::string path = Write("hosts",
                           "# the rack\n"
                           "node1 slots=8\n"
                           "\n"
                           "  node2   # spare\n"
                           "gpu[1-2]\n");
  for (const std::string& spec : {path, "@" + path}) {
    auto list = ResolveHosts(spec);
    ASSERT_TRUE(list.ok()) << list.status().ToString();
    EXPECT_EQ(list->source, HostSource::kHostFile);
    EXPECT_EQ(list->hosts, (Names{"node1", "node2", "gpu1", "gpu2"}));
  }
}

TEST_F(HostListTest, HostFileErrorsNameFileAndLine) {
  std::string bad = Write("bad", "node1\nnode[3-1]\n");
  auto r = ResolveHosts(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(r.status().message().find(bad + ":2"), std::string::npos) << r.status().ToString();

  std::string twice = Write("twice", "node1\nnode2\nnode1\n");
  r = ResolveHosts(twice);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(twice + ":3: host 'node1' is listed twice (first at " +
                                      twice + ":1)"),
            std::string::npos)
      << r.status().ToString();

  std::string shell = Write("shell", "node1;reboot\n");
  r = ResolveHosts(shell);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find(shell + ":1: host name 'node1;reboot'"), std::string::npos)
      << r.status().ToString();

  r = ResolveHosts(dir_.Sub("missing"));
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound) << r.status().ToString();
  r = ResolveHosts("@");
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
}

TEST_F(HostListTest, AListWithoutHostsIsAnError) {
  std::string empty = Write("empty", "# nobody yet\n\n");
  for (const std::string& spec : {empty, "@" + empty, std::string(""), std::string("  ")}) {
    auto r = ResolveHosts(spec);
    ASSERT_FALSE(r.ok()) << spec;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("names no host"), std::string::npos)
        << r.status().ToString();
  }
  auto r = ResolveHosts(empty);
  EXPECT_EQ(r.status().message(), "host list '" + empty + "' names no host");
  // A malformed expression names itself.
  r = ResolveHosts("node[1-");
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("node[1-"), std::string::npos) << r.status().ToString();
}

TEST_F(HostListTest, TopologyFileGivesNodesAddressesAndTree) {
  std::string path = Topology();
  auto list = ResolveHosts(path);
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->source, HostSource::kTopology);
  EXPECT_EQ(list->topology_file, path);
  EXPECT_EQ(list->hosts, (Names{"n1", "n2", "n3", "n4"}));
  EXPECT_EQ(list->hosts.size(), list->cluster.nodes.size());
  EXPECT_GT(list->cluster.switches.size(), 1u);
  // A topology without nodes names no host.
  std::string bare = Write("bare.conf", "SwitchName=s1\n");
  auto r = ResolveHosts(bare);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("names no host"), std::string::npos) << r.status().ToString();
}

TEST_F(HostListTest, AttachTopologyNeedsEveryHost) {
  std::string path = Topology();
  auto from_topology = ResolveHosts(path);
  ASSERT_TRUE(from_topology.ok()) << from_topology.status().ToString();
  const std::string first = from_topology->hosts[0];
  auto list = ResolveHosts(first);
  ASSERT_TRUE(list.ok());
  ASSERT_TRUE(AttachTopology(*list, path).ok());
  EXPECT_EQ(list->topology_file, path);
  EXPECT_EQ(list->cluster, from_topology->cluster);
  auto typo = ResolveHosts(first + "x");
  ASSERT_TRUE(typo.ok());
  Status st = AttachTopology(*typo, path);
  EXPECT_EQ(st.code(), StatusCode::kNotFound);
  EXPECT_NE(st.message().find("did you mean '" + first + "'?"), std::string::npos) << st.ToString();
}

TEST_F(HostListTest, VirtualClusterFromItsStateFile) {
  vcluster::ClusterState state;
  state.plan = vcluster::MakePlan({.prefix = "hl",
                                   .hosts = 4,
                                   .leaves = 2,
                                   .leaf_rate_bits = 200'000'000,
                                   .mode = vcluster::Mode::kLoopback});
  state.topology_file = dir_.Sub("hl-topology.yaml");
  auto yaml = vcluster::TopologyYaml(state);
  ASSERT_TRUE(yaml.ok()) << yaml.status().ToString();
  std::ofstream(state.topology_file) << *yaml;
  std::ofstream(vcluster::StateFilePath(dir_.path(), "hl")) << vcluster::StateToJson(state);

  auto list = ResolveHosts("vcluster:hl", {.state_dir = dir_.path()});
  ASSERT_TRUE(list.ok()) << list.status().ToString();
  EXPECT_EQ(list->source, HostSource::kVcluster);
  EXPECT_EQ(list->hosts, (Names{"node0", "node1", "node2", "node3"}));
  EXPECT_EQ(list->addresses[0], state.plan.hosts[0].address);
  ASSERT_TRUE(list->vcluster.has_value());
  EXPECT_EQ(list->vcluster->spec().prefix, "hl");
  EXPECT_EQ(list->topology_file, state.topology_file);
  EXPECT_EQ(list->cluster.nodes.size(), 4u);
  EXPECT_EQ(list->cluster.nodes[0].link_rate_bits, 200'000'000u);

  auto down = ResolveHosts("vcluster:zz", {.state_dir = dir_.path()});
  EXPECT_EQ(down.status().code(), StatusCode::kFailedPrecondition) << down.status().ToString();
  auto bad = ResolveHosts("vcluster:Bad!", {.state_dir = dir_.path()});
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument) << bad.status().ToString();
}

TEST_F(HostListTest, HostNamesThatAShellWouldReadDifferentlyAreRefused) {
  EXPECT_TRUE(CheckHostName("gpu-017.rack2_a").ok());
  for (const char* bad : {"", "-x", "a b", "a;b", "$(x)", "a'b", ".hidden"}) {
    EXPECT_FALSE(CheckHostName(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace railyard::validate
