#include "railyard/topo/kube_export.h"

#include <fmt/format.h>

#include "railyard/base/checksum.h"
#include "railyard/base/subprocess.h"
#include "railyard/topo/internal/yaml_quote.h"

namespace railyard::topo {

namespace {

constexpr size_t kMaxLabelLength = 63;
// 50 + "-" + 12 hex digits = 63.
constexpr size_t kHashedPrefixLength = 50;
constexpr size_t kHashHexDigits = 12;
constexpr size_t kMaxObjectNameLength = 253;
// Kueue's Topology.spec.levels maxItems, hostname included: 16 from v0.13.0 on, 8 in
// v1alpha1 before that (apis/kueue/v1alpha1/tas_types.go at v0.9.0 to v0.12.0).
constexpr size_t kMaxKueueLevels = 16;
constexpr size_t kMaxKueueLevelsAlpha = 8;

bool IsAlnum(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
}

bool IsLabelInner(char c) { return IsAlnum(c) || c == '-' || c == '_' || c == '.'; }

bool IsValidLabelValue(std::string_view s) {
  if (s.empty()) return true;
  if (s.size() > kMaxLabelLength || !IsAlnum(s.front()) || !IsAlnum(s.back())) return false;
  for (char c : s) {
    if (!IsLabelInner(c)) return false;
  }
  return true;
}

std::string TrimNonAlnumFront(std::string s) {
  size_t start = 0;
  while (start < s.size() && !IsAlnum(s[start])) ++start;
  return s.substr(start);
}

// A DNS-1123 subdomain, as Kubernetes object names must be.
std::string ObjectName(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    bool ok = (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '-' || c == '.';
    out += ok ? c : '-';
  }
  auto alnum = [](char c) { return (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'); };
  if (out.size() > kMaxObjectNameLength) out.resize(kMaxObjectNameLength);
  size_t start = 0;
  while (start < out.size() && !alnum(out[start])) ++start;
  size_t end = out.size();
  while (end > start && !alnum(out[end - 1])) --end;
  out = out.substr(start, end - start);
  return out.empty() ? "railyard" : out;
}

std::string ClusterLabelValue(const Cluster& cluster) {
  return cluster.name.empty() ? std::string(kDefaultClusterLabelValue)
                              : KubeLabelValue(cluster.name);
}

}  // namespace

std::string KubeLabelValue(std::string_view text) {
  if (IsValidLabelValue(text)) return std::string(text);
  // A run of invalid characters becomes one '-': "Leaf #1 (row B)" -> "Leaf-1-row-B".
  std::string sanitised;
  bool in_run = false;
  for (char c : text) {
    if (IsLabelInner(c)) {
      sanitised += c;
      in_run = false;
    } else if (!in_run) {
      sanitised += '-';
      in_run = true;
    }
  }
  sanitised = TrimNonAlnumFront(std::move(sanitised));
  if (sanitised.size() > kHashedPrefixLength) sanitised.resize(kHashedPrefixLength);
  while (!sanitised.empty() && !IsAlnum(sanitised.back())) sanitised.pop_back();
  // The hash is of the original text, so two names that sanitise alike stay apart.
  std::string hash = base::ChecksumHex(base::Xxh3(text)).substr(0, kHashHexDigits);
  return sanitised.empty() ? hash : sanitised + "-" + hash;
}

std::string LevelLabelKey(std::string_view level) { return "railyard.io/" + KubeLabelValue(level); }

std::vector<std::pair<std::string, std::string>> NodeLabels(const Cluster& cluster, int node) {
  std::vector<std::pair<std::string, std::string>> labels;
  for (int level = 0; level < static_cast<int>(cluster.levels.size()); ++level) {
    int s = cluster.DomainOf(node, level);
    if (s < 0) continue;
    labels.emplace_back(LevelLabelKey(cluster.levels[level]),
                        KubeLabelValue(cluster.switches[s].name));
  }
  labels.emplace_back(std::string(kClusterLabel), ClusterLabelValue(cluster));
  return labels;
}

std::string KubectlLabelCommands(const Cluster& cluster) {
  std::string out;
  for (int n = 0; n < static_cast<int>(cluster.nodes.size()); ++n) {
    out += "kubectl label node " + base::ShellQuote(cluster.nodes[n].name);
    for (const auto& [key, value] : NodeLabels(cluster, n)) {
      out += fmt::format(" {}={}", key, value);
    }
    out += " --overwrite\n";
  }
  return out;
}

nlohmann::json NodeLabelsJson(const Cluster& cluster) {
  nlohmann::json out = nlohmann::json::object();
  for (int n = 0; n < static_cast<int>(cluster.nodes.size()); ++n) {
    nlohmann::json labels = nlohmann::json::object();
    for (const auto& [key, value] : NodeLabels(cluster, n)) labels[key] = value;
    out[cluster.nodes[n].name] = std::move(labels);
  }
  return out;
}

Result<KueueApi> ParseKueueApi(std::string_view text) {
  std::string_view v = text;
  constexpr std::string_view kGroup = "kueue.x-k8s.io/";
  if (v.substr(0, kGroup.size()) == kGroup) v.remove_prefix(kGroup.size());
  if (v == "v1alpha1") return KueueApi::kV1alpha1;
  if (v == "v1beta1") return KueueApi::kV1beta1;
  if (v == "v1beta2") return KueueApi::kV1beta2;
  return InvalidArgument(
      "Kueue API version '{}': expected v1alpha1 (Kueue 0.9-0.13), v1beta1 (0.14 and later) or "
      "v1beta2 (0.15 and later)",
      text);
}

std::string_view KueueApiName(KueueApi api) {
  switch (api) {
    case KueueApi::kV1alpha1:
      return "v1alpha1";
    case KueueApi::kV1beta1:
      return "v1beta1";
    case KueueApi::kV1beta2:
      return "v1beta2";
  }
  return "v1beta2";
}

size_t KueueMaxLevels(KueueApi api) {
  return api == KueueApi::kV1alpha1 ? kMaxKueueLevelsAlpha : kMaxKueueLevels;
}

// Fields and rules from Kueue's API types (kubernetes-sigs/kueue apis/kueue/<version>/
// topology_types.go and resourceflavor_types.go, tags v0.9.0 to v0.19.0): spec.levels is a
// list of {nodeLabel}, coarsest first, unique, with kubernetes.io/hostname allowed only last;
// a ResourceFlavor points at it through spec.topologyName and must then have at least one
// spec.nodeLabels entry. topo/kube_export_test.cc checks the output against those rules.
Result<std::string> KueueTopologyManifest(const Cluster& cluster, std::string name, KueueApi api) {
  const size_t levels = cluster.levels.size() + 1;
  if (levels > KueueMaxLevels(api)) {
    return InvalidArgument(
        "the cluster has {} levels; with kubernetes.io/hostname that is {}, and Kueue's "
        "{} Topology accepts at most {} (spec.levels maxItems){}",
        cluster.levels.size(), levels, KueueApiName(api), KueueMaxLevels(api),
        api == KueueApi::kV1alpha1 ? "; Kueue 0.13 and later accept 16 (--kueue-api v1beta1 "
                                     "needs 0.14)"
                                   : "");
  }
  const std::string topology_api = fmt::format("kueue.x-k8s.io/{}", KueueApiName(api));
  // ResourceFlavor was never v1alpha1: Kueue 0.9-0.13 serve it as v1beta1.
  const std::string flavor_api =
      api == KueueApi::kV1alpha1 ? "kueue.x-k8s.io/v1beta1" : topology_api;
  const std::string object = internal::YamlScalar(ObjectName(name));
  std::string out = fmt::format(
      "# Kueue topology-aware scheduling for cluster '{}', generated by railyard.\n"
      "# Nodes must carry railyard's node labels (railyard.io/<level> and {}) first.\n"
      "# Kueue rejects changes to Topology levels and to the flavor's topologyName: to change\n"
      "# them, delete both objects and apply again.\n",
      ClusterLabelValue(cluster), kClusterLabel);
  out += fmt::format("apiVersion: {}\nkind: Topology\nmetadata:\n  name: {}\nspec:\n  levels:\n",
                     topology_api, object);
  for (const std::string& level : cluster.levels) {
    out += fmt::format("  - nodeLabel: {}\n", internal::YamlScalar(LevelLabelKey(level)));
  }
  out += "  - nodeLabel: kubernetes.io/hostname\n";
  out += fmt::format(
      "---\napiVersion: {}\nkind: ResourceFlavor\nmetadata:\n  name: {}\nspec:\n"
      "  nodeLabels:\n    {}: {}\n  topologyName: {}\n",
      flavor_api, object, internal::YamlScalar(kClusterLabel),
      internal::YamlScalar(ClusterLabelValue(cluster)), object);
  return out;
}

}  // namespace railyard::topo
