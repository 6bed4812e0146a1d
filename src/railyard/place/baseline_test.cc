#include "railyard/place/baseline.h"

#include <gtest/gtest.h>

#include <algorithm>

#include "railyard/place/fattree.h"
#include "railyard/place/placement.h"

namespace railyard::place {
namespace {

void MarkFirst(const topo::Cluster& c, const std::string& leaf, int k, std::vector<bool>* mask) {
  mask->resize(c.nodes.size());
  const auto& nodes = c.switches[c.FindSwitch(leaf)].nodes;
  for (int i = 0; i < k; ++i) (*mask)[nodes[i]] = true;
}

// The plainest possible check of OptimalLeafCount: every subset of the leaves of every
// domain of `level` (all leaves when level < 0), as a bitmask.
int BruteForceMinLeaves(const topo::Cluster& c, const std::vector<bool>& busy, int gpus, int need,
                        int level) {
  std::vector<std::vector<int>> domains;  // free counts of each domain's leaves
  std::vector<int> index_of(c.switches.size(), -1);
  for (size_t s = 0; s < c.switches.size(); ++s) {
    if (level >= 0 && c.switches[s].level == level) {
      index_of[s] = static_cast<int>(domains.size());
      domains.emplace_back();
    }
  }
  if (level < 0) domains.emplace_back();
  for (size_t s = 0; s < c.switches.size(); ++s) {
    const topo::Switch& leaf = c.switches[s];
    if (leaf.level != c.leaf_level() || leaf.nodes.empty()) continue;
    int free = 0;
    for (int n : leaf.nodes) free += !busy[n] && c.nodes[n].gpu_count >= gpus;
    domains[level < 0 ? 0 : index_of[c.DomainOf(leaf.nodes[0], level)]].push_back(free);
  }
  int best = -1;
  for (const auto& leaves : domains) {
    const uint32_t subsets = 1u << leaves.size();
    for (uint32_t m = 1; m < subsets; ++m) {
      int sum = 0;
      for (size_t i = 0; i < leaves.size(); ++i) sum += (m >> i & 1) ? leaves[i] : 0;
      int k = __builtin_popcount(m);
      if (sum >= need && (best < 0 || k < best)) best = k;
    }
  }
  return best;
}

TEST(BaselineTest, GreedyTakesTightestDomainThenLeavesInTreeOrder) {
  topo::Cluster c =
      MakeFatTree({.spines_per_block = 2, .leaves_per_spine = 3, .nodes_per_leaf = 4});
  std::vector<bool> busy;
  MarkFirst(c, "leaf0", 2, &busy);  // leaf0: 2 free
  MarkFirst(c, "leaf1", 2, &busy);  // leaf1: 2 free; spine0: 8 free, the tightest
  Result<Placement> p = PlaceGreedy(c, {.nodes = 6}, busy);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  // leaf0 has n00002, n00003 free, leaf1 n00006, n00007, then leaf2.
  EXPECT_EQ(p->hosts,
            (std::vector<std::string>{"n00002", "n00003", "n00006", "n00007", "n00008", "n00009"}));
  EXPECT_EQ(p->leaves, (std::vector<std::string>{"leaf0", "leaf1", "leaf2"}));
  EXPECT_EQ(p->levels.at("spine"), 1);
  EXPECT_EQ(p->explanation, "greedy: placed 6 nodes in spine0 (level spine) on 3 leaves");
  // The engine needs only 2 leaves for the same job (a whole leaf plus a part of one).
  Result<Placement> engine = PlaceOnce(c, {.nodes = 6}, busy);
  ASSERT_TRUE(engine.ok());
  EXPECT_EQ(engine->leaves.size(), 2u);
  EXPECT_EQ(OptimalLeafCount(c, {.nodes = 6}, busy).value_or(-1), 2);
}

TEST(BaselineTest, GreedyHonoursLevelsAndFailsLikeTheEngine) {
  topo::Cluster c =
      MakeFatTree({.blocks = 2, .spines_per_block = 2, .leaves_per_spine = 2, .nodes_per_leaf = 4});
  Result<Placement> spanning = PlaceGreedy(c, {.nodes = 20}, {});
  ASSERT_TRUE(spanning.ok());
  EXPECT_EQ(spanning->levels.at("block"), 2);
  EXPECT_EQ(PlaceGreedy(c, {.nodes = 20, .required_level = "block"}, {}).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(PlaceGreedy(c, {.nodes = 2, .required_level = "rack"}, {}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(PlaceGreedy(c, {.nodes = 2}, std::vector<bool>(5)).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(BaselineTest, OptimalLeafCountHandCases) {
  // One spine, leaves of 10: free 10, 7, 4.
  topo::Cluster c =
      MakeFatTree({.spines_per_block = 1, .leaves_per_spine = 3, .nodes_per_leaf = 10});
  std::vector<bool> busy;
  MarkFirst(c, "leaf1", 3, &busy);
  MarkFirst(c, "leaf2", 6, &busy);
  struct Case {
    int nodes;
    int leaves;
  };
  for (Case k : {Case{1, 1}, Case{10, 1}, Case{11, 2}, Case{17, 2}, Case{18, 3}, Case{21, 3}}) {
    EXPECT_EQ(OptimalLeafCount(c, {.nodes = k.nodes}, busy).value_or(-1), k.leaves)
        << k.nodes << " nodes";
    Result<Placement> p = PlaceOnce(c, {.nodes = k.nodes}, busy);
    ASSERT_TRUE(p.ok());
    EXPECT_EQ(static_cast<int>(p->leaves.size()), k.leaves) << k.nodes << " nodes";
  }
  EXPECT_EQ(OptimalLeafCount(c, {.nodes = 22}, busy).status().code(),
            StatusCode::kResourceExhausted);

  // Two spines: only spine0 (leaves of 8 free) holds 20 under one spine, in 3 leaves.
  topo::Cluster two =
      MakeFatTree({.spines_per_block = 2, .leaves_per_spine = 3, .nodes_per_leaf = 10});
  std::vector<bool> b2;
  for (std::string leaf : {"leaf0", "leaf1", "leaf2"}) MarkFirst(two, leaf, 2, &b2);
  for (std::string leaf : {"leaf4", "leaf5"}) MarkFirst(two, leaf, 10, &b2);
  EXPECT_EQ(OptimalLeafCount(two, {.nodes = 20, .required_level = "spine"}, b2).value_or(-1), 3);
  EXPECT_EQ(PlaceOnce(two, {.nodes = 20, .required_level = "spine"}, b2)->leaves.size(), 3u);
}

TEST(BaselineTest, OptimalLeafCountRejectsLargeClusters) {
  topo::Cluster c =
      MakeFatTree({.spines_per_block = 1, .leaves_per_spine = 5, .nodes_per_leaf = 13});
  EXPECT_EQ(OptimalLeafCount(c, {.nodes = 1}, {}).status().code(), StatusCode::kInvalidArgument);
}

TEST(BaselineTest, OptimumMatchesBruteForceAndEngineNeverWorseThanGreedy) {
  int greedy_worse = 0;
  for (uint64_t seed = 1000; seed < 1400; ++seed) {
    RandomInstance inst = MakeRandomInstance(seed, 40);
    const topo::Cluster& c = inst.cluster;
    int leaves = 0;
    for (const auto& s : c.switches) leaves += s.level == c.leaf_level();
    if (leaves > 18) continue;  // keep the bitmask brute force fast
    Result<LevelPlan> plan = ResolveRequest(c, inst.request);
    ASSERT_TRUE(plan.ok()) << plan.status().ToString();
    // The level the optimum works at: the first from plan.start upward with a fitting domain.
    int level = -2;
    for (int lv = plan->start; lv >= plan->stop && level == -2; --lv) {
      if (BruteForceMinLeaves(c, inst.busy, inst.request.gpus_per_node, inst.request.nodes, lv) >
          0) {
        level = lv;
      }
    }
    if (level == -2 && plan->span) level = -1;
    int brute = level == -2 ? -1
                            : BruteForceMinLeaves(c, inst.busy, inst.request.gpus_per_node,
                                                  inst.request.nodes, level);
    Result<int> best = OptimalLeafCount(c, inst.request, inst.busy);
    EXPECT_EQ(best.value_or(-1), brute) << "seed " << seed;
    Result<Placement> engine = PlaceOnce(c, inst.request, inst.busy);
    Result<Placement> greedy = PlaceGreedy(c, inst.request, inst.busy);
    ASSERT_EQ(engine.ok(), greedy.ok()) << "seed " << seed;
    if (!engine.ok()) continue;
    EXPECT_LE(engine->leaves.size(), greedy->leaves.size()) << "seed " << seed;
    greedy_worse += greedy->leaves.size() > engine->leaves.size();
  }
  // The instances are varied enough that the optimisation matters.
  EXPECT_GT(greedy_worse, 10);
}

}  // namespace
}  // namespace railyard::place
