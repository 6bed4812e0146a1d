#include "railyard/vcluster/topology_file.h"

#include <gtest/gtest.h>
#include <yaml-cpp/yaml.h>

#include <cstdint>
#include <string>
#include <utility>

#include "railyard/base/files.h"
#include "railyard/base/temp_dir_testing.h"
#include "railyard/topo/load.h"
#include "railyard/topo/yaml_format.h"

namespace railyard::vcluster {
namespace {

ClusterState Make(std::string prefix, Mode mode, int hosts, uint64_t leaf_rate,
                  uint64_t spine_rate) {
  ClusterSpec spec;
  spec.prefix = std::move(prefix);
  spec.mode = mode;
  spec.hosts = hosts;
  spec.leaves = 2;
  spec.leaf_rate_bits = leaf_rate;
  spec.spine_rate_bits = spine_rate;
  ClusterState s;
  s.plan = MakePlan(spec);
  s.created = "2026-11-30T19:00:00Z";
  return s;
}

ClusterState Shaped() {
  ClusterState s = Make("ryt", Mode::kNetns, 5, 1'000'000'000, 500'000'000);
  // Degraded and cut links are the cluster's state, not its topology: the file keeps the
  // nominal rates.
  s.host_rates["node1"] = 100'000'000;
  s.cut.insert("node4");
  return s;
}

ClusterState Unshaped() { return Make("rylo", Mode::kLoopback, 3, 0, 0); }

// What `vcluster up` wrote for Shaped() and Unshaped() before it used topo's writer (schema
// version 1): the new files must mean the same.
constexpr const char* kShapedV1 = R"(version: 1
name: vcluster-ryt
levels: [spine, leaf]
switches:
  - {name: spine0, level: spine}
  - {name: leaf0, level: leaf, parent: spine0, uplink_rate: 500 Mbit/s}
  - {name: leaf1, level: leaf, parent: spine0, uplink_rate: 500 Mbit/s}
nodes:
  - {name: node0, switch: leaf0, address: 198.18.0.1, link_rate: 1 Gbit/s}
  - {name: node1, switch: leaf0, address: 198.18.0.2, link_rate: 1 Gbit/s}
  - {name: node2, switch: leaf0, address: 198.18.0.3, link_rate: 1 Gbit/s}
  - {name: node3, switch: leaf1, address: 198.18.1.4, link_rate: 1 Gbit/s}
  - {name: node4, switch: leaf1, address: 198.18.1.5, link_rate: 1 Gbit/s}
vcluster:
  prefix: ryt
  mode: netns
  created: 2026-11-30T19:00:00Z
)";
constexpr const char* kUnshapedV1 = R"(version: 1
name: vcluster-rylo
levels: [spine, leaf]
switches:
  - {name: spine0, level: spine}
  - {name: leaf0, level: leaf, parent: spine0, uplink_rate: unshaped}
  - {name: leaf1, level: leaf, parent: spine0, uplink_rate: unshaped}
nodes:
  - {name: node0, switch: leaf0, address: 127.181.0.1, link_rate: unshaped}
  - {name: node1, switch: leaf0, address: 127.181.0.2, link_rate: unshaped}
  - {name: node2, switch: leaf1, address: 127.181.1.3, link_rate: unshaped}
vcluster:
  prefix: rylo
  mode: loopback
  created: 2026-11-30T19:00:00Z
)";

// Writes the file as `vcluster up` does and loads it back as any topology file.
topo::Cluster WriteAndLoad(const ClusterState& state) {
  base::ScopedTempDir dir("vcluster-topo");
  EXPECT_FALSE(dir.path().empty());
  const std::string path = dir.Sub("topology.yaml");
  Result<std::string> text = TopologyYaml(state);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  if (!text.ok()) return {};
  EXPECT_TRUE(base::WriteFileAtomic(path, *text).ok()) << path;
  Result<topo::Cluster> loaded = topo::LoadTopology(path);
  EXPECT_TRUE(loaded.ok()) << loaded.status().ToString() << "\n" << *text;
  return loaded.ok() ? *loaded : topo::Cluster{};
}

TEST(TopologyFileTest, ShapedClusterLoadsWithHostsSwitchesAndRates) {
  topo::Cluster c = WriteAndLoad(Shaped());
  EXPECT_EQ(c.name, "vcluster-ryt");
  EXPECT_EQ(c.levels, (std::vector<std::string>{"spine", "leaf"}));
  ASSERT_EQ(c.switches.size(), 3u);  // spine0 + 2 leaves
  EXPECT_EQ(c.switches[0].name, "spine0");
  EXPECT_EQ(c.switches[0].parent, -1);
  for (int s : {1, 2}) {
    EXPECT_EQ(c.switches[s].parent, 0);
    EXPECT_EQ(c.switches[s].uplink_rate_bits, 500'000'000u);
  }
  ASSERT_EQ(c.nodes.size(), 5u);
  EXPECT_EQ(c.nodes[0].address, "198.18.0.1");
  EXPECT_EQ(c.switches[c.nodes[4].leaf].name, "leaf1");
  for (const topo::Node& n : c.nodes) EXPECT_EQ(n.link_rate_bits, 1'000'000'000u) << n.name;

  Result<topo::Cluster> before = topo::ParseTopology(kShapedV1, "version 1 file");
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_EQ(c, *before);
}

TEST(TopologyFileTest, UnshapedLinksStayUnknown) {
  topo::Cluster c = WriteAndLoad(Unshaped());
  ASSERT_EQ(c.nodes.size(), 3u);
  for (const topo::Node& n : c.nodes) EXPECT_EQ(n.link_rate_bits, 0u) << n.name;
  for (const topo::Switch& s : c.switches) EXPECT_EQ(s.uplink_rate_bits, 0u) << s.name;

  Result<topo::Cluster> before = topo::ParseTopology(kUnshapedV1, "version 1 file");
  ASSERT_TRUE(before.ok()) << before.status().ToString();
  EXPECT_EQ(c, *before);
}

TEST(TopologyFileTest, KeepsTheVclusterSection) {
  Result<std::string> text = TopologyYaml(Shaped());
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  YAML::Node y = YAML::Load(*text);
  EXPECT_EQ(y["version"].as<int>(), topo::kTopologyYamlVersion);
  EXPECT_EQ(y["vcluster"]["prefix"].as<std::string>(), "ryt");
  EXPECT_EQ(y["vcluster"]["mode"].as<std::string>(), "netns");
  EXPECT_EQ(y["vcluster"]["created"].as<std::string>(), "2026-11-30T19:00:00Z");
}

}  // namespace
}  // namespace railyard::vcluster
