// `railyard bench ...`: the benchmarks that produce the figures in docs/performance.md.
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "railyard/cli/cli_common.h"
#include "railyard/place/bench.h"

namespace railyard::cli {

void RegisterBenchCommand(CLI::App& app, Action* action) {
  CLI::App* bench = app.add_subcommand("bench", "Benchmarks (figures for docs/performance.md)");
  bench->require_subcommand(1);
  bench->footer("Examples:\n  railyard bench place --nodes 16384 --json\nDocs: docs/performance.md\n");

  struct PlaceFlags {
    place::PlaceBenchOptions o;
    bool json = false;
  };
  auto f = std::make_shared<PlaceFlags>();
  CLI::App* p = bench->add_subcommand(
      "place", "Placement speed on a generated fat tree and quality against the exhaustive "
               "optimum and a Slurm-tree-style greedy baseline");
  p->add_option("--nodes", f->o.nodes, "nodes of the generated fat tree")->capture_default_str();
  p->add_option("--gpus-per-node", f->o.gpus_per_node, "GPUs per node")->capture_default_str();
  p->add_option("--busy-percent", f->o.busy_percent, "nodes marked busy before timing")
      ->capture_default_str();
  p->add_option("--trials", f->o.trials, "placements timed for the median")->capture_default_str();
  p->add_option("--jobs", f->o.jobs, "mixed jobs placed and released in sequence")
      ->capture_default_str();
  p->add_option("--instances", f->o.instances, "small random instances for the quality check")
      ->capture_default_str();
  p->add_option("--seed", f->o.seed, "random seed")->capture_default_str();
  p->add_flag("--json", f->json,
              "one object: nodes, gpus, place_median_ms, jobs, jobs_total_s, optimal_fraction, "
              "worse_than_greedy");
  p->footer("Example:\n  railyard bench place --nodes 16384 --json\n");
  p->callback([f, action] {
    *action = [f]() -> Outcome {
      if (f->o.nodes < 1 || f->o.nodes > 1'000'000) {
        return InvalidArgument("--nodes {}: expected 1 to 1000000", f->o.nodes);
      }
      if (f->o.busy_percent < 0 || f->o.busy_percent > 90) {
        return InvalidArgument("--busy-percent {}: expected 0 to 90", f->o.busy_percent);
      }
      if (f->o.trials < 1 || f->o.jobs < 0 || f->o.instances < 0) {
        return InvalidArgument("--trials must be positive; --jobs and --instances not negative");
      }
      place::PlaceBenchResult r = place::RunPlaceBench(f->o);
      if (f->json) {
        fmt::print("{}\n", place::ToJson(r).dump());
        return Status::Ok();
      }
      fmt::print("fat tree: {} nodes, {} GPUs\n", r.nodes, r.gpus);
      fmt::print("  one placement, median          {:>10.3f} ms\n", r.place_median_ms);
      fmt::print("  {} jobs placed and released  {:>10.3f} s\n", r.jobs, r.jobs_total_s);
      fmt::print("  leaves used == optimum         {:>10.1f} % of small instances\n",
                 100.0 * r.optimal_fraction);
      fmt::print("  worse than greedy baseline     {:>10d} instances\n", r.worse_than_greedy);
      return Status::Ok();
    };
  });
}

}  // namespace railyard::cli
