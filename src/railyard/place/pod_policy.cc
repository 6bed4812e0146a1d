#include "railyard/place/pod_policy.h"

#include <fmt/format.h>

#include "railyard/topo/kube_export.h"

namespace railyard::place {

namespace {

constexpr std::string_view kRailyardLabelPrefix = "railyard.io/";

std::string LevelList(const topo::Cluster& cluster) {
  std::vector<std::string> names;
  for (const std::string& level : cluster.levels) {
    names.push_back(fmt::format("{} ({})", level, topo::LevelLabelKey(level)));
  }
  names.emplace_back(kHostnameLabel);
  return fmt::format("{}", fmt::join(names, ", "));
}

// The node's domain at `level`: the switch index, or the node itself at the hostname level.
int Domain(const topo::Cluster& cluster, int node, int level) {
  return level == HostnameLevel(cluster) ? node : cluster.DomainOf(node, level);
}

std::string DomainName(const topo::Cluster& cluster, int domain, int level) {
  return level == HostnameLevel(cluster) ? cluster.nodes[domain].name
                                         : cluster.switches[domain].name;
}

}  // namespace

Result<int> ResolveLevel(const topo::Cluster& cluster, std::string_view text) {
  if (text == kHostnameLabel) return HostnameLevel(cluster);
  for (int i = 0; i < static_cast<int>(cluster.levels.size()); ++i) {
    // A level name, or the label key the k8s-labels and kueue exports put on nodes (hashed
    // when the level name is not valid label text).
    if (text == cluster.levels[i] || text == topo::LevelLabelKey(cluster.levels[i])) return i;
  }
  const bool ours = text.rfind(kRailyardLabelPrefix, 0) == 0;
  if (!ours && text.find('/') != std::string_view::npos) return -1;  // another tool's label
  return InvalidArgument("topology level '{}' is not one of this cluster's levels: {}", text,
                         LevelList(cluster));
}

Result<ResolvedPod> ResolvePod(const topo::Cluster& cluster, const PodRequest& pod) {
  ResolvedPod out;
  out.group = pod.group;
  // Railyard's own annotation first: it is explicit; then Kueue's.
  for (const std::string* text : {&pod.required_level, &pod.required_topology}) {
    if (text->empty() || out.required_level >= 0) continue;
    const std::string_view what =
        text == &pod.required_level ? kRequiredLevelAnnotation : kKueueRequiredTopologyAnnotation;
    auto level = ResolveLevel(cluster, *text);
    if (!level.ok()) {
      return InvalidArgument("pod annotation {}: {}", what, level.status().message());
    }
    if (*level < 0 && text == &pod.required_level) {
      // Railyard's own annotation has no other reader: a foreign label there is a mistake.
      return InvalidArgument("pod annotation {}: '{}' is not one of this cluster's levels: {}",
                             what, *text, LevelList(cluster));
    }
    if (*level >= 0) {
      out.required_level = *level;
      out.required_text = *text;
    }
  }
  bool preferred = false;
  if (!pod.preferred_topology.empty()) {
    auto level = ResolveLevel(cluster, pod.preferred_topology);
    if (!level.ok()) {
      return InvalidArgument("pod annotation {}: {}", kKueuePreferredTopologyAnnotation,
                             level.status().message());
    }
    preferred = *level >= 0;
  }
  out.railyard = !out.group.empty() || out.required_level >= 0 || preferred;
  return out;
}

FilterVerdict FilterNodes(const topo::Cluster& cluster, const ResolvedPod& pod,
                          const std::vector<std::string>& names, const std::set<int>& bound,
                          const std::set<std::string>& excluded) {
  FilterVerdict verdict;
  if (!pod.railyard) {
    for (size_t i = 0; i < names.size(); ++i) verdict.passed.push_back(i);
    return verdict;
  }
  // Domains of the required level the gang already uses: a node must share one.
  std::set<int> domains;
  if (pod.required_level >= 0 && !pod.group.empty()) {
    for (int n : bound) {
      const int d = Domain(cluster, n, pod.required_level);
      if (d >= 0) domains.insert(d);
    }
  }
  const std::string who =
      pod.group.empty() ? std::string("the pod") : fmt::format("gang '{}'", pod.group);
  for (size_t i = 0; i < names.size(); ++i) {
    const int n = cluster.FindNode(names[i]);
    std::string reason;
    if (n < 0) {
      reason = fmt::format("node is not in the Railyard topology, which {} needs", who);
    } else if (excluded.count(names[i])) {
      reason = "node is excluded by Railyard validation";
    } else if (!domains.empty() && !domains.count(Domain(cluster, n, pod.required_level))) {
      reason = fmt::format(
          "{} requires one {} ({}) and is already on {}", who,
          pod.required_level == HostnameLevel(cluster) ? std::string("node")
                                                       : cluster.levels[pod.required_level],
          pod.required_text, DomainName(cluster, *domains.begin(), pod.required_level));
    }
    if (reason.empty()) {
      verdict.passed.push_back(i);
    } else {
      verdict.failed.emplace_back(i, std::move(reason));
    }
  }
  return verdict;
}

std::vector<int> ScoreNodes(const topo::Cluster& cluster, const ResolvedPod& pod,
                            const std::vector<std::string>& names, const std::set<int>& bound) {
  std::vector<int> scores(names.size(), 0);
  if (!pod.railyard || pod.group.empty() || bound.empty()) return scores;
  const int levels = static_cast<int>(cluster.levels.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const int n = cluster.FindNode(names[i]);
    if (n < 0) continue;
    // The deepest level at which the node shares a switch with a bound pod of the gang.
    for (int level = levels - 1; level >= 0 && scores[i] == 0; --level) {
      const int d = cluster.DomainOf(n, level);
      if (d < 0) continue;
      for (int b : bound) {
        if (cluster.DomainOf(b, level) == d) {
          scores[i] = kMaxScore * (level + 1) / levels;
          break;
        }
      }
    }
  }
  return scores;
}

}  // namespace railyard::place
