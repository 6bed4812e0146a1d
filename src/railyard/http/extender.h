// The Kubernetes scheduler-extender logic: filter and prioritize nodes for a pod by the
// cluster's topology. Pure: JSON in, JSON out, no I/O, so tests drive it with the request
// bodies kube-scheduler sends; server.h puts it behind HTTP.
//
// Wire shapes (k8s.io/kube-scheduler/extender/v1; the types carry no JSON tags, so the
// scheduler sends Go field names, and every key here is matched case-insensitively):
//   ExtenderArgs          {"Pod": v1.Pod, "Nodes": v1.NodeList|null, "NodeNames": [..]|null}
//   ExtenderFilterResult  {"Nodes"|"NodeNames", "FailedNodes": {name: reason},
//                          "FailedAndUnresolvableNodes": {}, "Error": ""}
//   HostPriorityList      [{"Host": name, "Score": 0..10}]
//
// Policy:
// - filter: a node not in the topology, or on the exclusion list (unhealthy hosts from
//   validation), fails with the reason. When the pod asks for a required level
//   (annotation kueue.x-k8s.io/podset-required-topology or railyard.io/required-level, naming a
//   level or its node label railyard.io/<level>) and pods of its group are already bound, only
//   nodes in the same domain of that level pass.
// - prioritize: closeness to the already-bound pods of the same group (group = value of the
//   pod label `group_label`): 10 on the leaf of a bound pod, then proportionally less for each
//   level further up the common ancestor is; 0 with nothing in common or nothing bound.
// - bindings are learned through RecordBound (the server's POST /bound, fed by a pod watcher;
//   see deploy/kubernetes/), since the extender protocol does not tell the extender where
//   pods landed.
//
// Thread-safety: all methods are safe to call concurrently (one mutex).
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/topo/model.h"

namespace railyard::http {

// Case-insensitive lookup of `key` in a JSON object; nullptr when absent or not an object.
const nlohmann::json* FindKey(const nlohmann::json& object, std::string_view key);
nlohmann::json* FindKey(nlohmann::json& object, std::string_view key);

struct ExtenderCounters {
  uint64_t filter_requests = 0;
  uint64_t prioritize_requests = 0;
  uint64_t bad_requests = 0;
  uint64_t nodes_filtered_out = 0;
};

class Extender {
 public:
  explicit Extender(topo::Cluster cluster, std::string group_label = "railyard.io/group");

  // Body of /filter. INVALID_ARGUMENT (naming the field) for a malformed ExtenderArgs.
  // Takes the request by value: the Node objects that pass are moved into the result, not
  // copied (a request can carry thousands of them).
  Result<nlohmann::json> Filter(nlohmann::json args);
  // Body of /prioritize.
  Result<nlohmann::json> Prioritize(const nlohmann::json& args);

  // A pod of `group` is bound to `node`. NOT_FOUND for a node outside the topology.
  Status RecordBound(const std::string& group, const std::string& node);
  void ForgetBound(const std::string& group, const std::string& node);
  void SetExcluded(std::set<std::string> nodes);

  ExtenderCounters counters() const;
  size_t bound_pods() const;
  const topo::Cluster& cluster() const { return cluster_; }

 private:
  struct PodInfo {
    std::string group;
    int required_level = -1;
  };
  struct Request {
    PodInfo pod;
    std::vector<std::string> names;  // candidate nodes
    bool by_name = false;            // NodeNames (nodeCacheCapable) rather than Nodes.items
  };
  // Parses ExtenderArgs; counts a malformed one. Requires mu_ held.
  Result<Request> ReadRequest(const nlohmann::json& args);
  Result<PodInfo> ReadPod(const nlohmann::json& args) const;
  // Candidate node names and whether the request used NodeNames; with Nodes.items, names[i]
  // is the name of items[i].
  Result<std::vector<std::string>> ReadNodeNames(const nlohmann::json& args, bool* by_name) const;
  int Score(int node, const std::set<int>& bound) const;

  topo::Cluster cluster_;
  std::string group_label_;
  mutable std::mutex mu_;
  std::map<std::string, std::multiset<int>> bound_;  // group -> node indices
  std::set<std::string> excluded_;
  ExtenderCounters counters_;
};

}  // namespace railyard::http
