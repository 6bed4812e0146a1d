// Slurm topology files: what topology.conf (slurm_conf.cc) and topology.yaml (slurm_yaml.cc)
// share, declared in internal/slurm_tree.h, and the public helpers of slurm_format.h.
#include "railyard/topo/slurm_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <utility>

#include "railyard/base/strings.h"
#include "railyard/topo/hostlist.h"
#include "railyard/topo/internal/slurm_tree.h"

namespace railyard::topo {
namespace internal {

Result<Cluster> BuildTree(const std::vector<SwitchSpec>& specs, std::string_view source,
                          std::string name, const Words& words) {
  if (specs.empty()) return InvalidArgument("{}: the tree has no switches", source);
  std::map<std::string, int, std::less<>> index;
  for (size_t i = 0; i < specs.size(); ++i) {
    auto [it, fresh] = index.emplace(specs[i].name, static_cast<int>(i));
    if (!fresh) {
      return InvalidArgument("{}: switch '{}' is defined twice (first on line {})",
                             base::Where(source, specs[i].line), specs[i].name,
                             specs[it->second].line);
    }
  }
  std::vector<int> parent(specs.size(), -1);
  for (size_t i = 0; i < specs.size(); ++i) {
    const SwitchSpec& s = specs[i];
    if (!s.children.empty() && !s.nodes.empty()) {
      return InvalidArgument(
          "{}: switch '{}' lists both {} and {}; railyard needs nodes only on leaf switches",
          base::Where(source, s.line), s.name, words.children, words.nodes);
    }
    for (const std::string& child : s.children) {
      auto it = index.find(child);
      if (it == index.end()) {
        return InvalidArgument("{}: switch '{}' lists child switch '{}', which is not defined",
                               base::Where(source, s.line), s.name, child);
      }
      int c = it->second;
      if (c == static_cast<int>(i)) {
        return InvalidArgument("{}: switch '{}' lists itself as a child (a cycle)",
                               base::Where(source, s.line), s.name);
      }
      if (parent[c] == static_cast<int>(i)) {
        return InvalidArgument("{}: switch '{}' lists child switch '{}' twice",
                               base::Where(source, s.line), s.name, child);
      }
      if (parent[c] >= 0) {
        return InvalidArgument(
            "{}: switch '{}' is listed under two parents: '{}' (line {}) and '{}' (line {})",
            base::Where(source, s.line), child, specs[parent[c]].name, specs[parent[c]].line,
            s.name, s.line);
      }
      parent[c] = static_cast<int>(i);
    }
  }
  // Depth of every switch, walking up; a walk that meets itself is a cycle.
  constexpr int kUnknown = -1, kVisiting = -2;
  std::vector<int> depth(specs.size(), kUnknown);
  for (size_t i = 0; i < specs.size(); ++i) {
    std::vector<int> chain;
    int s = static_cast<int>(i);
    while (s >= 0 && depth[s] == kUnknown) {
      depth[s] = kVisiting;
      chain.push_back(s);
      s = parent[s];
    }
    if (s >= 0 && depth[s] == kVisiting) {
      std::vector<std::string> cycle;
      for (auto it = std::find(chain.begin(), chain.end(), s); it != chain.end(); ++it) {
        cycle.push_back(specs[*it].name);
      }
      cycle.push_back(specs[s].name);
      return InvalidArgument(
          "{}: switches form a cycle with no top switch (each is listed under the next): {}",
          base::Where(source, specs[s].line), fmt::join(cycle, " -> "));
    }
    int d = s < 0 ? -1 : depth[s];
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) depth[*it] = ++d;
  }
  // Leaves are switches without child switches; all must be equally deep.
  int leaf = -1;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!specs[i].children.empty()) continue;
    if (leaf < 0) {
      leaf = static_cast<int>(i);
    } else if (depth[i] != depth[leaf]) {
      int shallow = depth[i] < depth[leaf] ? static_cast<int>(i) : leaf;
      int deep = shallow == leaf ? static_cast<int>(i) : leaf;
      return InvalidArgument(
          "{}: the tree is unbalanced: leaf switch '{}' is {} level(s) below the top but leaf "
          "switch '{}' (line {}) is {}; railyard needs every leaf switch at the same depth "
          "(add a pass-through switch above '{}')",
          base::Where(source, specs[shallow].line), specs[shallow].name, depth[shallow],
          specs[deep].name, specs[deep].line, depth[deep], specs[shallow].name);
    }
  }
  std::vector<std::string> levels = SlurmLevelNames(depth[leaf] + 1);
  ClusterBuilder b{std::string(source)};
  b.SetName(std::move(name));
  b.SetLevels(levels);
  for (size_t i = 0; i < specs.size(); ++i) {
    b.AddSwitch(specs[i].name, levels[depth[i]], parent[i] < 0 ? "" : specs[parent[i]].name, 0,
                specs[i].line);
  }
  for (const SwitchSpec& s : specs) {
    for (const std::string& n : s.nodes) {
      Node node;
      node.name = n;
      b.AddNode(std::move(node), s.name, s.line);
    }
  }
  return std::move(b).Finish();
}

