#include "railyard/place/placement.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <set>

#include "railyard/place/baseline.h"
#include "railyard/place/fattree.h"

namespace railyard::place {
namespace {

// gmock is not linked; a substring check with a readable failure message instead.
::testing::AssertionResult HasSubstr(const std::string& text, const std::string& part) {
  if (text.find(part) != std::string::npos) return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure() << "'" << part << "' not in '" << text << "'";
}

// block0{spine0{leaf0,leaf1}, spine1{leaf2,leaf3}}, block1{spine2{leaf4,leaf5}, ...}: 4 nodes
// per leaf, 32 nodes.
topo::Cluster SmallTree() {
  return MakeFatTree({.blocks = 2,
                      .spines_per_block = 2,
                      .leaves_per_spine = 2,
                      .nodes_per_leaf = 4,
                      .gpus_per_node = 8});
}

// Marks the first `k` nodes of leaf `leaf` in the mask.
void MarkFirst(const topo::Cluster& c, const std::string& leaf, int k, std::vector<bool>* mask) {
  mask->resize(c.nodes.size());
  const auto& nodes = c.switches[c.FindSwitch(leaf)].nodes;
  for (int i = 0; i < k; ++i) (*mask)[nodes[i]] = true;
}

// The leaf names a placement's hosts run on, with consecutive duplicates collapsed.
std::vector<std::string> LeafRuns(const topo::Cluster& c, const Placement& p) {
  std::vector<std::string> runs;
  for (int n : p.node_indices) {
    const std::string& leaf = c.switches[c.nodes[n].leaf].name;
    if (runs.empty() || runs.back() != leaf) runs.push_back(leaf);
  }
  return runs;
}

TEST(PlacementTest, SmallJobOnOneTightestLeaf) {
  topo::Cluster c = SmallTree();
  Placer placer(c);
  std::vector<bool> busy;
  MarkFirst(c, "leaf5", 1, &busy);  // leaf5 has 3 free: the tightest leaf holding 3
  placer.SetBusyMask(busy);
  Result<Placement> p = placer.Place({.nodes = 3});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->leaves, std::vector<std::string>{"leaf5"});
  EXPECT_EQ(p->hosts, (std::vector<std::string>{"n00021", "n00022", "n00023"}));
  EXPECT_EQ(p->levels, (std::map<std::string, int>{{"block", 1}, {"spine", 1}, {"leaf", 1}}));
  EXPECT_EQ(p->explanation, "placed 3 nodes in leaf5 (level leaf) on 1 leaf");
  EXPECT_GT(p->job_id, 0);
}

TEST(PlacementTest, PrefersDomainWithFewerLeavesOverTighterOne) {
  // spine0: leaves of 8 free (24 in all, the tightest); spine1: leaves of 10 free. A job of
  // 20 needs 3 leaves in spine0 but 2 in spine1.
  topo::Cluster c =
      MakeFatTree({.spines_per_block = 2, .leaves_per_spine = 3, .nodes_per_leaf = 10});
  std::vector<bool> busy;
  for (std::string leaf : {"leaf0", "leaf1", "leaf2"}) MarkFirst(c, leaf, 2, &busy);
  Result<Placement> p = PlaceOnce(c, {.nodes = 20}, busy);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->leaves, (std::vector<std::string>{"leaf3", "leaf4"}));
  EXPECT_TRUE(HasSubstr(p->explanation, "in spine1 (level spine) on 2 leaves"));
  Result<Placement> greedy = PlaceGreedy(c, {.nodes = 20}, busy);
  ASSERT_TRUE(greedy.ok());
  EXPECT_EQ(greedy->leaves.size(), 3u);
  EXPECT_EQ(OptimalLeafCount(c, {.nodes = 20}, busy).value_or(-1), 2);
}

