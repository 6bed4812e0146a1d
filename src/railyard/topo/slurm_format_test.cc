#include "railyard/topo/slurm_format.h"

#include <gtest/gtest.h>

#include <string>

#include "railyard/base/files.h"
#include "railyard/topo/testdata_testing.h"
#include "railyard/topo/yaml_format.h"

namespace railyard::topo {
namespace {

using testing::RepoFile;
using testing::TestData;

std::string Read(const std::string& path) {
  auto text = base::ReadFile(path);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : "";
}

Cluster Conf(const std::string& file) {
  std::string path = TestData(file);
  auto c = ParseSlurmTopologyConf(Read(path), path);
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : Cluster{};
}

std::vector<std::string> Names(const Cluster& c, const std::vector<int>& nodes) {
  std::vector<std::string> out;
  for (int n : nodes) out.push_back(c.nodes[n].name);
  return out;
}

std::string ConfError(std::string_view text) {
  auto c = ParseSlurmTopologyConf(text, "topology.conf");
  EXPECT_FALSE(c.ok()) << text;
  return c.ok() ? "" : c.status().message();
}

#define EXPECT_HAS(haystack, needle)                               \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
      << (haystack) << "\nmissing: " << (needle)

TEST(SlurmFormatTest, ReadsATreeWithLevelsFromItsHeight) {
  Cluster c = Conf("slurm_tree.conf");
  EXPECT_EQ(c.levels, (std::vector<std::string>{"block", "spine", "leaf"}));
  ASSERT_EQ(c.switches.size(), 7u);
  EXPECT_EQ(c.switches[c.FindSwitch("core")].level, 0);
  EXPECT_EQ(c.switches[c.FindSwitch("spine1")].level, 1);
  EXPECT_EQ(c.switches[c.FindSwitch("leaf1")].level, 2);
  EXPECT_EQ(c.switches[c.switches[c.FindSwitch("leaf2")].parent].name, "spine1");
  ASSERT_EQ(c.nodes.size(), 16u);
  EXPECT_EQ(Names(c, c.switches[c.FindSwitch("leaf3")].nodes),
            (std::vector<std::string>{"gpu013", "gpu014", "gpu015", "gpu020"}));
  EXPECT_EQ(c.NodesUnder(c.FindSwitch("spine0")).size(), 8u);
  EXPECT_EQ(c.TotalGpus(), 0);  // Slurm's topology says nothing about GPUs
}

TEST(SlurmFormatTest, TreeRoundTrips) {
  Cluster c = Conf("slurm_tree.conf");
  std::string conf = WriteSlurmTopologyConf(c);
  EXPECT_HAS(conf, "\nSwitchName=leaf3 Nodes=gpu[013-015,020]\n");
  EXPECT_HAS(conf, "\nSwitchName=core Switches=spine[0-1]\n");
  EXPECT_HAS(conf, "levels: block > spine > leaf");
  auto back = ParseSlurmTopologyConf(conf, "written.conf");
  ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << conf;
  EXPECT_TRUE(*back == c) << conf;
}

TEST(SlurmFormatTest, ReadsAndWritesBlocks) {
  Cluster c = Conf("slurm_block.conf");
  EXPECT_EQ(c.levels, (std::vector<std::string>{"block"}));
  EXPECT_EQ(c.block_sizes, (std::vector<int>{18, 36}));
  ASSERT_EQ(c.switches.size(), 4u);
  EXPECT_EQ(c.nodes.size(), 72u);
  EXPECT_EQ(c.switches[c.nodes[20].leaf].name, "nvl1");
  std::string conf = WriteSlurmTopologyConf(c);
  EXPECT_HAS(conf, "\nBlockName=nvl0 Nodes=gb[001-018]\n");
  EXPECT_HAS(conf, "\nBlockSizes=18,36\n");
  auto back = ParseSlurmTopologyConf(conf, "written.conf");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(*back == c) << conf;
}

TEST(SlurmFormatTest, WritesBlocksOfTheBlockLevelWhenSizesAreSet) {
  ClusterBuilder b("code");
  b.SetLevels({"block", "leaf"});
  b.SetBlockSizes({4});
  b.AddSwitch("b0", "block", "", 0);
  b.AddSwitch("b1", "block", "", 0);
  for (int l = 0; l < 4; ++l) b.AddSwitch(fmt::format("l{}", l), "leaf", l < 2 ? "b0" : "b1", 0);
  for (int n = 0; n < 8; ++n) {
    Node node;
    node.name = fmt::format("n{}", n);
    b.AddNode(node, fmt::format("l{}", n / 2));
  }
  auto c = std::move(b).Finish();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  std::string conf = WriteSlurmTopologyConf(*c);
  EXPECT_HAS(conf, "\nBlockName=b0 Nodes=n[0-3]\nBlockName=b1 Nodes=n[4-7]\nBlockSizes=4\n");
  EXPECT_EQ(conf.find("SwitchName"), std::string::npos) << conf;
}

TEST(SlurmFormatTest, ExportsTheRailyardExampleAsATree) {
  std::string path = RepoFile("examples/topology-2su-rail.yaml");
  auto c = ParseTopologyYaml(Read(path), path);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  auto back = ParseSlurmTopologyConf(WriteSlurmTopologyConf(*c), "x.conf");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  // Three levels come back with the same names; only rates and hardware are lost.
  EXPECT_EQ(back->levels, c->levels);
  ASSERT_EQ(back->switches.size(), c->switches.size());
  for (size_t s = 0; s < c->switches.size(); ++s) {
    EXPECT_EQ(back->switches[s].name, c->switches[s].name);
    EXPECT_EQ(back->switches[s].parent, c->switches[s].parent);
  }
  ASSERT_EQ(back->nodes.size(), c->nodes.size());
  for (size_t n = 0; n < c->nodes.size(); ++n) {
    EXPECT_EQ(back->nodes[n].name, c->nodes[n].name);
    EXPECT_EQ(back->nodes[n].leaf, c->nodes[n].leaf);
  }
}

TEST(SlurmFormatTest, NamesLevelsFromHeight) {
  EXPECT_EQ(SlurmLevelNames(1), (std::vector<std::string>{"leaf"}));
  EXPECT_EQ(SlurmLevelNames(2), (std::vector<std::string>{"spine", "leaf"}));
  EXPECT_EQ(SlurmLevelNames(4), (std::vector<std::string>{"level0", "level1", "level2", "level3"}));
  auto one = ParseSlurmTopologyConf("SwitchName=s0 Nodes=n[1-2]\n", "t");
  ASSERT_TRUE(one.ok()) << one.status().ToString();
  EXPECT_EQ(one->levels, (std::vector<std::string>{"leaf"}));
  auto four = ParseSlurmTopologyConf(
      "SwitchName=l Nodes=n1\nSwitchName=c Switches=l\nSwitchName=b Switches=c\n"
      "SwitchName=a Switches=b\n",
      "t");
  ASSERT_TRUE(four.ok()) << four.status().ToString();
  EXPECT_EQ(four->levels.size(), 4u);
  EXPECT_EQ(four->switches[four->FindSwitch("a")].level, 0);
  // Several top switches (fabrics Slurm keeps apart) are fine.
  auto two_roots = ParseSlurmTopologyConf("SwitchName=a Nodes=n1\nSwitchName=b Nodes=n2\n", "t");
  ASSERT_TRUE(two_roots.ok()) << two_roots.status().ToString();
}

TEST(SlurmFormatTest, ReportsBadTreesWithFileAndLine) {
  struct Case {
    std::string file;
    std::vector<std::string> needles;
  };
  for (const Case& k : std::vector<Case>{
           {"slurm_cycle.conf", {"slurm_cycle.conf:3", "cycle", "b -> a -> b"}},
           {"slurm_unbalanced.conf",
            {"slurm_unbalanced.conf:2", "unbalanced", "'leaf1'", "'leaf0' (line 1)"}},
           {"slurm_two_parents.conf",
            {"slurm_two_parents.conf:4", "switch 'leaf1' is listed under two parents",
             "'spine0' (line 3)", "'spine1' (line 4)"}},
           {"slurm_node_two_leaves.conf",
            {"slurm_node_two_leaves.conf:2", "'n3' is under two leaves"}},
           {"slurm_descending.conf",
            {"slurm_descending.conf:3", "Nodes=", "range 5-2 is descending"}},
       }) {
    std::string path = TestData(k.file);
    auto c = ParseSlurmTopologyConf(Read(path), path);
    ASSERT_FALSE(c.ok()) << k.file;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    for (const std::string& needle : k.needles) EXPECT_HAS(c.status().message(), needle);
  }
}

TEST(SlurmFormatTest, RejectsBadConfLines) {
  EXPECT_HAS(ConfError("SwitchName=s0 Switchs=s1\n"), "topology.conf:1: unknown key 'Switchs'");
  EXPECT_HAS(ConfError("SwitchName=s0 Switchs=s1\n"), "did you mean 'Switches'");
  EXPECT_HAS(ConfError("\n\nNodeName=n1 Weight=1\n"), "topology.conf:3:");
  EXPECT_HAS(ConfError("SwitchName=s0 Nodes=n1\nhello world\n"),
             "topology.conf:2: expected Key=Value");
  EXPECT_HAS(ConfError("RingName=r0 Nodes=n[1-4]\n"), "topology/ring");
  EXPECT_HAS(ConfError("SwitchName=s0 Nodes=n1\nBlockName=b0 Nodes=n2\n"),
             "topology.conf:2: the file mixes a tree");
  EXPECT_HAS(ConfError("BlockName=b0 Nodes=n[1-3]\nBlockSizes=3,5\n"),
             "topology.conf:2: BlockSizes: block size 5 is not a power-of-two multiple");
  EXPECT_HAS(ConfError("BlockName=b0 Nodes=n1\nBlockSizes=4,2\n"), "must increase");
  EXPECT_HAS(ConfError("BlockName=b0 Nodes=n1\nBlockSizes=x\n"), "not a positive integer");
  EXPECT_HAS(ConfError("BlockSizes=4\n"), "without any BlockName");
  EXPECT_HAS(ConfError("SwitchName=s0 Nodes=n[1-2] \\\n"), "line continuation");
  EXPECT_HAS(ConfError(""), "no SwitchName= or BlockName= entries");
  EXPECT_HAS(ConfError("# nothing\n"), "no SwitchName= or BlockName= entries");
  EXPECT_HAS(ConfError("SwitchName=s0 Switches=s9\n"),
             "topology.conf:1: switch 's0' lists child switch 's9', which is not defined");
  EXPECT_HAS(ConfError("SwitchName=s0 Switches=s0\n"), "lists itself");
  EXPECT_HAS(ConfError("SwitchName=l Nodes=n1\nSwitchName=s Switches=l Nodes=n2\n"),
             "topology.conf:2: switch 's' lists both Switches= and Nodes=");
  EXPECT_HAS(ConfError("SwitchName=l Nodes=n1\nSwitchName=l Nodes=n2\n"),
             "topology.conf:2: switch 'l' is defined twice (first on line 1)");
  EXPECT_HAS(ConfError("SwitchName=l Nodes=\n"), "Nodes= is empty");
  EXPECT_HAS(ConfError("SwitchName= Nodes=n1\n"), "SwitchName= is empty");
  EXPECT_HAS(ConfError("SwitchName=l Nodes=n1 nodes=n2\n"), "given twice");
  EXPECT_HAS(ConfError("SwitchName=l Nodes=n[1-3\n"), "topology.conf:1: Nodes=: hostlist");
  EXPECT_HAS(ConfError("SwitchName=a Nodes=n[1-600000]\nSwitchName=b Nodes=m[1-600000]\n"),
             "more than 1000000");
}

TEST(SlurmFormatTest, ReadsQuotedValuesAndComments) {
  auto c = ParseSlurmTopologyConf(
      "  SwitchName=\"leaf0\"   Nodes=\"n[1-2]\"  # quoted\r\n"
      "SwitchName=top Switches=leaf0 LinkSpeed=100\r\n",
      "t");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->switches[0].name, "leaf0");
  EXPECT_EQ(c->nodes.size(), 2u);
}

TEST(SlurmFormatTest, ReadsTopologyYamlDefaultAndNamedEntries) {
  std::string path = TestData("slurm_topology.yaml");
  std::string text = Read(path);
  auto tree = ParseSlurmTopologyYaml(text, path);
  ASSERT_TRUE(tree.ok()) << tree.status().ToString();
  EXPECT_EQ(tree->name, "fabric");
  EXPECT_EQ(tree->levels, (std::vector<std::string>{"spine", "leaf"}));
  EXPECT_EQ(tree->switches.size(), 3u);
  EXPECT_EQ(Names(*tree, tree->switches[tree->FindSwitch("s2")].nodes),
            (std::vector<std::string>{"node03", "node04"}));

  auto block = ParseSlurmTopologyYaml(text, path, "nvl");
  ASSERT_TRUE(block.ok()) << block.status().ToString();
  EXPECT_EQ(block->levels, (std::vector<std::string>{"block"}));
  EXPECT_EQ(block->block_sizes, (std::vector<int>{2, 4}));
  EXPECT_EQ(block->nodes.size(), 4u);

  auto flat = ParseSlurmTopologyYaml(text, path, "flat_topo");
  ASSERT_FALSE(flat.ok());
  EXPECT_HAS(flat.status().message(), "slurm_topology.yaml:3:");
  EXPECT_HAS(flat.status().message(), "neither a tree nor a block");
  auto missing = ParseSlurmTopologyYaml(text, path, "nope");
  ASSERT_FALSE(missing.ok());
  EXPECT_HAS(missing.status().message(),
             "no topology named 'nope' (the file has: flat_topo, "
             "fabric, nvl)");
}

TEST(SlurmFormatTest, TopologyYamlRoundTrips) {
  std::string path = TestData("slurm_topology.yaml");
  std::string text = Read(path);
  for (std::string_view name : {"fabric", "nvl"}) {
    auto c = ParseSlurmTopologyYaml(text, path, name);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    std::string written = WriteSlurmTopologyYaml(*c);
    EXPECT_HAS(written, fmt::format("- topology: {}\n  cluster_default: true\n", name));
    auto back = ParseSlurmTopologyYaml(written, "written.yaml");
    ASSERT_TRUE(back.ok()) << back.status().ToString() << "\n" << written;
    EXPECT_TRUE(*back == *c) << written;
  }
  // A tree read from topology.conf survives topology.yaml too (its name becomes "default").
  Cluster conf = Conf("slurm_tree.conf");
  auto back = ParseSlurmTopologyYaml(WriteSlurmTopologyYaml(conf), "w.yaml");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  conf.name = "default";
  EXPECT_TRUE(*back == conf);
}

TEST(SlurmFormatTest, RejectsBadTopologyYaml) {
  auto error = [](std::string_view text) {
    auto c = ParseSlurmTopologyYaml(text, "topology.yaml");
    EXPECT_FALSE(c.ok()) << text;
    return c.ok() ? std::string() : c.status().message();
  };
  EXPECT_HAS(error("- topology: t\n  tree:\n    switchs: []\n"),
             "topology.yaml:3:5: field '[0].tree': unknown key 'switchs'");
  EXPECT_HAS(error("- topology: t\n  tree:\n    switches:\n      - switch: s\n"
                   "        nodes: n[5-2]\n"),
             "topology.yaml:5:16: field '[0].tree.switches[0].nodes': hostlist 'n[5-2]': range "
             "5-2 is descending");
  EXPECT_HAS(error("- topology: t\n  tree:\n    switches:\n      - switch: a\n        children: b\n"
                   "      - switch: b\n        children: a\n"),
             "cycle");
  EXPECT_HAS(error("- topology: t\n  tree:\n    switches:\n      - switch: l\n        nodes: n1\n"
                   "      - switch: m\n        nodes: n1\n      - switch: top\n"
                   "        children: l,m\n"),
             "topology.yaml:6: node 'n1' is under two leaves");
  EXPECT_HAS(error("- topology: t\n  block:\n    block_sizes: [2, 3]\n    blocks: []\n"),
             "topology.yaml:3:18: field '[0].block.block_sizes'");
  EXPECT_HAS(error("- topology: t\n  block:\n    blocks: []\n"), "lists no blocks");
  EXPECT_HAS(error("- topology: t\n  tree: {switches: []}\n  block: {blocks: []}\n"),
             "exactly one type");
  EXPECT_HAS(error("- topology: t\n  flat: true\n"), "none of the topologies (t)");
  EXPECT_HAS(error("topology: t\n"), "expected a sequence");
  EXPECT_HAS(error("- topology: t\n  cluster_defualt: true\n"), "did you mean 'cluster_default'");
  EXPECT_HAS(error("- cluster_default: true\n"), "missing required key 'topology'");
  EXPECT_HAS(error(""), "empty");
}

}  // namespace
}  // namespace railyard::topo
