#include "railyard/topo/node_json.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <set>

#include "railyard/base/strings.h"
#include "railyard/base/units.h"

namespace railyard::topo {

namespace {

using base::FieldContext;
using nlohmann::json;

constexpr int kMaxCpuId = 65535;

// FormatRateBits rounds to three significant digits; a rate it cannot print exactly is
// written in plain bits so that reading it back gives the same number.
std::string RateText(uint64_t bits) {
  std::string text = base::FormatRateBits(static_cast<double>(bits));
  Result<uint64_t> back = base::ParseRateBits(text);
  if (back.ok() && *back == bits) return text;
  return fmt::format("{} bit/s", bits);
}

std::string_view JsonTypeName(const json& value) {
  switch (value.type()) {
    case json::value_t::null:
      return "null";
    case json::value_t::object:
      return "an object";
    case json::value_t::array:
      return "an array";
    case json::value_t::string:
      return "a string";
    case json::value_t::boolean:
      return "a boolean";
    case json::value_t::number_integer:
    case json::value_t::number_unsigned:
      return "an integer";
    case json::value_t::number_float:
      return "a number";
    default:
      return "an unknown value";
  }
}

Status CheckKeys(const json& object, const std::vector<std::string_view>& allowed,
                 const std::vector<std::string>& extra, const FieldContext& ctx) {
  if (!object.is_object()) {
    return ctx.Error(fmt::format("expected an object, got {}", JsonTypeName(object)));
  }
  for (const auto& [key, value] : object.items()) {
    bool known = std::find(allowed.begin(), allowed.end(), key) != allowed.end() ||
                 std::find(extra.begin(), extra.end(), key) != extra.end();
    if (!known) {
      return ctx.Error(
          fmt::format("unknown key '{}' (expected one of: {})", key, fmt::join(allowed, ", ")));
    }
  }
  return Status::Ok();
}

// An optional integer in [lo, hi]; `fallback` when absent or null.
Result<int> OptionalIntIn(const json& object, std::string_view key, int fallback, int lo, int hi,
                          const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(int64_t v, base::OptionalInt(object, key, fallback, ctx));
  if (v < lo || v > hi) {
    return ctx.Child(key).Error(fmt::format("expected an integer in [{}, {}], got {}", lo, hi, v));
  }
  return static_cast<int>(v);
}

Result<int> RequireIntIn(const json& object, std::string_view key, int lo, int hi,
                         const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(int64_t v, base::RequireInt(object, key, ctx));
  if (v < lo || v > hi) {
    return ctx.Child(key).Error(fmt::format("expected an integer in [{}, {}], got {}", lo, hi, v));
  }
  return static_cast<int>(v);
}

// A rate: text as ParseRateBits reads it, or a non-negative integer in bits/s. 0 when absent.
Result<uint64_t> OptionalRate(const json& object, std::string_view key, const FieldContext& ctx) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return uint64_t{0};
  FieldContext field = ctx.Child(key);
  if (it->is_number_unsigned()) return it->get<uint64_t>();
  if (it->is_number_integer()) {
    int64_t v = it->get<int64_t>();
    if (v < 0) return field.Error(fmt::format("expected a rate, got {}", v));
    return static_cast<uint64_t>(v);
  }
  if (!it->is_string()) {
    return field.Error(
        fmt::format("expected a rate such as \"400 Gbit/s\", got {}", JsonTypeName(*it)));
  }
  Result<uint64_t> rate = base::ParseRateBits(it->get<std::string>());
  if (!rate.ok()) return field.Error(rate.status().message());
  return *rate;
}

Result<bool> OptionalBool(const json& object, std::string_view key, bool fallback,
                          const FieldContext& ctx) {
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return fallback;
  return base::RequireBool(object, key, ctx);
}

// The array under `key`, or an empty one when absent or null.
Result<const json*> OptionalArray(const json& object, std::string_view key,
                                  const FieldContext& ctx) {
  static const json kEmpty = json::array();
  auto it = object.find(key);
  if (it == object.end() || it->is_null()) return &kEmpty;
  return base::RequireArray(object, key, ctx);
}

Result<Gpu> GpuFromJson(const json& j, const FieldContext& ctx) {
  RY_RETURN_IF_ERROR(
      CheckKeys(j, {"index", "uuid", "pci_bus_id", "numa_node", "nvlink_domain"}, {}, ctx));
  Gpu g;
  RY_ASSIGN_OR_RETURN(g.index, RequireIntIn(j, "index", 0, INT_MAX, ctx));
  RY_ASSIGN_OR_RETURN(g.uuid, base::OptionalString(j, "uuid", "", ctx));
  RY_ASSIGN_OR_RETURN(g.pci_bus_id, base::OptionalString(j, "pci_bus_id", "", ctx));
  RY_ASSIGN_OR_RETURN(g.numa_node, OptionalIntIn(j, "numa_node", -1, -1, INT_MAX, ctx));
  RY_ASSIGN_OR_RETURN(g.nvlink_domain, base::OptionalString(j, "nvlink_domain", "", ctx));
  return g;
}

Result<Nic> NicFromJson(const json& j, const FieldContext& ctx) {
  RY_RETURN_IF_ERROR(
      CheckKeys(j, {"name", "pci_bus_id", "numa_node", "rail", "rate", "rdma"}, {}, ctx));
  Nic n;
  RY_ASSIGN_OR_RETURN(n.name, base::RequireString(j, "name", ctx));
  if (n.name.empty()) return ctx.Child("name").Error("expected a NIC name, got \"\"");
  RY_ASSIGN_OR_RETURN(n.pci_bus_id, base::OptionalString(j, "pci_bus_id", "", ctx));
  RY_ASSIGN_OR_RETURN(n.numa_node, OptionalIntIn(j, "numa_node", -1, -1, INT_MAX, ctx));
  RY_ASSIGN_OR_RETURN(n.rail, OptionalIntIn(j, "rail", -1, -1, INT_MAX, ctx));
  RY_ASSIGN_OR_RETURN(n.rate_bits, OptionalRate(j, "rate", ctx));
  RY_ASSIGN_OR_RETURN(n.rdma, OptionalBool(j, "rdma", false, ctx));
  return n;
}

Result<NumaNode> NumaFromJson(const json& j, const FieldContext& ctx) {
  RY_RETURN_IF_ERROR(CheckKeys(j, {"id", "cpus"}, {}, ctx));
  NumaNode numa;
  RY_ASSIGN_OR_RETURN(numa.id, RequireIntIn(j, "id", 0, INT_MAX, ctx));
  RY_ASSIGN_OR_RETURN(std::string cpus, base::OptionalString(j, "cpus", "", ctx));
  Result<std::vector<int>> parsed = ParseCpuList(cpus);
  if (!parsed.ok()) return ctx.Child("cpus").Error(parsed.status().message());
  numa.cpus = std::move(parsed).value();
  return numa;
}

Result<GpuNicPath> PathFromJson(const json& j, const FieldContext& ctx) {
  RY_RETURN_IF_ERROR(CheckKeys(j, {"gpu", "nic", "path"}, {}, ctx));
  GpuNicPath p;
  RY_ASSIGN_OR_RETURN(p.gpu, RequireIntIn(j, "gpu", 0, INT_MAX, ctx));
  RY_ASSIGN_OR_RETURN(p.nic, base::RequireString(j, "nic", ctx));
  RY_ASSIGN_OR_RETURN(std::string path, base::RequireString(j, "path", ctx));
  Result<PathClass> cls = ParsePathClass(path);
  if (!cls.ok()) return ctx.Child("path").Error(cls.status().message());
  p.path = *cls;
  return p;
}

// Reads each element of the array under `key` with `read` into `out`.
template <typename T, typename Read>
Status ReadList(const json& object, std::string_view key, const FieldContext& ctx, Read read,
                std::vector<T>* out) {
  RY_ASSIGN_OR_RETURN(const json* list, OptionalArray(object, key, ctx));
  for (size_t i = 0; i < list->size(); ++i) {
    RY_ASSIGN_OR_RETURN(T item, read((*list)[i], ctx.Child(key).Index(i)));
    out->push_back(std::move(item));
  }
  return Status::Ok();
}

Status CheckConsistency(const Node& node, const FieldContext& ctx) {
  std::set<int> gpu_indices;
  for (size_t i = 0; i < node.gpus.size(); ++i) {
    if (!gpu_indices.insert(node.gpus[i].index).second) {
      return ctx.Child("gpus").Index(i).Error(
          fmt::format("GPU index {} is listed twice", node.gpus[i].index));
    }
  }
  std::set<std::string> nic_names;
  for (size_t i = 0; i < node.nics.size(); ++i) {
    if (!nic_names.insert(node.nics[i].name).second) {
      return ctx.Child("nics").Index(i).Error(
          fmt::format("NIC '{}' is listed twice", node.nics[i].name));
    }
  }
  std::set<int> numa_ids;
  for (size_t i = 0; i < node.numa.size(); ++i) {
    if (!numa_ids.insert(node.numa[i].id).second) {
      return ctx.Child("numa").Index(i).Error(
          fmt::format("NUMA node {} is listed twice", node.numa[i].id));
    }
  }
  for (size_t i = 0; i < node.gpu_nic_paths.size(); ++i) {
    const GpuNicPath& p = node.gpu_nic_paths[i];
    FieldContext at = ctx.Child("gpu_nic_paths").Index(i);
    if (!gpu_indices.count(p.gpu)) {
      return at.Error(fmt::format("GPU {} is not in the node's 'gpus' list", p.gpu));
    }
    if (!nic_names.count(p.nic)) {
      return at.Error(fmt::format("NIC '{}' is not in the node's 'nics' list", p.nic));
    }
  }
  if (!node.gpus.empty() && node.gpu_count != static_cast<int>(node.gpus.size())) {
    return ctx.Child("gpu_count")
        .Error(fmt::format("gpu_count is {} but 'gpus' lists {} GPUs", node.gpu_count,
                           node.gpus.size()));
  }
  return Status::Ok();
}

Status CpuItemError(std::string_view text, std::string_view item, std::string_view why) {
  return InvalidArgument("cpu list '{}': item '{}': {}", text, item, why);
}

Result<int> ParseCpuId(std::string_view text, std::string_view item, std::string_view digits) {
  int v = 0;
  auto [end, ec] = std::from_chars(digits.data(), digits.data() + digits.size(), v);
  if (digits.empty() || ec != std::errc() || end != digits.data() + digits.size()) {
    return CpuItemError(text, item, fmt::format("'{}' is not a CPU number", digits));
  }
  if (v > kMaxCpuId) {
    return CpuItemError(text, item, fmt::format("CPU {} is above {}", v, kMaxCpuId));
  }
  return v;
}

}  // namespace

