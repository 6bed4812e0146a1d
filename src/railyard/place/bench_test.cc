#include "railyard/place/bench.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace railyard::place {
namespace {

// The benchmark's numbers are measured, not asserted; this checks it runs end to end on a
// small setup and reports what it says.
TEST(BenchTest, SmallRunReportsSaneFigures) {
  PlaceBenchOptions o;
  o.nodes = 2000;
  o.trials = 30;
  o.jobs = 60;
  o.max_live_jobs = 4;
  o.instances = 100;
  PlaceBenchResult r = RunPlaceBench(o);
  EXPECT_EQ(r.nodes, 2000);
  EXPECT_EQ(r.gpus, 16000);
  EXPECT_EQ(r.jobs, 60);
  EXPECT_GT(r.place_median_ms, 0);
  EXPECT_GT(r.jobs_total_s, 0);
  EXPECT_GE(r.optimal_fraction, 0.99);
  EXPECT_EQ(r.worse_than_greedy, 0);
}

TEST(BenchTest, JsonHasExactlyTheDocumentedKeys) {
  PlaceBenchResult r{.nodes = 16384,
                     .gpus = 131072,
                     .place_median_ms = 0.5,
                     .jobs = 1000,
                     .jobs_total_s = 0.2,
                     .optimal_fraction = 1.0,
                     .worse_than_greedy = 0};
  nlohmann::json j = ToJson(r);
  std::vector<std::string> keys;
  for (const auto& [k, v] : j.items()) keys.push_back(k);
  EXPECT_EQ(keys,
            (std::vector<std::string>{"gpus", "jobs", "jobs_total_s", "nodes", "optimal_fraction",
                                      "place_median_ms", "worse_than_greedy"}));
  EXPECT_EQ(j["nodes"], 16384);
  EXPECT_EQ(j["place_median_ms"], 0.5);
  EXPECT_EQ(j["optimal_fraction"], 1.0);
}

}  // namespace
}  // namespace railyard::place
