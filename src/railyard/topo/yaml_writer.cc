// WriteTopologyYaml (yaml_format.h): a Cluster as Railyard topology YAML, version 2. Nodes
// with the same hardware share a profile, and a leaf whose nodes differ only by name is
// written as a hostlist when that keeps the node order; every string a YAML 1.1 reader would
// retype is quoted (internal/yaml_quote.h).
#include <fmt/format.h>

#include <algorithm>
#include <string>
#include <vector>

#include "railyard/base/units.h"
#include "railyard/topo/hostlist.h"
#include "railyard/topo/internal/yaml_quote.h"
#include "railyard/topo/yaml_format.h"

namespace railyard::topo {
namespace {

// "0-15,32-47" from CPU ids, in the order given (the reader keeps that order).
std::string FormatCpuList(const std::vector<int>& cpus) {
  std::string out;
  size_t i = 0;
  while (i < cpus.size()) {
    size_t j = i + 1;
    while (j < cpus.size() && cpus[j] == cpus[j - 1] + 1) ++j;
    if (!out.empty()) out += ',';
    out += j - i > 1 ? fmt::format("{}-{}", cpus[i], cpus[j - 1]) : std::to_string(cpus[i]);
    i = j;
  }
  return out;
}

// A rate as text that parses back to exactly `bits` ("1.25 Gbit/s", or "1234567 bit/s" when
// the short form would round).
std::string RateText(uint64_t bits) {
  std::string text = base::FormatRateBits(static_cast<double>(bits));
  Result<uint64_t> back = base::ParseRateBits(text);
  if (back.ok() && *back == bits) return text;
  return fmt::format("{} bit/s", bits);
}

// A node's hardware, without what is particular to the node (name, address, link, leaf).
Node HardwareOf(const Node& n) {
  Node hw;
  hw.gpu_count = n.gpu_count;
  hw.gpus = n.gpus;
  hw.nics = n.nics;
  hw.numa = n.numa;
  hw.gpu_nic_paths = n.gpu_nic_paths;
  return hw;
}

// More than a GPU count: worth a profile when several nodes share it.
bool IsRich(const Node& hw) {
  return !hw.gpus.empty() || !hw.nics.empty() || !hw.numa.empty() || !hw.gpu_nic_paths.empty();
}

// A string value under `key`, quoted when a YAML 1.1 reader would retype it.
void Str(YAML::Emitter& out, std::string_view key, std::string_view value) {
  out << YAML::Key << std::string(key) << YAML::Value;
  internal::EmitYamlString(out, value);
}

void EmitHardware(YAML::Emitter& out, const Node& hw) {
  if (hw.gpus.empty()) {
    if (hw.gpu_count > 0) out << YAML::Key << "gpus" << YAML::Value << hw.gpu_count;
  } else {
    out << YAML::Key << "gpus" << YAML::Value << YAML::BeginSeq;
    for (const Gpu& g : hw.gpus) {
      out << YAML::Flow << YAML::BeginMap << YAML::Key << "index" << YAML::Value << g.index;
      if (!g.uuid.empty()) Str(out, "uuid", g.uuid);
      if (!g.pci_bus_id.empty()) Str(out, "pci_bus_id", g.pci_bus_id);
      if (g.numa_node != -1) out << YAML::Key << "numa_node" << YAML::Value << g.numa_node;
      if (!g.nvlink_domain.empty()) {
        Str(out, "nvlink_domain", g.nvlink_domain);
      }
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  if (!hw.nics.empty()) {
    out << YAML::Key << "nics" << YAML::Value << YAML::BeginSeq;
    for (const Nic& n : hw.nics) {
      out << YAML::Flow << YAML::BeginMap;
      Str(out, "name", n.name);
      if (!n.pci_bus_id.empty()) Str(out, "pci_bus_id", n.pci_bus_id);
      if (n.numa_node != -1) out << YAML::Key << "numa_node" << YAML::Value << n.numa_node;
      if (n.rail != -1) out << YAML::Key << "rail" << YAML::Value << n.rail;
      if (n.rate_bits != 0) Str(out, "rate", RateText(n.rate_bits));
      if (n.rdma) out << YAML::Key << "rdma" << YAML::Value << true;
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  if (!hw.numa.empty()) {
    out << YAML::Key << "numa" << YAML::Value << YAML::BeginSeq;
    for (const NumaNode& n : hw.numa) {
      out << YAML::Flow << YAML::BeginMap << YAML::Key << "id" << YAML::Value << n.id;
      if (!n.cpus.empty()) Str(out, "cpus", FormatCpuList(n.cpus));
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  if (!hw.gpu_nic_paths.empty()) {
    out << YAML::Key << "gpu_nic_paths" << YAML::Value << YAML::BeginSeq;
    for (const GpuNicPath& p : hw.gpu_nic_paths) {
      out << YAML::Flow << YAML::BeginMap << YAML::Key << "gpu" << YAML::Value << p.gpu;
      Str(out, "nic", p.nic);
      Str(out, "path", PathClassName(p.path));
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
}

// How the writer lays the cluster out: shared profiles and which leaves are compact.
struct Layout {
  std::vector<Node> profiles;     // hardware, named "hw<i>"
  std::vector<int> node_profile;  // per node: index into profiles or -1
  std::vector<bool> compact;      // per switch
};

Layout PlanLayout(const Cluster& c) {
  Layout l;
  l.node_profile.assign(c.nodes.size(), -1);
  l.compact.assign(c.switches.size(), false);
  std::vector<Node> seen;
  std::vector<int> uses;
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    Node hw = HardwareOf(c.nodes[i]);
    if (!IsRich(hw)) continue;
    auto it = std::find(seen.begin(), seen.end(), hw);
    if (it == seen.end()) {
      seen.push_back(hw);
      uses.push_back(1);
    } else {
      ++uses[it - seen.begin()];
    }
  }
  std::vector<int> profile_of(seen.size(), -1);
  for (size_t k = 0; k < seen.size(); ++k) {
    if (uses[k] < 2) continue;
    profile_of[k] = static_cast<int>(l.profiles.size());
    l.profiles.push_back(seen[k]);
  }
  for (size_t i = 0; i < c.nodes.size(); ++i) {
    Node hw = HardwareOf(c.nodes[i]);
    if (!IsRich(hw)) continue;
    l.node_profile[i] = profile_of[std::find(seen.begin(), seen.end(), hw) - seen.begin()];
  }

  for (size_t s = 0; s < c.switches.size(); ++s) {
    const Switch& sw = c.switches[s];
    if (sw.nodes.empty()) continue;
    const Node& first = c.nodes[sw.nodes[0]];
    Node hw = HardwareOf(first);
    bool ok = !IsRich(hw) || l.node_profile[sw.nodes[0]] >= 0;
    std::vector<std::string> names;
    for (int n : sw.nodes) {
      const Node& node = c.nodes[n];
      ok = ok && node.address.empty() && node.link_rate_bits == first.link_rate_bits &&
           HardwareOf(node) == hw;
      names.push_back(node.name);
    }
    if (!ok) continue;
    Result<std::vector<std::string>> back = ExpandHostlist(CompressHostlist(names));
    l.compact[s] = back.ok() && *back == names;
  }
  // The reader adds compact nodes first, switch by switch, then the listed ones; only keep the
  // compact form if that reproduces the cluster's node order.
  std::vector<int> order;
  std::vector<bool> listed(c.nodes.size(), true);
  for (size_t s = 0; s < c.switches.size(); ++s) {
    if (!l.compact[s]) continue;
    for (int n : c.switches[s].nodes) {
      order.push_back(n);
      listed[n] = false;
    }
  }
  for (size_t n = 0; n < c.nodes.size(); ++n) {
    if (listed[n]) order.push_back(static_cast<int>(n));
  }
  for (size_t i = 0; i < order.size(); ++i) {
    if (order[i] != static_cast<int>(i)) {
      l.compact.assign(c.switches.size(), false);
      break;
    }
  }
  return l;
}

std::string ProfileName(int i) { return fmt::format("hw{}", i); }

}  // namespace

std::string WriteTopologyYaml(const Cluster& c) {
  Layout layout = PlanLayout(c);
  YAML::Emitter out;
  out << YAML::Comment("Railyard topology, version 2 (schema: docs/formats.md)");
  out << YAML::BeginMap;
  out << YAML::Key << "version" << YAML::Value << kTopologyYamlVersion;
  if (!c.name.empty()) Str(out, "name", c.name);
  out << YAML::Key << "levels" << YAML::Value << YAML::Flow << YAML::BeginSeq;
  for (const std::string& level : c.levels) internal::EmitYamlString(out, level);
  out << YAML::EndSeq;
  if (!c.block_sizes.empty()) {
    out << YAML::Key << "block_sizes" << YAML::Value << YAML::Flow << c.block_sizes;
  }
  if (!layout.profiles.empty()) {
    out << YAML::Key << "profiles" << YAML::Value << YAML::BeginMap;
    for (size_t i = 0; i < layout.profiles.size(); ++i) {
      out << YAML::Key << ProfileName(static_cast<int>(i)) << YAML::Value << YAML::BeginMap;
      EmitHardware(out, layout.profiles[i]);
      out << YAML::EndMap;
    }
    out << YAML::EndMap;
  }

  out << YAML::Key << "switches" << YAML::Value << YAML::BeginSeq;
  for (size_t s = 0; s < c.switches.size(); ++s) {
    const Switch& sw = c.switches[s];
    out << YAML::Flow << YAML::BeginMap;
    Str(out, "name", sw.name);
    Str(out, "level", c.levels[sw.level]);
    if (sw.parent >= 0) Str(out, "parent", c.switches[sw.parent].name);
    if (sw.uplink_rate_bits != 0) {
      Str(out, "uplink_rate", RateText(sw.uplink_rate_bits));
    }
    if (layout.compact[s]) {
      std::vector<std::string> names;
      for (int n : sw.nodes) names.push_back(c.nodes[n].name);
      const Node& first = c.nodes[sw.nodes[0]];
      Str(out, "nodes", CompressHostlist(names));
      int profile = layout.node_profile[sw.nodes[0]];
      if (profile >= 0) {
        out << YAML::Key << "profile" << YAML::Value << ProfileName(profile);
      } else if (first.gpu_count > 0) {
        out << YAML::Key << "gpus_per_node" << YAML::Value << first.gpu_count;
      }
      if (first.link_rate_bits != 0) {
        Str(out, "node_link_rate", RateText(first.link_rate_bits));
      }
    }
    out << YAML::EndMap;
  }
  out << YAML::EndSeq;

  std::vector<bool> compact_node(c.nodes.size(), false);
  for (size_t s = 0; s < c.switches.size(); ++s) {
    if (!layout.compact[s]) continue;
    for (int n : c.switches[s].nodes) compact_node[n] = true;
  }
  bool any_listed =
      std::find(compact_node.begin(), compact_node.end(), false) != compact_node.end();
  if (any_listed) {
    out << YAML::Key << "nodes" << YAML::Value << YAML::BeginSeq;
    for (size_t i = 0; i < c.nodes.size(); ++i) {
      if (compact_node[i]) continue;
      const Node& n = c.nodes[i];
      int profile = layout.node_profile[i];
      bool inline_hw = profile < 0 && IsRich(HardwareOf(n));
      if (!inline_hw) out << YAML::Flow;
      out << YAML::BeginMap;
      Str(out, "name", n.name);
      Str(out, "switch", c.switches[n.leaf].name);
      if (!n.address.empty()) Str(out, "address", n.address);
      if (n.link_rate_bits != 0) {
        Str(out, "link_rate", RateText(n.link_rate_bits));
      }
      if (profile >= 0) {
        out << YAML::Key << "profile" << YAML::Value << ProfileName(profile);
      } else {
        EmitHardware(out, HardwareOf(n));
      }
      out << YAML::EndMap;
    }
    out << YAML::EndSeq;
  }
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace railyard::topo
