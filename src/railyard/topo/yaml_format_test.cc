#include "railyard/topo/yaml_format.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <string>

#include "railyard/base/files.h"
#include "railyard/topo/testdata_testing.h"

namespace railyard::topo {
namespace {

using testing::RepoFile;
using testing::TestData;

Cluster ParseFile(const std::string& path) {
  auto text = base::ReadFile(path);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  if (!text.ok()) return {};
  auto c = ParseTopologyYaml(*text, path);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : Cluster{};
}

// Parse(Write(c)) == c, with the written text in the failure message.
void ExpectRoundTrip(const Cluster& c) {
  std::string text = WriteTopologyYaml(c);
  auto back = ParseTopologyYaml(text, "written.yaml");
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << text;
  EXPECT_TRUE(*back == c) << text;
}

std::string ErrorOf(std::string_view yaml) {
  auto c = ParseTopologyYaml(yaml, "t.yaml");
  EXPECT_FALSE(c.ok()) << yaml;
  if (c.ok()) return "";
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  return c.status().message();
}

TEST(YamlFormatTest, ReadsTheVirtualClusterVersion1File) {
  Cluster c = ParseFile(RepoFile("examples/vcluster-topology.yaml"));
  EXPECT_EQ(c.name, "vcluster-rydoc");
  EXPECT_EQ(c.levels, (std::vector<std::string>{"spine", "leaf"}));
  ASSERT_EQ(c.switches.size(), 3u);
  EXPECT_EQ(c.switches[1].uplink_rate_bits, 500'000'000u);  // "500 Mbit/s", with the space
  EXPECT_EQ(c.switches[0].uplink_rate_bits, 0u);
  ASSERT_EQ(c.nodes.size(), 4u);
  EXPECT_EQ(c.nodes[2].name, "node2");
  EXPECT_EQ(c.nodes[2].address, "198.18.1.3");
  EXPECT_EQ(c.nodes[2].link_rate_bits, 1'000'000'000u);
  EXPECT_EQ(c.switches[c.nodes[2].leaf].name, "leaf1");
  ExpectRoundTrip(c);
}

TEST(YamlFormatTest, ReadsUnshapedRates) {
  auto c = ParseTopologyYaml(R"(version: 1
levels: [spine, leaf]
switches:
  - {name: s, level: spine}
  - {name: l, level: leaf, parent: s, uplink_rate: unshaped}
nodes:
  - {name: n, switch: l, link_rate: unshaped}
vcluster: {prefix: ry, mode: loopback}
)",
                             "v1.yaml");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->switches[1].uplink_rate_bits, 0u);
  EXPECT_EQ(c->nodes[0].link_rate_bits, 0u);
}

TEST(YamlFormatTest, ReadsTheTwoScalableUnitExample) {
  Cluster c = ParseFile(RepoFile("examples/topology-2su-rail.yaml"));
  EXPECT_EQ(c.name, "h100-2su");
  EXPECT_EQ(c.levels, (std::vector<std::string>{"block", "spine", "leaf"}));
  EXPECT_EQ(c.switches.size(), 11u);
  ASSERT_EQ(c.nodes.size(), 32u);
  EXPECT_EQ(c.TotalGpus(), 256);
  EXPECT_EQ(c.nodes.front().name, "gpu001");
  EXPECT_EQ(c.nodes.back().name, "gpu032");
  // Four nodes per rail group, two SUs of sixteen.
  int n17 = c.FindNode("gpu017");
  EXPECT_EQ(c.switches[c.DomainOf(n17, 2)].name, "su1-rg0");
  EXPECT_EQ(c.switches[c.DomainOf(n17, 1)].name, "su1-spine");
  EXPECT_EQ(c.NodesUnder(c.FindSwitch("su0-spine")).size(), 16u);
  EXPECT_EQ(c.switches[c.FindSwitch("su0-rg0")].uplink_rate_bits, 12'800'000'000'000u);
  const Node& n = c.nodes[n17];
  EXPECT_EQ(n.link_rate_bits, 3'200'000'000'000u);
  ASSERT_EQ(n.gpus.size(), 8u);
  EXPECT_EQ(n.gpus[5].pci_bus_id, "0000:ab:00.0");
  EXPECT_EQ(n.gpus[5].numa_node, 1);
  ASSERT_EQ(n.nics.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(n.nics[i].rail, i);
    EXPECT_TRUE(n.nics[i].rdma);
    EXPECT_EQ(n.nics[i].rate_bits, 400'000'000'000u);
  }
  ASSERT_EQ(n.numa.size(), 2u);
  EXPECT_EQ(n.numa[0].cpus.size(), 112u);
  EXPECT_EQ(n.numa[1].cpus.front(), 56);
  ASSERT_EQ(n.gpu_nic_paths.size(), 10u);
  EXPECT_EQ(n.gpu_nic_paths[3].path, PathClass::kPIX);
  EXPECT_EQ(n.gpu_nic_paths[9].path, PathClass::kSYS);
  EXPECT_EQ(n.gpu_nic_paths[9].nic, "mlx5_4");
}

TEST(YamlFormatTest, WritesTheExampleCompactlyAndReadsItBack) {
  Cluster c = ParseFile(RepoFile("examples/topology-2su-rail.yaml"));
  std::string text = WriteTopologyYaml(c);
  EXPECT_NE(text.find("version: 2"), std::string::npos);
  EXPECT_NE(text.find("gpu[001-004]"), std::string::npos) << text;
  EXPECT_NE(text.find("profile: hw0"), std::string::npos) << text;
  EXPECT_EQ(text.find("\nnodes:"), std::string::npos) << "every leaf should be compact\n" << text;
  EXPECT_LT(std::count(text.begin(), text.end(), '\n'), 80) << text;
  ExpectRoundTrip(c);
}

TEST(YamlFormatTest, ReadsExplicitNodesProfilesAndOverrides) {
  Cluster c = ParseFile(TestData("railyard_explicit.yaml"));
  EXPECT_EQ(c.block_sizes, (std::vector<int>{2, 4}));
  EXPECT_EQ(c.switches[1].uplink_rate_bits, 1'250'000'000u);
  EXPECT_EQ(c.switches[2].uplink_rate_bits, 0u);
  ASSERT_EQ(c.nodes.size(), 4u);
  const Node& n0 = c.nodes[0];
  EXPECT_EQ(n0.gpu_count, 2);
  EXPECT_EQ(n0.gpus[0].uuid, "GPU-11111111-2222-3333-4444-555555555555");
  EXPECT_EQ(n0.gpus[0].nvlink_domain, "nvl-a");
  EXPECT_EQ(n0.nics[1].name, "eth0");
  EXPECT_FALSE(n0.nics[1].rdma);
  EXPECT_EQ(n0.nics[1].rail, -1);
  EXPECT_EQ(n0.numa[1].cpus.size(), 32u);
  EXPECT_EQ(n0.gpu_nic_paths[0].path, PathClass::kPXB);
  // node1 takes the profile whole; node2 overrides its GPU count and keeps its NICs.
  EXPECT_EQ(c.nodes[1].gpu_count, 4);
  EXPECT_EQ(c.nodes[1].address, "10.0.0.2");
  EXPECT_EQ(c.nodes[2].gpu_count, 2);
  ASSERT_EQ(c.nodes[2].nics.size(), 1u);
  EXPECT_EQ(c.nodes[2].nics[0].rate_bits, 200'000'000'000u);
  EXPECT_EQ(c.nodes[3].gpu_count, 0);
  ExpectRoundTrip(c);
}

TEST(YamlFormatTest, RoundTripsAwkwardClusters) {
  ClusterBuilder b("code");
  b.SetName("odd: name");
  b.SetLevels({"top", "null"});
  b.AddSwitch("t", "top", "", 123'456'789);  // not a round number of any unit
  b.AddSwitch("~", "null", "t", 0);
  b.AddSwitch("l2", "null", "t", 1);
  // Interleaved leaves: the compact form would reorder nodes, so the writer must not use it.
  for (int i = 0; i < 6; ++i) {
    Node n;
    n.name = "n" + std::to_string(i);
    n.gpu_count = 8;
    n.link_rate_bits = 999;
    b.AddNode(n, i % 2 ? "~" : "l2");
  }
  Node odd;
  odd.name = "true";
  Nic nic;
  nic.name = "efa0";
  nic.rate_bits = 7;
  odd.nics = {nic};
  odd.numa = {NumaNode{3, {7, 5, 6, 9, 10}}};
  b.AddNode(odd, "l2");
  auto c = std::move(b).Finish();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  ExpectRoundTrip(*c);
}

TEST(YamlFormatTest, WritesCompactLeavesWhenOrderAllows) {
  ClusterBuilder b("code");
  b.SetLevels({"leaf"});
  b.AddSwitch("l0", "leaf", "", 0);
  b.AddSwitch("l1", "leaf", "", 0);
  for (int i = 0; i < 4; ++i) {
    Node n;
    n.name = fmt::format("node{:02}", i);
    n.gpu_count = 4;
    b.AddNode(n, i < 2 ? "l0" : "l1");
  }
  auto c = std::move(b).Finish();
  ASSERT_TRUE(c.ok());
  std::string text = WriteTopologyYaml(*c);
  EXPECT_NE(text.find("node[00-01]"), std::string::npos) << text;
  EXPECT_NE(text.find("gpus_per_node: 4"), std::string::npos) << text;
  ExpectRoundTrip(*c);
}

struct BadCase {
  std::string yaml;
  std::vector<std::string> needles;
};

TEST(YamlFormatTest, RejectsBadInputNamingFileLineAndField) {
  const std::string head = "version: 2\nlevels: [spine, leaf]\n";
  const std::string tree =
      "switches:\n  - {name: s, level: spine}\n  - {name: l, level: leaf, parent: s}\n";
  const std::vector<BadCase> cases = {
      {"version: 3\nlevels: [leaf]\nswitches: []\n",
       {"t.yaml:1:10", "version 3 is newer than this railyard understands (1-2)"}},
      {"version: 0\n", {"t.yaml:1:10", "not a topology version"}},
      {"version: two\n", {"t.yaml:1:10", "expected an integer"}},
      {"levels: [leaf]\n", {"t.yaml:1:1", "missing required key 'version'"}},
      {head + "swiches: []\n", {"t.yaml:3:1", "did you mean 'switches'"}},
      {head + tree + "nodes:\n  - {name: n, switch: l, adress: 1.2.3.4}\n",
       {"t.yaml:7:", "nodes[0]", "did you mean 'address'"}},
      {"version: 1\nlevels: [leaf]\nswitches: [{name: l, level: leaf}]\n"
       "nodes:\n  - {name: n, switch: l, gpus: 8}\n",
       {"t.yaml:5:", "'gpus' needs version 2"}},
      {"version: 2\nlevels: spine\n", {"t.yaml:2:9", "field 'levels'", "expected a sequence"}},
      {"version: 2\nlevels: []\nswitches: []\n", {"t.yaml:2:", "lists no levels"}},
      {"version: 2\nlevels: [a, b, a]\nswitches: []\n", {"t.yaml:2:", "'a' is listed twice"}},
      {head + "switches:\n  - {name: s, level: spine, uplink_rate: fast}\n",
       {"t.yaml:4:", "switches[0].uplink_rate", "fast"}},
      {head + tree + "nodes:\n  - {name: n, switch: l, gpus: {count: 8}}\n",
       {"t.yaml:7:", "nodes[0].gpus", "a GPU count or a list"}},
      {head + tree + "nodes:\n  - {name: n, switch: l, gpus: -1}\n", {"t.yaml:7:", "out of range"}},
      {head + tree + "nodes:\n  - {name: n, switch: l, gpus: [{index: 0}, {index: 0}]}\n",
       {"t.yaml:7:", "GPU index 0 is listed twice"}},
      {head + tree + "nodes:\n  - {name: n, switch: l, nics: [{name: a}, {name: a}]}\n",
       {"t.yaml:7:", "NIC 'a' is listed twice"}},
      {head + tree + "nodes:\n  - {name: n, switch: l, numa: [{id: 0, cpus: 5-2}]}\n",
       {"t.yaml:7:", "numa[0].cpus", "range 5-2 is descending"}},
      {head + tree +
           "nodes:\n  - {name: n, switch: l, gpus: 1, nics: [{name: a}],\n"
           "     gpu_nic_paths: [{gpu: 0, nic: a, path: PXX}]}\n",
       {"t.yaml:8:", "gpu_nic_paths[0].path", "PXX"}},
      {head + tree +
           "nodes:\n  - {name: n, switch: l, gpus: 1, nics: [{name: a}],\n"
           "     gpu_nic_paths: [{gpu: 0, nic: b, path: PIX}]}\n",
       {"t.yaml:7:", "node 'n' has no NIC 'b'"}},
      {head + tree +
           "nodes:\n  - {name: n, switch: l, gpus: 1, nics: [{name: a}],\n"
           "     gpu_nic_paths: [{gpu: 3, nic: a, path: PIX}]}\n",
       {"t.yaml:7:", "has no GPU 3"}},
      {head + "switches:\n  - {name: s, level: spine}\n"
              "  - {name: l, level: leaf, parent: s, nodes: \"node[5-2]\"}\n",
       {"t.yaml:5:", "switches[1].nodes", "range 5-2 is descending"}},
      {head + "switches:\n  - {name: s, level: spine}\n"
              "  - {name: l, level: leaf, parent: s, nodes: \"n[1-2\"}\n",
       {"t.yaml:5:", "never closed"}},
      {head + "switches:\n  - {name: s, level: spine}\n"
              "  - {name: l, level: leaf, parent: s, nodes: n1, profile: dgx}\n",
       {"t.yaml:5:", "no profile named 'dgx'"}},
      {head + "switches:\n  - {name: s, level: spine, gpus_per_node: 8}\n",
       {"t.yaml:4:", "switch 's' has no 'nodes'"}},
      {head + "profiles:\n  p: {gpus: [{index: 0}]}\nswitches:\n  - {name: s, level: spine}\n"
              "  - {name: l, level: leaf, parent: s, nodes: n1, profile: p, gpus_per_node: 8}\n",
       {"t.yaml:7:", "profile 'p' lists 1 GPUs"}},
      {head + "profiles:\n  p: {gpu: 8}\nswitches: []\n", {"t.yaml:4:", "did you mean 'gpus'"}},
      {head + "block_sizes: [3, 5]\nswitches: []\n", {"t.yaml:3:", "power-of-two multiple"}},
      {head + "block_sizes: [big]\nswitches: []\n", {"t.yaml:3:", "positive integer"}},
      {"- version: 2\n", {"t.yaml:1:1", "expected a map"}},
      {"", {"t.yaml", "empty"}},
      {"version: 2\nlevels: [leaf\n", {"t.yaml:", "error"}},
      {head + "switches:\n  - just-a-name\n", {"t.yaml:4:5", "switches[0]", "expected a map"}},
      // Tree errors come from ClusterBuilder, with the line of the switch or node.
      {head + "switches:\n  - {name: s, level: spine}\n  - {name: l, level: rack, parent: s}\n",
       {"t.yaml:5", "level 'rack'", "not one of the levels"}},
      {head + tree + "nodes:\n  - {name: n, switch: l}\n  - {name: n, switch: s}\n",
       {"t.yaml:8", "leaf-level"}},
      {head + tree + "nodes:\n  - {name: n, switch: nowhere}\n", {"t.yaml:7", "'nowhere'"}},
  };
  for (const BadCase& bad : cases) {
    std::string message = ErrorOf(bad.yaml);
    for (const std::string& needle : bad.needles) {
      EXPECT_NE(message.find(needle), std::string::npos)
          << "input:\n"
          << bad.yaml << "\nmessage: " << message << "\nmissing: " << needle;
    }
  }
}

TEST(YamlFormatTest, ReportsTreeErrorsFromFiles) {
  struct Case {
    std::string file;
    std::vector<std::string> needles;
  };
  for (const Case& k : std::vector<Case>{
           {"railyard_bad_level.yaml", {"railyard_bad_level.yaml:5", "'rack'", "spine, leaf"}},
           {"railyard_cycle.yaml", {"railyard_cycle.yaml:4", "cycle"}},
           {"railyard_two_leaves.yaml",
            {"railyard_two_leaves.yaml:9", "'n3' is under two leaves", "'leaf0'", "'leaf1'"}},
       }) {
    std::string path = TestData(k.file);
    auto text = base::ReadFile(path);
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    auto c = ParseTopologyYaml(*text, path);
    ASSERT_FALSE(c.ok()) << k.file;
    for (const std::string& needle : k.needles) {
      EXPECT_NE(c.status().message().find(needle), std::string::npos)
          << c.status().message() << "\nmissing: " << needle;
    }
  }
}

TEST(YamlFormatTest, CapsNodeCount) {
  std::string yaml =
      "version: 2\nlevels: [leaf]\nswitches:\n"
      "  - {name: a, level: leaf, nodes: \"a[1-600000]\"}\n"
      "  - {name: b, level: leaf, nodes: \"b[1-600000]\"}\n";
  std::string message = ErrorOf(yaml);
  EXPECT_NE(message.find("more than 1000000 nodes"), std::string::npos) << message;
  EXPECT_NE(message.find("t.yaml:5:"), std::string::npos) << message;
}

}  // namespace
}  // namespace railyard::topo
