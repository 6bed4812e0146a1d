// Kubernetes exports of a Cluster: node labels naming each node's switches, and a Kueue
// Topology (+ ResourceFlavor) that makes Kueue's topology-aware scheduling use them.
//
// Every node gets one label per switch level, top first, plus one naming the cluster:
//
//   railyard.io/block=block0  railyard.io/spine=spine3  railyard.io/leaf=leaf12
//   cluster.railyard.io/name=train-a
//
//   fmt::print("{}", KubectlLabelCommands(cluster));          // a shell script to apply them
//   fmt::print("{}", KueueTopologyManifest(cluster, "train-a")); // kubectl apply -f -
//
// Label keys and values must be valid Kubernetes label text (at most 63 characters,
// [A-Za-z0-9] at both ends, [-_.A-Za-z0-9] inside). Names that already are valid are used
// as they are; any other name becomes `<sanitised>-<12 hex digits of XXH3(name)>`, where
// <sanitised> is the name with each run of other characters replaced by one '-', trimmed to
// start and end with a letter or digit and cut to 50 characters ("Leaf #1 (row B)" ->
// "Leaf-1-row-B-0a5ca1afe871"). The label stays readable, is stable across runs, and
// distinct names do not share a value (barring a 48-bit hash collision).
//
// Kueue needs every node of a TAS flavour to carry one common label, which is what the
// cluster label is for; it lives under its own prefix so that no level name can collide
// with it.
//
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "railyard/topo/model.h"

namespace railyard::topo {

// The label carried by every node of the cluster, and the value used when the cluster has no
// name.
inline constexpr std::string_view kClusterLabel = "cluster.railyard.io/name";
inline constexpr std::string_view kDefaultClusterLabelValue = "default";

// `text` as a valid label value / name segment, as described above. "" stays "" (a valid
// value; callers never pass an empty level or switch name).
std::string KubeLabelValue(std::string_view text);

// "railyard.io/" + KubeLabelValue(level).
std::string LevelLabelKey(std::string_view level);

// Node `node`'s labels: one per level, top first, then kClusterLabel. A level with no switch
// above the node (impossible in a cluster ClusterBuilder accepted) is skipped.
// Precondition: 0 <= node < cluster.nodes.size().
std::vector<std::pair<std::string, std::string>> NodeLabels(const Cluster& cluster, int node);

// One line per node, in cluster order, each on one line:
//   kubectl label node gpu07 railyard.io/spine=spine0 railyard.io/leaf=leaf1
//     cluster.railyard.io/name=train-a --overwrite
// Node names that are not plain words are single-quoted for the shell.
std::string KubectlLabelCommands(const Cluster& cluster);

// {"gpu07": {"railyard.io/leaf": "leaf1", ...}, ...}: the same labels for tools that patch
// nodes through the API.
nlohmann::json NodeLabelsJson(const Cluster& cluster);

// Two YAML documents: a Kueue `Topology` named `name` whose spec.levels are the level labels,
// top first, then kubernetes.io/hostname (which Kueue allows only as the last level), and a
// `ResourceFlavor` of the same name with spec.topologyName = name and spec.nodeLabels =
// {kClusterLabel: <cluster>} (Kueue requires at least one node label on a TAS flavour).
// `name` is made a valid object name (lowercase, [a-z0-9.-]); empty becomes "railyard".
// api_version: kueue.x-k8s.io/v1beta1 (Kueue 0.14, where Topology left alpha) or
// kueue.x-k8s.io/v1beta2 (Kueue 0.15 on); both take the fields written here unchanged.
// Kueue accepts at most 16 levels; a deeper cluster gets a warning comment in the output.
std::string KueueTopologyManifest(const Cluster& cluster, std::string name,
                                  std::string_view api_version = "kueue.x-k8s.io/v1beta1");

}  // namespace railyard::topo