TEST(PlacementTest, LastLeafIsTheSmallestThatCoversTheRemainder) {
  // One spine, leaves with 10, 7 and 4 free; 13 nodes: the 10-leaf plus 3 from the 4-leaf,
  // keeping the 7-leaf whole.
  topo::Cluster c =
      MakeFatTree({.spines_per_block = 1, .leaves_per_spine = 3, .nodes_per_leaf = 10});
  std::vector<bool> busy;
  MarkFirst(c, "leaf1", 3, &busy);
  MarkFirst(c, "leaf2", 6, &busy);
  Result<Placement> p = PlaceOnce(c, {.nodes = 13}, busy);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->leaves, (std::vector<std::string>{"leaf0", "leaf2"}));
  EXPECT_EQ(p->hosts.back(), "n00028");  // 3 of leaf2's free nodes n00026..n00029
  EXPECT_EQ(p->levels.at("leaf"), 2);
}

TEST(PlacementTest, RequiredLevelKeepsJobUnderOneDomain) {
  topo::Cluster c = SmallTree();
  std::vector<bool> busy;
  MarkFirst(c, "leaf0", 3, &busy);  // spine0 has 5 free, spine1..3 have 8
  Placer placer(c);
  placer.SetBusyMask(busy);
  for (int round = 0; round < 3; ++round) {
    Result<Placement> p = placer.Place({.nodes = 6, .required_level = "spine"});
    ASSERT_TRUE(p.ok()) << round << ": " << p.status().ToString();
    int spine = c.DomainOf(p->node_indices[0], c.FindLevel("spine"));
    for (int n : p->node_indices) EXPECT_EQ(c.DomainOf(n, c.FindLevel("spine")), spine);
    EXPECT_NE(c.switches[spine].name, "spine0");
    EXPECT_EQ(p->levels.at("spine"), 1);
  }
  // Every spine now has at most 5 free: a 6-node job under one spine cannot be placed,
  // although 11 nodes are free in the cluster.
  Result<Placement> fail = placer.Place({.nodes = 6, .required_level = "spine"});
  ASSERT_EQ(fail.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(fail.status().message(),
            "cannot place 6 nodes under one 'spine': the best spine (spine0) has 5 free "
            "eligible nodes; cluster-wide 11 free eligible, 0 excluded, 3 busy, 18 allocated to "
            "other jobs");
}

TEST(PlacementTest, ExplanationCountsExcludedAndBusy) {
  topo::Cluster c = SmallTree();
  Placer placer(c);
  ASSERT_TRUE(placer.SetExcluded({"n00000", "n00004", "n00008"}).ok());
  ASSERT_TRUE(placer.SetBusy({"n00001", "n00012", "n00016", "n00020"}).ok());
  Result<Placement> p = placer.Place({.nodes = 16, .required_level = "block"});
  ASSERT_EQ(p.status().code(), StatusCode::kResourceExhausted);
  const std::string m = p.status().message();
  EXPECT_TRUE(HasSubstr(m, "cannot place 16 nodes under one 'block'"));
  EXPECT_TRUE(HasSubstr(m, "the best block (block1) has 14 free eligible nodes"));
  EXPECT_TRUE(HasSubstr(m, "cluster-wide 25 free eligible, 3 excluded, 4 busy"));
}

TEST(PlacementTest, PreferredLevelRelaxesUpwardThenAcrossTheCluster) {
  topo::Cluster c = SmallTree();
  Placer placer(c);
  Result<Placement> in_block = placer.Place({.nodes = 12, .preferred_level = "spine"});
  ASSERT_TRUE(in_block.ok()) << in_block.status().ToString();
  EXPECT_EQ(in_block->levels.at("block"), 1);
  EXPECT_EQ(in_block->levels.at("spine"), 2);
  EXPECT_TRUE(HasSubstr(in_block->explanation, "(level block) on 3 leaves"));
  EXPECT_TRUE(HasSubstr(in_block->explanation,
                        "preferred level 'spine' relaxed: the best spine (spine0) has 8"));
  // 20 free remain (4 in one block, 16 in the other): 18 nodes span both blocks.
  Result<Placement> spanning = placer.Place({.nodes = 18, .preferred_level = "spine"});
  ASSERT_TRUE(spanning.ok()) << spanning.status().ToString();
  EXPECT_EQ(spanning->levels.at("block"), 2);
  EXPECT_EQ(spanning->leaves.size(), 5u);
  EXPECT_TRUE(HasSubstr(spanning->explanation, "across the cluster on 5 leaves in 2 'block'"));
  EXPECT_TRUE(HasSubstr(spanning->explanation, "(the best, block1, has 16 free eligible)"));
  // The same job with the level required is refused instead.
  ASSERT_TRUE(placer.Release(*spanning).ok());
  EXPECT_EQ(placer.Place({.nodes = 18, .required_level = "block"}).status().code(),
            StatusCode::kResourceExhausted);
}

TEST(PlacementTest, PreferredLevelPicksTightestDomainOfThatLevel) {
  // Without a preference the tightest leaf anywhere wins; preferring spines, the tightest
  // spine that holds the job is chosen first.
  topo::Cluster c = SmallTree();
  std::vector<bool> busy;
  MarkFirst(c, "leaf0", 2, &busy);  // leaf0: 2 free (tightest leaf), spine0: 6 free
  MarkFirst(c, "leaf2", 1, &busy);  // leaf2: 3 free
  MarkFirst(c, "leaf3", 4, &busy);  // spine1: 3 free (tightest spine)
  Result<Placement> any = PlaceOnce(c, {.nodes = 2}, busy);
  ASSERT_TRUE(any.ok());
  EXPECT_EQ(any->leaves, std::vector<std::string>{"leaf0"});
  Result<Placement> pref = PlaceOnce(c, {.nodes = 2, .preferred_level = "spine"}, busy);
  ASSERT_TRUE(pref.ok());
  EXPECT_EQ(pref->leaves, std::vector<std::string>{"leaf2"});
}

TEST(PlacementTest, RankOrderGroupsLeavesInTreeOrder) {
  topo::Cluster c =
      MakeFatTree({.blocks = 2, .spines_per_block = 2, .leaves_per_spine = 3, .nodes_per_leaf = 4});
  std::vector<bool> busy(c.nodes.size());
  std::mt19937_64 rng(3);
  for (size_t i = 0; i < busy.size(); ++i) busy[i] = rng() % 3 == 0;
  Result<Placement> p = PlaceOnce(c, {.nodes = 20}, busy);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  std::vector<std::string> runs = LeafRuns(c, *p);
  EXPECT_EQ(runs, p->leaves);  // each leaf appears as one contiguous run
  std::vector<int> order;
  for (const auto& l : runs) order.push_back(c.FindSwitch(l));
  EXPECT_TRUE(std::is_sorted(order.begin(), order.end()));  // generator numbers in tree order
  for (size_t i = 1; i < p->node_indices.size(); ++i) {
    if (c.nodes[p->node_indices[i]].leaf == c.nodes[p->node_indices[i - 1]].leaf) {
      EXPECT_LT(p->node_indices[i - 1], p->node_indices[i]);
    }
  }
}

TEST(PlacementTest, SequenceNeverDoubleBooksOrUsesUnavailableNodes) {
  topo::Cluster c =
      MakeFatTree({.blocks = 2, .spines_per_block = 3, .leaves_per_spine = 4, .nodes_per_leaf = 6});
  Placer placer(c);
  std::mt19937_64 rng(11);
  std::vector<bool> excluded(c.nodes.size()), busy(c.nodes.size());
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    excluded[i] = rng() % 10 == 0;
    busy[i] = rng() % 8 == 0;
  }
  placer.SetExcludedMask(excluded);
  placer.SetBusyMask(busy);
  const int usable = placer.free_nodes();
  std::map<int, Placement> live;
  std::set<int> held;
  const char* levels[] = {"", "leaf", "spine", "block"};
  for (int step = 0; step < 400; ++step) {
    if (!live.empty() && rng() % 3 == 0) {
      auto it = std::next(live.begin(), static_cast<long>(rng() % live.size()));
      for (int n : it->second.node_indices) held.erase(n);
      ASSERT_TRUE(placer.Release(it->second).ok());
      live.erase(it);
      continue;
    }
    JobRequest job{.nodes = 1 + static_cast<int>(rng() % 30)};
    (rng() % 2 ? job.required_level : job.preferred_level) = levels[rng() % 4];
    const int before = placer.free_nodes();
    Result<Placement> p = placer.Place(job);
    if (!p.ok()) {
      ASSERT_EQ(p.status().code(), StatusCode::kResourceExhausted) << p.status().ToString();
      EXPECT_EQ(placer.free_nodes(), before);  // all or nothing
      continue;
    }
    ASSERT_EQ(static_cast<int>(p->hosts.size()), job.nodes);
    for (int n : p->node_indices) {
      EXPECT_TRUE(held.insert(n).second) << "node " << n << " double-booked";
      EXPECT_FALSE(excluded[n] || busy[n]) << c.nodes[n].name;
      EXPECT_EQ(placer.AllocatedTo(n), p->job_id);
    }
    if (!job.required_level.empty()) {
      int lv = c.FindLevel(job.required_level);
      for (int n : p->node_indices) {
        EXPECT_EQ(c.DomainOf(n, lv), c.DomainOf(p->node_indices[0], lv));
      }
    }
    live[p->job_id] = *p;
    EXPECT_EQ(placer.free_nodes(), usable - static_cast<int>(held.size()));
  }
}

