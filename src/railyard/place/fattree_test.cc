#include "railyard/place/fattree.h"

#include <gtest/gtest.h>

namespace railyard::place {
namespace {

TEST(FatTreeTest, BuildsSixteenThousandNodes) {
  topo::Cluster c = MakeFatTree(FatTreeSpecForNodes(16384));
  EXPECT_EQ(c.levels, (std::vector<std::string>{"block", "spine", "leaf"}));
  ASSERT_EQ(c.nodes.size(), 16384u);
  EXPECT_EQ(c.TotalGpus(), 131072);
  EXPECT_EQ(c.nodes.front().name, "n00000");
  EXPECT_EQ(c.nodes.back().name, "n16383");
  int per_level[3] = {0, 0, 0};
  for (const auto& s : c.switches) {
    ++per_level[s.level];
    const size_t expected[3] = {8, 16, 32};  // children, children, nodes
    EXPECT_EQ(s.level == 2 ? s.nodes.size() : s.children.size(), expected[s.level]) << s.name;
  }
  EXPECT_EQ(per_level[0], 4);
  EXPECT_EQ(per_level[1], 32);
  EXPECT_EQ(per_level[2], 512);
  // Tree order: node i sits under leaf i / 32.
  EXPECT_EQ(c.switches[c.nodes[100].leaf].name, "leaf3");
  EXPECT_EQ(c.switches[c.DomainOf(5000, 0)].name, "block1");
}

TEST(FatTreeTest, TwoLevelsAndTruncation) {
  topo::Cluster c = MakeFatTree({.blocks = 0,
                                 .spines_per_block = 3,
                                 .leaves_per_spine = 2,
                                 .nodes_per_leaf = 4,
                                 .gpus_per_node = 4,
                                 .max_nodes = 19});
  EXPECT_EQ(c.levels, (std::vector<std::string>{"spine", "leaf"}));
  ASSERT_EQ(c.nodes.size(), 19u);
  EXPECT_EQ(c.TotalGpus(), 76);
  // 19 nodes: leaves of 4, 4 | 4, 4 | 3; no empty switch is generated.
  ASSERT_EQ(c.switches.size(), 3u + 5u);
  EXPECT_EQ(c.switches.back().name, "leaf4");
  EXPECT_EQ(c.switches.back().nodes.size(), 3u);
  // Counts below 1 are treated as 1.
  topo::Cluster tiny =
      MakeFatTree({.spines_per_block = 0, .leaves_per_spine = -1, .nodes_per_leaf = 0});
  EXPECT_EQ(tiny.nodes.size(), 1u);
}

TEST(FatTreeTest, RandomInstancesAreReproducibleAndSmall) {
  int three_levels = 0, mixed = 0, constrained = 0;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    RandomInstance a = MakeRandomInstance(seed);
    RandomInstance b = MakeRandomInstance(seed);
    EXPECT_EQ(a.cluster, b.cluster);
    EXPECT_EQ(a.busy, b.busy);
    EXPECT_EQ(a.request.nodes, b.request.nodes);
    ASSERT_GE(a.cluster.nodes.size(), 1u);
    ASSERT_LE(a.cluster.nodes.size(), 64u);
    ASSERT_EQ(a.busy.size(), a.cluster.nodes.size());
    EXPECT_TRUE(ResolveRequest(a.cluster, a.request).ok()) << "seed " << seed;
    three_levels += a.cluster.levels.size() == 3;
    bool has4 = false, has8 = false;
    for (const auto& n : a.cluster.nodes) (n.gpu_count == 4 ? has4 : has8) = true;
    mixed += has4 && has8;
    constrained += !a.request.required_level.empty() || !a.request.preferred_level.empty();
  }
  // The generator covers the shapes it promises.
  EXPECT_GT(three_levels, 50);
  EXPECT_GT(mixed, 20);
  EXPECT_GT(constrained, 40);
  EXPECT_NE(MakeRandomInstance(1).cluster, MakeRandomInstance(2).cluster);
  EXPECT_LE(MakeRandomInstance(5, 10).cluster.nodes.size(), 10u);
}

}  // namespace
}  // namespace railyard::place
