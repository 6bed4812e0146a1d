// The placement benchmark: speed on a large generated fat tree and quality on small random
// instances. It is a measurement, not a test: it reads the steady clock and asserts
// nothing (bench_test only checks it runs and reports sane numbers on a small setup).
//
//   PlaceBenchResult r = RunPlaceBench({});          // 16,384 nodes, 2,000 instances
//   std::cout << ToJson(r).dump(2);
//
// Method (docs/placement.md has the rationale):
//   place_median_ms  a Placer on MakeFatTree(FatTreeSpecForNodes(nodes)) with
//                    busy_percent of nodes busy (random) and a few resident jobs for
//                    fragmentation; `trials` placements of mixed sizes (1..2,048 nodes) and
//                    constraints (none / preferred spine / required block), each released
//                    after timing; the median of the Place() times.
//   jobs_total_s     `jobs` mixed jobs placed in sequence on the same kind of cluster,
//                    keeping at most `max_live_jobs` alive (the oldest is released when
//                    full, or when a job does not fit); total time of all Place and Release.
//   optimal_fraction over `instances` MakeRandomInstance(seed + i): the fraction where the
//                    engine and OptimalLeafCount agree (same leaf count, or both cannot
//                    place).
//   worse_than_greedy instances where the engine used more leaves than PlaceGreedy, or
//                    failed where it succeeded.
// Thread-safety: pure apart from reading the clock.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>

namespace railyard::place {

struct PlaceBenchOptions {
  int nodes = 16384;
  int gpus_per_node = 8;
  int busy_percent = 20;
  int trials = 500;
  int jobs = 1000;
  int max_live_jobs = 16;
  int instances = 2000;
  uint64_t seed = 1;
};

struct PlaceBenchResult {
  int nodes = 0;
  int gpus = 0;
  double place_median_ms = 0;
  int jobs = 0;
  double jobs_total_s = 0;
  double optimal_fraction = 0;
  int worse_than_greedy = 0;
};

PlaceBenchResult RunPlaceBench(const PlaceBenchOptions& options);

// Exactly the keys nodes, gpus, place_median_ms, jobs, jobs_total_s, optimal_fraction,
// worse_than_greedy.
nlohmann::json ToJson(const PlaceBenchResult& result);

}  // namespace railyard::place
