#include "railyard/topo/model.h"

#include <fmt/format.h>

#include <map>
#include <set>

#include "railyard/base/strings.h"

namespace railyard::topo {

std::string_view PathClassName(PathClass p) {
  switch (p) {
    case PathClass::kPIX:
      return "PIX";
    case PathClass::kPXB:
      return "PXB";
    case PathClass::kPHB:
      return "PHB";
    case PathClass::kNODE:
      return "NODE";
    case PathClass::kSYS:
      return "SYS";
  }
  return "SYS";
}

Result<PathClass> ParsePathClass(std::string_view s) {
  for (PathClass p :
       {PathClass::kPIX, PathClass::kPXB, PathClass::kPHB, PathClass::kNODE, PathClass::kSYS}) {
    if (s == PathClassName(p)) return p;
  }
  return InvalidArgument("unknown GPU-NIC path class '{}' (expected PIX, PXB, PHB, NODE or SYS)",
                         s);
}

int Cluster::FindNode(std::string_view n) const {
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].name == n) return static_cast<int>(i);
  }
  return -1;
}

int Cluster::FindSwitch(std::string_view n) const {
  for (size_t i = 0; i < switches.size(); ++i) {
    if (switches[i].name == n) return static_cast<int>(i);
  }
  return -1;
}

int Cluster::FindLevel(std::string_view n) const {
  for (size_t i = 0; i < levels.size(); ++i) {
    if (levels[i] == n) return static_cast<int>(i);
  }
  return -1;
}

int Cluster::DomainOf(int node, int level) const {
  if (node < 0 || node >= static_cast<int>(nodes.size())) return -1;
  int s = nodes[node].leaf;
  while (s >= 0 && switches[s].level > level) s = switches[s].parent;
  return s >= 0 && switches[s].level == level ? s : -1;
}

std::vector<int> Cluster::NodesUnder(int s) const {
  std::vector<int> out;
  std::vector<int> stack = {s};
  // Depth-first in input order: push children reversed so the first child is visited first.
  while (!stack.empty()) {
    int cur = stack.back();
    stack.pop_back();
    const Switch& sw = switches[cur];
    out.insert(out.end(), sw.nodes.begin(), sw.nodes.end());
    for (auto it = sw.children.rbegin(); it != sw.children.rend(); ++it) stack.push_back(*it);
  }
  return out;
}

int Cluster::TotalGpus() const {
  int total = 0;
  for (const auto& n : nodes) total += n.gpu_count;
  return total;
}

void ClusterBuilder::AddSwitch(std::string name, std::string level, std::string parent,
                               uint64_t uplink_rate_bits, int line) {
  switches_.push_back(
      {std::move(name), std::move(level), std::move(parent), uplink_rate_bits, line});
}

void ClusterBuilder::AddNode(Node node, std::string leaf, int line) {
  nodes_.push_back({std::move(node), std::move(leaf), line});
}

Result<Cluster> ClusterBuilder::Finish() && {
  auto where = [&](int line) { return base::Where(source_, line); };
  Cluster& c = cluster_;
  if (c.levels.empty()) return InvalidArgument("{}: the topology names no switch levels", source_);
  std::set<std::string> level_names;
  for (const auto& l : c.levels) {
    if (l.empty()) return InvalidArgument("{}: a switch level has an empty name", source_);
    if (!level_names.insert(l).second) {
      return InvalidArgument("{}: switch level '{}' is listed twice", source_, l);
    }
  }
  std::map<std::string, int> switch_index;
  for (const auto& p : switches_) {
    if (p.name.empty()) return InvalidArgument("{}: a switch has no name", where(p.line));
    int level = c.FindLevel(p.level);
    if (level < 0) {
      return InvalidArgument("{}: switch '{}' has level '{}', which is not one of the levels ({})",
                             where(p.line), p.name, p.level, fmt::join(c.levels, ", "));
    }
    if (!switch_index.emplace(p.name, static_cast<int>(c.switches.size())).second) {
      return InvalidArgument("{}: switch '{}' is defined twice", where(p.line), p.name);
    }
    Switch s;
    s.name = p.name;
    s.level = level;
    s.uplink_rate_bits = p.rate;
    c.switches.push_back(std::move(s));
  }
  for (size_t i = 0; i < switches_.size(); ++i) {
    const auto& p = switches_[i];
    Switch& s = c.switches[i];
    if (p.parent.empty()) {
      if (s.level != 0) {
        return InvalidArgument(
            "{}: switch '{}' (level '{}') has no parent; only top-level ('{}') switches may "
            "stand alone",
            where(p.line), p.name, p.level, c.levels[0]);
      }
      continue;
    }
    auto it = switch_index.find(p.parent);
    if (it == switch_index.end()) {
      return InvalidArgument("{}: switch '{}' names parent '{}', which is not defined",
                             where(p.line), p.name, p.parent);
    }
    if (it->second == static_cast<int>(i)) {
      return InvalidArgument("{}: switch '{}' is its own parent (a cycle)", where(p.line), p.name);
    }
    const Switch& parent = c.switches[it->second];
    if (parent.level != s.level - 1) {
      return InvalidArgument(
          "{}: switch '{}' (level '{}') has parent '{}' at level '{}'; a parent must be exactly "
          "one level up (a cycle or a skipped level)",
          where(p.line), p.name, c.levels[s.level], parent.name, c.levels[parent.level]);
    }
    s.parent = it->second;
    c.switches[it->second].children.push_back(static_cast<int>(i));
  }
  // Levels strictly decrease towards the root, so the parent links cannot form a cycle.
  std::map<std::string, int> node_index;
  for (auto& p : nodes_) {
    if (p.node.name.empty()) return InvalidArgument("{}: a node has no name", where(p.line));
    auto leaf = switch_index.find(p.leaf);
    if (leaf == switch_index.end()) {
      return InvalidArgument("{}: node '{}' hangs off switch '{}', which is not defined",
                             where(p.line), p.node.name, p.leaf);
    }
    if (c.switches[leaf->second].level != c.leaf_level()) {
      return InvalidArgument(
          "{}: node '{}' hangs off switch '{}' at level '{}'; nodes hang off leaf-level ('{}') "
          "switches",
          where(p.line), p.node.name, p.leaf, c.levels[c.switches[leaf->second].level],
          c.levels.back());
    }
    auto [it, fresh] = node_index.emplace(p.node.name, static_cast<int>(c.nodes.size()));
    if (!fresh) {
      const Node& first = c.nodes[it->second];
      if (first.leaf != leaf->second) {
        return InvalidArgument("{}: node '{}' is under two leaves ('{}' and '{}')", where(p.line),
                               p.node.name, c.switches[first.leaf].name, p.leaf);
      }
      return InvalidArgument("{}: node '{}' is listed twice under '{}'", where(p.line), p.node.name,
                             p.leaf);
    }
    if (!p.node.gpus.empty() && p.node.gpu_count == 0) {
      p.node.gpu_count = static_cast<int>(p.node.gpus.size());
    }
    if (!p.node.gpus.empty() && p.node.gpu_count != static_cast<int>(p.node.gpus.size())) {
      return InvalidArgument("{}: node '{}' says {} GPUs but lists {}", where(p.line), p.node.name,
                             p.node.gpu_count, p.node.gpus.size());
    }
    p.node.leaf = leaf->second;
    c.switches[leaf->second].nodes.push_back(static_cast<int>(c.nodes.size()));
    c.nodes.push_back(std::move(p.node));
  }
  return std::move(cluster_);
}

}  // namespace railyard::topo
