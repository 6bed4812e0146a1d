#include "railyard/topo/nccl_export.h"

#include <fmt/format.h>
#include <sys/utsname.h>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstring>
#include <map>
#include <optional>
#include <set>

#include "railyard/base/strings.h"

namespace railyard::topo {

namespace {

// NCCL's XML reader (src/graph/xml.cc, xmlGetValue) fails on a value of 254 characters or more.
constexpr size_t kMaxNcclAttr = 253;

// The link speeds NCCL knows (kvDictPciGen in src/graph/topo.cc, the same from 2.18 on); any
// other text falls back to PCIe Gen3 with only an INFO line.
constexpr std::array<const char*, 11> kNcclLinkSpeeds = {
    "2.5 GT/s",       "5 GT/s",         "8 GT/s",        "16 GT/s",
    "32 GT/s",        "2.5 GT/s PCIe",  "5.0 GT/s PCIe", "8.0 GT/s PCIe",
    "16.0 GT/s PCIe", "32.0 GT/s PCIe", "64.0 GT/s PCIe"};

constexpr const char* kBridgeClass = "0x060400";

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

}  // namespace

Status CheckNcclCpu(const NcclCpu& cpu) {
  if (cpu.arch != "x86_64" && cpu.arch != "arm64" && cpu.arch != "ppc64") {
    return InvalidArgument(
        "NCCL CPU arch '{}': expected x86_64, arm64 or ppc64 (NCCL's names; HostNcclCpu() gives "
        "this machine's)",
        cpu.arch);
  }
  if (cpu.arch == "x86_64" && (cpu.vendor.empty() || cpu.family < 0 || cpu.model < 0)) {
    return InvalidArgument(
        "an x86_64 NCCL CPU needs vendor, family and model as cpuid gives them (got vendor "
        "'{}', family {}, model {}); NCCL reads them from the file for Intel CPUs",
        cpu.vendor, cpu.family, cpu.model);
  }
  return Status::Ok();
}

Status CheckPcieLink(std::string_view speed, int width) {
  if (std::find(kNcclLinkSpeeds.begin(), kNcclLinkSpeeds.end(), speed) == kNcclLinkSpeeds.end()) {
    return InvalidArgument(
        "PCIe link speed '{}' is not one NCCL knows (it would fall back to Gen3); expected one "
        "of '{}'",
        speed, fmt::join(kNcclLinkSpeeds, "', '"));
  }
  const std::set<int> widths = {1, 2, 4, 8, 12, 16, 32};
  if (!widths.count(width)) {
    return InvalidArgument("PCIe link width {}: expected 1, 2, 4, 8, 12, 16 or 32", width);
  }
  return Status::Ok();
}

namespace {

Status CheckOptions(const Node& node, const NcclExportOptions& o) {
  Status st = CheckNcclCpu(o.cpu);
  if (st.ok()) st = CheckPcieLink(o.pcie_link_speed, o.pcie_link_width);
  return st.ok() ? st : st.WithContext(fmt::format("node '{}'", node.name));
}

struct Device {
  std::string bus;
  std::string who;  // "GPU 3", "NIC 'mlx5_0'": for messages
  const char* cls = "0x020000";
  int cpu = -1;  // NUMA node id
};

// One <pci>: a device (no children) or a made-up bridge.
struct PciNode {
  std::string bus;  // bridges: assigned after the tree is sorted
  const char* cls = kBridgeClass;
  std::vector<PciNode> children;
  std::string key;  // the smallest device bus id below: orders siblings as NCCL keeps them
  int id = -1;      // bridges: numbers them for the path check
};

struct CpuEntry {
  std::vector<int> cpus;                  // empty for a NUMA node only a device names
  std::map<std::string, Device> devices;  // by bus id
  std::vector<PciNode> children;          // the tree under this <cpu>
};

// Union-find over bus ids.
class Groups {
 public:
  std::string Find(const std::string& x) {
    auto it = parent_.find(x);
    if (it == parent_.end() || it->second == x) return x;
    std::string root = Find(it->second);
    parent_[x] = root;
    return root;
  }
  void Join(const std::string& a, const std::string& b) {
    std::string ra = Find(a), rb = Find(b);
    if (ra != rb) parent_[std::max(ra, rb)] = std::min(ra, rb);
  }

