#include "railyard/validate/schedule.h"

#include <gtest/gtest.h>

#include <set>

#include "railyard/place/fattree.h"
#include "railyard/validate/schedule_testing.h"

namespace railyard::validate {
namespace {

// Fails the test unless every round is disjoint and names valid hosts.
void ExpectDisjointRounds(const Schedule& s) {
  for (size_t r = 0; r < s.rounds.size(); ++r) {
    std::vector<char> seen(s.hosts, 0);
    for (const PairTest& p : s.rounds[r].pairs) {
      ASSERT_TRUE(p.a >= 0 && p.a < s.hosts && p.b >= 0 && p.b < s.hosts && p.a != p.b);
      ASSERT_FALSE(seen[p.a]) << "host " << p.a << " twice in round " << r;
      ASSERT_FALSE(seen[p.b]) << "host " << p.b << " twice in round " << r;
      seen[p.a] = seen[p.b] = 1;
    }
  }
}

TEST(ScheduleTest, AllPairsCoversEveryOrderedPairExactlyOnce) {
  for (int n = 0; n <= 17; ++n) {
    SCOPED_TRACE(n);
    Schedule s = AllPairsSchedule(n);
    ExpectDisjointRounds(s);
    int expected_rounds = n < 2 ? 0 : (n % 2 == 0 ? n - 1 : n);
    ASSERT_EQ(static_cast<int>(s.rounds.size()), expected_rounds);
    std::vector<int> count(n * n, 0);
    for (const Round& r : s.rounds) {
      if (n % 2 == 0) {
        EXPECT_EQ(static_cast<int>(r.pairs.size()), n / 2);
      }
      for (const PairTest& p : r.pairs) {
        ++count[p.a * n + p.b];  // a -> b and b -> a run together
        ++count[p.b * n + p.a];
      }
    }
    for (int a = 0; a < n; ++a) {
      for (int b = 0; b < n; ++b) EXPECT_EQ(count[a * n + b], a == b ? 0 : 1) << a << "->" << b;
    }
  }
}

// Independently of the planner: every host in some pair (its link runs both ways, as both
// ends of a pair send at once), and every uplink with hosts on both sides crossed; with
// `full_load`, crossed in one round by a pair of every host under it.
void ExpectTopologyCovered(const topo::Cluster& c, const Schedule& s, bool full_load) {
  ExpectDisjointRounds(s);
  std::vector<char> tested(c.nodes.size(), 0);
  for (const Round& r : s.rounds) {
    for (const PairTest& p : r.pairs) tested[p.a] = tested[p.b] = 1;
  }
  for (size_t n = 0; n < c.nodes.size(); ++n) {
    if (c.nodes.size() > 1) {
      EXPECT_TRUE(tested[n]) << c.nodes[n].name << " never tested";
    }
  }
  // under[s][n]: node n is under switch s.
  for (size_t sw = 0; sw < c.switches.size(); ++sw) {
    if (c.switches[sw].parent < 0) continue;
    std::vector<char> under(c.nodes.size(), 0);
    std::vector<int> inside = c.NodesUnder(static_cast<int>(sw));
    for (int n : inside) under[n] = 1;
    if (inside.empty() || inside.size() == c.nodes.size()) continue;
    size_t best = 0;
    for (const Round& r : s.rounds) {
      size_t crossing = 0;
      for (const PairTest& p : r.pairs) crossing += under[p.a] != under[p.b];
      best = std::max(best, crossing);
    }
    EXPECT_GT(best, 0u) << "uplink of " << c.switches[sw].name << " never crossed";
    if (full_load) {
      EXPECT_EQ(best, inside.size())
          << "uplink of " << c.switches[sw].name << " never fully loaded";
    }
  }
}

TEST(ScheduleTest, TopologyScheduleCoversSmallTrees) {
  for (const std::vector<int>& leaves :
       {std::vector<int>{4, 4}, {3, 3, 3}, {1, 2, 3, 5}, {2}, {1, 1}, {7, 1, 4}}) {
    SCOPED_TRACE(::testing::PrintToString(leaves));
    topo::Cluster c = LeafCluster(leaves);
    Schedule s = TopologySchedule(c);
    EXPECT_EQ(s.kind, ScheduleKind::kTopology);
    EXPECT_LE(s.rounds.size(), 4u);
    ExpectTopologyCovered(c, s, /*full_load=*/false);
  }
  ExpectTopologyCovered(LeafCluster({4, 4, 4, 4}), TopologySchedule(LeafCluster({4, 4, 4, 4})),
                        /*full_load=*/true);
}

TEST(ScheduleTest, TopologyScheduleCoversSeveralTopSwitches) {
  topo::Cluster c = place::MakeFatTree(
      {.blocks = 3, .spines_per_block = 3, .leaves_per_spine = 3, .nodes_per_leaf = 3});
  Schedule s = TopologySchedule(c);
  EXPECT_EQ(s.rounds.size(), 7u);
  ExpectTopologyCovered(c, s, /*full_load=*/true);
}

TEST(ScheduleTest, TopologyScheduleFor16384NodesIsConstantRoundsAndCoversEverything) {
  topo::Cluster c = place::MakeFatTree(place::FatTreeSpecForNodes(16384));
  ASSERT_EQ(c.nodes.size(), 16384u);
  ASSERT_EQ(c.levels.size(), 3u);
  Schedule s = TopologySchedule(c);
  EXPECT_LE(s.rounds.size(), 8u);
  for (const Round& r : s.rounds) EXPECT_EQ(r.pairs.size(), 8192u);  // every host, every round
  ExpectTopologyCovered(c, s, /*full_load=*/true);
}

TEST(ScheduleTest, ExpectedRatesShareEachLinkAmongItsFlows) {
  // 200 Mbit/s hosts, 400 Mbit/s leaf uplinks: four flows share an uplink across leaves.
  topo::Cluster c = LeafCluster({4, 4}, 200'000'000, 400'000'000);
  Schedule s = TopologySchedule(c);
  bool saw_cross = false, saw_inside = false;
  for (const Round& r : s.rounds) {
    for (const PairTest& p : r.pairs) {
      bool cross = (p.a < 4) != (p.b < 4);
      EXPECT_EQ(p.expected_ab_bits, cross ? 100e6 : 200e6);
      EXPECT_EQ(p.expected_ba_bits, p.expected_ab_bits);
      (cross ? saw_cross : saw_inside) = true;
    }
  }
  EXPECT_TRUE(saw_cross && saw_inside);
  // Unknown rates expect nothing.
  Schedule unknown = ChooseSchedule(LeafCluster({2, 2}));
  EXPECT_EQ(unknown.kind, ScheduleKind::kAllPairs);
  for (const Round& r : unknown.rounds) EXPECT_EQ(r.pairs[0].expected_ab_bits, 0);
}

TEST(ScheduleTest, ChooseScheduleBySize) {
  EXPECT_EQ(ChooseSchedule(LeafCluster({4, 4}), 8).kind, ScheduleKind::kAllPairs);
  EXPECT_EQ(ChooseSchedule(LeafCluster({4, 5}), 8).kind, ScheduleKind::kTopology);
}

TEST(ScheduleTest, PackRoundsKeepsEveryPairInDisjointRounds) {
  std::vector<PairTest> pairs = {
      {.a = 0, .b = 1}, {.a = 0, .b = 2}, {.a = 3, .b = 4}, {.a = 1, .b = 2}, {.a = 5, .b = 0}};
  std::vector<Round> rounds = PackRounds(pairs);
  Schedule s{.kind = ScheduleKind::kRetest, .hosts = 6, .rounds = rounds};
  ExpectDisjointRounds(s);
  EXPECT_EQ(s.PairCount(), pairs.size());
  EXPECT_EQ(rounds.size(), 3u);  // host 0 is in three pairs
}

TEST(ScheduleTest, DryRunSaysRoundsPairsAndTime) {
  topo::Cluster c = LeafCluster({2, 2}, 200'000'000, 200'000'000);
  // n0<->n3 crosses both uplinks, which carry two flows each way in that round.
  Schedule s = ChooseSchedule(c);
  DryRun d = DescribeDryRun(s, std::chrono::seconds(5));
  EXPECT_EQ(d.rounds, 3);
  EXPECT_EQ(d.pairs, 6u);
  EXPECT_EQ(d.measurements, 12u);
  EXPECT_EQ(d.estimated_s, 15);
  std::vector<std::string> names = {"n0", "n1", "n2", "n3"};
  std::string text = FormatDryRun(s, names, std::chrono::seconds(5), 1);
  EXPECT_EQ(text.substr(0, text.find('\n')),
            "schedule all-pairs: 4 hosts, 3 rounds, 6 pairs (12 measurements), about 15 s at 5 "
            "s per round");
  EXPECT_NE(text.find("round 1: 2 pairs: n0<->n3 100 Mbit/s, ... 1 more\n"), std::string::npos)
      << text;
}

}  // namespace
}  // namespace railyard::validate