TEST(PlacementTest, FailedPlacementAllocatesNothingAndReleaseRestores) {
  topo::Cluster c = SmallTree();
  Placer placer(c);
  Result<Placement> all = placer.Place({.nodes = 32});
  ASSERT_TRUE(all.ok());
  EXPECT_EQ(placer.free_nodes(), 0);
  Result<Placement> more = placer.Place({.nodes = 1});
  ASSERT_EQ(more.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(HasSubstr(more.status().message(), "32 allocated to other jobs"));
  ASSERT_TRUE(placer.Release(*all).ok());
  EXPECT_EQ(placer.free_nodes(), 32);
  EXPECT_EQ(placer.AllocatedTo(0), 0);
  EXPECT_EQ(placer.Release(*all).code(), StatusCode::kNotFound);
  EXPECT_EQ(placer.Release(Placement{}).code(), StatusCode::kNotFound);
  Result<Placement> one = placer.Place({.nodes = 1});
  ASSERT_TRUE(one.ok());
  Placement forged = *one;
  forged.node_indices = {5};
  EXPECT_EQ(placer.Release(forged).code(), StatusCode::kNotFound);
  ASSERT_TRUE(placer.Release(*one).ok());

  // A job that does not fit under the required level leaves the cluster as it was.
  Result<Placement> part = placer.Place({.nodes = 12});
  ASSERT_TRUE(part.ok());
  EXPECT_EQ(placer.Place({.nodes = 17, .required_level = "block"}).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_EQ(placer.free_nodes(), 20);
  EXPECT_EQ(placer.live_jobs(), 1);
}

TEST(PlacementTest, ExcludingAnAllocatedNodeKeepsItOutAfterRelease) {
  topo::Cluster c = SmallTree();
  Placer placer(c);
  Result<Placement> p = placer.Place({.nodes = 4});
  ASSERT_TRUE(p.ok());
  ASSERT_TRUE(placer.SetExcluded({p->hosts[0]}).ok());
  EXPECT_EQ(placer.free_nodes(), 28);
  ASSERT_TRUE(placer.Release(*p).ok());
  EXPECT_EQ(placer.free_nodes(), 31);
  ASSERT_TRUE(placer.SetExcluded({}).ok());
  EXPECT_EQ(placer.free_nodes(), 32);
  Status unknown = placer.SetBusy({"n00001", "nope"});
  EXPECT_EQ(unknown.code(), StatusCode::kNotFound);
  EXPECT_TRUE(HasSubstr(unknown.message(), "'nope'"));
  EXPECT_EQ(placer.free_nodes(), 32);  // unchanged on error
}

TEST(PlacementTest, GpusPerNodeFiltersNodes) {
  topo::ClusterBuilder b("test");
  b.SetLevels({"spine", "leaf"});
  b.AddSwitch("s0", "spine", "", 0);
  b.AddSwitch("l0", "leaf", "s0", 0);
  b.AddSwitch("l1", "leaf", "s0", 0);
  for (int i = 0; i < 8; ++i) {
    topo::Node n;
    n.name = "h" + std::to_string(i);
    n.gpu_count = i % 2 ? 8 : 4;
    b.AddNode(std::move(n), i < 4 ? "l0" : "l1");
  }
  Result<topo::Cluster> c = std::move(b).Finish();
  ASSERT_TRUE(c.ok());
  Result<Placement> p = PlaceOnce(*c, {.nodes = 3, .gpus_per_node = 8}, {});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  for (int n : p->node_indices) EXPECT_EQ(c->nodes[n].gpu_count, 8);
  Result<Placement> fail = PlaceOnce(*c, {.nodes = 5, .gpus_per_node = 5}, {});
  ASSERT_EQ(fail.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(HasSubstr(fail.status().message(), "4 free with fewer than 5 GPUs"));
  EXPECT_TRUE(PlaceOnce(*c, {.nodes = 8, .gpus_per_node = 4}, {}).ok());
}

TEST(PlacementTest, ManyDistinctGpuCountsUseTheScanPath) {
  // More distinct GPU counts than the engine keeps counters for.
  topo::ClusterBuilder b("test");
  b.SetLevels({"leaf"});
  for (int l = 0; l < 4; ++l) b.AddSwitch("l" + std::to_string(l), "leaf", "", 0);
  for (int i = 0; i < 48; ++i) {
    topo::Node n;
    n.name = "h" + std::to_string(i);
    n.gpu_count = i % 12 + 1;
    b.AddNode(std::move(n), "l" + std::to_string(i / 12));
  }
  Result<topo::Cluster> c = std::move(b).Finish();
  ASSERT_TRUE(c.ok());
  Placer placer(*c);
  Result<Placement> p = placer.Place({.nodes = 5, .gpus_per_node = 11});
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  EXPECT_EQ(p->leaves.size(), 3u);  // two per leaf have >= 11 GPUs
  for (int n : p->node_indices) EXPECT_GE(c->nodes[n].gpu_count, 11);
  Result<Placement> q = placer.Place({.nodes = 4, .gpus_per_node = 11});
  ASSERT_EQ(q.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(HasSubstr(q.status().message(), "3 free eligible"));
  ASSERT_TRUE(placer.Place({.nodes = 3, .gpus_per_node = 11}).ok());
}

TEST(PlacementTest, BadRequestsAreInvalidArguments) {
  topo::Cluster c = SmallTree();
  Placer placer(c);
  Result<Placement> unknown = placer.Place({.nodes = 2, .required_level = "rack"});
  EXPECT_EQ(unknown.status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(HasSubstr(unknown.status().message(), "'rack'"));
  EXPECT_TRUE(HasSubstr(unknown.status().message(), "block, spine, leaf"));
  Result<Placement> big = placer.Place({.nodes = 40});
  EXPECT_EQ(big.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(big.status().message(), "job of 40 nodes is larger than the cluster (32 nodes)");
  EXPECT_EQ(placer.Place({.nodes = 0}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(placer.Place({.nodes = -3}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(placer.Place({.nodes = 1, .gpus_per_node = 9}).status().code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(placer.Place({.nodes = 1, .required_level = "spine", .preferred_level = "block"})
                .status()
                .code(),
            StatusCode::kInvalidArgument);
  EXPECT_TRUE(
      placer.Place({.nodes = 1, .required_level = "block", .preferred_level = "leaf"}).ok());
  EXPECT_EQ(PlaceOnce(c, {.nodes = 1}, std::vector<bool>(3)).status().code(),
            StatusCode::kInvalidArgument);
}

TEST(PlacementTest, PlaceOnceAvoidsUnavailableNodes) {
  topo::Cluster c = SmallTree();
  std::vector<bool> down(c.nodes.size());
  for (int i = 0; i < 32; i += 2) down[i] = true;
  Result<Placement> p = PlaceOnce(c, {.nodes = 16}, down);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  for (int n : p->node_indices) EXPECT_FALSE(down[n]);
  EXPECT_EQ(p->job_id, 0);
  Result<Placement> fail = PlaceOnce(c, {.nodes = 17}, down);
  ASSERT_EQ(fail.status().code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(HasSubstr(fail.status().message(), "17 needed, only 16 free eligible"));
  EXPECT_TRUE(HasSubstr(fail.status().message(), "16 excluded"));
}

TEST(PlacementTest, EngineMatchesExhaustiveOptimumOnRandomInstances) {
  for (uint64_t seed = 0; seed < 300; ++seed) {
    RandomInstance inst = MakeRandomInstance(seed);
    Result<Placement> p = PlaceOnce(inst.cluster, inst.request, inst.busy);
    Result<int> best = OptimalLeafCount(inst.cluster, inst.request, inst.busy);
    ASSERT_EQ(p.ok(), best.ok()) << "seed " << seed << ": " << p.status().ToString();
    if (p.ok()) {
      EXPECT_EQ(static_cast<int>(p->leaves.size()), *best) << "seed " << seed;
      EXPECT_EQ(LeafRuns(inst.cluster, *p), p->leaves) << "seed " << seed;
    }
  }
}

TEST(PlacementTest, JsonShape) {
  topo::Cluster c = SmallTree();
  Result<Placement> p = PlaceOnce(c, {.nodes = 6, .required_level = "spine"}, {});
  ASSERT_TRUE(p.ok());
  nlohmann::json j = ToJson(*p);
  EXPECT_EQ(j.size(), 4u);
  EXPECT_EQ(j["hosts"].size(), 6u);
  EXPECT_EQ(j["leaves"], nlohmann::json({"leaf0", "leaf1"}));
  EXPECT_EQ(j["levels"], nlohmann::json({{"block", 1}, {"spine", 1}, {"leaf", 2}}));
  EXPECT_EQ(j["explanation"], "placed 6 nodes in spine0 (level spine) on 2 leaves");
}

TEST(PlacementTest, LargeClusterRequiredSpine) {
  topo::Cluster c = MakeFatTree(FatTreeSpecForNodes(16384));
  Placer placer(c);
  std::vector<int> seen(c.nodes.size());
  for (int i = 0; i < 32; ++i) {
    Result<Placement> p = placer.Place({.nodes = 500, .required_level = "spine"});
    ASSERT_TRUE(p.ok()) << i << ": " << p.status().ToString();
    EXPECT_EQ(p->levels.at("spine"), 1);
    EXPECT_EQ(p->levels.at("leaf"), 16);
    for (int n : p->node_indices) EXPECT_EQ(seen[n]++, 0);
  }
  EXPECT_EQ(placer.free_nodes(), 16384 - 32 * 500);
  // 12 free nodes are left under each spine.
  EXPECT_EQ(placer.Place({.nodes = 13, .required_level = "spine"}).status().code(),
            StatusCode::kResourceExhausted);
  EXPECT_TRUE(placer.Place({.nodes = 12, .required_level = "spine"}).ok());
}

}  // namespace
}  // namespace railyard::place
