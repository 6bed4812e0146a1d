// Generated clusters for placement tests and the placement benchmark.
//
// MakeFatTree builds a regular tree (block > spine > leaf, or spine > leaf) of uniform
// nodes named "n00000", "n00001", ...; 16,384 nodes take a few tens of milliseconds.
// MakeRandomInstance builds a small irregular cluster (uneven leaves, some busy nodes, mixed
// GPU counts) plus a request, reproducibly from a seed, for comparing the engine against
// the greedy baseline and the exhaustive optimum.
//
//   topo::Cluster c = MakeFatTree({.blocks = 4, .spines_per_block = 8,
//                                  .leaves_per_spine = 16, .nodes_per_leaf = 32});
//   RandomInstance r = MakeRandomInstance(/*seed=*/7);
//
// Both go through topo::ClusterBuilder, so their output is a valid model. Thread-safety:
// pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "railyard/place/placement.h"
#include "railyard/topo/model.h"

namespace railyard::place {

struct FatTreeSpec {
  int blocks = 0;            // 0: two levels, spine > leaf; >= 1: block > spine > leaf
  int spines_per_block = 4;  // with blocks == 0, the number of spines
  int leaves_per_spine = 8;
  int nodes_per_leaf = 32;
  int gpus_per_node = 8;
  int max_nodes = 0;  // > 0: stop after this many nodes (the last leaf may be short)
  std::string name = "fattree";
};

// Switches are named "block<i>", "spine<i>", "leaf<i>" (numbered across the whole tree),
// nodes "n%05d" in tree order. Counts below 1 are treated as 1 (blocks below 0 as 0).
topo::Cluster MakeFatTree(const FatTreeSpec& spec);

// The benchmark's shape for `nodes` nodes: 32 nodes per leaf, 16 leaves per spine, 8
// spines per block (4,096 nodes), as many blocks as needed, cut at `nodes`.
FatTreeSpec FatTreeSpecForNodes(int nodes, int gpus_per_node = 8);

struct RandomInstance {
  topo::Cluster cluster;
  std::vector<bool> busy;  // one entry per node
  JobRequest request;      // 1..(free nodes) nodes; sometimes a required or preferred level
};

// A random cluster of 1..max_nodes nodes: two or three levels, 1-3 blocks, 1-3 spines per
// block, 1-4 leaves per spine of 1-8 nodes each, a quarter of instances with mixed 4- and
// 8-GPU nodes, 0-40% of nodes busy. The same seed gives the same instance.
RandomInstance MakeRandomInstance(uint64_t seed, int max_nodes = 64);

}  // namespace railyard::place