json NodeToJson(const Node& node) {
  json j = json::object();
  j["name"] = node.name;
  if (!node.address.empty()) j["address"] = node.address;
  if (node.link_rate_bits > 0) j["link_rate"] = RateText(node.link_rate_bits);
  j["gpu_count"] = node.gpu_count;
  if (!node.gpus.empty()) {
    json gpus = json::array();
    for (const Gpu& g : node.gpus) {
      json e = {{"index", g.index}};
      if (!g.uuid.empty()) e["uuid"] = g.uuid;
      if (!g.pci_bus_id.empty()) e["pci_bus_id"] = g.pci_bus_id;
      if (g.numa_node >= 0) e["numa_node"] = g.numa_node;
      if (!g.nvlink_domain.empty()) e["nvlink_domain"] = g.nvlink_domain;
      gpus.push_back(std::move(e));
    }
    j["gpus"] = std::move(gpus);
  }
  if (!node.nics.empty()) {
    json nics = json::array();
    for (const Nic& n : node.nics) {
      json e = {{"name", n.name}};
      if (!n.pci_bus_id.empty()) e["pci_bus_id"] = n.pci_bus_id;
      if (n.numa_node >= 0) e["numa_node"] = n.numa_node;
      if (n.rail >= 0) e["rail"] = n.rail;
      if (n.rate_bits > 0) e["rate"] = RateText(n.rate_bits);
      e["rdma"] = n.rdma;
      nics.push_back(std::move(e));
    }
    j["nics"] = std::move(nics);
  }
  if (!node.numa.empty()) {
    json numa = json::array();
    for (const NumaNode& n : node.numa) {
      numa.push_back({{"id", n.id}, {"cpus", FormatCpuList(n.cpus)}});
    }
    j["numa"] = std::move(numa);
  }
  if (!node.gpu_nic_paths.empty()) {
    json paths = json::array();
    for (const GpuNicPath& p : node.gpu_nic_paths) {
      paths.push_back({{"gpu", p.gpu}, {"nic", p.nic}, {"path", PathClassName(p.path)}});
    }
    j["gpu_nic_paths"] = std::move(paths);
  }
  return j;
}

