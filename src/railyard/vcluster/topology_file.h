// A virtual cluster's topology as a topo::Cluster, and the file `vcluster up` writes from it.
//
// The tree is one spine ("spine0") over the plan's leaves, each host under its leaf with its
// address; links carry the spec's nominal rates (0, unshaped, is left out), not the degraded
// ones of `vcluster degrade`. The file is Railyard topology YAML written by topo's writer
// (topo/yaml_format.h, schema in docs/formats.md), so it loads with topo::LoadTopology like
// any other; after the tree it carries a `vcluster` section (prefix, mode, created) that
// topology readers ignore.
//
//   RY_ASSIGN_OR_RETURN(std::string text, TopologyYaml(state));
//   RY_RETURN_IF_ERROR(base::WriteFileAtomic(state.topology_file, text));
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "railyard/base/status.h"
#include "railyard/topo/model.h"
#include "railyard/vcluster/state.h"

namespace railyard::vcluster {

// The cluster tree of `state`. INTERNAL when the plan does not make a tree (a bug in MakePlan:
// duplicate names, a host on a missing leaf).
Result<topo::Cluster> TopologyOf(const ClusterState& state);

// The topology file's text: WriteTopologyYaml(TopologyOf(state)) plus the `vcluster` section.
Result<std::string> TopologyYaml(const ClusterState& state);

}  // namespace railyard::vcluster
