// Yardsticks for the placement engine: a Slurm-tree-style greedy baseline and the exact
// minimum number of leaves for small instances.
//
// PlaceGreedy does exactly this, with the same request rules as the engine (ResolveRequest:
// start at the preferred level, else the leaf level; walk upward to the required level,
// else to the top; span the cluster only when no level is required):
//   1. at the first level that has a domain with >= `nodes` free eligible nodes, take the
//      tightest such domain (fewest free eligible nodes; ties: lowest switch index), like
//      Slurm's tree plugin picks the lowest switch that can hold the job;
//   2. otherwise (no level required) use the whole cluster;
//   3. walk the domain's leaves in tree order (depth first, children in input order) and
//      take every free eligible node of each leaf, in input order, until the job is full.
// There is no leaf optimisation at all: it is the first-fit a naive scheduler does, and
// the engine must never use more leaves than it does.
//
// OptimalLeafCount answers "how few leaves can hold this job" by exhaustive search over
// the subsets of the leaves of each candidate domain (the domains at the same level the
// engine would choose), for clusters of at most 64 nodes.
//
// `unavailable` is empty or has one entry per node (true: must not be used); a node is
// eligible when available and it has at least gpus_per_node GPUs. Thread-safety: pure
// functions.
#pragma once

#include <vector>

#include "railyard/base/status.h"
#include "railyard/place/placement.h"
#include "railyard/topo/model.h"

namespace railyard::place {

// Same Placement shape as the engine (job_id 0). Errors: those of ResolveRequest,
// INVALID_ARGUMENT for a mask of the wrong size, RESOURCE_EXHAUSTED when it cannot place.
Result<Placement> PlaceGreedy(const topo::Cluster& cluster, const JobRequest& request,
                              const std::vector<bool>& unavailable);

// The largest cluster OptimalLeafCount accepts.
inline constexpr int kMaxOptimalNodes = 64;

// The minimum number of leaves any placement of `request` can use under the engine's
// constraints: inside one domain of the lowest level (from the start level upward) that
// has a domain with enough free eligible nodes, or, when none has and no level is
// required, anywhere. Errors: those of ResolveRequest, INVALID_ARGUMENT for more than
// kMaxOptimalNodes nodes or a mask of the wrong size, RESOURCE_EXHAUSTED when nothing fits.
Result<int> OptimalLeafCount(const topo::Cluster& cluster, const JobRequest& request,
                             const std::vector<bool>& unavailable);

}  // namespace railyard::place
