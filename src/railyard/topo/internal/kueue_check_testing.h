// Test support: a check of Kueue Topology and ResourceFlavor objects written from Kueue's own
// API types and their validation markers, per API version, so a test can say whether the API
// server (CRD schema and CEL rules) and Kueue's webhook would accept what Railyard writes.
//
// Sources (kubernetes-sigs/kueue, read at each tag):
//   v1alpha1 Topology  apis/kueue/v1alpha1/tas_types.go @ v0.9.0-v0.11.0,
//                      apis/kueue/v1alpha1/topology_types.go @ v0.12.0, v0.13.0
//   v1beta1 Topology   apis/kueue/v1beta1/topology_types.go @ v0.14.0, v0.15.0
//   v1beta2 Topology   apis/kueue/v1beta2/topology_types.go @ v0.15.0
//   ResourceFlavor     apis/kueue/v1beta1/resourceflavor_types.go @ v0.9.0-v0.15.0,
//                      apis/kueue/v1beta2/resourceflavor_types.go @ v0.15.0;
//                      nodeLabels through metavalidation.ValidateLabels in
//                      pkg/webhooks/resourceflavor_webhook.go @ v0.15.0
// Rules: Topology spec is required and holds only `levels`; levels has MinItems 1 and MaxItems
// 8 (v1alpha1 through v0.12.0) or 16 (v0.13.0 on); each level holds only `nodeLabel`, required,
// MinLength 1, MaxLength 316, matching the qualified-name Pattern; levels are unique ("must be
// unique"); kubernetes.io/hostname only as the last level. A ResourceFlavor spec holds only
// nodeLabels, nodeTaints, tolerations, topologyName; nodeLabels MaxProperties 8, valid label
// keys and values; topologyName MaxLength 253 with the DNS-subdomain Pattern; with a
// topologyName at least one nodeLabel ("at least one nodeLabel is required when topology is
// set"). Object names are DNS subdomains (Kubernetes ObjectMeta).
// Test-only: include from *_test.cc files.
#pragma once

#include <fmt/format.h>
#include <yaml-cpp/yaml.h>

#include <regex>
#include <set>
#include <string>
#include <vector>

#include "railyard/topo/kube_export.h"

