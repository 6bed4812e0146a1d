// Slurm's topology files: topology.conf (tree and block forms) and topology.yaml.
//
// Import and export of the cluster tree for clusters run by Slurm:
//
//   topology.conf, tree:   SwitchName=s0 Nodes=dev[0-5]      (leaf switches list nodes)
//                          SwitchName=s3 Switches=s[0-2]     (upper switches list switches)
//   topology.conf, block:  BlockName=b1 Nodes=node[1-32]
//                          BlockSizes=32,64
//   topology.yaml (Slurm 25.05+): a list of named topologies, each `tree: {switches: [...]}`,
//                          `block: {block_sizes, blocks: [...]}` or `flat: true`.
//
// Slurm names no levels, so a tree's levels are named from its height, top first: one level
// {"leaf"}, two {"spine", "leaf"}, three {"block", "spine", "leaf"}, more "level0".."levelN".
// Every leaf must sit at the same depth (Railyard's model has one leaf level); a switch under
// two parents, a cycle, or a node under two leaves is an error naming the switch or node and
// its line. A block topology becomes levels {"block"} with one switch per block and
// Cluster::block_sizes. Slurm keeps no rates, addresses or hardware, so the writers drop them.
//
//   RY_ASSIGN_OR_RETURN(Cluster c, ParseSlurmTopologyConf(text, "topology.conf"));
//   std::string conf = WriteSlurmTopologyConf(c);
//
// Errors are INVALID_ARGUMENT naming "<source>:<line>". Thread-safety: pure functions.
#pragma once

#include <yaml-cpp/yaml.h>

#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/topo/model.h"

namespace railyard::topo {

// Level names for a Slurm tree of `height` levels (see the header comment).
std::vector<std::string> SlurmLevelNames(int height);

// Slurm's rule for BlockSizes: positive, increasing, each a power-of-two multiple of the
// first. The message has no location; callers add it.
Status ValidateBlockSizes(const std::vector<int>& sizes);

// topology.conf. Keys are case-insensitive, '#' starts a comment, values are hostlists.
// Tree and block entries may not be mixed; RingName= and line continuations are rejected.
Result<Cluster> ParseSlurmTopologyConf(std::string_view text, std::string_view source);

// Tree form, or block form when cluster.levels == {"block"} or block_sizes is set. In block
// form the blocks are the switches of the level named "block" if there is one, else the
// leaf switches. Names are compressed with CompressHostlist.
std::string WriteSlurmTopologyConf(const Cluster& cluster);

// topology.yaml. `topology` picks an entry by name; when empty, the first tree or block
// entry with cluster_default: true, else the first tree or block entry. The Cluster's name is
// the entry's name. Flat (and other) entries are accepted but cannot be imported.
Result<Cluster> ParseSlurmTopologyYaml(std::string_view text, std::string_view source,
                                       std::string_view topology = {});
Result<Cluster> SlurmTopologyFromYaml(const YAML::Node& root, std::string_view source,
                                      std::string_view topology = {});

// One entry named cluster.name ("default" when empty) with cluster_default: true, in tree or
// block form by the same rule as WriteSlurmTopologyConf.
std::string WriteSlurmTopologyYaml(const Cluster& cluster);

}  // namespace railyard::topo
