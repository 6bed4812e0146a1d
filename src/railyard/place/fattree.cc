#include "railyard/place/fattree.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <random>

namespace railyard::place {
namespace {

topo::Node MakeNode(int index, int gpus) {
  topo::Node n;
  n.name = fmt::format("n{:05d}", index);
  n.gpu_count = gpus;
  return n;
}

// The generators only produce valid trees; a failure here is a bug in this file.
topo::Cluster FinishOrDie(topo::ClusterBuilder&& builder) {
  Result<topo::Cluster> c = std::move(builder).Finish();
  if (!c.ok()) {
    std::fprintf(stderr, "railyard: internal error: generated cluster is invalid: %s\n",
                 c.status().ToString().c_str());
    std::abort();
  }
  return std::move(c).value();
}

// Uniform in [lo, hi] from the raw engine output: the engine's sequence is fixed by the
// standard, unlike std::uniform_int_distribution's, so instances match across toolchains.
int Uniform(std::mt19937_64& rng, int lo, int hi) {
  return lo + static_cast<int>(rng() % static_cast<uint64_t>(hi - lo + 1));
}

bool Chance(std::mt19937_64& rng, int percent) { return Uniform(rng, 0, 99) < percent; }

}  // namespace

topo::Cluster MakeFatTree(const FatTreeSpec& spec) {
  const int blocks = std::max(spec.blocks, 0);
  const int spines = std::max(spec.spines_per_block, 1);
  const int leaves = std::max(spec.leaves_per_spine, 1);
  const int per_leaf = std::max(spec.nodes_per_leaf, 1);
  const int max_nodes = spec.max_nodes > 0 ? spec.max_nodes : INT_MAX;
  topo::ClusterBuilder b("generated fat tree");
  b.SetName(spec.name);
  if (blocks > 0) {
    b.SetLevels({"block", "spine", "leaf"});
  } else {
    b.SetLevels({"spine", "leaf"});
  }
  int node = 0, spine_id = 0, leaf_id = 0;
  for (int bl = 0; bl < std::max(blocks, 1) && node < max_nodes; ++bl) {
    std::string block_name;
    if (blocks > 0) {
      block_name = fmt::format("block{}", bl);
      b.AddSwitch(block_name, "block", "", 0);
    }
    for (int sp = 0; sp < spines && node < max_nodes; ++sp) {
      std::string spine_name = fmt::format("spine{}", spine_id++);
      b.AddSwitch(spine_name, "spine", block_name, 0);
      for (int lf = 0; lf < leaves && node < max_nodes; ++lf) {
        std::string leaf_name = fmt::format("leaf{}", leaf_id++);
        b.AddSwitch(leaf_name, "leaf", spine_name, 0);
        for (int k = 0; k < per_leaf && node < max_nodes; ++k) {
          b.AddNode(MakeNode(node++, spec.gpus_per_node), leaf_name);
        }
      }
    }
  }
  return FinishOrDie(std::move(b));
}

FatTreeSpec FatTreeSpecForNodes(int nodes, int gpus_per_node) {
  FatTreeSpec spec;
  spec.nodes_per_leaf = 32;
  spec.leaves_per_spine = 16;
  spec.spines_per_block = 8;
  const int per_block = spec.nodes_per_leaf * spec.leaves_per_spine * spec.spines_per_block;
  spec.blocks = std::max(1, (nodes + per_block - 1) / per_block);
  spec.gpus_per_node = gpus_per_node;
  spec.max_nodes = nodes;
  return spec;
}

RandomInstance MakeRandomInstance(uint64_t seed, int max_nodes) {
  std::mt19937_64 rng(seed);
  max_nodes = std::max(max_nodes, 1);
  const bool three_levels = Chance(rng, 50);
  const bool mixed_gpus = Chance(rng, 25);
  const int busy_percent = Uniform(rng, 0, 40);
  topo::ClusterBuilder b(fmt::format("random instance {}", seed));
  b.SetName(fmt::format("random{}", seed));
  if (three_levels) {
    b.SetLevels({"block", "spine", "leaf"});
  } else {
    b.SetLevels({"spine", "leaf"});
  }
  int node = 0, spine_id = 0, leaf_id = 0;
  const int blocks = three_levels ? Uniform(rng, 1, 3) : 1;
  for (int bl = 0; bl < blocks && node < max_nodes; ++bl) {
    std::string block_name;
    if (three_levels) {
      block_name = fmt::format("block{}", bl);
      b.AddSwitch(block_name, "block", "", 0);
    }
    const int spines = Uniform(rng, 1, 3);
    for (int sp = 0; sp < spines && node < max_nodes; ++sp) {
      std::string spine_name = fmt::format("spine{}", spine_id++);
      b.AddSwitch(spine_name, "spine", block_name, 0);
      const int leaves = Uniform(rng, 1, 4);
      for (int lf = 0; lf < leaves && node < max_nodes; ++lf) {
        std::string leaf_name = fmt::format("leaf{}", leaf_id++);
        b.AddSwitch(leaf_name, "leaf", spine_name, 0);
        const int size = Uniform(rng, 1, 8);
        for (int k = 0; k < size && node < max_nodes; ++k) {
          int gpus = mixed_gpus && Chance(rng, 30) ? 4 : 8;
          b.AddNode(MakeNode(node++, gpus), leaf_name);
        }
      }
    }
  }
  RandomInstance out;
  out.cluster = FinishOrDie(std::move(b));
  const int n = static_cast<int>(out.cluster.nodes.size());
  out.busy.assign(n, false);
  int free = 0;
  for (int i = 0; i < n; ++i) {
    out.busy[i] = Chance(rng, busy_percent);
    free += out.busy[i] ? 0 : 1;
  }
  out.request.nodes = Uniform(rng, 1, std::max(free, 1));
  if (mixed_gpus && Chance(rng, 50)) out.request.gpus_per_node = 8;
  const int levels = static_cast<int>(out.cluster.levels.size());
  const int mode = Uniform(rng, 0, 9);
  if (mode < 2) {
    out.request.required_level = out.cluster.levels[Uniform(rng, 0, levels - 1)];
  } else if (mode < 4) {
    out.request.preferred_level = out.cluster.levels[Uniform(rng, 0, levels - 1)];
  }
  return out;
}

}  // namespace railyard::place