namespace railyard::topo::internal {

inline const std::regex& KueueNodeLabelPattern() {
  // TopologyLevel.NodeLabel's +kubebuilder:validation:Pattern, verbatim.
  static const std::regex re(
      R"(^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])$)");
  return re;
}

inline const std::regex& DnsSubdomainPattern() {
  // ResourceFlavorSpec.TopologyName's Pattern (and Kubernetes' DNS-1123 subdomain).
  static const std::regex re(
      R"(^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$)");
  return re;
}

// A Kubernetes label value: empty, or at most 63 characters, alphanumeric at both ends and
// [-_.A-Za-z0-9] inside (apimachinery validation.IsValidLabelValue).
inline bool IsKubeLabelValue(const std::string& v) {
  static const std::regex re(R"(^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$)");
  return v.size() <= 63 && std::regex_match(v, re);
}

// A label key: [prefix/]name, prefix a DNS subdomain of at most 253, name as a value but
// non-empty (validation.IsQualifiedName).
inline bool IsKubeLabelKey(const std::string& k) {
  size_t slash = k.find('/');
  std::string name = slash == std::string::npos ? k : k.substr(slash + 1);
  if (slash != std::string::npos) {
    std::string prefix = k.substr(0, slash);
    if (prefix.empty() || prefix.size() > 253 || !std::regex_match(prefix, DnsSubdomainPattern()))
      return false;
  }
  return !name.empty() && IsKubeLabelValue(name);
}

inline std::string ExpectedTopologyApi(KueueApi api) {
  return fmt::format("kueue.x-k8s.io/{}", KueueApiName(api));
}

inline std::string ExpectedFlavorApi(KueueApi api) {
  return api == KueueApi::kV1alpha1 ? "kueue.x-k8s.io/v1beta1" : ExpectedTopologyApi(api);
}

// Every problem found in the YAML documents of `text` (empty: all accepted), each naming the
// document, the field and the rule.
inline std::vector<std::string> CheckKueueManifest(const std::string& text, KueueApi api) {
  std::vector<std::string> errors;
  auto error = [&](size_t doc, const std::string& field, const std::string& what) {
    errors.push_back(fmt::format("document {} {}: {}", doc, field, what));
  };
  std::vector<YAML::Node> docs;
  try {
    docs = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    return {fmt::format("not YAML: {}", e.what())};
  }
  auto only_keys = [&](size_t d, const YAML::Node& n, const std::string& field,
                       std::set<std::string> allowed) {
    if (!n.IsMap()) {
      error(d, field, "expected a map");
      return false;
    }
    for (const auto& kv : n) {
      std::string key = kv.first.as<std::string>();
      if (!allowed.count(key)) error(d, field + "." + key, "unknown field (pruned or rejected)");
    }
    return true;
  };
  auto check_name = [&](size_t d, const YAML::Node& doc) -> std::string {
    if (!only_keys(d, doc["metadata"], "metadata", {"name", "labels", "annotations"})) return "";
    std::string name = doc["metadata"]["name"] ? doc["metadata"]["name"].as<std::string>() : "";
    if (name.empty() || name.size() > 253 || !std::regex_match(name, DnsSubdomainPattern())) {
      error(d, "metadata.name", fmt::format("'{}' is not a DNS subdomain", name));
    }
    return name;
  };
  std::set<std::string> topologies;
  std::vector<std::pair<size_t, std::string>> flavor_refs;
  for (size_t d = 0; d < docs.size(); ++d) {
    const YAML::Node& doc = docs[d];
    if (!only_keys(d, doc, "", {"apiVersion", "kind", "metadata", "spec"})) continue;
    std::string kind = doc["kind"] ? doc["kind"].as<std::string>() : "";
    std::string version = doc["apiVersion"] ? doc["apiVersion"].as<std::string>() : "";
    const YAML::Node spec = doc["spec"];
    if (kind == "Topology") {
      if (version != ExpectedTopologyApi(api)) {
        error(d, "apiVersion", fmt::format("'{}', expected {}", version, ExpectedTopologyApi(api)));
      }
      topologies.insert(check_name(d, doc));
      if (!spec) {
        error(d, "spec", "required");
        continue;
      }
      if (!only_keys(d, spec, "spec", {"levels"})) continue;
      const YAML::Node levels = spec["levels"];
      if (!levels || !levels.IsSequence()) {
        error(d, "spec.levels", "required list");
        continue;
      }
      size_t max = KueueMaxLevels(api);
      if (levels.size() < 1 || levels.size() > max) {
        error(d, "spec.levels", fmt::format("{} items, expected 1 to {}", levels.size(), max));
      }
      std::set<std::string> seen;
      for (size_t i = 0; i < levels.size(); ++i) {
        std::string f = fmt::format("spec.levels[{}]", i);
        if (!only_keys(d, levels[i], f, {"nodeLabel"})) continue;
        if (!levels[i]["nodeLabel"] || !levels[i]["nodeLabel"].IsScalar()) {
          error(d, f + ".nodeLabel", "required");
          continue;
        }
        std::string label = levels[i]["nodeLabel"].as<std::string>();
        if (label.empty() || label.size() > 316 ||
            !std::regex_match(label, KueueNodeLabelPattern())) {
          error(d, f + ".nodeLabel", fmt::format("'{}' fails the Pattern/MaxLength 316", label));
        }
        if (!seen.insert(label).second) error(d, f, "must be unique");
        if (label == "kubernetes.io/hostname" && i + 1 != levels.size()) {
          error(d, f, "the kubernetes.io/hostname label can only be used at the lowest level");
        }
      }
    } else if (kind == "ResourceFlavor") {
      if (version != ExpectedFlavorApi(api)) {
        error(d, "apiVersion", fmt::format("'{}', expected {}", version, ExpectedFlavorApi(api)));
      }
      check_name(d, doc);
      if (!spec) continue;
      if (!only_keys(d, spec, "spec", {"nodeLabels", "nodeTaints", "tolerations", "topologyName"}))
        continue;
      size_t labels = 0;
      if (spec["nodeLabels"]) {
        if (!spec["nodeLabels"].IsMap()) {
          error(d, "spec.nodeLabels", "expected a map");
        } else {
          labels = spec["nodeLabels"].size();
          if (labels > 8) error(d, "spec.nodeLabels", "MaxProperties 8");
          for (const auto& kv : spec["nodeLabels"]) {
            std::string k = kv.first.as<std::string>();
            std::string v = kv.second.IsScalar() ? kv.second.as<std::string>() : "<not a string>";
            if (!IsKubeLabelKey(k)) error(d, "spec.nodeLabels", fmt::format("bad key '{}'", k));
            if (!IsKubeLabelValue(v)) {
              error(d, "spec.nodeLabels." + k, fmt::format("bad value '{}'", v));
            }
          }
        }
      }
      if (spec["topologyName"]) {
        std::string t = spec["topologyName"].as<std::string>();
        if (t.size() > 253 || !std::regex_match(t, DnsSubdomainPattern())) {
          error(d, "spec.topologyName", fmt::format("'{}' fails the Pattern", t));
        }
        if (labels < 1) {
          error(d, "spec", "at least one nodeLabel is required when topology is set");
        }
        flavor_refs.emplace_back(d, t);
      }
    } else {
      error(d, "kind", fmt::format("'{}', expected Topology or ResourceFlavor", kind));
    }
  }
  for (const auto& [d, t] : flavor_refs) {
    if (!topologies.count(t)) error(d, "spec.topologyName", fmt::format("no Topology '{}'", t));
  }
  return errors;
}

}  // namespace railyard::topo::internal
