// Kubernetes exports of a Cluster: node labels naming each node's switches, and a Kueue
// Topology (+ ResourceFlavor) that makes Kueue's topology-aware scheduling use them.
//
// Every node gets one label per switch level, top first, plus one naming the cluster:
//
//   railyard.io/block=block0  railyard.io/spine=spine3  railyard.io/leaf=leaf12
//   cluster.railyard.io/name=train-a
//
//   fmt::print("{}", KubectlLabelCommands(cluster));          // a shell script to apply them
//   RY_ASSIGN_OR_RETURN(std::string kueue, KueueTopologyManifest(cluster, "train-a"));
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

#include "railyard/base/status.h"
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

// Kueue API versions of the Topology object. Which Kueue releases serve which (read from
// kubernetes-sigs/kueue apis/kueue/<version>/ at each release tag):
//   kV1alpha1  Kueue 0.9 to 0.13 (v1alpha1/tas_types.go, later topology_types.go); at most 8
//              levels up to 0.12, 16 in 0.13. The ResourceFlavor is then kueue.x-k8s.io/v1beta1
//              (ResourceFlavor was never v1alpha1).
//   kV1beta1   Kueue 0.14 on (v1beta1/topology_types.go); Topology and ResourceFlavor v1beta1.
//   kV1beta2   Kueue 0.15 on (v1beta2/); Topology and ResourceFlavor v1beta2. The default.
enum class KueueApi { kV1alpha1, kV1beta1, kV1beta2 };
inline constexpr KueueApi kDefaultKueueApi = KueueApi::kV1beta2;

// "v1alpha1", "v1beta1" or "v1beta2" (a "kueue.x-k8s.io/" prefix is accepted too);
// INVALID_ARGUMENT naming the accepted values otherwise.
Result<KueueApi> ParseKueueApi(std::string_view text);
std::string_view KueueApiName(KueueApi api);  // "v1beta2"

// The most Topology levels (kubernetes.io/hostname included) every Kueue release that serves
// `api` accepts: spec.levels MaxItems, 8 for v1alpha1 (Kueue 0.9-0.12), else 16.
size_t KueueMaxLevels(KueueApi api);

// Two YAML documents: a Kueue `Topology` named `name` whose spec.levels are the level labels,
// top first, then kubernetes.io/hostname (which Kueue allows only as the last level), and a
// `ResourceFlavor` of the same name with spec.topologyName = name and spec.nodeLabels =
// {kClusterLabel: <cluster>} (Kueue requires at least one node label on a TAS flavour). Both
// carry only fields every release serving `api` defines. `name` is made a valid object name
// (lowercase, [a-z0-9.-]); empty becomes "railyard". Every scalar a YAML 1.1 reader could
// retype is quoted (internal/yaml_quote.h).
// Kueue rejects changes to a Topology's levels and to a TAS flavour's topologyName (CEL rules
// on the types): applying a changed export over existing objects fails; delete and recreate.
// INVALID_ARGUMENT when the levels plus hostname exceed KueueMaxLevels(api).
Result<std::string> KueueTopologyManifest(const Cluster& cluster, std::string name,
                                          KueueApi api = kDefaultKueueApi);

}  // namespace railyard::topo