Result<Node> NodeFromJson(const json& j, std::string_view source) {
  return NodeFromJson(j, FieldContext(std::string(source)), {});
}

Result<Node> NodeFromJson(const json& j, const FieldContext& ctx,
                          const std::vector<std::string>& extra_keys) {
  RY_RETURN_IF_ERROR(CheckKeys(
      j, {"name", "address", "link_rate", "gpu_count", "gpus", "nics", "numa", "gpu_nic_paths"},
      extra_keys, ctx));
  Node node;
  RY_ASSIGN_OR_RETURN(node.name, base::RequireString(j, "name", ctx));
  if (node.name.empty()) return ctx.Child("name").Error("expected a node name, got \"\"");
  RY_ASSIGN_OR_RETURN(node.address, base::OptionalString(j, "address", "", ctx));
  RY_ASSIGN_OR_RETURN(node.link_rate_bits, OptionalRate(j, "link_rate", ctx));
  RY_RETURN_IF_ERROR(ReadList(j, "gpus", ctx, GpuFromJson, &node.gpus));
  RY_RETURN_IF_ERROR(ReadList(j, "nics", ctx, NicFromJson, &node.nics));
  RY_RETURN_IF_ERROR(ReadList(j, "numa", ctx, NumaFromJson, &node.numa));
  RY_RETURN_IF_ERROR(ReadList(j, "gpu_nic_paths", ctx, PathFromJson, &node.gpu_nic_paths));
  RY_ASSIGN_OR_RETURN(
      node.gpu_count,
      OptionalIntIn(j, "gpu_count", static_cast<int>(node.gpus.size()), 0, INT_MAX, ctx));
  RY_RETURN_IF_ERROR(CheckConsistency(node, ctx));
  return node;
}

