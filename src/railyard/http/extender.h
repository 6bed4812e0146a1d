// The Kubernetes scheduler extender's JSON face: ExtenderArgs in, ExtenderFilterResult and
// HostPriorityList out. It reads the pod's gang label and topology annotations and the
// candidate node names, asks the policy in place/pod_policy.h, and writes the answer; it holds
// the gang bindings the watcher reports. server.h puts it behind HTTP.
//
// Wire shapes (k8s.io/kube-scheduler/extender/v1; the types carry no JSON tags, so the
// scheduler sends Go field names, and every key here is matched case-insensitively):
//   ExtenderArgs          {"Pod": v1.Pod, "Nodes": v1.NodeList|null, "NodeNames": [..]|null}
//   ExtenderFilterResult  {"Nodes"|"NodeNames", "FailedNodes": {name: reason},
//                          "FailedAndUnresolvableNodes": {name: reason}, "Error": ""}
//   HostPriorityList      [{"Host": name, "Score": 0..10}]
// A failed node is listed in both maps: kube-scheduler (1.20 on) lets FailedAndUnresolvable
// win, so preemption does not evict pods from a node the pod can never use; older schedulers
// read FailedNodes.
//
// Bindings: the extender protocol does not say where pods were bound, so a watcher reports
// each (gang, node) pair that holds at least one bound pod of the gang (RecordBound) and each
// pair that no longer does (ForgetBound). Both are idempotent, so the watcher can replay its
// whole list after either side restarts (deploy/kubernetes/extender.yaml).
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
#include "railyard/place/pod_policy.h"
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

  // At least one pod of `group` is bound to `node` (idempotent). NOT_FOUND for a node
  // outside the topology, INVALID_ARGUMENT for an empty group.
  Status RecordBound(const std::string& group, const std::string& node);
  // No pod of `group` is bound to `node` any more (idempotent; unknown pairs are ignored).
  void ForgetBound(const std::string& group, const std::string& node);
  void SetExcluded(std::set<std::string> nodes);

  ExtenderCounters counters() const;
  // (group, node) pairs recorded by RecordBound.
  size_t bound_pods() const;
  const topo::Cluster& cluster() const { return cluster_; }

 private:
  struct Request {
    place::PodRequest pod;
    std::vector<std::string> names;  // candidate nodes
    bool by_name = false;            // NodeNames (nodeCacheCapable) rather than Nodes.items
  };
  // Parses ExtenderArgs. INVALID_ARGUMENT naming the field.
  Result<Request> ReadRequest(const nlohmann::json& args) const;
  // ReadRequest, then the policy's view of the pod and its gang's bound nodes; counts a
  // malformed request. Requires mu_ held.
  Result<place::ResolvedPod> Prepare(const nlohmann::json& args, Request* req,
                                     std::set<int>* bound);

  topo::Cluster cluster_;
  std::string group_label_;
  mutable std::mutex mu_;
  std::map<std::string, std::set<int>> bound_;  // group -> node indices
  std::set<std::string> excluded_;
  ExtenderCounters counters_;
};

}  // namespace railyard::http
