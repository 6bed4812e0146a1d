// What Slurm's two topology files share (slurm_format.h): the format-neutral tree and block
// content both readers produce with one builder for each, and the naming helpers both
// writers use. slurm_conf.cc reads and writes topology.conf, slurm_yaml.cc topology.yaml.
// Internal to topo.
//
// Thread-safety: pure functions.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/topo/model.h"

namespace railyard::topo::internal {

// Node and switch names over the whole file; keeps a hostlist typo repeated on many lines
// from exhausting memory.
inline constexpr size_t kMaxSlurmNames = 1'000'000;

// The format-neutral content of a tree or block topology, with the line of each entry.
struct SwitchSpec {
  std::string name;
  std::vector<std::string> children;
  std::vector<std::string> nodes;
  int line = 0;
};

struct BlockSpec {
  std::string name;
  std::vector<std::string> nodes;
  int line = 0;
};

// How each format names things in messages ("Switches=" vs "children").
struct Words {
  std::string_view children;
  std::string_view nodes;
};

// The Cluster of a tree topology: levels named by SlurmLevelNames from its height. Errors
// name `source`, the line and the switch or node (defined twice, two parents, a cycle, leaves
// at different depths).
Result<Cluster> BuildTree(const std::vector<SwitchSpec>& specs, std::string_view source,
                          std::string name, const Words& words);

// The Cluster of a block topology: levels {"block"}, one switch per block.
Result<Cluster> BuildBlocks(const std::vector<BlockSpec>& blocks, std::vector<int> sizes,
                            std::string_view source, std::string name);

// ---- writing ----

// True when `c` is written in block form (see WriteSlurmTopologyConf).
bool WritesBlocks(const Cluster& c);

// The level whose switches become Slurm blocks: "block" if there is one, else the leaves.
int BlockLevel(const Cluster& c);

std::vector<std::string> NodeNames(const Cluster& c, const std::vector<int>& nodes);
std::vector<std::string> ChildNames(const Cluster& c, const Switch& s);

// A hostlist every slurmctld from 22.05 on reads (see slurm_format.cc).
std::string SlurmHostlist(const std::vector<std::string>& names);

// Two comment lines saying where the file came from and what it leaves out.
std::string Header(const Cluster& c, std::string_view what);

}  // namespace railyard::topo::internal
