#include "railyard/place/bench.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <iterator>
#include <nlohmann/json.hpp>
#include <random>

#include "railyard/place/baseline.h"
#include "railyard/place/fattree.h"
#include "railyard/place/placement.h"

namespace railyard::place {
namespace {

using Clock = std::chrono::steady_clock;

double Seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// A job from the mix: sizes 1..2,048 nodes (powers of two, small ones more often, as on
// real clusters), a third with a preferred spine, some with a required block.
JobRequest RandomJob(std::mt19937_64& rng, const topo::Cluster& c) {
  static constexpr int kSizes[] = {1, 1, 2, 4, 8, 8, 16, 16, 32, 64, 128, 256, 512, 1024, 2048};
  JobRequest r;
  r.nodes = kSizes[rng() % std::size(kSizes)];
  r.nodes = std::min<int>(r.nodes, static_cast<int>(c.nodes.size()));
  int mode = static_cast<int>(rng() % 6);
  if (mode < 2 && c.FindLevel("spine") >= 0) {
    r.preferred_level = "spine";
  } else if (mode == 2 && c.FindLevel("block") >= 0) {
    r.required_level = "block";
  }
  return r;
}

std::vector<bool> RandomMask(std::mt19937_64& rng, size_t n, int percent) {
  std::vector<bool> mask(n);
  for (size_t i = 0; i < n; ++i) mask[i] = static_cast<int>(rng() % 100) < percent;
  return mask;
}

double MedianPlaceMs(const topo::Cluster& c, const PlaceBenchOptions& o, std::mt19937_64& rng) {
  Placer placer(c);
  placer.SetBusyMask(RandomMask(rng, c.nodes.size(), o.busy_percent));
  // Resident jobs fragment the free space the way a running cluster does.
  for (int i = 0; i < 8; ++i) placer.Place(RandomJob(rng, c)).status().IgnoreError();
  std::vector<double> ms;
  ms.reserve(o.trials);
  for (int t = 0; t < o.trials; ++t) {
    JobRequest job = RandomJob(rng, c);
    auto start = Clock::now();
    Result<Placement> p = placer.Place(job);
    ms.push_back(Seconds(Clock::now() - start) * 1e3);
    if (p.ok()) placer.Release(*p).IgnoreError();
  }
  if (ms.empty()) return 0;
  std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
  return ms[ms.size() / 2];
}

double JobSequenceSeconds(const topo::Cluster& c, const PlaceBenchOptions& o,
                          std::mt19937_64& rng) {
  Placer placer(c);
  placer.SetBusyMask(RandomMask(rng, c.nodes.size(), o.busy_percent));
  std::vector<JobRequest> jobs;
  for (int i = 0; i < o.jobs; ++i) jobs.push_back(RandomJob(rng, c));
  std::deque<int> live;
  auto start = Clock::now();
  for (const JobRequest& job : jobs) {
    while (static_cast<int>(live.size()) >= std::max(o.max_live_jobs, 1)) {
      placer.Release(live.front()).IgnoreError();
      live.pop_front();
    }
    Result<Placement> p = placer.Place(job);
    while (!p.ok() && p.status().code() == StatusCode::kResourceExhausted && !live.empty()) {
      placer.Release(live.front()).IgnoreError();
      live.pop_front();
      p = placer.Place(job);
    }
    if (p.ok()) live.push_back(p->job_id);
  }
  for (int id : live) placer.Release(id).IgnoreError();
  return Seconds(Clock::now() - start);
}

void Quality(const PlaceBenchOptions& o, PlaceBenchResult* r) {
  int agree = 0;
  for (int i = 0; i < o.instances; ++i) {
    RandomInstance inst = MakeRandomInstance(o.seed + static_cast<uint64_t>(i));
    Result<Placement> engine = PlaceOnce(inst.cluster, inst.request, inst.busy);
    Result<int> best = OptimalLeafCount(inst.cluster, inst.request, inst.busy);
    Result<Placement> greedy = PlaceGreedy(inst.cluster, inst.request, inst.busy);
    if (engine.ok() ? (best.ok() && *best == static_cast<int>(engine->leaves.size()))
                    : !best.ok()) {
      ++agree;
    }
    if (greedy.ok() && (!engine.ok() || engine->leaves.size() > greedy->leaves.size())) {
      ++r->worse_than_greedy;
    }
  }
  r->optimal_fraction = o.instances > 0 ? static_cast<double>(agree) / o.instances : 1.0;
}

}  // namespace

PlaceBenchResult RunPlaceBench(const PlaceBenchOptions& options) {
  PlaceBenchResult r;
  std::mt19937_64 rng(options.seed);
  topo::Cluster c = MakeFatTree(FatTreeSpecForNodes(options.nodes, options.gpus_per_node));
  r.nodes = static_cast<int>(c.nodes.size());
  r.gpus = c.TotalGpus();
  r.place_median_ms = MedianPlaceMs(c, options, rng);
  r.jobs = options.jobs;
  r.jobs_total_s = JobSequenceSeconds(c, options, rng);
  Quality(options, &r);
  return r;
}

nlohmann::json ToJson(const PlaceBenchResult& r) {
  return nlohmann::json{{"nodes", r.nodes},
                        {"gpus", r.gpus},
                        {"place_median_ms", r.place_median_ms},
                        {"jobs", r.jobs},
                        {"jobs_total_s", r.jobs_total_s},
                        {"optimal_fraction", r.optimal_fraction},
                        {"worse_than_greedy", r.worse_than_greedy}};
}

}  // namespace railyard::place
