// Planning speed of the fabric schedules and of the attribution on a large generated fat tree
// (place::FatTreeSpecForNodes: 32 nodes per leaf, 16 leaves per spine, 8 spines per block).
// A measurement, not a test: it prints one JSON object and asserts nothing.
//
//   validate_schedule_bench [nodes]     (default 16384)
//
// Keys: hosts, levels, rounds, pairs, plan_ms (TopologySchedule with expected rates, median of
// 5), all_pairs_rounds (what the round-robin tournament would need), analysis_ms (Attribute on
// a clean matrix of the schedule's measurements, median of 3).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <random>

#include "railyard/place/fattree.h"
#include "railyard/validate/analysis.h"
#include "railyard/validate/schedule.h"

namespace {

template <typename F>
double MedianMs(int runs, F&& f) {
  std::vector<double> ms;
  for (int i = 0; i < runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    f();
    ms.push_back(
        std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  using namespace railyard;
  int nodes = argc > 1 ? std::atoi(argv[1]) : 16384;
  if (nodes < 2) {
    std::fprintf(stderr, "usage: validate_schedule_bench [nodes >= 2]\n");
    return 2;
  }
  place::FatTreeSpec spec = place::FatTreeSpecForNodes(nodes);
  topo::Cluster c = place::MakeFatTree(spec);
  for (topo::Node& n : c.nodes) n.link_rate_bits = 200'000'000;
  validate::Schedule s;
  double plan_ms = MedianMs(5, [&] { s = validate::TopologySchedule(c); });

  std::vector<validate::Measurement> ms;
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> noise(0.9, 1.1);
  for (const validate::Round& r : s.rounds) {
    for (const validate::PairTest& p : r.pairs) {
      ms.push_back({p.a, p.b, p.expected_ab_bits * noise(rng), p.expected_ab_bits, "pair"});
      ms.push_back({p.b, p.a, p.expected_ba_bits * noise(rng), p.expected_ba_bits, "pair"});
    }
  }
  validate::FabricView view = validate::FabricView::FromCluster(c);
  size_t findings = 0;
  double analysis_ms = MedianMs(3, [&] {
    Result<validate::Attribution> a = validate::Attribute(view, ms);
    findings = a.ok() ? a->findings.size() : SIZE_MAX;
  });

  nlohmann::json j = {
      {"hosts", c.nodes.size()},    {"levels", c.levels.size()},
      {"rounds", s.rounds.size()},  {"pairs", s.PairCount()},
      {"plan_ms", plan_ms},         {"all_pairs_rounds", nodes % 2 == 0 ? nodes - 1 : nodes},
      {"analysis_ms", analysis_ms}, {"clean_findings", findings}};
  std::printf("%s\n", j.dump(2).c_str());
  return 0;
}
