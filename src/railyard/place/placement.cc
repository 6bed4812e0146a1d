#include "railyard/place/placement.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <set>

namespace railyard::place {
namespace {

// Counters are kept for at most this many distinct GPU counts (a real cluster has one to
// three); a request that needs a rarer threshold counts by scanning the nodes instead.
constexpr int kMaxTrackedClasses = 8;

constexpr uint8_t kExcluded = 1;
constexpr uint8_t kBusy = 2;

std::string Plural(int n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

}  // namespace

nlohmann::json ToJson(const Placement& placement) {
  nlohmann::json levels = nlohmann::json::object();
  for (const auto& [name, count] : placement.levels) levels[name] = count;
  return nlohmann::json{{"hosts", placement.hosts},
                        {"leaves", placement.leaves},
                        {"levels", std::move(levels)},
                        {"explanation", placement.explanation}};
}

namespace {

int MostGpus(const topo::Cluster& cluster) {
  int most = 0;
  for (const auto& n : cluster.nodes) most = std::max(most, n.gpu_count);
  return most;
}

// ResolveRequest with the largest GPU count already known, so the Placer does not scan
// every node on every placement.
Result<LevelPlan> Resolve(const topo::Cluster& cluster, const JobRequest& request, int most_gpus) {
  const int total = static_cast<int>(cluster.nodes.size());
  if (cluster.levels.empty()) {
    return InvalidArgument("cluster '{}' names no switch levels; cannot place", cluster.name);
  }
  if (request.nodes <= 0) {
    return InvalidArgument("a job needs at least 1 node (asked for {})", request.nodes);
  }
  if (request.nodes > total) {
    return InvalidArgument("job of {} nodes is larger than the cluster ({} nodes)", request.nodes,
                           total);
  }
  if (request.gpus_per_node < 0) {
    return InvalidArgument("gpus per node must be >= 0 (got {})", request.gpus_per_node);
  }
  if (request.gpus_per_node > most_gpus) {
    return InvalidArgument("no node has {} GPUs (the most any node has is {})",
                           request.gpus_per_node, most_gpus);
  }
  LevelPlan plan;
  auto resolve = [&](const std::string& name, std::string_view what, int* out) -> Status {
    if (name.empty()) return Status::Ok();
    *out = cluster.FindLevel(name);
    if (*out < 0) {
      return InvalidArgument("unknown {} level '{}' (levels, top first: {})", what, name,
                             fmt::join(cluster.levels, ", "));
    }
    return Status::Ok();
  };
  RY_RETURN_IF_ERROR(resolve(request.required_level, "required", &plan.required));
  RY_RETURN_IF_ERROR(resolve(request.preferred_level, "preferred", &plan.preferred));
  if (plan.required >= 0 && plan.preferred >= 0 && plan.preferred < plan.required) {
    return InvalidArgument(
        "preferred level '{}' is above the required level '{}'; a preference can only narrow "
        "the required domain",
        request.preferred_level, request.required_level);
  }
  plan.start = plan.preferred >= 0 ? plan.preferred : cluster.leaf_level();
  plan.stop = plan.required >= 0 ? plan.required : 0;
  plan.span = plan.required < 0;
  return plan;
}

}  // namespace

Result<LevelPlan> ResolveRequest(const topo::Cluster& cluster, const JobRequest& request) {
  return Resolve(cluster, request, MostGpus(cluster));
}

// The engine proper: the tree in DFS order plus counters of free eligible nodes.
struct Placer::Engine {
  explicit Engine(const topo::Cluster& cl);

  // Per-switch counts of free nodes with at least `gpus` GPUs; `total` gets the
  // cluster-wide count. Points into the counters or into `scratch`.
  const int* Counts(int gpus, int* total);
  bool IsFree(int n) const { return flags[n] == 0 && owner[n] == 0; }
  // Applies a state change of node n, keeping the counters right.
  void SetState(int n, uint8_t new_flags, int new_owner);
  // Fewest leaves of [begin, end) (DFS positions) that hold `need` nodes; INT_MAX if none.
  int MinLeaves(const int* cnt, int begin, int end, int need);
  // Leaves chosen inside [begin, end): (DFS position, nodes to take), in DFS order.
  std::vector<std::pair<int, int>> ChooseLeaves(const int* cnt, int begin, int end, int need);

