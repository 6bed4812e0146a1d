// ParseTopologyYaml and TopologyFromYaml (yaml_format.h): Railyard topology YAML, versions 1
// and 2, read into a ClusterBuilder with every error naming the file, line and field. The
// writer is yaml_writer.cc.
#include "railyard/topo/yaml_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "railyard/base/config.h"
#include "railyard/base/strings.h"
#include "railyard/base/units.h"
#include "railyard/topo/hostlist.h"
#include "railyard/topo/slurm_format.h"

namespace railyard::topo {
namespace {

using base::FieldContext;

// A compact leaf ("gpu[1-100000]") times many leaves could otherwise allocate without bound.
constexpr size_t kMaxNodes = 1'000'000;
constexpr int kMaxGpusPerNode = 4096;
constexpr size_t kMaxCpusPerNuma = 1 << 20;

YAML::Node KeyNode(const YAML::Node& map, std::string_view key) {
  for (const auto& kv : map) {
    if (kv.first.IsScalar() && kv.first.Scalar() == key) return kv.first;
  }
  return map;
}

Result<int> IntIn(const YAML::Node& map, std::string_view key, int fallback, int lo, int hi,
                  const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(int64_t v, base::OptionalInt(map, key, fallback, ctx));
  if (v < lo || v > hi) {
    return ctx.Child(key).Error(base::YamlGet(map, key),
                                fmt::format("{} is out of range (expected {} to {})", v, lo, hi));
  }
  return static_cast<int>(v);
}

// A rate field: absent, "unshaped", "unknown" or "0" mean 0 (not known or not shaped).
Result<uint64_t> Rate(const YAML::Node& map, std::string_view key, const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(std::string text, base::OptionalString(map, key, "", ctx));
  if (text.empty() || text == "unshaped" || text == "unknown" || text == "0") return uint64_t{0};
  Result<uint64_t> bits = base::ParseRateBits(text);
  if (!bits.ok()) return ctx.Child(key).Error(base::YamlGet(map, key), bits.status().message());
  return *bits;
}

Result<std::string> ScalarItem(const YAML::Node& item, const FieldContext& ctx) {
  if (!item.IsScalar()) return ctx.Error(item, "expected a string");
  return item.Scalar();
}

// "0-15,32-47" -> {0..15, 32..47}, in the order written.
Result<std::vector<int>> ParseCpuList(const YAML::Node& at, std::string_view text,
                                      const FieldContext& ctx) {
  std::vector<int> cpus;
  size_t start = 0;
  auto fail = [&](std::string_view why) {
    return ctx.Error(at,
                     fmt::format("cpu list '{}': {} (expected a list like 0-15,32-47)", text, why));
  };
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string_view part =
        base::StripChars(text.substr(start, comma == text.npos ? text.npos : comma - start), " ");
    if (part.empty()) return fail("empty entry");
    size_t dash = part.find('-');
    int64_t lo = 0, hi = 0;
    auto number = [&](std::string_view s, int64_t& out) {
      if (s.empty() || s.size() > 7) return false;
      out = 0;
      for (char c : s) {
        if (c < '0' || c > '9') return false;
        out = out * 10 + (c - '0');
      }
      return true;
    };
    if (!number(part.substr(0, dash), lo)) {
      return fail(fmt::format("'{}' is not a CPU number", part));
    }
    hi = lo;
    if (dash != part.npos && !number(part.substr(dash + 1), hi)) {
      return fail(fmt::format("'{}' is not a CPU range", part));
    }
    if (hi < lo) return fail(fmt::format("range {} is descending", part));
    if (cpus.size() + static_cast<size_t>(hi - lo + 1) > kMaxCpusPerNuma) {
      return fail("too many CPUs");
    }
    for (int64_t c = lo; c <= hi; ++c) cpus.push_back(static_cast<int>(c));
    if (comma == text.npos) break;
    start = comma + 1;
  }
  return cpus;
}

class Reader {
 public:
  explicit Reader(std::string_view source) : source_(source), builder_(std::string(source)) {}