 private:
  std::map<std::string, std::string> parent_;
};

PciNode Leaf(const Device& d) {
  PciNode n;
  n.bus = d.bus;
  n.cls = d.cls;
  n.key = d.bus;
  return n;
}

PciNode Bridge(std::vector<PciNode> children, int* next_id) {
  std::sort(children.begin(), children.end(),
            [](const PciNode& a, const PciNode& b) { return a.key < b.key; });
  PciNode n;
  n.key = children.front().key;
  n.children = std::move(children);
  n.id = (*next_id)++;
  return n;
}

// Bridges above each device, outermost first.
void CollectAncestors(const PciNode& n, std::vector<int>& above,
                      std::map<std::string, std::vector<int>>* out) {
  if (n.id < 0) {
    (*out)[n.bus] = above;
    return;
  }
  above.push_back(n.id);
  for (const PciNode& c : n.children) CollectAncestors(c, above, out);
  above.pop_back();
}

// Made-up bridge bus ids in the order they are written: ffff:ff:01.0, ffff:ff:02.0, ...,
// ffff:fe:00.0, ... as the clouds' files number theirs; skips ids a device has.
void NumberBridges(PciNode& n, const std::set<std::string>& taken, int* k) {
  if (n.id < 0) return;
  std::string bus;
  do {
    ++*k;
    bus = fmt::format("ffff:{:02x}:{:02x}.0", 0xff - *k / 32, *k % 32);
  } while (taken.count(bus));
  n.bus = bus;
  for (PciNode& c : n.children) NumberBridges(c, taken, k);
}

void WritePci(const PciNode& n, const NcclExportOptions& o, int indent, std::string* out) {
  out->append(indent, ' ');
  *out += fmt::format("<pci busid=\"{}\" class=\"{}\" link_speed=\"{}\" link_width=\"{}\"",
                      base::XmlEscape(n.bus), n.cls, base::XmlEscape(o.pcie_link_speed),
                      o.pcie_link_width);
  if (n.children.empty()) {
    *out += "/>\n";
    return;
  }
  *out += ">\n";
  for (const PciNode& c : n.children) WritePci(c, o, indent + 2, out);
  out->append(indent, ' ');
  *out += "</pci>\n";
}

std::string_view NcclName(PathClass p) {
  switch (p) {
    case PathClass::kPIX:
      return "PIX";
    case PathClass::kPXB:
      return "PXB";
    case PathClass::kPHB:
    case PathClass::kNODE:
      return "PHB";  // NCCL has no NODE: a path through the CPU is PHB
    case PathClass::kSYS:
      return "SYS";
  }
  return "SYS";
}

}  // namespace

Result<NcclCpu> HostNcclCpu() {
  struct utsname u {};
  if (uname(&u) != 0) {
    return Unavailable("uname failed ({}): cannot tell NCCL's CPU arch", std::strerror(errno));
  }
  std::string machine = u.machine;
  NcclCpu cpu;
  if (machine == "x86_64") {
    cpu.arch = "x86_64";
  } else if (machine == "aarch64" || machine == "arm64") {
    cpu.arch = "arm64";
  } else if (machine.rfind("ppc64", 0) == 0) {
    cpu.arch = "ppc64";
  } else {
    return Unavailable("this machine is '{}': NCCL knows only x86_64, arm64 and ppc64", machine);
  }
#if defined(__x86_64__)
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (__get_cpuid(0, &a, &b, &c, &d)) {
    char vendor[13] = {};
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &d, 4);
    std::memcpy(vendor + 8, &c, 4);
    cpu.vendor = vendor;
  }
  if (__get_cpuid(1, &a, &b, &c, &d)) {
    // NCCL adds the extended fields unconditionally (ncclTopoGetXmlFromCpu); so does this.
    cpu.family = static_cast<int>(((a >> 8) & 0xf) + (((a >> 20) & 0xff) << 4));
    cpu.model = static_cast<int>(((a >> 4) & 0xf) + (((a >> 16) & 0xf) << 4));
  }
#endif
  return cpu;
}

