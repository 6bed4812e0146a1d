// Human-readable views of a Cluster: the tree `railyard topo show` prints, and an OpenMPI
// hostfile.
//
//   train-a
//   ├─ spine0 (spine, 8 nodes, 64 GPUs)
//   │  ├─ leaf0 (leaf, 4 nodes, 32 GPUs): gpu[01-04]
//   │  └─ leaf1 (leaf, 4 nodes, 32 GPUs): gpu[05-08]
//   └─ spine1 (spine, 0 nodes)
//   8 nodes, 64 GPUs; levels spine (2) > leaf (2)
//
// Each switch shows its level and the nodes and GPUs below it (GPU counts are left out of
// the tree when the cluster has none); leaves list their nodes as a Slurm-style hostlist.
// Past kRenderMaxLeaves leaves, only the first and last kRenderShownLeaves / 2 are drawn and
// each run of hidden siblings becomes one "… 120 more leaves …" line, so that a 2,000-leaf
// cluster still fits a screen while the totals on the drawn switches stay exact.
//
//   fmt::print("{}", RenderTree(cluster));
//   WriteFileAtomic("hosts", Hostfile(cluster, placement.node_order, 8));
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <vector>

#include "railyard/topo/model.h"

namespace railyard::topo {

inline constexpr int kRenderMaxLeaves = 64;
inline constexpr int kRenderShownLeaves = 32;

// The tree above, ending in the summary line and a newline. The first line is the cluster's
// name ("(unnamed cluster)" when it has none); top-level switches hang off it.
std::string RenderTree(const Cluster& cluster);

// An OpenMPI hostfile: one "name slots=N" line per node. `rank_order` lists node indices in
// rank order (a node listed again, or an index out of range, is skipped); empty means tree
// order (the nodes under each top-level switch in turn). slots_per_node <= 0 means each
// node's gpu_count, or 1 for a node without GPUs.
std::string Hostfile(const Cluster& cluster, const std::vector<int>& rank_order,
                     int slots_per_node);

}  // namespace railyard::topo
