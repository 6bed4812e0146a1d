#include "railyard/validate/analysis.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

#include "railyard/place/fattree.h"
#include "railyard/validate/schedule_testing.h"

namespace railyard::validate {
namespace {

using Factor = std::function<double(int src, int dst)>;
constexpr uint64_t kRate = 200'000'000;  // 200 Mbit/s host links

// Measurements of `schedule` on `c`: the expected rate (or kRate where the topology gives
// none) times uniform noise of +-10% times `factor`.
std::vector<Measurement> Measure(const topo::Cluster& c, Schedule schedule, uint64_t seed,
                                 const Factor& factor) {
  SetExpectedRates(c, schedule);
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> noise(0.9, 1.1);
  std::vector<Measurement> out;
  for (size_t r = 0; r < schedule.rounds.size(); ++r) {
    for (const PairTest& p : schedule.rounds[r].pairs) {
      for (auto [s, d, e] :
           {std::tuple{p.a, p.b, p.expected_ab_bits}, std::tuple{p.b, p.a, p.expected_ba_bits}}) {
        double base = e > 0 ? e : kRate;
        out.push_back({.src = s,
                       .dst = d,
                       .measured_bits = base * noise(rng) * factor(s, d),
                       .expected_bits = e,
                       .test = "pair round " + std::to_string(r + 1)});
      }
    }
  }
  return out;
}

// The clusters of the acceptance cases, with link rates known (the expectation is the
// topology's) or unknown (the reference is the fleet median).
topo::Cluster Cluster(std::vector<int> leaves, bool rates_known) {
  return LeafCluster(leaves, rates_known ? kRate : 0, 0);
}

struct Case {
  bool rates_known;
  uint64_t seed;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  for (bool known : {true, false}) {
    for (uint64_t seed = 1; seed <= 10; ++seed) cases.push_back({known, seed});
  }
  return cases;
}

Attribution Analyse(const topo::Cluster& c, const Factor& f, uint64_t seed) {
  FabricView view = FabricView::FromCluster(c);
  std::vector<Measurement> ms = Measure(c, AllPairsSchedule(c.nodes.size()), seed, f);
  Result<Attribution> a = Attribute(view, ms);
  EXPECT_TRUE(a.ok()) << a.status().ToString();
  return a.ok() ? *a : Attribution{};
}

// Runs `first`'s re-tests with the fault still there (or gone) and confirms.
Attribution Retest(const topo::Cluster& c, Attribution first, const Factor& f, uint64_t seed) {
  Schedule s{.kind = ScheduleKind::kRetest,
             .hosts = static_cast<int>(c.nodes.size()),
             .rounds = PackRounds(first.retest)};
  std::vector<Measurement> ms = Measure(c, s, seed + 100, f);
  return Confirm(std::move(first), FabricView::FromCluster(c), ms);
}

TEST(AnalysisTest, CleanMatrixWithNoiseHasNoFinding) {
  for (Case k : Cases()) {
    SCOPED_TRACE(::testing::Message() << "rates known " << k.rates_known << " seed " << k.seed);
    for (std::vector<int> leaves : {std::vector<int>{4, 4}, {3, 3, 3}}) {
      Attribution a = Analyse(
          Cluster(leaves, k.rates_known), [](int, int) { return 1.0; }, k.seed);
      EXPECT_TRUE(a.findings.empty()) << a.findings[0].outcome.reason;
      EXPECT_TRUE(a.retest.empty());
      EXPECT_NEAR(a.stats.median, k.rates_known ? 1.0 : kRate, k.rates_known ? 0.1 : 0.1 * kRate);
      EXPECT_GT(a.stats.mad, 0);
    }
  }
}

TEST(AnalysisTest, OneHostAtTwentyPercentIsExactlyThatHost) {
  const int bad = 5;  // 8 hosts in 2 leaves
  Factor f = [&](int s, int d) { return s == bad || d == bad ? 0.2 : 1.0; };
  for (Case k : Cases()) {
    SCOPED_TRACE(::testing::Message() << "rates known " << k.rates_known << " seed " << k.seed);
    topo::Cluster c = Cluster({4, 4}, k.rates_known);
    Attribution a = Analyse(c, f, k.seed);
    ASSERT_EQ(a.findings.size(), 1u);
    const Finding& h = a.findings[0];
    EXPECT_EQ(h.kind, FindingKind::kHost);
    EXPECT_EQ(h.subject, "n5");
    EXPECT_EQ(h.direction, "both");
    EXPECT_EQ(h.evidence.slow, 14);
    EXPECT_EQ(h.evidence.total, 14);
    EXPECT_NEAR(h.evidence.ratio, 0.2, 0.03);
    EXPECT_EQ(h.outcome.verdict, Verdict::kWarn);  // a suspect until re-tested
    EXPECT_EQ(std::count(a.good_hosts.begin(), a.good_hosts.end(), bad), 0);
    ASSERT_EQ(h.retest.size(), 2u);
    for (const PairTest& p : h.retest) {
      EXPECT_EQ(p.a, bad);
      EXPECT_NE(std::count(a.good_hosts.begin(), a.good_hosts.end(), p.b), 0);
    }
    EXPECT_EQ(h.retest[0].b / 4, bad / 4);  // one partner in its own leaf

    Attribution confirmed = Retest(c, a, f, k.seed);
    EXPECT_EQ(confirmed.findings[0].outcome.verdict, Verdict::kFail);
    EXPECT_NE(confirmed.findings[0].outcome.reason.find("n5: every path slow (both)"),
              std::string::npos)
        << confirmed.findings[0].outcome.reason;
    EXPECT_EQ(confirmed.findings[0].evidence.retest_tests.size(), 4u);
  }
}

TEST(AnalysisTest, OneSlowPathIsThatLinkNeitherHost) {
  for (auto [a_host, b_host] : {std::pair{1, 6}, std::pair{2, 3}}) {  // across, inside a leaf
    Factor f = [&](int s, int d) {
      return (s == a_host && d == b_host) || (s == b_host && d == a_host) ? 0.2 : 1.0;
    };
    for (Case k : Cases()) {
      SCOPED_TRACE(::testing::Message() << a_host << "<->" << b_host << " rates known "
                                        << k.rates_known << " seed " << k.seed);
      topo::Cluster c = Cluster({4, 4}, k.rates_known);
      Attribution a = Analyse(c, f, k.seed);
      ASSERT_EQ(a.findings.size(), 1u);
      const Finding& l = a.findings[0];
      EXPECT_EQ(l.kind, FindingKind::kLink);
      EXPECT_EQ(l.host, a_host);
      EXPECT_EQ(l.peer, b_host);
      EXPECT_EQ(l.direction, "both");
      EXPECT_EQ(l.evidence.slow, 2);
      EXPECT_EQ(l.retest.size(), 3u);
      EXPECT_EQ(Retest(c, a, f, k.seed).findings[0].outcome.verdict, Verdict::kFail);
    }
  }
}

TEST(AnalysisTest, OneWaySlowPathNamesItsDirection) {
  Factor f = [](int s, int d) { return s == 1 && d == 6 ? 0.3 : 1.0; };
  topo::Cluster c = Cluster({4, 4}, true);
  Attribution a = Analyse(c, f, 3);
  ASSERT_EQ(a.findings.size(), 1u);
  EXPECT_EQ(a.findings[0].direction, "n1->n6");
  EXPECT_EQ(a.findings[0].evidence.total, 2);
  EXPECT_EQ(Retest(c, a, f, 3).findings[0].outcome.verdict, Verdict::kFail);
}

TEST(AnalysisTest, OneSlowUplinkIsTheUplinkNotItsHosts) {
  // 9 hosts in 3 leaves; leaf1 (n3..n5) has its uplink slowed.
  auto in_leaf1 = [](int h) { return h >= 3 && h < 6; };
  Factor f = [&](int s, int d) { return in_leaf1(s) != in_leaf1(d) ? 0.3 : 1.0; };
  for (Case k : Cases()) {
    SCOPED_TRACE(::testing::Message() << "rates known " << k.rates_known << " seed " << k.seed);
    topo::Cluster c = Cluster({3, 3, 3}, k.rates_known);
    Attribution a = Analyse(c, f, k.seed);
    ASSERT_EQ(a.findings.size(), 1u) << a.findings[1].outcome.reason;
    const Finding& u = a.findings[0];
    EXPECT_EQ(u.kind, FindingKind::kUplink);
    EXPECT_EQ(u.subject, "uplink of leaf1");
    EXPECT_EQ(u.direction, "both");
    EXPECT_EQ(u.evidence.slow, 36);
    EXPECT_TRUE(u.alternatives.empty());
    ASSERT_EQ(u.retest.size(), 2u);
    for (const PairTest& p : u.retest) EXPECT_NE(in_leaf1(p.a), in_leaf1(p.b));
    EXPECT_EQ(Retest(c, a, f, k.seed).findings[0].outcome.verdict, Verdict::kFail);
  }
}

TEST(AnalysisTest, TwoLeavesCannotTellWhichUplinkAndSaySo) {
  // Every host has more paths across than inside, so the fleet median itself is slow: only
  // the topology's expectation shows the fault.
  Factor f = [](int s, int d) { return (s < 4) != (d < 4) ? 0.3 : 1.0; };
  topo::Cluster c = Cluster({4, 4}, true);
  std::vector<Measurement> ms = Measure(c, AllPairsSchedule(8), 1, f);
  EXPECT_TRUE(Attribute(FabricView::FromCluster(c), ms)->findings.empty());
  AnalysisOptions expected;
  expected.slow = {.kind = Threshold::Kind::kOfExpected, .value = 0.8, .text = "80% of expected"};
  Result<Attribution> a = Attribute(FabricView::FromCluster(c), ms, expected);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  ASSERT_EQ(a->findings.size(), 1u);
  EXPECT_EQ(a->findings[0].subject, "uplink of leaf0 or of leaf1");
  EXPECT_EQ(a->findings[0].alternatives.size(), 1u);
}

TEST(AnalysisTest, SuspectNotReproducedIsATransientPassAndUnrunRetestIsUnknown) {
  const int bad = 2;
  Factor f = [&](int s, int d) { return s == bad || d == bad ? 0.2 : 1.0; };
  topo::Cluster c = Cluster({4, 4}, true);
  Attribution a = Analyse(c, f, 1);
  ASSERT_EQ(a.findings.size(), 1u);
  Attribution healed = Retest(
      c, a, [](int, int) { return 1.0; }, 1);
  EXPECT_EQ(healed.findings[0].outcome.verdict, Verdict::kPass);
  EXPECT_NE(healed.findings[0].outcome.reason.find("transient: not reproduced"), std::string::npos);
  Attribution unrun = Confirm(a, FabricView::FromCluster(c), {});
  EXPECT_EQ(unrun.findings[0].outcome.verdict, Verdict::kUnknown);
  EXPECT_NE(unrun.findings[0].outcome.reason.find("re-test did not run"), std::string::npos);
}

TEST(AnalysisTest, TopologyScheduleOnThreeLevelsFindsHostAndUplink) {
  // 81 hosts: 3 blocks x 3 spines x 3 leaves x 3 nodes, measured with the topology schedule.
  topo::Cluster c = place::MakeFatTree(
      {.blocks = 3, .spines_per_block = 3, .leaves_per_spine = 3, .nodes_per_leaf = 3});
  for (topo::Node& n : c.nodes) n.link_rate_bits = kRate;
  FabricView view = FabricView::FromCluster(c);
  int leaf = c.nodes[40].leaf;
  std::vector<Factor> faults = {
      [](int s, int d) { return s == 40 || d == 40 ? 0.2 : 1.0; },
      [&](int s, int d) {
        return (c.nodes[s].leaf == leaf) != (c.nodes[d].leaf == leaf) ? 0.3 : 1.0;
      },
  };
  for (size_t k = 0; k < faults.size(); ++k) {
    for (uint64_t seed = 1; seed <= 5; ++seed) {
      SCOPED_TRACE(::testing::Message() << "fault " << k << " seed " << seed);
      std::vector<Measurement> ms = Measure(c, TopologySchedule(c), seed, faults[k]);
      Result<Attribution> a = Attribute(view, ms);
      ASSERT_TRUE(a.ok());
      ASSERT_EQ(a->findings.size(), 1u) << a->findings[1].outcome.reason;
      if (k == 0) {
        EXPECT_EQ(a->findings[0].subject, c.nodes[40].name);
      } else {
        EXPECT_EQ(a->findings[0].subject, "uplink of " + c.switches[leaf].name);
      }
      EXPECT_EQ(Retest(c, *a, faults[k], seed).findings[0].outcome.verdict, Verdict::kFail);
    }
  }
}

TEST(AnalysisTest, FlatViewStillFindsAHost) {
  const int bad = 0;
  Factor f = [&](int s, int d) { return s == bad || d == bad ? 0.2 : 1.0; };
  topo::Cluster c = Cluster({6}, false);
  std::vector<Measurement> ms = Measure(c, AllPairsSchedule(6), 4, f);
  FabricView flat = FabricView::Flat({"a", "b", "c", "d", "e", "f"});
  Result<Attribution> a = Attribute(flat, ms);
  ASSERT_TRUE(a.ok());
  ASSERT_EQ(a->findings.size(), 1u);
  EXPECT_EQ(a->findings[0].subject, "a");
}

TEST(AnalysisTest, ThresholdsAndBadInput) {
  topo::Cluster c = Cluster({2, 2}, false);
  FabricView view = FabricView::FromCluster(c);
  std::vector<Measurement> ms = Measure(c, AllPairsSchedule(4), 1, [](int, int) { return 1.0; });
  Result<Attribution> empty = Attribute(view, {});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->findings.empty());
  AnalysisOptions expected;
  expected.slow = {.kind = Threshold::Kind::kOfExpected, .value = 0.9, .text = "90% of expected"};
  Result<Attribution> no_expectation = Attribute(view, ms, expected);
  ASSERT_FALSE(no_expectation.ok());
  EXPECT_EQ(no_expectation.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(no_expectation.status().message().find("has no expected rate"), std::string::npos);

  AnalysisOptions absolute;
  absolute.slow = {.kind = Threshold::Kind::kAbsolute, .value = 250e6, .text = "250Mbit/s"};
  Result<Attribution> all_slow = Attribute(view, ms, absolute);
  ASSERT_TRUE(all_slow.ok());
  EXPECT_EQ(std::count(all_slow->slow.begin(), all_slow->slow.end(), 1),
            static_cast<long>(ms.size()));

  ms[0].dst = 7;
  Result<Attribution> bad = Attribute(view, ms);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "measurement 0 ('pair round 1'): hosts 0->7 not two of the 4 hosts");
}

}  // namespace
}  // namespace railyard::validate
