#include "railyard/http/extender.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>

namespace railyard::http {

using nlohmann::json;

namespace {

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) ==
                  std::tolower(static_cast<unsigned char>(y));
         });
}

// metadata.labels[key] / metadata.annotations[key] of a v1 object, "" when absent.
std::string MetaValue(const json& object, std::string_view section, std::string_view key) {
  const json* meta = FindKey(object, "metadata");
  if (meta == nullptr) return "";
  const json* map = FindKey(*meta, section);
  if (map == nullptr || !map->is_object()) return "";
  auto it = map->find(std::string(key));  // label keys are case-sensitive in Kubernetes
  return it != map->end() && it->is_string() ? it->get<std::string>() : "";
}

}  // namespace

const json* FindKey(const json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto exact = object.find(std::string(key));
  if (exact != object.end()) return &*exact;
  for (auto it = object.begin(); it != object.end(); ++it) {
    if (EqualsIgnoreCase(it.key(), key)) return &it.value();
  }
  return nullptr;
}

json* FindKey(json& object, std::string_view key) {
  return const_cast<json*>(FindKey(static_cast<const json&>(object), key));
}

Extender::Extender(topo::Cluster cluster, std::string group_label)
    : cluster_(std::move(cluster)), group_label_(std::move(group_label)) {}

Result<Extender::Request> Extender::ReadRequest(const json& args) const {
  if (!args.is_object()) return InvalidArgument("ExtenderArgs: expected a JSON object");
  const json* pod = FindKey(args, "Pod");
  if (pod == nullptr || !pod->is_object()) {
    return InvalidArgument("ExtenderArgs: field 'Pod': expected a v1.Pod object");
  }
  Request req;
  req.pod.group = MetaValue(*pod, "labels", group_label_);
  req.pod.required_topology =
      MetaValue(*pod, "annotations", place::kKueueRequiredTopologyAnnotation);
  req.pod.preferred_topology =
      MetaValue(*pod, "annotations", place::kKueuePreferredTopologyAnnotation);
  req.pod.required_level = MetaValue(*pod, "annotations", place::kRequiredLevelAnnotation);

  const json* node_names = FindKey(args, "NodeNames");
  if (node_names != nullptr && node_names->is_array()) {
    req.by_name = true;
    for (const auto& n : *node_names) {
      if (!n.is_string()) {
        return InvalidArgument("ExtenderArgs: field 'NodeNames': expected strings");
      }
      req.names.push_back(n.get<std::string>());
    }
    return req;
  }
  const json* nodes = FindKey(args, "Nodes");
  if (nodes == nullptr || nodes->is_null()) {
    return InvalidArgument("ExtenderArgs: neither 'NodeNames' nor 'Nodes' is set");
  }
  const json* items = FindKey(*nodes, "items");
  if (items == nullptr || !items->is_array()) {
    return InvalidArgument("ExtenderArgs: field 'Nodes.items': expected a list of v1.Node");
  }
  for (const auto& node : *items) {
    const json* meta = FindKey(node, "metadata");
    const json* name = meta ? FindKey(*meta, "name") : nullptr;
    if (name == nullptr || !name->is_string()) {
      return InvalidArgument("ExtenderArgs: a node in 'Nodes.items' has no metadata.name");
    }
    req.names.push_back(name->get<std::string>());
  }
  return req;
}

Result<place::ResolvedPod> Extender::Prepare(const json& args, Request* req, std::set<int>* bound) {
  auto parsed = ReadRequest(args);
  auto pod = parsed.ok() ? place::ResolvePod(cluster_, parsed->pod)
                         : Result<place::ResolvedPod>(parsed.status());
  if (!pod.ok()) {
    ++counters_.bad_requests;
    return pod.status();
  }
  *req = std::move(*parsed);
  if (!pod->group.empty()) {
    auto it = bound_.find(pod->group);
    if (it != bound_.end()) *bound = it->second;
  }
  return pod;
}

Result<json> Extender::Filter(json args) {
  std::lock_guard lock(mu_);
  ++counters_.filter_requests;
  Request req;
  std::set<int> bound;
  RY_ASSIGN_OR_RETURN(place::ResolvedPod pod, Prepare(args, &req, &bound));
  place::FilterVerdict verdict = place::FilterNodes(cluster_, pod, req.names, bound, excluded_);
  counters_.nodes_filtered_out += verdict.failed.size();

  json failed = json::object();
  for (const auto& [i, reason] : verdict.failed) failed[req.names[i]] = reason;
  json result = json::object();
  result["FailedNodes"] = failed;
  result["FailedAndUnresolvableNodes"] = std::move(failed);
  result["Error"] = "";
  if (req.by_name) {
    json passed = json::array();
    for (size_t i : verdict.passed) passed.push_back(req.names[i]);
    result["NodeNames"] = std::move(passed);
    result["Nodes"] = nullptr;
  } else {
    // ReadRequest checked that Nodes.items is an array. The passing Node objects are moved,
    // not copied: a request can carry thousands of them.
    json& items = *FindKey(*FindKey(args, "Nodes"), "items");
    json passed = json::array();
    for (size_t i : verdict.passed) passed.push_back(std::move(items[i]));
    result["Nodes"] = json::object();
    result["Nodes"]["items"] = std::move(passed);
    result["NodeNames"] = nullptr;
  }
  return result;
}

Result<json> Extender::Prioritize(const json& args) {
  std::lock_guard lock(mu_);
  ++counters_.prioritize_requests;
  Request req;
  std::set<int> bound;
  RY_ASSIGN_OR_RETURN(place::ResolvedPod pod, Prepare(args, &req, &bound));
  std::vector<int> scores = place::ScoreNodes(cluster_, pod, req.names, bound);
  json list = json::array();
  for (size_t i = 0; i < req.names.size(); ++i) {
    list.push_back({{"Host", req.names[i]}, {"Score", scores[i]}});
  }
  return list;
}

Status Extender::RecordBound(const std::string& group, const std::string& node) {
  int n = cluster_.FindNode(node);
  if (n < 0) return NotFound("node '{}' is not in the Railyard topology", node);
  if (group.empty()) return InvalidArgument("a bound pod needs a non-empty group");
  std::lock_guard lock(mu_);
  bound_[group].insert(n);
  return Status::Ok();
}

void Extender::ForgetBound(const std::string& group, const std::string& node) {
  int n = cluster_.FindNode(node);
  std::lock_guard lock(mu_);
  auto it = bound_.find(group);
  if (it == bound_.end()) return;
  it->second.erase(n);
  if (it->second.empty()) bound_.erase(it);
}

void Extender::SetExcluded(std::set<std::string> nodes) {
  std::lock_guard lock(mu_);
  excluded_ = std::move(nodes);
}

ExtenderCounters Extender::counters() const {
  std::lock_guard lock(mu_);
  return counters_;
}

size_t Extender::bound_pods() const {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [g, nodes] : bound_) n += nodes.size();
  return n;
}

}  // namespace railyard::http