  const topo::Cluster& c;
  int num_switches = 0;
  std::vector<int> classes;         // distinct gpu_count values, ascending
  std::vector<int> node_top_class;  // highest tracked class a node counts in; -1 none
  std::vector<int> counts;          // [class * num_switches + switch]
  std::vector<int> totals;          // per tracked class
  std::vector<uint8_t> flags;       // per node: kExcluded | kBusy
  std::vector<int> owner;           // per node: job id or 0
  int excluded = 0, busy = 0, allocated = 0;
  std::vector<int> dfs_leaves;              // leaf switches in tree order
  std::vector<int> range_begin, range_end;  // per switch: its leaves in dfs_leaves
  std::vector<std::vector<int>> by_level;   // switches of each level, in index order
  std::vector<int> scratch;
  std::vector<std::pair<int, int>> sort_buf;  // (count, DFS position)
  std::vector<int> int_buf;
};

Placer::Engine::Engine(const topo::Cluster& cl) : c(cl) {
  num_switches = static_cast<int>(c.switches.size());
  const int n_nodes = static_cast<int>(c.nodes.size());
  const int levels = static_cast<int>(c.levels.size());
  by_level.resize(std::max(levels, 1));
  range_begin.assign(num_switches, 0);
  range_end.assign(num_switches, 0);
  for (int s = 0; s < num_switches; ++s) {
    int lv = c.switches[s].level;
    if (lv >= 0 && lv < levels) by_level[lv].push_back(s);
  }
  // DFS from every top switch in index order, children in input order, so leaves under the
  // same parent are adjacent and each switch's leaves form one contiguous range.
  std::vector<std::pair<int, bool>> stack;
  for (int top = 0; top < num_switches; ++top) {
    if (c.switches[top].parent >= 0) continue;
    stack.push_back({top, false});
    while (!stack.empty()) {
      auto [s, done] = stack.back();
      stack.pop_back();
      if (done) {
        range_end[s] = static_cast<int>(dfs_leaves.size());
        continue;
      }
      range_begin[s] = static_cast<int>(dfs_leaves.size());
      if (c.switches[s].level == c.leaf_level()) dfs_leaves.push_back(s);
      stack.push_back({s, true});
      const auto& ch = c.switches[s].children;
      for (auto it = ch.rbegin(); it != ch.rend(); ++it) stack.push_back({*it, false});
    }
  }
  for (const auto& n : c.nodes) classes.push_back(n.gpu_count);
  std::sort(classes.begin(), classes.end());
  classes.erase(std::unique(classes.begin(), classes.end()), classes.end());
  const int tracked = std::min<int>(classes.size(), kMaxTrackedClasses);
  counts.assign(static_cast<size_t>(tracked) * num_switches, 0);
  totals.assign(tracked, 0);
  flags.assign(n_nodes, 0);
  owner.assign(n_nodes, 0);
  node_top_class.assign(n_nodes, -1);
  for (int n = 0; n < n_nodes; ++n) {
    const auto& node = c.nodes[n];
    if (node.leaf < 0 || node.leaf >= num_switches) continue;  // unattached: never placed
    int k = static_cast<int>(std::lower_bound(classes.begin(), classes.end(), node.gpu_count) -
                             classes.begin());
    node_top_class[n] = std::min(k, tracked - 1);
    for (int cls = 0; cls <= node_top_class[n]; ++cls) {
      ++totals[cls];
      for (int s = node.leaf; s >= 0; s = c.switches[s].parent) ++counts[cls * num_switches + s];
    }
  }
}

const int* Placer::Engine::Counts(int gpus, int* total) {
  int cls =
      static_cast<int>(std::lower_bound(classes.begin(), classes.end(), gpus) - classes.begin());
  if (cls < static_cast<int>(totals.size())) {
    *total = totals[cls];
    return counts.data() + static_cast<size_t>(cls) * num_switches;
  }
  scratch.assign(num_switches, 0);
  *total = 0;
  for (size_t n = 0; n < c.nodes.size(); ++n) {
    if (node_top_class[n] < 0 || !IsFree(n) || c.nodes[n].gpu_count < gpus) continue;
    ++*total;
    for (int s = c.nodes[n].leaf; s >= 0; s = c.switches[s].parent) ++scratch[s];
  }
  return scratch.data();
}

void Placer::Engine::SetState(int n, uint8_t new_flags, int new_owner) {
  const bool was_free = IsFree(n);
  excluded += ((new_flags & kExcluded) != 0) - ((flags[n] & kExcluded) != 0);
  busy += ((new_flags & kBusy) != 0) - ((flags[n] & kBusy) != 0);
  allocated += (new_owner != 0) - (owner[n] != 0);
  flags[n] = new_flags;
  owner[n] = new_owner;
  const bool now_free = IsFree(n);
  if (was_free == now_free) return;
  const int delta = now_free ? 1 : -1;
  for (int cls = 0; cls <= node_top_class[n]; ++cls) {
    totals[cls] += delta;
    for (int s = c.nodes[n].leaf; s >= 0; s = c.switches[s].parent) {
      counts[cls * num_switches + s] += delta;
    }
  }
}

int Placer::Engine::MinLeaves(const int* cnt, int begin, int end, int need) {
  int_buf.clear();
  for (int p = begin; p < end; ++p) {
    if (cnt[dfs_leaves[p]] > 0) int_buf.push_back(cnt[dfs_leaves[p]]);
  }
  std::sort(int_buf.begin(), int_buf.end(), std::greater<>());
  int sum = 0;
  for (size_t i = 0; i < int_buf.size(); ++i) {
    sum += int_buf[i];
    if (sum >= need) return static_cast<int>(i) + 1;
  }
  return INT_MAX;
}

// Fewest leaves: the k largest free counts are the most any k leaves can hold, so taking
// the fullest leaves until the job is covered gives the minimum k. The last of the k is
// then swapped for the smallest leaf that still covers the remainder (best fit), which
// keeps k and leaves the bigger leaves whole for later jobs.
std::vector<std::pair<int, int>> Placer::Engine::ChooseLeaves(const int* cnt, int begin, int end,
                                                              int need) {
  sort_buf.clear();
  for (int p = begin; p < end; ++p) {
    if (cnt[dfs_leaves[p]] > 0) sort_buf.push_back({cnt[dfs_leaves[p]], p});
  }
  std::sort(sort_buf.begin(), sort_buf.end(), [](const auto& a, const auto& b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  std::vector<std::pair<int, int>> chosen;
  int remaining = need;
  size_t i = 0;
  for (; i < sort_buf.size() && remaining > sort_buf[i].first; ++i) {
    chosen.push_back({sort_buf[i].second, sort_buf[i].first});
    remaining -= sort_buf[i].first;
  }
  if (remaining > 0 && i < sort_buf.size()) {
    // sort_buf[i] covers the remainder; find the last entry that still does, then the first
    // entry of its (equal-count) run so ties go to the leaf earliest in tree order.
    size_t j = i;
    while (j + 1 < sort_buf.size() && sort_buf[j + 1].first >= remaining) ++j;
    while (j > i && sort_buf[j - 1].first == sort_buf[j].first) --j;
    chosen.push_back({sort_buf[j].second, remaining});
    remaining = 0;
  }
  if (remaining > 0) return {};
  std::sort(chosen.begin(), chosen.end());
  return chosen;
}

Placer::Placer(const topo::Cluster& cluster)
    : cluster_(cluster), engine_(std::make_unique<Engine>(cluster)) {}

Placer::~Placer() = default;

int Placer::free_nodes() const { return engine_->totals.empty() ? 0 : engine_->totals[0]; }

int Placer::AllocatedTo(int n) const {
  return n >= 0 && n < static_cast<int>(engine_->owner.size()) ? engine_->owner[n] : 0;
}

Result<Placement> Placer::Place(const JobRequest& request) {
  Engine& e = *engine_;
  RY_ASSIGN_OR_RETURN(LevelPlan plan,
                      Resolve(cluster_, request, e.classes.empty() ? 0 : e.classes.back()));
  const int need = request.nodes;
  int total_free = 0;
  const int* cnt = e.Counts(request.gpus_per_node, &total_free);

  // The best domain of a level: fewest leaves, then tightest (fewest free), then switch
  // order. describe_best() names the roomiest domain of a level for explanations.
  int domain = -1, domain_level = -1;
  std::string relaxed;  // why the preferred level was given up, for the explanation
  auto describe_best = [&](int level) {
    int best = -1;
    for (int s : e.by_level[level]) {
      if (best < 0 || cnt[s] > cnt[best]) best = s;
    }
    return best;
  };
  for (int level = plan.start; level >= plan.stop && domain < 0; --level) {
    int best_leaves = INT_MAX;
    for (int s : e.by_level[level]) {
      if (cnt[s] < need) continue;
      int k = e.MinLeaves(cnt, e.range_begin[s], e.range_end[s], need);
      if (k < best_leaves || (k == best_leaves && cnt[s] < cnt[domain])) {
        best_leaves = k;
        domain = s;
      }
    }
    if (domain >= 0) {
      domain_level = level;
    } else if (level == plan.start && plan.preferred >= 0) {
      int best = describe_best(level);
      relaxed =
          fmt::format("; preferred level '{}' relaxed: the best {} ({}) has {} free eligible",
                      cluster_.levels[level], cluster_.levels[level],
                      best >= 0 ? cluster_.switches[best].name : "none", best >= 0 ? cnt[best] : 0);
    }
  }

  auto cluster_counts = [&]() {
    std::string s = fmt::format("cluster-wide {} free eligible, {} excluded, {} busy", total_free,
                                e.excluded, e.busy);
    if (e.allocated > 0) s += fmt::format(", {} allocated to other jobs", e.allocated);
    int short_gpus = free_nodes() - total_free;
    if (short_gpus > 0) {
      s += fmt::format(", {} free with fewer than {} GPUs", short_gpus, request.gpus_per_node);
    }
    return s;
  };
  int begin = 0, end = static_cast<int>(e.dfs_leaves.size());
  if (domain >= 0) {
    begin = e.range_begin[domain];
    end = e.range_end[domain];
  } else if (!plan.span) {
    int best = describe_best(plan.stop);
    const std::string& lv = cluster_.levels[plan.stop];
    return ResourceExhausted(
        "cannot place {} under one '{}': the best {} ({}) has {} free eligible nodes; {}",
        Plural(need, "node", "nodes"), lv, lv, best >= 0 ? cluster_.switches[best].name : "none",
        best >= 0 ? cnt[best] : 0, cluster_counts());
  } else if (total_free < need) {
    return ResourceExhausted(
        "cannot place {} anywhere in the cluster: {} needed, only {} free eligible; {}",
        Plural(need, "node", "nodes"), need, total_free, cluster_counts());
  }
  std::vector<std::pair<int, int>> leaves = e.ChooseLeaves(cnt, begin, end, need);
  if (leaves.empty()) {
    return Internal("placement counters disagree: no leaf set of the chosen domain holds {} nodes",
                    need);
  }

  Placement out;
  std::vector<std::set<int>> used(cluster_.levels.size());
  for (auto [pos, take] : leaves) {
    const int leaf = e.dfs_leaves[pos];
    out.leaves.push_back(cluster_.switches[leaf].name);
    for (int s = leaf; s >= 0; s = cluster_.switches[s].parent) {
      used[cluster_.switches[s].level].insert(s);
    }
    for (int n : cluster_.switches[leaf].nodes) {
      if (take == 0) break;
      if (!e.IsFree(n) || cluster_.nodes[n].gpu_count < request.gpus_per_node) continue;
      out.node_indices.push_back(n);
      out.hosts.push_back(cluster_.nodes[n].name);
      --take;
    }
  }
  if (static_cast<int>(out.node_indices.size()) != need) {
    return Internal("placement counters disagree with node states ({} of {} nodes found)",
                    out.node_indices.size(), need);
  }
  for (size_t lv = 0; lv < used.size(); ++lv) {
    if (!used[lv].empty()) out.levels[cluster_.levels[lv]] = static_cast<int>(used[lv].size());
  }
  const std::string leaves_text = Plural(static_cast<int>(leaves.size()), "leaf", "leaves");
  if (domain >= 0) {
    out.explanation = fmt::format("placed {} in {} (level {}) on {}{}",
                                  Plural(need, "node", "nodes"), cluster_.switches[domain].name,
                                  cluster_.levels[domain_level], leaves_text, relaxed);
  } else {
    const std::string& top = cluster_.levels[0];
    int best = describe_best(0);
    out.explanation = fmt::format(
        "placed {} across the cluster on {} in {} '{}' domains; no single {} holds them "
        "(the best, {}, has {} free eligible){}",
        Plural(need, "node", "nodes"), leaves_text, out.levels[top], top, top,
        best >= 0 ? cluster_.switches[best].name : "none", best >= 0 ? cnt[best] : 0, relaxed);
  }
  // Allocate last: the explanation above reads the counters as they were before this job.
  out.job_id = next_job_id_++;
  for (int n : out.node_indices) e.SetState(n, e.flags[n], out.job_id);
  jobs_[out.job_id] = out.node_indices;
  return out;
}

Status Placer::Release(const Placement& placement) {
  if (placement.job_id == 0) {
    return NotFound("placement of {} nodes was not made by this placer (job id 0)",
                    placement.hosts.size());
  }
  auto it = jobs_.find(placement.job_id);
  if (it != jobs_.end() && it->second != placement.node_indices) {
    return NotFound("placement of {} nodes does not match live job {} of this placer",
                    placement.hosts.size(), placement.job_id);
  }
  return Release(placement.job_id);
}

Status Placer::Release(int job_id) {
  auto it = jobs_.find(job_id);
  if (it == jobs_.end()) return NotFound("no live job {} to release", job_id);
  for (int n : it->second) engine_->SetState(n, engine_->flags[n], 0);
  jobs_.erase(it);
  return Status::Ok();
}

Result<std::vector<bool>> Placer::MaskFromNames(const std::vector<std::string>& hosts) {
  if (name_index_.empty()) {
    name_index_.reserve(cluster_.nodes.size());
    for (size_t i = 0; i < cluster_.nodes.size(); ++i) {
      name_index_.emplace(cluster_.nodes[i].name, static_cast<int>(i));
    }
  }
  std::vector<bool> mask(cluster_.nodes.size(), false);
  for (const auto& h : hosts) {
    auto it = name_index_.find(h);
    if (it == name_index_.end()) {
      return NotFound("host '{}' is not a node of cluster '{}'", h, cluster_.name);
    }
    mask[it->second] = true;
  }
  return mask;
}

Status Placer::SetExcluded(const std::vector<std::string>& hosts) {
  RY_ASSIGN_OR_RETURN(std::vector<bool> mask, MaskFromNames(hosts));
  SetExcludedMask(mask);
  return Status::Ok();
}

Status Placer::SetBusy(const std::vector<std::string>& hosts) {
  RY_ASSIGN_OR_RETURN(std::vector<bool> mask, MaskFromNames(hosts));
  SetBusyMask(mask);
  return Status::Ok();
}

void Placer::SetExcludedMask(const std::vector<bool>& mask) {
  Engine& e = *engine_;
  for (size_t n = 0; n < e.flags.size(); ++n) {
    bool on = n < mask.size() && mask[n];
    e.SetState(n, on ? (e.flags[n] | kExcluded) : (e.flags[n] & ~kExcluded), e.owner[n]);
  }
}

void Placer::SetBusyMask(const std::vector<bool>& mask) {
  Engine& e = *engine_;
  for (size_t n = 0; n < e.flags.size(); ++n) {
    bool on = n < mask.size() && mask[n];
    e.SetState(n, on ? (e.flags[n] | kBusy) : (e.flags[n] & ~kBusy), e.owner[n]);
  }
}

Result<Placement> PlaceOnce(const topo::Cluster& cluster, const JobRequest& request,
                            const std::vector<bool>& unavailable) {
  if (!unavailable.empty() && unavailable.size() != cluster.nodes.size()) {
    return InvalidArgument("unavailable-node mask has {} entries for a cluster of {} nodes",
                           unavailable.size(), cluster.nodes.size());
  }
  // Check the request before building counters: bad input should not cost O(cluster).
  RY_RETURN_IF_ERROR(ResolveRequest(cluster, request));
  Placer placer(cluster);
  placer.SetExcludedMask(unavailable);
  RY_ASSIGN_OR_RETURN(Placement p, placer.Place(request));
  p.job_id = 0;
  return p;
}

}  // namespace railyard::place
