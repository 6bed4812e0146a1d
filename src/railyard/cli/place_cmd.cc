// `railyard place`: topology-aware gang placement of one job on a cluster's free capacity.
#include <fmt/format.h>

#include <nlohmann/json.hpp>

#include "railyard/cli/cli_common.h"
#include "railyard/place/placement.h"
#include "railyard/topo/load.h"

namespace railyard::cli {
namespace {

struct PlaceFlags {
  std::string topology;
  int nodes = 0;
  int gpus_per_node = 0;
  std::string required;
  std::string preferred;
  std::string exclude;
  std::string busy;
  bool json = false;
};

Status RunPlace(const PlaceFlags& f) {
  if (f.nodes <= 0) return InvalidArgument("--nodes {}: expected a positive number", f.nodes);
  RY_ASSIGN_OR_RETURN(topo::Cluster cluster, topo::LoadTopology(f.topology));
  RY_ASSIGN_OR_RETURN(auto excluded, ReadHostsArg("--exclude", f.exclude));
  RY_ASSIGN_OR_RETURN(auto busy, ReadHostsArg("--busy", f.busy));
  place::Placer placer(cluster);
  RY_RETURN_IF_ERROR(placer.SetExcluded(excluded).WithContext("--exclude"));
  RY_RETURN_IF_ERROR(placer.SetBusy(busy).WithContext("--busy"));
  place::JobRequest req{.nodes = f.nodes,
                        .gpus_per_node = f.gpus_per_node,
                        .required_level = f.required,
                        .preferred_level = f.preferred};
  RY_ASSIGN_OR_RETURN(place::Placement p, placer.Place(req));
  if (f.json) {
    fmt::print("{}\n", place::ToJson(p).dump(2));
    return Status::Ok();
  }
  fmt::print("{}\n", p.explanation);
  fmt::print("{:<6} {:<24} {}\n", "RANK", "HOST", "LEAF");
  for (size_t r = 0; r < p.hosts.size(); ++r) {
    fmt::print("{:<6} {:<24} {}\n", r, p.hosts[r],
               cluster.switches[cluster.nodes[p.node_indices[r]].leaf].name);
  }
  return Status::Ok();
}

}  // namespace

void RegisterPlaceCommand(CLI::App& app, Action* action) {
  auto f = std::make_shared<PlaceFlags>();
  CLI::App* p = app.add_subcommand(
      "place",
      "Place a gang of N nodes on a topology: all or nothing, fewest leaves, ranks "
      "ordered by leaf");
  p->add_option("--topology", f->topology, "topology file (any supported format)")->required();
  p->add_option("--nodes", f->nodes, "nodes the job needs")->required();
  p->add_option("--gpus-per-node", f->gpus_per_node, "only nodes with at least this many GPUs");
  p->add_option("--required", f->required,
                "the whole job under one domain of this level (e.g. spine), or not at all");
  p->add_option("--preferred", f->preferred,
                "try this level first, then relax upward level by level");
  p->add_option("--exclude", f->exclude,
                "hosts never to use (unhealthy): comma list, hostlist node[01-04], or @FILE");
  p->add_option("--busy", f->busy, "hosts in use by other jobs: same syntax");
  p->add_flag("--json", f->json,
              "print {\"hosts\", \"leaves\", \"levels\", \"explanation\"} instead of a table");
  p->footer(
      "Exit status 1 with an explanation when the job cannot be placed now (which level, how\n"
      "many free, how many needed, how many excluded or busy).\n"
      "Examples:\n"
      "  railyard place --topology topology.conf --nodes 16 --preferred leaf --json\n"
      "  railyard place --topology cluster.yaml --nodes 64 --required spine --exclude @bad_hosts\n"
      "Docs: docs/placement.md\n");
  p->callback([f, action] { *action = [f]() -> Outcome { return RunPlace(*f); }; });
}

}  // namespace railyard::cli