Result<std::string> NcclTopologyXml(const Node& node) {
  NcclExportOptions options;
  RY_ASSIGN_OR_RETURN(options.cpu, HostNcclCpu());
  return NcclTopologyXml(node, options);
}

Result<std::string> NcclTopologyXml(const Node& node, const NcclExportOptions& options) {
  RY_RETURN_IF_ERROR(CheckOptions(node, options));
  std::map<int, CpuEntry> cpus;
  int max_cpu = -1;
  for (const NumaNode& numa : node.numa) {
    CpuEntry& e = cpus[numa.id];
    e.cpus.insert(e.cpus.end(), numa.cpus.begin(), numa.cpus.end());
    for (int c : numa.cpus) max_cpu = std::max(max_cpu, c);
  }

  std::map<std::string, Device*> by_bus;
  std::map<int, const Device*> gpu_dev;          // Gpu::index -> its device
  std::map<std::string, const Device*> nic_dev;  // Nic::name -> its device
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
    if (auto it = by_bus.find(*bus); it != by_bus.end()) {
      return InvalidArgument("node '{}': {} and {} both have PCI bus id {}", node.name,
                             it->second->who, who, *bus);
    }
    Device& d = cpus[g.numa_node].devices[*bus];
    d = Device{*bus, who, "0x030200", g.numa_node};
    by_bus[*bus] = &d;
    gpu_dev[g.index] = &d;
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
    Device* d = nullptr;
    if (auto it = by_bus.find(*bus); it != by_bus.end()) {
      if (it->second->who.rfind("GPU", 0) == 0) {
        return InvalidArgument("node '{}': {} and {} both have PCI bus id {}", node.name,
                               it->second->who, who, *bus);
      }
      d = it->second;  // another port of the same card: its NUMA node and <pci>
    } else {
      d = &cpus[n.numa_node].devices[*bus];
      *d = Device{*bus, who, "0x020000", n.numa_node};
      by_bus[*bus] = d;
    }
    if (n.rdma) d->cls = "0x020700";
    nic_dev[n.name] = d;
  }
  if (cpus.empty()) {
    return InvalidArgument(
        "node '{}': nothing to write in an NCCL topology file: the node lists no NUMA nodes and "
        "no GPU or NIC with both a NUMA node and a PCI bus id",
        node.name);
  }

  // The model's pairs, between devices that are written; their NUMA nodes first.
  struct Pair {
    const GpuNicPath* path;
    const Device* gpu;
    const Device* nic;
  };
  std::vector<Pair> pairs;
  Groups pix, pxb;
  for (const GpuNicPath& p : node.gpu_nic_paths) {
    auto g = gpu_dev.find(p.gpu);
    auto n = nic_dev.find(p.nic);
    if (g == gpu_dev.end() || n == nic_dev.end()) continue;  // left for NCCL to place
    bool sys = p.path == PathClass::kSYS;
    if (sys == (g->second->cpu == n->second->cpu)) {
      return InvalidArgument(
          "node '{}': gpu_nic_paths says {} for GPU {} and NIC '{}', but they are on NUMA nodes "
          "{} and {} (SYS is between NUMA nodes, every other class within one)",
          node.name, PathClassName(p.path), p.gpu, p.nic, g->second->cpu, n->second->cpu);
    }
    pairs.push_back({&p, g->second, n->second});
    if (p.path == PathClass::kPIX) pix.Join(g->second->bus, n->second->bus);
    if (p.path == PathClass::kPIX || p.path == PathClass::kPXB) {
      pxb.Join(g->second->bus, n->second->bus);
    }
  }

  // Per CPU: a device in no PIX/PXB pair directly under it; a PXB group under one bridge with
  // a switch (bridge) per PIX group inside; a group that is one PIX group is one switch.
  int next_id = 0;
  std::map<std::string, std::vector<int>> above;
  for (auto& [id, entry] : cpus) {
    std::map<std::string, std::vector<const Device*>> outer;
    for (const auto& [bus, dev] : entry.devices) outer[pxb.Find(bus)].push_back(&dev);
    for (const auto& [root, members] : outer) {
      if (members.size() == 1) {
        entry.children.push_back(Leaf(*members.front()));
        continue;
      }
      std::map<std::string, std::vector<PciNode>> inner;
      for (const Device* d : members) inner[pix.Find(d->bus)].push_back(Leaf(*d));
      if (inner.size() == 1) {
        entry.children.push_back(Bridge(std::move(inner.begin()->second), &next_id));
        continue;
      }
      std::vector<PciNode> switches;
      for (auto& [r, leaves] : inner) switches.push_back(Bridge(std::move(leaves), &next_id));
      entry.children.push_back(Bridge(std::move(switches), &next_id));
    }
    std::sort(entry.children.begin(), entry.children.end(),
              [](const PciNode& a, const PciNode& b) { return a.key < b.key; });
    std::vector<int> stack;
    for (const PciNode& c : entry.children) CollectAncestors(c, stack, &above);
  }

  // Every stated pair must come out as the model says; only contradicting pairs can fail.
  for (const Pair& p : pairs) {
    std::string_view want = NcclName(p.path->path);
    std::string_view got = "SYS";
    if (p.gpu->cpu == p.nic->cpu) {
      const std::vector<int>& a = above[p.gpu->bus];
      const std::vector<int>& b = above[p.nic->bus];
      size_t common = 0;
      while (common < a.size() && common < b.size() && a[common] == b[common]) ++common;
      got = common == 0 ? "PHB" : (a.size() == common && b.size() == common) ? "PIX" : "PXB";
    }
    if (got != want) {
      return InvalidArgument(
          "node '{}': gpu_nic_paths says {} for GPU {} and NIC '{}', but its PIX and PXB pairs "
          "put them {}, where NCCL computes {}; the pairs do not describe one PCI tree",
          node.name, PathClassName(p.path->path), p.path->gpu, p.path->nic,
          got == "PIX" ? "behind one PCI switch" : "under one PCI bridge", got);
    }
  }

  std::set<std::string> taken;
  for (const auto& [bus, dev] : by_bus) taken.insert(bus);
  int k = 0;
  for (auto& [id, entry] : cpus) {
    for (PciNode& c : entry.children) NumberBridges(c, taken, &k);
  }

  // One width for every mask, as sysfs does; past NCCL's attribute limit, leave affinity to
  // NCCL (it reads /sys/devices/system/node/nodeN/cpumap when the attribute is absent).
  int groups = max_cpu / 32 + 1;
  bool write_affinity = max_cpu >= 0 && static_cast<size_t>(groups) * 9 - 1 <= kMaxNcclAttr;
  std::string cpu_id = fmt::format(" arch=\"{}\"", options.cpu.arch);
  if (options.cpu.arch == "x86_64") {
    cpu_id +=
        fmt::format(" vendor=\"{}\" familyid=\"{}\" modelid=\"{}\"",
                    base::XmlEscape(options.cpu.vendor), options.cpu.family, options.cpu.model);
  }

  std::string out = "<system version=\"1\">\n";
  for (const auto& [id, entry] : cpus) {
    out += fmt::format("  <cpu numaid=\"{}\"", id);
    if (write_affinity && !entry.cpus.empty()) {
      out += fmt::format(" affinity=\"{}\"", CpuMask(entry.cpus, groups));
    }
    out += cpu_id;
    if (entry.children.empty()) {
      out += "/>\n";
      continue;
    }
    out += ">\n";
    for (const PciNode& c : entry.children) WritePci(c, options, 4, &out);
    out += "  </cpu>\n";
  }
  out += "</system>\n";
  return out;
}

}  // namespace railyard::topo
