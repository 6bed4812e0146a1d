// Railyard's own topology file (YAML), versions 1 and 2; the schema is in docs/formats.md.
//
// Version 1 is the network tree the virtual cluster writes (levels, switches, nodes with an
// address and link rate). Version 2 adds each node's hardware (GPUs, NICs with their rails,
// NUMA nodes, GPU-to-NIC path classes), Slurm block sizes, named hardware `profiles`, and a
// compact form where a leaf switch lists its nodes as a hostlist ("gpu[001-032]") so that a
// large cluster fits on a page. Railyard reads both versions and writes version 2.
//
//   RY_ASSIGN_OR_RETURN(std::string text, base::ReadFile(path));
//   RY_ASSIGN_OR_RETURN(Cluster cluster, ParseTopologyYaml(text, path));
//   RY_RETURN_IF_ERROR(base::WriteFileAtomic(out, WriteTopologyYaml(cluster)));
//
// Errors are INVALID_ARGUMENT and read "<source>:<line>:<col>: field '<path>': <what>", or
// name the switch or node (with its line) for tree errors found by ClusterBuilder.
// Thread-safety: pure functions.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>

#include "railyard/base/status.h"
#include "railyard/topo/model.h"

namespace railyard::topo {

// The versions this build reads; it writes kTopologyYamlVersion.
inline constexpr int kMinTopologyYamlVersion = 1;
inline constexpr int kTopologyYamlVersion = 2;

// Parses a Railyard topology document. `source` (usually the path) prefixes every error.
// Unknown keys are rejected with a did-you-mean hint, except the `vcluster` section, which
// carries the virtual cluster's own bookkeeping and is ignored.
Result<Cluster> ParseTopologyYaml(std::string_view text, std::string_view source);

// The same for a document that is already parsed (the format detector parses once).
Result<Cluster> TopologyFromYaml(const YAML::Node& root, std::string_view source);

// Writes `cluster` as version 2. Nodes with identical hardware share a profile, and a leaf
// whose nodes have no address and the same hardware and link rate is written compactly, as
// long as that keeps the node order. ParseTopologyYaml(WriteTopologyYaml(c)) == c for every
// cluster that ClusterBuilder accepts whose hardware the reader would accept too: distinct GPU
// indices and NIC names per node, paths naming a listed GPU and NIC, numa_node/rail >= -1.
std::string WriteTopologyYaml(const Cluster& cluster);

}  // namespace railyard::topo
