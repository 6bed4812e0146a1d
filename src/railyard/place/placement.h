// Topology-aware gang placement on a topo::Cluster: all or nothing, fewest leaf switches.
//
// A job asks for `nodes` whole nodes (each with at least `gpus_per_node` GPUs). The engine
// finds a switch domain that holds the whole job (the lowest level first, Slurm tree and
// Kueue TAS style), picks the domain whose job would touch the fewest leaves (ties: the
// tightest, i.e. fewest free nodes), and inside it takes the leaves with the most free
// eligible nodes plus, for the remainder, the smallest leaf that still covers it. Ranks are
// ordered leaf by leaf in tree order, so a ring crosses each switch boundary the fewest
// times. docs/placement.md describes the rules in full.
//
//   Placer placer(cluster);                       // cluster must outlive the placer
//   RY_RETURN_IF_ERROR(placer.SetBusy({"n00012"}));
//   RY_ASSIGN_OR_RETURN(Placement p, placer.Place({.nodes = 16, .preferred_level = "spine"}));
//   ... run the job on p.hosts (rank i on p.hosts[i]) ...
//   RY_RETURN_IF_ERROR(placer.Release(p));
//
// PlaceOnce() is the same engine as a pure function (validate/ and launch/ use it to place
// around unhealthy hosts). No I/O anywhere in place/.
//
// Thread-safety: PlaceOnce is safe to call concurrently. A Placer is not synchronised; use
// one per thread or guard it with a mutex.
#pragma once

#include <map>
#include <memory>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <unordered_map>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/topo/model.h"

namespace railyard::place {

struct JobRequest {
  int nodes = 0;
  int gpus_per_node = 0;  // a node is eligible only with gpu_count >= this
  // Level names from Cluster::levels, or empty. Required: the whole job under one domain of
  // that level or nothing. Preferred: tried first, then relaxed upward level by level and,
  // unless a level is required, finally across the whole cluster. With both, the preferred
  // level must be at or below the required one and relaxation stops at the required one.
  // (The `{}` initialisers keep -Wextra quiet about designated initialisers that omit them.)
  std::string required_level{};
  std::string preferred_level{};
};

struct Placement {
  int job_id = 0;                     // assigned by Placer::Place; 0 from PlaceOnce
  std::vector<std::string> hosts;     // rank order: hosts[r] runs rank r
  std::vector<int> node_indices;      // Cluster::nodes indices, same order as hosts
  std::vector<std::string> leaves;    // leaf switches used, in rank order
  std::map<std::string, int> levels;  // level name -> number of its domains used
  // On success, e.g. "placed 16 nodes in spine2 (level spine) on 2 leaves".
  std::string explanation;
};

// {"hosts": [...], "leaves": [...], "levels": {level: domains}, "explanation": "..."}.
nlohmann::json ToJson(const Placement& placement);

// How a request walks the levels; shared by the engine, the baseline and the optimum so
// all three judge a request by the same rules.
struct LevelPlan {
  int start = 0;      // first level tried: the preferred level, else the leaf level
  int stop = 0;       // last level tried: the required level, else 0 (the top)
  bool span = false;  // no level required: may finally span the whole cluster
  int required = -1;  // level indices, -1 when not given
  int preferred = -1;
};

// Checks `request` against `cluster` and resolves its level names. INVALID_ARGUMENT for an
// unknown level (listing the levels), nodes <= 0, more nodes than the cluster has, negative
// gpus_per_node or more than any node has, or a preferred level above the required one.
Result<LevelPlan> ResolveRequest(const topo::Cluster& cluster, const JobRequest& request);

// Stateful engine for a sequence of placements and releases. Keeps per-switch counters of
// free eligible nodes (per distinct GPU count) that are updated incrementally, so one
// placement costs O(switches + nodes placed), not O(cluster).
class Placer {
 public:
  // Keeps a reference: `cluster` must outlive the Placer and must not change.
  explicit Placer(const topo::Cluster& cluster);
  ~Placer();
  Placer(const Placer&) = delete;
  Placer& operator=(const Placer&) = delete;

  // Places a job and marks its nodes allocated. Errors: INVALID_ARGUMENT for an unknown
  // level (the message lists the levels), nodes <= 0, a job larger than the cluster,
  // negative or unsatisfiable gpus_per_node, a preferred level above the required one;
  // RESOURCE_EXHAUSTED when it cannot be placed now, with an explanation naming the level,
  // the free eligible nodes of the best domain, the nodes needed, and the cluster-wide
  // free/excluded/busy/allocated counts. A failed placement allocates nothing.
  Result<Placement> Place(const JobRequest& request);

  // Frees the nodes of a job placed by this Placer. NOT_FOUND for an unknown (or already
  // released) job id, or a placement whose nodes differ from that job's.
  Status Release(const Placement& placement);
  Status Release(int job_id);

  // Replace the whole excluded (or busy) set. NOT_FOUND naming the first unknown host; the
  // set is then left unchanged. Excluded and busy nodes that are allocated stay allocated
  // until released and are not offered afterwards.
  Status SetExcluded(const std::vector<std::string>& hosts);
  Status SetBusy(const std::vector<std::string>& hosts);
  // The same by node index: mask[i] true marks node i. A shorter mask leaves the rest unset.
  void SetExcludedMask(const std::vector<bool>& mask);
  void SetBusyMask(const std::vector<bool>& mask);

  // Nodes that are not excluded, busy or allocated (whatever their GPU count).
  int free_nodes() const;
  // The job holding node `n`, or 0.
  int AllocatedTo(int n) const;
  int live_jobs() const { return static_cast<int>(jobs_.size()); }

 private:
  struct Engine;
  const topo::Cluster& cluster_;
  std::unique_ptr<Engine> engine_;
  std::unordered_map<std::string, int> name_index_;  // built on first lookup by name
  std::map<int, std::vector<int>> jobs_;             // job id -> node indices
  int next_job_id_ = 1;
  Result<std::vector<bool>> MaskFromNames(const std::vector<std::string>& hosts);
};

// One placement on a fresh engine. `unavailable` (empty, or one entry per node) marks
// nodes that must not be used; they are reported as excluded in explanations. Same errors
// as Placer::Place, plus INVALID_ARGUMENT for a mask of the wrong size.
Result<Placement> PlaceOnce(const topo::Cluster& cluster, const JobRequest& request,
                            const std::vector<bool>& unavailable);

}  // namespace railyard::place
