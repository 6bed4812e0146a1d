#include "railyard/place/baseline.h"

#include <fmt/format.h>

#include <algorithm>
#include <functional>
#include <set>

namespace railyard::place {
namespace {

// Free eligible nodes per switch, counted from scratch: the yardsticks share no state or
// code with the engine's incremental counters, so they check it rather than echo it.
struct Counted {
  std::vector<bool> eligible;  // per node
  std::vector<int> per_switch;
  int total = 0;
};

Result<Counted> CountEligible(const topo::Cluster& c, const JobRequest& request,
                              const std::vector<bool>& unavailable) {
  if (!unavailable.empty() && unavailable.size() != c.nodes.size()) {
    return InvalidArgument("unavailable-node mask has {} entries for a cluster of {} nodes",
                           unavailable.size(), c.nodes.size());
  }
  Counted out;
  out.eligible.assign(c.nodes.size(), false);
  out.per_switch.assign(c.switches.size(), 0);
  for (size_t n = 0; n < c.nodes.size(); ++n) {
    const topo::Node& node = c.nodes[n];
    if ((!unavailable.empty() && unavailable[n]) || node.gpu_count < request.gpus_per_node ||
        node.leaf < 0 || node.leaf >= static_cast<int>(c.switches.size())) {
      continue;
    }
    out.eligible[n] = true;
    ++out.total;
    for (int s = node.leaf; s >= 0; s = c.switches[s].parent) ++out.per_switch[s];
  }
  return out;
}

// Leaf switches under `s` (all leaves when s < 0) in tree order.
std::vector<int> LeavesUnder(const topo::Cluster& c, int s) {
  std::vector<int> out;
  std::function<void(int)> walk = [&](int sw) {
    if (c.switches[sw].level == c.leaf_level()) out.push_back(sw);
    for (int ch : c.switches[sw].children) walk(ch);
  };
  if (s >= 0) {
    walk(s);
  } else {
    for (size_t t = 0; t < c.switches.size(); ++t) {
      if (c.switches[t].parent < 0) walk(static_cast<int>(t));
    }
  }
  return out;
}

// Is there a choice of at most `slots` of counts[i..] (sorted descending) that, added to
// `sum`, reaches `need`? Plain branch and bound over subsets; the bound (the next `slots`
// entries are the largest left) only skips branches that cannot succeed.
bool Reachable(const std::vector<int>& counts, size_t i, int slots, int sum, int need) {
  if (sum >= need) return true;
  if (slots == 0 || i == counts.size()) return false;
  int bound = sum;
  for (size_t j = i; j < counts.size() && j < i + slots; ++j) bound += counts[j];
  if (bound < need) return false;
  return Reachable(counts, i + 1, slots - 1, sum + counts[i], need) ||
         Reachable(counts, i + 1, slots, sum, need);
}

int ExhaustiveMinLeaves(const topo::Cluster& c, const Counted& k, int domain, int need) {
  std::vector<int> counts;
  for (int leaf : LeavesUnder(c, domain)) {
    if (k.per_switch[leaf] > 0) counts.push_back(k.per_switch[leaf]);
  }
  std::sort(counts.begin(), counts.end(), std::greater<>());
  for (int slots = 1; slots <= static_cast<int>(counts.size()); ++slots) {
    if (Reachable(counts, 0, slots, 0, need)) return slots;
  }
  return -1;
}

// Domains at the first level (from plan.start upward to plan.stop) that hold `need`; empty
// when there is none.
std::vector<int> FittingDomains(const topo::Cluster& c, const LevelPlan& plan, const Counted& k,
                                int need) {
  for (int level = plan.start; level >= plan.stop; --level) {
    std::vector<int> fit;
    for (size_t s = 0; s < c.switches.size(); ++s) {
      if (c.switches[s].level == level && k.per_switch[s] >= need) fit.push_back(s);
    }
    if (!fit.empty()) return fit;
  }
  return {};
}

}  // namespace

Result<Placement> PlaceGreedy(const topo::Cluster& c, const JobRequest& request,
                              const std::vector<bool>& unavailable) {
  RY_ASSIGN_OR_RETURN(LevelPlan plan, ResolveRequest(c, request));
  RY_ASSIGN_OR_RETURN(Counted k, CountEligible(c, request, unavailable));
  const int need = request.nodes;
  int domain = -1;
  for (int s : FittingDomains(c, plan, k, need)) {
    if (domain < 0 || k.per_switch[s] < k.per_switch[domain]) domain = s;
  }
  if (domain < 0 && (!plan.span || k.total < need)) {
    return ResourceExhausted(
        "greedy: cannot place {} nodes{}; {} free eligible in the cluster", need,
        plan.span ? "" : fmt::format(" under one '{}'", c.levels[plan.stop]), k.total);
  }
  Placement out;
  std::vector<std::set<int>> used(c.levels.size());
  int remaining = need;
  for (int leaf : LeavesUnder(c, domain)) {
    if (remaining == 0) break;
    if (k.per_switch[leaf] == 0) continue;
    out.leaves.push_back(c.switches[leaf].name);
    for (int s = leaf; s >= 0; s = c.switches[s].parent) used[c.switches[s].level].insert(s);
    for (int n : c.switches[leaf].nodes) {
      if (remaining == 0) break;
      if (!k.eligible[n]) continue;
      out.hosts.push_back(c.nodes[n].name);
      out.node_indices.push_back(n);
      --remaining;
    }
  }
  for (size_t lv = 0; lv < used.size(); ++lv) {
    if (!used[lv].empty()) out.levels[c.levels[lv]] = static_cast<int>(used[lv].size());
  }
  out.explanation =
      fmt::format("greedy: placed {} nodes {} on {} leaves", need,
                  domain >= 0 ? fmt::format("in {} (level {})", c.switches[domain].name,
                                            c.levels[c.switches[domain].level])
                              : std::string("across the cluster"),
                  out.leaves.size());
  return out;
}

Result<int> OptimalLeafCount(const topo::Cluster& c, const JobRequest& request,
                             const std::vector<bool>& unavailable) {
  if (static_cast<int>(c.nodes.size()) > kMaxOptimalNodes) {
    return InvalidArgument("exhaustive optimum is for clusters of at most {} nodes (this has {})",
                           kMaxOptimalNodes, c.nodes.size());
  }
  RY_ASSIGN_OR_RETURN(LevelPlan plan, ResolveRequest(c, request));
  RY_ASSIGN_OR_RETURN(Counted k, CountEligible(c, request, unavailable));
  const int need = request.nodes;
  std::vector<int> domains = FittingDomains(c, plan, k, need);
  if (domains.empty() && plan.span && k.total >= need) domains.push_back(-1);
  int best = -1;
  for (int d : domains) {
    int leaves = ExhaustiveMinLeaves(c, k, d, need);
    if (leaves > 0 && (best < 0 || leaves < best)) best = leaves;
  }
  if (best < 0) return ResourceExhausted("no placement of {} nodes exists", need);
  return best;
}

}  // namespace railyard::place