std::string FormatCpuList(const std::vector<int>& cpus) {
  std::vector<int> sorted;
  sorted.reserve(cpus.size());
  for (int c : cpus) {
    if (c >= 0) sorted.push_back(c);
  }
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  std::string out;
  for (size_t i = 0; i < sorted.size();) {
    size_t j = i;
    while (j + 1 < sorted.size() && sorted[j + 1] == sorted[j] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j > i ? fmt::format("{}-{}", sorted[i], sorted[j]) : fmt::format("{}", sorted[i]);
    i = j + 1;
  }
  return out;
}

Result<std::vector<int>> ParseCpuList(std::string_view text) {
  std::vector<int> out;
  if (base::StripAsciiWhitespace(text).empty()) return out;
  // Items become intervals that are merged before expanding, so repeated or overlapping
  // items cost nothing extra and the result never holds more than kMaxCpuId + 1 ids.
  std::vector<std::pair<int, int>> intervals;
  std::string_view rest = text;
  while (true) {
    size_t comma = rest.find(',');
    std::string_view item = base::StripAsciiWhitespace(rest.substr(0, comma));
    if (item.empty()) return InvalidArgument("cpu list '{}': empty item", text);
    // "a-b:used/group" selects the first `used` ids of every `group` ids from a to b.
    std::string_view range = item;
    int used = 0, group = 0;
    if (size_t colon = item.find(':'); colon != std::string_view::npos) {
      range = item.substr(0, colon);
      std::string_view stride = item.substr(colon + 1);
      size_t slash = stride.find('/');
      if (slash == std::string_view::npos || range.find('-') == std::string_view::npos) {
        return CpuItemError(text, item, "expected a stride as 'a-b:used/group'");
      }
      RY_ASSIGN_OR_RETURN(used, ParseCpuId(text, item, stride.substr(0, slash)));
      RY_ASSIGN_OR_RETURN(group, ParseCpuId(text, item, stride.substr(slash + 1)));
      if (used == 0 || group == 0 || used > group) {
        return CpuItemError(text, item, "expected 0 < used <= group in 'a-b:used/group'");
      }
    }
    size_t dash = range.find('-');
    RY_ASSIGN_OR_RETURN(int lo, ParseCpuId(text, item, range.substr(0, dash)));
    int hi = lo;
    if (dash != std::string_view::npos) {
      RY_ASSIGN_OR_RETURN(hi, ParseCpuId(text, item, range.substr(dash + 1)));
      if (hi < lo) return CpuItemError(text, item, "a range must go up ('a-b' with a <= b)");
    }
    if (group == 0) {
      intervals.emplace_back(lo, hi);
    } else {
      for (int start = lo; start <= hi; start += group) {
        intervals.emplace_back(start, std::min(hi, start + used - 1));
      }
    }
    if (intervals.size() > (size_t{1} << 20)) {
      return InvalidArgument("cpu list '{:.64}...': too many items", text);
    }
    if (comma == std::string_view::npos) break;
    rest.remove_prefix(comma + 1);
  }
  std::sort(intervals.begin(), intervals.end());
  int next = 0;  // first id not yet emitted
  for (const auto& [lo, hi] : intervals) {
    for (int c = std::max(lo, next); c <= hi; ++c) out.push_back(c);
    next = std::max(next, hi + 1);
  }
  return out;
}

}  // namespace railyard::topo
