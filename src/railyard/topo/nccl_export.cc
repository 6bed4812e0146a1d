#include "railyard/topo/nccl_export.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <map>
#include <optional>

namespace railyard::topo {

namespace {

// NCCL's XML reader (src/graph/xml.cc) stops at 255 characters per attribute value.
constexpr size_t kMaxNcclAttr = 255;

std::string XmlEscape(std::string_view s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      case '\'':
        out += "&apos;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

bool IsHex(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
}

// "00000000:17:00.0" (NVML) or "0000:17:00.0" -> "0000:17:00.0", lowercase; an empty
// optional when the text is not domain:bus:device.function. Sysfs, and so NCCL's lookups,
// spell bus ids with a 4-digit domain in lowercase.
std::optional<std::string> NormalizeBusId(std::string_view id) {
  size_t c1 = id.find(':');
  if (c1 == std::string_view::npos || c1 < 4 || c1 > 8) return std::nullopt;
  std::string_view domain = id.substr(0, c1), rest = id.substr(c1 + 1);
  // rest: BB:DD.F
  if (rest.size() != 7 || rest[2] != ':' || rest[5] != '.') return std::nullopt;
  for (size_t i : {0, 1, 3, 4, 6}) {
    if (!IsHex(rest[i])) return std::nullopt;
  }
  for (char c : domain) {
    if (!IsHex(c)) return std::nullopt;
  }
  while (domain.size() > 4 && domain.front() == '0') domain.remove_prefix(1);
  std::string out = std::string(domain) + ":" + std::string(rest);
  for (char& c : out) {
    if (c >= 'A' && c <= 'F') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// The sysfs cpumap form: 32-bit groups of 8 lowercase hex digits, most significant first,
// `groups` of them.
std::string CpuMask(const std::vector<int>& cpus, int groups) {
  std::vector<uint32_t> words(groups, 0);
  for (int c : cpus) {
    if (c >= 0 && c / 32 < groups) words[c / 32] |= uint32_t{1} << (c % 32);
  }
  std::string out;
  for (int g = groups - 1; g >= 0; --g) {
    out += fmt::format("{:08x}", words[g]);
    if (g > 0) out += ',';
  }
  return out;
}

struct PciDevice {
  std::string bus_id;
  const Gpu* gpu = nullptr;
  std::vector<const Nic*> nics;
};

struct CpuEntry {
  std::vector<int> cpus;                     // empty for a NUMA node only a device names
  std::map<std::string, PciDevice> devices;  // by bus id: NCCL keeps PCI children sorted
};

}  // namespace

Result<std::string> NcclTopologyXml(const Node& node) {
  std::map<int, CpuEntry> cpus;
  int max_cpu = -1;
  for (const NumaNode& numa : node.numa) {
    CpuEntry& e = cpus[numa.id];
    e.cpus.insert(e.cpus.end(), numa.cpus.begin(), numa.cpus.end());
    for (int c : numa.cpus) max_cpu = std::max(max_cpu, c);
  }

  std::map<std::string, std::string> owner;  // bus id -> the device that claimed it
  for (const Gpu& g : node.gpus) {
    if (g.numa_node < 0 || g.pci_bus_id.empty()) continue;
    std::optional<std::string> bus = NormalizeBusId(g.pci_bus_id);
    if (!bus) {
      return InvalidArgument(
          "node '{}': GPU {} has PCI bus id '{}'; expected domain:bus:device.function in hex, "
          "like 0000:17:00.0",
          node.name, g.index, g.pci_bus_id);
    }
    std::string who = fmt::format("GPU {}", g.index);
    if (auto [it, fresh] = owner.emplace(*bus, who); !fresh) {
      return InvalidArgument("node '{}': {} and {} both have PCI bus id {}", node.name, it->second,
                             who, *bus);
    }
    PciDevice& d = cpus[g.numa_node].devices[*bus];
    d.bus_id = *bus;
    d.gpu = &g;
  }
  for (const Nic& n : node.nics) {
    if (n.numa_node < 0 || n.pci_bus_id.empty()) continue;
    std::optional<std::string> bus = NormalizeBusId(n.pci_bus_id);
    if (!bus) {
      return InvalidArgument(
          "node '{}': NIC '{}' has PCI bus id '{}'; expected domain:bus:device.function in "
          "hex, like 0000:18:00.0",
          node.name, n.name, n.pci_bus_id);
    }
    std::string who = fmt::format("NIC '{}'", n.name);
    auto [it, fresh] = owner.emplace(*bus, who);
    if (!fresh && it->second.rfind("GPU", 0) == 0) {
      return InvalidArgument("node '{}': {} and {} both have PCI bus id {}", node.name, it->second,
                             who, *bus);
    }
    // A NIC on another NUMA node than the first NIC of its function keeps the first one's.
    int numa = n.numa_node;
    for (auto& [id, entry] : cpus) {
      if (entry.devices.count(*bus)) numa = id;
    }
    PciDevice& d = cpus[numa].devices[*bus];
    d.bus_id = *bus;
    d.nics.push_back(&n);
  }
  if (cpus.empty()) {
    return InvalidArgument(
        "node '{}': nothing to write in an NCCL topology file: the node lists no NUMA nodes and "
        "no GPU or NIC with both a NUMA node and a PCI bus id",
        node.name);
  }

  // One width for every mask, as sysfs does; past NCCL's attribute limit, leave affinity to
  // NCCL (it reads /sys/devices/system/node/nodeN/cpumap when the attribute is absent).
  int groups = max_cpu / 32 + 1;
  bool write_affinity = max_cpu >= 0 && static_cast<size_t>(groups) * 9 - 1 <= kMaxNcclAttr;

  std::string out = "<system version=\"1\">\n";
  for (const auto& [id, entry] : cpus) {
    out += fmt::format("  <cpu numaid=\"{}\"", id);
    if (write_affinity && !entry.cpus.empty()) {
      out += fmt::format(" affinity=\"{}\"", CpuMask(entry.cpus, groups));
    }
    if (entry.devices.empty()) {
      out += "/>\n";
      continue;
    }
    out += ">\n";
    for (const auto& [bus, dev] : entry.devices) {
      const char* cls = dev.gpu ? "0x030200" : "0x020000";
      if (!dev.gpu &&
          std::any_of(dev.nics.begin(), dev.nics.end(), [](const Nic* n) { return n->rdma; })) {
        cls = "0x020700";
      }
      out += fmt::format("    <pci busid=\"{}\" class=\"{}\">\n", XmlEscape(bus), cls);
      if (dev.gpu) out += fmt::format("      <gpu dev=\"{}\"/>\n", dev.gpu->index);
      if (!dev.nics.empty()) {
        out += "      <nic>\n";
        for (const Nic* n : dev.nics) {
          out += fmt::format("        <net name=\"{}\"", XmlEscape(n->name));
          uint64_t mbps = std::min<uint64_t>(n->rate_bits / 1'000'000, INT_MAX);
          if (mbps > 0) out += fmt::format(" speed=\"{}\"", mbps);
          out += "/>\n";
        }
        out += "      </nic>\n";
      }
      out += "    </pci>\n";
    }
    out += "  </cpu>\n";
  }
  out += "</system>\n";
  return out;
}

}  // namespace railyard::topo
