// The scheduler extender's policy as pure functions: which candidate nodes a Kubernetes pod may
// use and how well each one keeps its gang together. http/extender.cc parses the scheduler's
// JSON into a PodRequest and node names, calls these, and writes the answer back; nothing here
// does I/O, so tests drive the policy directly.
//
//   PodRequest pod = {.group = "job1", .required_topology = "railyard.io/spine"};
//   RY_ASSIGN_OR_RETURN(ResolvedPod r, ResolvePod(cluster, pod));
//   FilterVerdict v = FilterNodes(cluster, r, names, bound_nodes_of_job1, excluded);
//   std::vector<int> scores = ScoreNodes(cluster, r, names, bound_nodes_of_job1);
//
// Policy:
// - A pod is Railyard's when it carries the gang label or a topology annotation Railyard
//   understands. Any other pod (system daemons, CPU jobs, a GPU pod with no gang) passes on
//   every node with score 0 everywhere, so on a mixed cluster the extender changes nothing
//   for it.
// - A Railyard pod fails, with a reason, on a node outside the topology, on an excluded node
//   (hosts validation failed), and, when it requires a level and pods of its gang are already
//   bound, on a node outside the domain of that level they use.
// - A required or preferred level is named by a level name ("spine"), by the node label
//   Railyard's Kubernetes exports put on nodes (topo::LevelLabelKey: "railyard.io/spine", or
//   the hashed form "railyard.io/Spine-Row-0a5ca1afe871" for a level name that is not a valid
//   label), or by "kubernetes.io/hostname" (the whole gang on one node). A label outside
//   railyard.io/ is another tool's (Kueue handles its own levels): it is ignored. An unknown
//   railyard.io/ label or level name, or another tool's label in railyard.io/required-level, is an
//   error naming the levels there are.
// - Score: 10 on a node that already holds a pod of the gang or shares its leaf with one,
//   then 10 * (level + 1) / levels for the deepest level at which the node shares a switch
//   with one; 0 with nothing in common, nothing bound yet, or outside the topology.
//
// Thread-safety: pure functions.
#pragma once

#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/topo/model.h"

namespace railyard::place {

// Annotations and labels the policy reads.
inline constexpr std::string_view kKueueRequiredTopologyAnnotation =
    "kueue.x-k8s.io/podset-required-topology";
inline constexpr std::string_view kKueuePreferredTopologyAnnotation =
    "kueue.x-k8s.io/podset-preferred-topology";
inline constexpr std::string_view kRequiredLevelAnnotation = "railyard.io/required-level";
inline constexpr std::string_view kHostnameLabel = "kubernetes.io/hostname";
inline constexpr std::string_view kDefaultGroupLabel = "railyard.io/group";

// What the extender read from the pod; "" where absent.
struct PodRequest {
  std::string group;               // value of the gang label
  std::string required_topology;   // kKueueRequiredTopologyAnnotation
  std::string preferred_topology;  // kKueuePreferredTopologyAnnotation
  std::string required_level;      // kRequiredLevelAnnotation: a level name or label key
};

// A pod's request resolved against the cluster.
struct ResolvedPod {
  bool railyard = false;  // false: the pod passes through untouched
  std::string group;
  int required_level = -1;    // index into cluster.levels; HostnameLevel(cluster) for a node
  std::string required_text;  // the annotation value, for messages
};

// The pseudo-level "one node": one past the leaf level.
inline int HostnameLevel(const topo::Cluster& cluster) {
  return static_cast<int>(cluster.levels.size());
}

// `text` (a level name, a Railyard level label key, or kubernetes.io/hostname) as a level
// index, HostnameLevel() for the hostname; -1 for a label outside railyard.io/ (not ours).
// INVALID_ARGUMENT naming the text and the cluster's levels for an unknown Railyard level.
Result<int> ResolveLevel(const topo::Cluster& cluster, std::string_view text);

// INVALID_ARGUMENT (from ResolveLevel) when an annotation names an unknown Railyard level.
Result<ResolvedPod> ResolvePod(const topo::Cluster& cluster, const PodRequest& pod);

struct FilterVerdict {
  std::vector<size_t> passed;                          // indices into `names`, in order
  std::vector<std::pair<size_t, std::string>> failed;  // index, reason
};

// `bound` holds the node indices where pods of the pod's gang are already bound; `excluded`
// the names of hosts to keep every Railyard pod off.
FilterVerdict FilterNodes(const topo::Cluster& cluster, const ResolvedPod& pod,
                          const std::vector<std::string>& names, const std::set<int>& bound,
                          const std::set<std::string>& excluded);

// One score per name, 0..kMaxScore, in the order of `names`.
inline constexpr int kMaxScore = 10;
std::vector<int> ScoreNodes(const topo::Cluster& cluster, const ResolvedPod& pod,
                            const std::vector<std::string>& names, const std::set<int>& bound);

}  // namespace railyard::place
