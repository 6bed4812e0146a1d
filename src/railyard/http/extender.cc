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

Result<Extender::PodInfo> Extender::ReadPod(const json& args) const {
  if (!args.is_object()) return InvalidArgument("ExtenderArgs: expected a JSON object");
  const json* pod = FindKey(args, "Pod");
  if (pod == nullptr || !pod->is_object()) {
    return InvalidArgument("ExtenderArgs: field 'Pod': expected a v1.Pod object");
  }
  PodInfo info;
  info.group = MetaValue(*pod, "labels", group_label_);
  std::string level = MetaValue(*pod, "annotations", "kueue.x-k8s.io/podset-required-topology");
  if (level.empty()) level = MetaValue(*pod, "annotations", "railyard.io/required-level");
  if (!level.empty()) {
    std::string_view name = level;
    if (name.rfind("railyard.io/", 0) == 0) name.remove_prefix(12);
    info.required_level = cluster_.FindLevel(name);
    if (info.required_level < 0) {
      return InvalidArgument("pod requires topology level '{}', which is not one of {}", level,
                             fmt::join(cluster_.levels, ", "));
    }
  }
  return info;
}

Result<std::vector<std::string>> Extender::ReadNodeNames(const json& args, bool* by_name) const {
  std::vector<std::string> names;
  const json* node_names = FindKey(args, "NodeNames");
  if (node_names != nullptr && node_names->is_array()) {
    *by_name = true;
    for (const auto& n : *node_names) {
      if (!n.is_string())
        return InvalidArgument("ExtenderArgs: field 'NodeNames': expected strings");
      names.push_back(n.get<std::string>());
    }
    return names;
  }
  *by_name = false;
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
    names.push_back(name->get<std::string>());
  }
  return names;
}

Result<Extender::Request> Extender::ReadRequest(const json& args) {
  Request req;
  auto pod = ReadPod(args);
  auto names =
      pod.ok() ? ReadNodeNames(args, &req.by_name) : Result<std::vector<std::string>>(pod.status());
  if (!names.ok()) {
    ++counters_.bad_requests;
    return names.status();
  }
  req.pod = *pod;
  req.names = std::move(*names);
  return req;
}

Result<json> Extender::Filter(json args) {
  std::lock_guard lock(mu_);
  ++counters_.filter_requests;
  RY_ASSIGN_OR_RETURN(Request req, ReadRequest(args));
  const PodInfo* pod = &req.pod;
  const std::vector<std::string>* names = &req.names;
  const bool by_name = req.by_name;
  // ReadRequest checked that Nodes.items is an array when NodeNames is not used.
  json* items = by_name ? nullptr : FindKey(*FindKey(args, "Nodes"), "items");
  // Domains of the required level already used by the group: a node must share one.
  std::set<int> required_domains;
  if (pod->required_level >= 0 && !pod->group.empty()) {
    auto it = bound_.find(pod->group);
    if (it != bound_.end()) {
      for (int n : it->second) required_domains.insert(cluster_.DomainOf(n, pod->required_level));
    }
  }
  json passed_names = json::array();
  json passed_items = json::array();
  json failed = json::object();
  for (size_t i = 0; i < names->size(); ++i) {
    const std::string& name = (*names)[i];
    int n = cluster_.FindNode(name);
    std::string reason;
    if (n < 0) {
      reason = "node is not in the Railyard topology";
    } else if (excluded_.count(name)) {
      reason = "node is excluded by Railyard validation";
    } else if (!required_domains.empty() &&
               !required_domains.count(cluster_.DomainOf(n, pod->required_level))) {
      const int d = *required_domains.begin();
      reason = fmt::format("group '{}' requires one {} and is already on {}", pod->group,
                           cluster_.levels[pod->required_level], cluster_.switches[d].name);
    }
    if (!reason.empty()) {
      failed[name] = reason;
      ++counters_.nodes_filtered_out;
      continue;
    }
    if (by_name) {
      passed_names.push_back(name);
    } else {
      passed_items.push_back(std::move((*items)[i]));
    }
  }
  json result = json::object();
  result["FailedNodes"] = std::move(failed);
  result["FailedAndUnresolvableNodes"] = json::object();
  result["Error"] = "";
  if (by_name) {
    result["NodeNames"] = std::move(passed_names);
    result["Nodes"] = nullptr;
  } else {
    result["Nodes"] = json::object();
    result["Nodes"]["items"] = std::move(passed_items);
    result["NodeNames"] = nullptr;
  }
  return result;
}

int Extender::Score(int node, const std::set<int>& bound) const {
  if (bound.empty()) return 0;
  const int levels = static_cast<int>(cluster_.levels.size());
  // The deepest level at which the node shares a switch with a bound pod.
  for (int level = levels - 1; level >= 0; --level) {
    const int d = cluster_.DomainOf(node, level);
    if (d < 0) continue;
    for (int b : bound) {
      if (cluster_.DomainOf(b, level) == d) return 10 * (level + 1) / levels;
    }
  }
  return 0;
}

Result<json> Extender::Prioritize(const json& args) {
  std::lock_guard lock(mu_);
  ++counters_.prioritize_requests;
  RY_ASSIGN_OR_RETURN(Request req, ReadRequest(args));
  const PodInfo* pod = &req.pod;
  const std::vector<std::string>* names = &req.names;
  std::set<int> bound;
  if (!pod->group.empty()) {
    auto it = bound_.find(pod->group);
    if (it != bound_.end()) bound.insert(it->second.begin(), it->second.end());
  }
  json list = json::array();
  for (const auto& name : *names) {
    int n = cluster_.FindNode(name);
    list.push_back({{"Host", name}, {"Score", n < 0 ? 0 : Score(n, bound)}});
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
  auto one = it->second.find(n);
  if (one != it->second.end()) it->second.erase(one);
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
