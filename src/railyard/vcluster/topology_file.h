// Writes a virtual cluster's topology as Railyard topology YAML, schema version 1.
//
// The schema is owned by the topology module (docs/formats.md); version 1 is its first,
// small form: named levels top first, switches with their parent, nodes with the switch
// they hang off, their address and link rate. Later versions add fields; readers must
// ignore the "vcluster" section they do not know.
//
// Thread-safety: pure function.
#pragma once

#include <string>

#include "railyard/vcluster/state.h"

namespace railyard::vcluster {

// The YAML text for `state` (rates as unit strings, e.g. "1Gbit/s"; "unshaped" when 0).
std::string TopologyYaml(const ClusterState& state);

}  // namespace railyard::vcluster