  Result<Cluster> Read(const YAML::Node& root);

 private:
  Status ReadVersion(const YAML::Node& root, const FieldContext& ctx);
  Status ReadProfiles(const YAML::Node& map, const FieldContext& ctx);
  Status ReadSwitch(const YAML::Node& sw, const FieldContext& ctx);
  Status ReadNode(const YAML::Node& node, const FieldContext& ctx);
  // Overlays the hardware keys present in `map` onto `node`.
  Status ReadHardware(const YAML::Node& map, const FieldContext& ctx, Node& node);
  Result<std::vector<Gpu>> ReadGpus(const YAML::Node& seq, const FieldContext& ctx);
  Result<std::vector<Nic>> ReadNics(const YAML::Node& seq, const FieldContext& ctx);
  Result<std::vector<NumaNode>> ReadNuma(const YAML::Node& seq, const FieldContext& ctx);
  Result<std::vector<GpuNicPath>> ReadPaths(const YAML::Node& seq, const FieldContext& ctx);
  Result<const Node*> Profile(const YAML::Node& map, const FieldContext& ctx);
  Status CountNodes(size_t more, const YAML::Node& at, const FieldContext& ctx);
  // Keys only version 2 knows, in a version 1 file: say so rather than "unknown key".
  Status RejectV2Keys(const YAML::Node& map, std::initializer_list<std::string_view> keys,
                      const FieldContext& ctx);