Result<Cluster> BuildBlocks(const std::vector<BlockSpec>& blocks, std::vector<int> sizes,
                            std::string_view source, std::string name) {
  if (blocks.empty()) return InvalidArgument("{}: the block topology has no blocks", source);
  ClusterBuilder b{std::string(source)};
  b.SetName(std::move(name));
  b.SetLevels({"block"});
  b.SetBlockSizes(std::move(sizes));
  for (const BlockSpec& block : blocks) b.AddSwitch(block.name, "block", "", 0, block.line);
  for (const BlockSpec& block : blocks) {
    for (const std::string& n : block.nodes) {
      Node node;
      node.name = n;
      b.AddNode(std::move(node), block.name, block.line);
    }
  }
  return std::move(b).Finish();
}

bool WritesBlocks(const Cluster& c) {
  return (c.levels.size() == 1 && c.levels[0] == "block") || !c.block_sizes.empty();
}

// The switches that become Slurm blocks.
int BlockLevel(const Cluster& c) {
  int level = c.FindLevel("block");
  return level >= 0 ? level : c.leaf_level();
}

std::vector<std::string> NodeNames(const Cluster& c, const std::vector<int>& nodes) {
  std::vector<std::string> names;
  names.reserve(nodes.size());
  for (int n : nodes) names.push_back(c.nodes[n].name);
  return names;
}

// A hostlist every slurmctld from 22.05 on reads. Before 23.02.5 (hostlist.c,
// _hostlist_create_bracketed at tag slurm-22-05-8-1) text may not follow the last ']' of an
// item: "su[0-1]-spine" fails with "fatal: Invalid switches". So only names that end in their
// number run are bracketed; the others are listed one by one ("su0-spine,su1-spine").
std::string SlurmHostlist(const std::vector<std::string>& names) {
  auto ends_in_digit = [](const std::string& n) {
    return !n.empty() && n.back() >= '0' && n.back() <= '9';
  };
  std::string out;
  std::vector<std::string> run;
  auto flush = [&] {
    if (run.empty()) return;
    out += (out.empty() ? "" : ",") + CompressHostlist(run);
    run.clear();
  };
  for (const std::string& n : names) {
    if (ends_in_digit(n)) {
      run.push_back(n);
      continue;
    }
    flush();
    out += (out.empty() ? "" : ",") + n;
  }
  flush();
  return out;
}

std::vector<std::string> ChildNames(const Cluster& c, const Switch& s) {
  std::vector<std::string> names;
  for (int ch : s.children) names.push_back(c.switches[ch].name);
  return names;
}

// Two comment lines saying where the file came from and what it leaves out.
std::string Header(const Cluster& c, std::string_view what) {
  return fmt::format(
      "# {} written by railyard{} (levels: {}).\n"
      "# Rates, addresses and node hardware are not part of this format.\n",
      what, c.name.empty() ? "" : fmt::format(" for cluster '{}'", c.name),
      fmt::join(c.levels, " > "));
}

}  // namespace internal

std::vector<std::string> SlurmLevelNames(int height) {
  switch (height) {
    case 1:
      return {"leaf"};
    case 2:
      return {"spine", "leaf"};
    case 3:
      return {"block", "spine", "leaf"};
    default:
      break;
  }
  std::vector<std::string> levels;
  for (int i = 0; i < height; ++i) levels.push_back(fmt::format("level{}", i));
  return levels;
}

Status ValidateBlockSizes(const std::vector<int>& sizes) {
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] <= 0) return InvalidArgument("block size {} is not positive", sizes[i]);
    if (i == 0) continue;
    if (sizes[i] <= sizes[i - 1]) {
      return InvalidArgument("block sizes must increase ({} follows {})", sizes[i], sizes[i - 1]);
    }
    int ratio = sizes[i] / sizes[0];
    if (sizes[i] % sizes[0] != 0 || (ratio & (ratio - 1)) != 0) {
      return InvalidArgument("block size {} is not a power-of-two multiple of the base size {}",
                             sizes[i], sizes[0]);
    }
  }
  return Status::Ok();
}

}  // namespace railyard::topo