  std::string source_;
  ClusterBuilder builder_;
  int version_ = 0;
  std::map<std::string, Node, std::less<>> profiles_;
  size_t node_count_ = 0;
};

Status Reader::RejectV2Keys(const YAML::Node& map, std::initializer_list<std::string_view> keys,
                            const FieldContext& ctx) {
  if (version_ >= 2) return Status::Ok();
  for (std::string_view k : keys) {
    if (base::YamlGet(map, k).IsDefined()) {
      return ctx.Child(k).Error(
          KeyNode(map, k),
          fmt::format("'{}' needs version 2 (this file says version {})", k, version_));
    }
  }
  return Status::Ok();
}

Status Reader::CountNodes(size_t more, const YAML::Node& at, const FieldContext& ctx) {
  node_count_ += more;
  if (node_count_ > kMaxNodes) {
    return ctx.Error(at, fmt::format("the topology has more than {} nodes", kMaxNodes));
  }
  return Status::Ok();
}

Status Reader::ReadVersion(const YAML::Node& root, const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(int64_t v, base::RequireInt(root, "version", ctx));
  if (v > kTopologyYamlVersion) {
    return ctx.Child("version").Error(
        base::YamlGet(root, "version"),
        fmt::format("version {} is newer than this railyard understands ({}-{})", v,
                    kMinTopologyYamlVersion, kTopologyYamlVersion));
  }
  if (v < kMinTopologyYamlVersion) {
    return ctx.Child("version").Error(
        base::YamlGet(root, "version"),
        fmt::format("version {} is not a topology version (expected {}-{})", v,
                    kMinTopologyYamlVersion, kTopologyYamlVersion));
  }
  version_ = static_cast<int>(v);
  return Status::Ok();
}

Result<std::vector<Gpu>> Reader::ReadGpus(const YAML::Node& seq, const FieldContext& ctx) {
  std::vector<Gpu> gpus;
  std::set<int> seen;
  if (seq.size() > static_cast<size_t>(kMaxGpusPerNode)) {
    return ctx.Error(seq, fmt::format("more than {} GPUs", kMaxGpusPerNode));
  }
  for (size_t i = 0; i < seq.size(); ++i) {
    FieldContext c = ctx.Index(i);
    const YAML::Node& g = seq[i];
    RY_RETURN_IF_ERROR(base::ExpectMap(g, c));
    RY_RETURN_IF_ERROR(base::RejectUnknownKeys(
        g, {"index", "uuid", "pci_bus_id", "numa_node", "nvlink_domain"}, c));
    Gpu gpu;
    RY_ASSIGN_OR_RETURN(gpu.index, IntIn(g, "index", static_cast<int>(i), 0, 1 << 20, c));
    RY_ASSIGN_OR_RETURN(gpu.uuid, base::OptionalString(g, "uuid", "", c));
    RY_ASSIGN_OR_RETURN(gpu.pci_bus_id, base::OptionalString(g, "pci_bus_id", "", c));
    RY_ASSIGN_OR_RETURN(gpu.numa_node, IntIn(g, "numa_node", -1, -1, 1 << 20, c));
    RY_ASSIGN_OR_RETURN(gpu.nvlink_domain, base::OptionalString(g, "nvlink_domain", "", c));
    if (!seen.insert(gpu.index).second) {
      return c.Child("index").Error(g, fmt::format("GPU index {} is listed twice", gpu.index));
    }
    gpus.push_back(std::move(gpu));
  }
  return gpus;
}

Result<std::vector<Nic>> Reader::ReadNics(const YAML::Node& seq, const FieldContext& ctx) {
  std::vector<Nic> nics;
  std::set<std::string> seen;
  for (size_t i = 0; i < seq.size(); ++i) {
    FieldContext c = ctx.Index(i);
    const YAML::Node& n = seq[i];
    RY_RETURN_IF_ERROR(base::ExpectMap(n, c));
    RY_RETURN_IF_ERROR(
        base::RejectUnknownKeys(n, {"name", "pci_bus_id", "numa_node", "rail", "rate", "rdma"}, c));
    Nic nic;
    RY_ASSIGN_OR_RETURN(nic.name, base::RequireString(n, "name", c));
    RY_ASSIGN_OR_RETURN(nic.pci_bus_id, base::OptionalString(n, "pci_bus_id", "", c));
    RY_ASSIGN_OR_RETURN(nic.numa_node, IntIn(n, "numa_node", -1, -1, 1 << 20, c));
    RY_ASSIGN_OR_RETURN(nic.rail, IntIn(n, "rail", -1, -1, 1 << 20, c));
    RY_ASSIGN_OR_RETURN(nic.rate_bits, Rate(n, "rate", c));
    RY_ASSIGN_OR_RETURN(nic.rdma, base::OptionalBool(n, "rdma", false, c));
    if (nic.name.empty()) return c.Child("name").Error(n, "a NIC needs a name");
    if (!seen.insert(nic.name).second) {
      return c.Child("name").Error(base::YamlGet(n, "name"),
                                   fmt::format("NIC '{}' is listed twice", nic.name));
    }
    nics.push_back(std::move(nic));
  }
  return nics;
}

Result<std::vector<NumaNode>> Reader::ReadNuma(const YAML::Node& seq, const FieldContext& ctx) {
  std::vector<NumaNode> numa;
  std::set<int> seen;
  for (size_t i = 0; i < seq.size(); ++i) {
    FieldContext c = ctx.Index(i);
    const YAML::Node& n = seq[i];
    RY_RETURN_IF_ERROR(base::ExpectMap(n, c));
    RY_RETURN_IF_ERROR(base::RejectUnknownKeys(n, {"id", "cpus"}, c));
    NumaNode nn;
    RY_ASSIGN_OR_RETURN(int64_t id, base::RequireInt(n, "id", c));
    if (id < 0 || id > (1 << 20))
      return c.Child("id").Error(base::YamlGet(n, "id"), "out of range");
    nn.id = static_cast<int>(id);
    RY_ASSIGN_OR_RETURN(std::string cpus, base::OptionalString(n, "cpus", "", c));
    if (!cpus.empty()) {
      RY_ASSIGN_OR_RETURN(nn.cpus, ParseCpuList(base::YamlGet(n, "cpus"), cpus, c.Child("cpus")));
    }
    if (!seen.insert(nn.id).second) {
      return c.Child("id").Error(base::YamlGet(n, "id"),
                                 fmt::format("NUMA node {} is listed twice", id));
    }
    numa.push_back(std::move(nn));
  }
  return numa;
}

Result<std::vector<GpuNicPath>> Reader::ReadPaths(const YAML::Node& seq, const FieldContext& ctx) {
  std::vector<GpuNicPath> paths;
  for (size_t i = 0; i < seq.size(); ++i) {
    FieldContext c = ctx.Index(i);
    const YAML::Node& p = seq[i];
    RY_RETURN_IF_ERROR(base::ExpectMap(p, c));
    RY_RETURN_IF_ERROR(base::RejectUnknownKeys(p, {"gpu", "nic", "path"}, c));
    GpuNicPath path;
    RY_ASSIGN_OR_RETURN(int64_t gpu, base::RequireInt(p, "gpu", c));
    if (gpu < 0 || gpu > (1 << 20))
      return c.Child("gpu").Error(base::YamlGet(p, "gpu"), "out of range");
    path.gpu = static_cast<int>(gpu);
    RY_ASSIGN_OR_RETURN(path.nic, base::RequireString(p, "nic", c));
    RY_ASSIGN_OR_RETURN(std::string cls, base::RequireString(p, "path", c));
    Result<PathClass> pc = ParsePathClass(cls);
    if (!pc.ok()) return c.Child("path").Error(base::YamlGet(p, "path"), pc.status().message());
    path.path = *pc;
    paths.push_back(std::move(path));
  }
  return paths;
}

Status Reader::ReadHardware(const YAML::Node& map, const FieldContext& ctx, Node& node) {
  YAML::Node gpus = base::YamlGet(map, "gpus");
  if (gpus.IsDefined() && !gpus.IsNull()) {
    if (gpus.IsScalar()) {
      RY_ASSIGN_OR_RETURN(node.gpu_count, IntIn(map, "gpus", 0, 0, kMaxGpusPerNode, ctx));
      node.gpus.clear();
    } else if (gpus.IsSequence()) {
      RY_ASSIGN_OR_RETURN(node.gpus, ReadGpus(gpus, ctx.Child("gpus")));
      node.gpu_count = static_cast<int>(node.gpus.size());
    } else {
      return ctx.Child("gpus").Error(gpus, "expected a GPU count or a list of GPUs, got a map");
    }
  }
  if (base::YamlHas(map, "nics")) {
    RY_ASSIGN_OR_RETURN(YAML::Node seq, base::RequireSequence(map, "nics", ctx));
    RY_ASSIGN_OR_RETURN(node.nics, ReadNics(seq, ctx.Child("nics")));
  }
  if (base::YamlHas(map, "numa")) {
    RY_ASSIGN_OR_RETURN(YAML::Node seq, base::RequireSequence(map, "numa", ctx));
    RY_ASSIGN_OR_RETURN(node.numa, ReadNuma(seq, ctx.Child("numa")));
  }
  if (base::YamlHas(map, "gpu_nic_paths")) {
    RY_ASSIGN_OR_RETURN(YAML::Node seq, base::RequireSequence(map, "gpu_nic_paths", ctx));
    RY_ASSIGN_OR_RETURN(node.gpu_nic_paths, ReadPaths(seq, ctx.Child("gpu_nic_paths")));
  }
  return Status::Ok();
}

// Paths must name GPUs and NICs the node has; checked after profiles and overrides combine.
Status CheckPaths(const Node& node, std::string_view what, const YAML::Node& at,
                  const FieldContext& ctx) {
  for (size_t i = 0; i < node.gpu_nic_paths.size(); ++i) {
    const GpuNicPath& p = node.gpu_nic_paths[i];
    bool gpu_known = node.gpus.empty()
                         ? p.gpu < node.gpu_count
                         : std::any_of(node.gpus.begin(), node.gpus.end(),
                                       [&](const Gpu& g) { return g.index == p.gpu; });
    if (!gpu_known) {
      return ctx.Child("gpu_nic_paths")
          .Index(i)
          .Error(at, fmt::format("{} has no GPU {} (it has {} GPUs)", what, p.gpu, node.gpu_count));
    }
    bool nic_known = std::any_of(node.nics.begin(), node.nics.end(),
                                 [&](const Nic& n) { return n.name == p.nic; });
    if (!nic_known) {
      std::vector<std::string> names;
      for (const auto& n : node.nics) names.push_back(n.name);
      return ctx.Child("gpu_nic_paths")
          .Index(i)
          .Error(at, fmt::format("{} has no NIC '{}' (its NICs: {})", what, p.nic,
                                 names.empty() ? std::string("none")
                                               : fmt::format("{}", fmt::join(names, ", "))));
    }
  }
  return Status::Ok();
}

Status Reader::ReadProfiles(const YAML::Node& map, const FieldContext& ctx) {
  if (!map.IsDefined() || map.IsNull()) return Status::Ok();
  RY_RETURN_IF_ERROR(base::ExpectMap(map, ctx));
  for (const auto& kv : map) {
    if (!kv.first.IsScalar()) return ctx.Error(kv.first, "expected a profile name");
    std::string name = kv.first.Scalar();
    FieldContext c = ctx.Child(name);
    RY_RETURN_IF_ERROR(base::ExpectMap(kv.second, c));
    RY_RETURN_IF_ERROR(
        base::RejectUnknownKeys(kv.second, {"gpus", "nics", "numa", "gpu_nic_paths"}, c));
    Node hw;
    RY_RETURN_IF_ERROR(ReadHardware(kv.second, c, hw));
    RY_RETURN_IF_ERROR(CheckPaths(hw, fmt::format("profile '{}'", name), kv.second, c));
    if (!profiles_.emplace(name, std::move(hw)).second) {
      return c.Error(kv.first, fmt::format("profile '{}' is defined twice", name));
    }
  }
  return Status::Ok();
}

Result<const Node*> Reader::Profile(const YAML::Node& map, const FieldContext& ctx) {
  RY_ASSIGN_OR_RETURN(std::string name, base::OptionalString(map, "profile", "", ctx));
  if (name.empty()) return static_cast<const Node*>(nullptr);
  auto it = profiles_.find(name);
  if (it == profiles_.end()) {
    std::vector<std::string_view> known;
    for (const auto& [k, v] : profiles_) known.push_back(k);
    return ctx.Child("profile").Error(
        base::YamlGet(map, "profile"),
        fmt::format(
            "no profile named '{}' (defined: {})", name,
            known.empty() ? std::string("none") : fmt::format("{}", fmt::join(known, ", "))));
  }
  return &it->second;
}

Status Reader::ReadSwitch(const YAML::Node& sw, const FieldContext& ctx) {
  RY_RETURN_IF_ERROR(base::ExpectMap(sw, ctx));
  RY_RETURN_IF_ERROR(
      RejectV2Keys(sw, {"nodes", "gpus_per_node", "profile", "node_link_rate"}, ctx));
  RY_RETURN_IF_ERROR(base::RejectUnknownKeys(sw,
                                             {"name", "level", "parent", "uplink_rate", "nodes",
                                              "gpus_per_node", "profile", "node_link_rate"},
                                             ctx));
  RY_ASSIGN_OR_RETURN(std::string name, base::RequireString(sw, "name", ctx));
  RY_ASSIGN_OR_RETURN(std::string level, base::RequireString(sw, "level", ctx));
  RY_ASSIGN_OR_RETURN(std::string parent, base::OptionalString(sw, "parent", "", ctx));
  RY_ASSIGN_OR_RETURN(uint64_t uplink, Rate(sw, "uplink_rate", ctx));
  builder_.AddSwitch(name, level, parent, uplink, base::YamlLine(sw));

  if (!base::YamlHas(sw, "nodes")) {
    for (std::string_view k : {"gpus_per_node", "profile", "node_link_rate"}) {
      if (base::YamlHas(sw, k)) {
        return ctx.Child(k).Error(KeyNode(sw, k),
                                  fmt::format("'{}' describes the nodes a switch lists, but "
                                              "switch '{}' has no 'nodes'",
                                              k, name));
      }
    }
    return Status::Ok();
  }
  RY_ASSIGN_OR_RETURN(std::string hostlist, base::RequireString(sw, "nodes", ctx));
  Result<std::vector<std::string>> names = ExpandHostlist(hostlist);
  if (!names.ok())
    return ctx.Child("nodes").Error(base::YamlGet(sw, "nodes"), names.status().message());
  RY_RETURN_IF_ERROR(CountNodes(names->size(), base::YamlGet(sw, "nodes"), ctx.Child("nodes")));

  Node tmpl;
  RY_ASSIGN_OR_RETURN(const Node* profile, Profile(sw, ctx));
  if (profile != nullptr) tmpl = *profile;
  if (base::YamlHas(sw, "gpus_per_node")) {
    RY_ASSIGN_OR_RETURN(int gpus, IntIn(sw, "gpus_per_node", 0, 0, kMaxGpusPerNode, ctx));
    if (!tmpl.gpus.empty() && gpus != tmpl.gpu_count) {
      return ctx.Child("gpus_per_node")
          .Error(base::YamlGet(sw, "gpus_per_node"),
                 fmt::format("{} GPUs per node, but profile '{}' lists {} GPUs", gpus,
                             base::YamlGet(sw, "profile").Scalar(), tmpl.gpu_count));
    }
    tmpl.gpu_count = gpus;
  }
  RY_ASSIGN_OR_RETURN(tmpl.link_rate_bits, Rate(sw, "node_link_rate", ctx));
  int line = base::YamlLine(base::YamlGet(sw, "nodes"));
  for (std::string& n : *names) {
    Node node = tmpl;
    node.name = std::move(n);
    builder_.AddNode(std::move(node), name, line);
  }
  return Status::Ok();
}

Status Reader::ReadNode(const YAML::Node& map, const FieldContext& ctx) {
  RY_RETURN_IF_ERROR(base::ExpectMap(map, ctx));
  RY_RETURN_IF_ERROR(RejectV2Keys(map, {"gpus", "nics", "numa", "gpu_nic_paths", "profile"}, ctx));
  RY_RETURN_IF_ERROR(base::RejectUnknownKeys(map,
                                             {"name", "switch", "address", "link_rate", "gpus",
                                              "nics", "numa", "gpu_nic_paths", "profile"},
                                             ctx));
  RY_RETURN_IF_ERROR(CountNodes(1, map, ctx));
  Node node;
  RY_ASSIGN_OR_RETURN(const Node* profile, Profile(map, ctx));
  if (profile != nullptr) node = *profile;
  RY_ASSIGN_OR_RETURN(node.name, base::RequireString(map, "name", ctx));
  RY_ASSIGN_OR_RETURN(std::string leaf, base::RequireString(map, "switch", ctx));
  RY_ASSIGN_OR_RETURN(node.address, base::OptionalString(map, "address", "", ctx));
  RY_ASSIGN_OR_RETURN(node.link_rate_bits, Rate(map, "link_rate", ctx));
  RY_RETURN_IF_ERROR(ReadHardware(map, ctx, node));
  RY_RETURN_IF_ERROR(CheckPaths(node, fmt::format("node '{}'", node.name), map, ctx));
  builder_.AddNode(std::move(node), std::move(leaf), base::YamlLine(map));
  return Status::Ok();
}

Result<Cluster> Reader::Read(const YAML::Node& root) {
  FieldContext ctx(source_);
  if (!root.IsDefined() || root.IsNull()) {
    return InvalidArgument(
        "{}: the topology is empty (expected 'version', 'levels', "
        "'switches' and 'nodes')",
        source_);
  }
  RY_RETURN_IF_ERROR(base::ExpectMap(root, ctx));
  RY_RETURN_IF_ERROR(ReadVersion(root, ctx));
  RY_RETURN_IF_ERROR(RejectV2Keys(root, {"block_sizes", "profiles"}, ctx));
  RY_RETURN_IF_ERROR(base::RejectUnknownKeys(
      root,
      {"version", "name", "levels", "block_sizes", "profiles", "switches", "nodes", "vcluster"},
      ctx));
  RY_ASSIGN_OR_RETURN(std::string name, base::OptionalString(root, "name", "", ctx));
  builder_.SetName(std::move(name));

  RY_ASSIGN_OR_RETURN(YAML::Node levels_node, base::RequireSequence(root, "levels", ctx));
  std::vector<std::string> levels;
  for (size_t i = 0; i < levels_node.size(); ++i) {
    RY_ASSIGN_OR_RETURN(std::string level,
                        ScalarItem(levels_node[i], ctx.Child("levels").Index(i)));
    if (level.empty() || std::find(levels.begin(), levels.end(), level) != levels.end()) {
      return ctx.Child("levels").Index(i).Error(
          levels_node[i], level.empty() ? std::string("a level needs a name")
                                        : fmt::format("level '{}' is listed twice", level));
    }
    levels.push_back(std::move(level));
  }
  if (levels.empty()) {
    return ctx.Child("levels").Error(levels_node,
                                     "lists no levels (expected the switch levels, top first, "
                                     "like [spine, leaf])");
  }
  builder_.SetLevels(std::move(levels));

  if (base::YamlHas(root, "block_sizes")) {
    RY_ASSIGN_OR_RETURN(YAML::Node seq, base::RequireSequence(root, "block_sizes", ctx));
    std::vector<int> sizes;
    for (size_t i = 0; i < seq.size(); ++i) {
      FieldContext c = ctx.Child("block_sizes").Index(i);
      if (!seq[i].IsScalar()) return c.Error(seq[i], "expected a positive integer");
      const std::string& text = seq[i].Scalar();
      if (text.empty() || text.size() > 9 ||
          !std::all_of(text.begin(), text.end(), [](char ch) { return ch >= '0' && ch <= '9'; })) {
        return c.Error(seq[i], fmt::format("expected a positive integer, got '{}'", text));
      }
      sizes.push_back(std::stoi(text));
    }
    Status valid = ValidateBlockSizes(sizes);
    if (!valid.ok()) return ctx.Child("block_sizes").Error(seq, valid.message());
    builder_.SetBlockSizes(std::move(sizes));
  }

  RY_RETURN_IF_ERROR(ReadProfiles(base::YamlGet(root, "profiles"), ctx.Child("profiles")));

  RY_ASSIGN_OR_RETURN(YAML::Node switches, base::RequireSequence(root, "switches", ctx));
  for (size_t i = 0; i < switches.size(); ++i) {
    RY_RETURN_IF_ERROR(ReadSwitch(switches[i], ctx.Child("switches").Index(i)));
  }
  if (base::YamlHas(root, "nodes")) {
    RY_ASSIGN_OR_RETURN(YAML::Node nodes, base::RequireSequence(root, "nodes", ctx));
    for (size_t i = 0; i < nodes.size(); ++i) {
      RY_RETURN_IF_ERROR(ReadNode(nodes[i], ctx.Child("nodes").Index(i)));
    }
  }
  return std::move(builder_).Finish();
}

}  // namespace

Result<Cluster> TopologyFromYaml(const YAML::Node& root, std::string_view source) {
  try {
    Reader reader(source);
    return reader.Read(root);
  } catch (const YAML::Exception& e) {
    // The accessors above avoid yaml-cpp's throwing paths; this is the last line of defence.
    return InvalidArgument("{}: error: {}", source, e.what());
  }
}

Result<Cluster> ParseTopologyYaml(std::string_view text, std::string_view source) {
  RY_ASSIGN_OR_RETURN(YAML::Node root, base::ParseYaml(text, source));
  return TopologyFromYaml(root, source);
}

}  // namespace railyard::topo
