#include "railyard/topo/discover.h"

#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <condition_variable>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "railyard/base/files.h"
#include "railyard/base/logging.h"
#include "railyard/base/strings.h"
#include "railyard/base/units.h"
#include "railyard/topo/node_json.h"

#ifdef RAILYARD_WITH_HWLOC
#include <hwloc.h>
#endif
#ifdef RAILYARD_WITH_OFI
#include <rdma/fabric.h>
#include <rdma/fi_errno.h>

#include "railyard/base/fabric_library.h"
#endif

namespace railyard::topo {
namespace {

namespace fs = std::filesystem;

const base::Logger kLog("discover");

// ---- small sysfs helpers ----------------------------------------------------------------

// A decimal or 0x-prefixed hex integer file; nullopt when absent or malformed.
std::optional<int64_t> ReadSysfsInt(const std::string& path) {
  std::optional<std::string> text = base::ReadTrimmedFile(path);
  if (!text || text->empty()) return std::nullopt;
  std::string_view s = *text;
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// Canonical path with symlinks resolved, or "" when it does not exist.
std::string RealPath(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::canonical(path, ec);
  return ec ? std::string() : p.string();
}

// Entry names of a directory, unsorted; empty when it cannot be read.
std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    out.push_back(it->path().filename().string());
  }
  return out;
}

// "mlx5_2" < "mlx5_10": digit runs compare by value, so devices list in the order people
// count them.
bool NaturalLess(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) &&
        std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t i2 = i, j2 = j;
      while (i2 < a.size() && a[i2] == '0') ++i2;
      while (j2 < b.size() && b[j2] == '0') ++j2;
      size_t ie = i2, je = j2;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      if (ie - i2 != je - j2) return ie - i2 < je - j2;
      int c = a.compare(i2, ie - i2, b, j2, je - j2);
      if (c != 0) return c < 0;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

std::vector<std::string> SortedNatural(std::vector<std::string> v) {
  std::sort(v.begin(), v.end(), NaturalLess);
  return v;
}

bool IsHex(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) != 0;
  });
}

// "0000:17:00.0" (domains may have more than 4 digits behind a VMD controller).
bool IsBdf(std::string_view s) {
  size_t c1 = s.find(':');
  if (c1 == std::string_view::npos || c1 < 4) return false;
  std::string_view rest = s.substr(c1 + 1);
  return IsHex(s.substr(0, c1)) && rest.size() == 7 && IsHex(rest.substr(0, 2)) && rest[2] == ':' &&
         IsHex(rest.substr(3, 2)) && rest[5] == '.' && rest[6] >= '0' && rest[6] <= '7';
}

// "pci0000:00": a PCI root complex (host bridge) in /sys/devices.
bool IsRootComplex(std::string_view s) {
  if (s.substr(0, 3) != "pci") return false;
  s.remove_prefix(3);
  size_t c = s.find(':');
  return c != std::string_view::npos && c >= 4 && IsHex(s.substr(0, c)) && s.size() == c + 3 &&
         IsHex(s.substr(c + 1));
}

struct PciChain {
  std::string_view root;               // "pci0000:00"; empty when the path has none
  std::vector<std::string_view> bdfs;  // from the root port down to the device
};

PciChain ParsePciChain(std::string_view path) {
  std::vector<std::string_view> parts;
  while (!path.empty()) {
    size_t slash = path.find('/');
    std::string_view part = path.substr(0, slash);
    if (!part.empty()) parts.push_back(part);
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  PciChain chain;
  size_t start = parts.size();
  for (size_t i = parts.size(); i-- > 0;) {
    if (IsRootComplex(parts[i])) {
      start = i;
      break;
    }
  }
  if (start == parts.size()) return chain;
  chain.root = parts[start];
  for (size_t i = start + 1; i < parts.size() && IsBdf(parts[i]); ++i) {
    chain.bdfs.push_back(parts[i]);
  }
  return chain;
}

// The PCI function directory a sysfs device path belongs to: the path cut after its last bus
// id ("/sys/devices/pci0000:00/0000:00:03.0/virtio2" -> ".../0000:00:03.0"), or "".
std::string PciDirOf(const std::string& real_path) {
  size_t end = std::string::npos;
  size_t pos = 0;
  while (pos <= real_path.size()) {
    size_t slash = real_path.find('/', pos);
    size_t stop = slash == std::string::npos ? real_path.size() : slash;
    if (IsBdf(std::string_view(real_path).substr(pos, stop - pos))) end = stop;
    if (slash == std::string::npos) break;
    pos = slash + 1;
  }
  return end == std::string::npos ? std::string() : real_path.substr(0, end);
}

std::string LastComponent(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// ParseCpuList with the file named in its error.
Result<std::vector<int>> ReadCpuList(std::string_view text, const std::string& path) {
  Result<std::vector<int>> cpus = ParseCpuList(text);
  if (!cpus.ok()) return cpus.status().WithContext(path);
  return cpus;
}

// Lists at most `limit` names, then "and N more".
std::string JoinSome(const std::vector<std::string>& names, size_t limit = 6) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < limit; ++i) {
    if (i) out += ", ";
    out += names[i];
  }
  if (names.size() > limit) out += fmt::format(" and {} more", names.size() - limit);
  return out;
}

// ---- NUMA nodes -------------------------------------------------------------------------

#ifdef RAILYARD_WITH_HWLOC
// NUMA nodes with their CPUs (OS indices). The whole machine, not just this process's cgroup
// (INCLUDE_DISALLOWED), so the description does not depend on where `discover` ran.
Result<std::vector<NumaNode>> NumaFromHwloc(std::vector<std::string>& notes) {
  hwloc_topology_t topology = nullptr;
  if (hwloc_topology_init(&topology) != 0) return Internal("hwloc_topology_init failed");
  std::unique_ptr<hwloc_topology, void (*)(hwloc_topology_t)> guard(topology,
                                                                    hwloc_topology_destroy);
  if (hwloc_topology_set_flags(topology, HWLOC_TOPOLOGY_FLAG_INCLUDE_DISALLOWED) != 0 ||
      hwloc_topology_load(topology) != 0) {
    return Internal("hwloc_topology_load failed: {}", std::strerror(errno));
  }
  std::vector<NumaNode> numa;
  int n = hwloc_get_nbobjs_by_type(topology, HWLOC_OBJ_NUMANODE);
  for (int i = 0; i < n; ++i) {
    hwloc_obj_t obj = hwloc_get_obj_by_type(topology, HWLOC_OBJ_NUMANODE, i);
    if (obj == nullptr) continue;
    NumaNode node;
    node.id = static_cast<int>(obj->os_index);
    int weight = obj->cpuset ? hwloc_bitmap_weight(obj->cpuset) : 0;
    if (weight > 0) {  // -1 would be an infinite set: never iterate it
      for (int cpu = hwloc_bitmap_first(obj->cpuset); cpu >= 0;
           cpu = hwloc_bitmap_next(obj->cpuset, cpu)) {
        node.cpus.push_back(cpu);
      }
    }
    if (node.cpus.empty()) {
      notes.push_back(fmt::format("NUMA node {} has no CPUs (memory only): left out", node.id));
      continue;
    }
    numa.push_back(std::move(node));
  }
  std::sort(numa.begin(), numa.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  return numa;
}

std::string HwlocVersion() {
  unsigned v = hwloc_get_api_version();  // the API version: 2.9.x libraries say 2.8
  return fmt::format("hwloc (API {}.{})", v >> 16, (v >> 8) & 0xff);
}
#endif

std::vector<NumaNode> NumaFromSysfs(const std::string& root, std::vector<std::string>& notes,
                                    std::string& source) {
  std::vector<NumaNode> numa;
  const std::string dir = root + "/devices/system/node";
  for (const std::string& name : ListDir(dir)) {
    std::string_view id_s = std::string_view(name).substr(std::min<size_t>(4, name.size()));
    int id = -1;
    auto [end, ec] = std::from_chars(id_s.data(), id_s.data() + id_s.size(), id);
    if (name.rfind("node", 0) != 0 || id_s.empty() || ec != std::errc() ||
        end != id_s.data() + id_s.size()) {
      continue;
    }
    const std::string path = dir + "/" + name + "/cpulist";
    std::optional<std::string> text = base::ReadTrimmedFile(path);
    if (!text) {
      notes.push_back(fmt::format("{}: unreadable, NUMA node {} left out", path, id));
      continue;
    }
    Result<std::vector<int>> cpus = ReadCpuList(*text, path);
    if (!cpus.ok()) {
      notes.push_back(cpus.status().message() + fmt::format(": NUMA node {} left out", id));
      continue;
    }
    if (cpus->empty()) {
      notes.push_back(fmt::format("NUMA node {} has no CPUs (memory only): left out", id));
      continue;
    }
    numa.push_back(NumaNode{id, std::move(cpus).value()});
  }
  std::sort(numa.begin(), numa.end(),
            [](const NumaNode& a, const NumaNode& b) { return a.id < b.id; });
  source = "sysfs";
  if (!numa.empty()) return numa;

  // Kernels built without NUMA have no node directories: the machine is one node.
  const std::string online = root + "/devices/system/cpu/online";
  std::optional<std::string> text = base::ReadTrimmedFile(online);
  Result<std::vector<int>> cpus =
      text ? ReadCpuList(*text, online)
           : Result<std::vector<int>>(NotFound("{}: unreadable", online));
  if (cpus.ok() && !cpus->empty()) {
    notes.push_back(fmt::format("no NUMA nodes in {}: one node 0 with the online CPUs", dir));
    source = "sysfs cpu/online (no NUMA information)";
    numa.push_back(NumaNode{0, std::move(cpus).value()});
  } else {
    notes.push_back(fmt::format("no NUMA nodes in {} and no CPU list in {}", dir, online));
    source = "none";
  }
  return numa;
}

// ---- GPUs -------------------------------------------------------------------------------

// The few NVML declarations used, from NVIDIA's documented C ABI (nvml.h), so neither the
// header nor the library is needed at build time.
using NvmlReturn = int;  // nvmlReturn_t; NVML_SUCCESS == 0
constexpr NvmlReturn kNvmlSuccess = 0;
struct NvmlDeviceOpaque;
using NvmlDevice = NvmlDeviceOpaque*;  // nvmlDevice_t
struct NvmlPciInfo {                   // nvmlPciInfo_t, as filled by nvmlDeviceGetPciInfo_v3
  char bus_id_legacy[16];              // NVML_DEVICE_PCI_BUS_ID_BUFFER_V2_SIZE
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[32];  // NVML_DEVICE_PCI_BUS_ID_BUFFER_SIZE
};
constexpr unsigned int kNvmlUuidBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

struct DlCloser {
  void operator()(void* handle) const {
    if (handle) dlclose(handle);
  }
};

// GPUs as NVML numbers them, or an explanation of why NVML cannot be used.
Result<std::vector<Gpu>> GpusFromNvml(const std::string& library) {
  std::unique_ptr<void, DlCloser> lib(dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL));
  if (!lib) return NotFound("NVML not found ({})", library);

  using InitFn = NvmlReturn (*)();
  using CountFn = NvmlReturn (*)(unsigned int*);
  using HandleFn = NvmlReturn (*)(unsigned int, NvmlDevice*);
  using UuidFn = NvmlReturn (*)(NvmlDevice, char*, unsigned int);
  using PciFn = NvmlReturn (*)(NvmlDevice, NvmlPciInfo*);
  using ErrorFn = const char* (*)(NvmlReturn);
  auto sym = [&](const char* name) { return dlsym(lib.get(), name); };
  auto init = reinterpret_cast<InitFn>(sym("nvmlInit_v2"));
  auto shutdown = reinterpret_cast<InitFn>(sym("nvmlShutdown"));
  auto count_fn = reinterpret_cast<CountFn>(sym("nvmlDeviceGetCount_v2"));
  auto handle_fn = reinterpret_cast<HandleFn>(sym("nvmlDeviceGetHandleByIndex_v2"));
  auto uuid_fn = reinterpret_cast<UuidFn>(sym("nvmlDeviceGetUUID"));
  auto pci_fn = reinterpret_cast<PciFn>(sym("nvmlDeviceGetPciInfo_v3"));
  auto error_fn = reinterpret_cast<ErrorFn>(sym("nvmlErrorString"));
  const std::pair<const char*, bool> required[] = {
      {"nvmlInit_v2", init != nullptr},
      {"nvmlShutdown", shutdown != nullptr},
      {"nvmlDeviceGetCount_v2", count_fn != nullptr},
      {"nvmlDeviceGetHandleByIndex_v2", handle_fn != nullptr},
      {"nvmlDeviceGetUUID", uuid_fn != nullptr},
      {"nvmlDeviceGetPciInfo_v3", pci_fn != nullptr}};
  for (const auto& [name, present] : required) {
    if (!present) return Unimplemented("NVML ({}) lacks {} (driver too old?)", library, name);
  }
  auto err = [&](NvmlReturn rc) {
    const char* text = error_fn ? error_fn(rc) : nullptr;
    return text ? fmt::format("{} (NVML error {})", text, rc) : fmt::format("NVML error {}", rc);
  };

  NvmlReturn rc = init();
  if (rc != kNvmlSuccess) return Unavailable("NVML init failed: {}", err(rc));
  std::vector<Gpu> gpus;
  Status status;
  unsigned int count = 0;
  rc = count_fn(&count);
  if (rc != kNvmlSuccess) status = Unavailable("nvmlDeviceGetCount_v2: {}", err(rc));
  for (unsigned int i = 0; status.ok() && i < count; ++i) {
    NvmlDevice device = nullptr;
    rc = handle_fn(i, &device);
    if (rc != kNvmlSuccess) {
      status = Unavailable("nvmlDeviceGetHandleByIndex_v2({}): {}", i, err(rc));
      break;
    }
    Gpu gpu;
    gpu.index = static_cast<int>(i);
    char uuid[kNvmlUuidBufferSize] = {};
    if (uuid_fn(device, uuid, sizeof uuid) == kNvmlSuccess) {
      gpu.uuid.assign(uuid, strnlen(uuid, sizeof uuid));
    }
    NvmlPciInfo pci = {};
    if (pci_fn(device, &pci) == kNvmlSuccess) {
      gpu.pci_bus_id = NormalizePciBusId(std::string_view(pci.bus_id, strnlen(pci.bus_id, 32)));
    }
    gpus.push_back(std::move(gpu));
  }
  shutdown();
  if (!status.ok()) return status;
  return gpus;
}

// Display-class PCI functions from GPU vendors. 0x0380 (display controller, other) is what
// AMD Instinct accelerators report; NVSwitches are bridges (0x0680) and stay out.
std::vector<Gpu> GpusFromPciClass(const std::string& root) {
  constexpr int64_t kVendorNvidia = 0x10de, kVendorAmd = 0x1002;
  const std::string dir = root + "/bus/pci/devices";
  std::vector<std::string> bdfs;
  for (const std::string& name : ListDir(dir)) {
    if (!IsBdf(name)) continue;
    std::optional<int64_t> cls = ReadSysfsInt(dir + "/" + name + "/class");
    std::optional<int64_t> vendor = ReadSysfsInt(dir + "/" + name + "/vendor");
    if (!cls || !vendor) continue;
    int64_t base = *cls & 0xffff00;
    bool display = base == 0x030000 || base == 0x030200 || base == 0x038000;
    if (display && (*vendor == kVendorNvidia || *vendor == kVendorAmd)) bdfs.push_back(name);
  }
  // Bus order, as CUDA_DEVICE_ORDER=PCI_BUS_ID and NVML number them.
  std::sort(bdfs.begin(), bdfs.end());
  std::vector<Gpu> gpus;
  for (const std::string& bdf : bdfs) {
    Gpu gpu;
    gpu.index = static_cast<int>(gpus.size());
    gpu.pci_bus_id = NormalizePciBusId(bdf);
    gpus.push_back(std::move(gpu));
  }
  return gpus;
}

// ---- NICs -------------------------------------------------------------------------------

struct FoundNic {
  Nic nic;
  std::string pci_dir;  // realpath of its PCI function in sysfs, "" when not on PCI
};

int NumaOfDevice(const std::string& device_dir, const std::string& pci_dir) {
  std::optional<int64_t> numa = ReadSysfsInt(device_dir + "/numa_node");
  if (!numa && !pci_dir.empty()) numa = ReadSysfsInt(pci_dir + "/numa_node");
  return numa && *numa >= 0 && *numa < (1 << 16) ? static_cast<int>(*numa) : -1;
}

uint64_t NetdevSpeedBits(const std::string& root, const std::string& netdev) {
  std::optional<int64_t> mbps = ReadSysfsInt(root + "/class/net/" + netdev + "/speed");
  return mbps && *mbps > 0 ? static_cast<uint64_t>(*mbps) * 1000000ULL : 0;
}

// RDMA devices (InfiniBand, RoCE, EFA) from class/infiniband; their rate is the fastest
// ACTIVE port's.
std::vector<FoundNic> RdmaNics(const std::string& root,
                               std::map<std::string, std::vector<std::string>>& netdevs,
                               std::vector<std::string>& notes) {
  std::vector<FoundNic> out;
  const std::string dir = root + "/class/infiniband";
  std::vector<std::string> software;
  for (const std::string& name : SortedNatural(ListDir(dir))) {
    const std::string ib = dir + "/" + name;
    const std::string device = RealPath(ib + "/device");
    const std::string pci_dir = PciDirOf(device);
    if (pci_dir.empty()) {  // rxe/siw ride on an Ethernet netdev: not an RDMA NIC
      software.push_back(name);
      continue;
    }
    FoundNic found;
    found.nic.name = name;
    found.nic.rdma = true;
    found.nic.pci_bus_id = NormalizePciBusId(LastComponent(pci_dir));
    found.nic.numa_node = NumaOfDevice(device, pci_dir);
    found.pci_dir = pci_dir;
    uint64_t active_rate = 0, any_rate = 0;
    bool any_active = false;
    std::vector<std::string> states;
    for (const std::string& port : SortedNatural(ListDir(ib + "/ports"))) {
      const std::string port_dir = ib + "/ports/" + port;
      std::string state = base::ReadTrimmedFile(port_dir + "/state").value_or("unknown");
      std::optional<std::string> rate_text = base::ReadTrimmedFile(port_dir + "/rate");
      uint64_t rate = 0;
      if (rate_text) {
        Result<uint64_t> r = ParseIbRate(*rate_text);
        if (r.ok()) {
          rate = *r;
        } else {
          notes.push_back(fmt::format("{}/rate: {}", port_dir, r.status().message()));
        }
      }
      any_rate = std::max(any_rate, rate);
      if (state.find("ACTIVE") != std::string::npos) {  // "4: ACTIVE"
        any_active = true;
        active_rate = std::max(active_rate, rate);
      } else {
        states.push_back(fmt::format("port {}: {}", port, state));
      }
    }
    found.nic.rate_bits = any_active ? active_rate : any_rate;
    if (!any_active) {
      notes.push_back(fmt::format("{}: no ACTIVE port ({}); rate is the link's nominal one", name,
                                  states.empty() ? "no ports" : JoinSome(states)));
    }
    std::vector<std::string> nets = SortedNatural(ListDir(ib + "/device/net"));
    if (!nets.empty()) {
      if (found.nic.rate_bits == 0) found.nic.rate_bits = NetdevSpeedBits(root, nets.front());
      netdevs[name] = nets;
    }
    out.push_back(std::move(found));
  }
  if (!software.empty()) {
    notes.push_back(fmt::format("software RDMA devices without a PCI function left out: {}",
                                JoinSome(software)));
  }
  return out;
}

// Physical network interfaces (those with a device link), except the ones an RDMA device
// already stands for.
std::vector<FoundNic> NetdevNics(const std::string& root, const std::set<std::string>& taken,
                                 std::vector<std::string>& notes) {
  std::vector<FoundNic> out;
  std::vector<std::string> is_virtual;
  const std::string dir = root + "/class/net";
  for (const std::string& name : SortedNatural(ListDir(dir))) {
    if (name == "lo" || taken.count(name)) continue;
    const std::string device = RealPath(dir + "/" + name + "/device");
    if (device.empty()) {  // bridges, veth, tunnels, bonds
      is_virtual.push_back(name);
      continue;
    }
    FoundNic found;
    found.nic.name = name;
    found.pci_dir = PciDirOf(device);
    if (!found.pci_dir.empty()) {
      found.nic.pci_bus_id = NormalizePciBusId(LastComponent(found.pci_dir));
    }
    found.nic.numa_node = NumaOfDevice(device, found.pci_dir);
    found.nic.rate_bits = NetdevSpeedBits(root, name);
    out.push_back(std::move(found));
  }
  if (!is_virtual.empty()) {
    notes.push_back(
        fmt::format("virtual network interfaces (no device) left out: {}", JoinSome(is_virtual)));
  }
  return out;
}

// ---- fabric providers -------------------------------------------------------------------

#ifdef RAILYARD_WITH_OFI
struct FabricProbe {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  std::vector<std::string> providers;
  std::string error;
};

void RunFabricProbe(const base::FabricLibrary& fi, FabricProbe& probe) {
  std::vector<std::string> providers;
  std::string error;
  fi_info* hints = fi.AllocInfo();
  if (hints == nullptr) {
    error = "fi_allocinfo failed";
  } else {
    hints->ep_attr->type = FI_EP_RDM;
    hints->caps = FI_MSG | FI_TAGGED;
    // What Railyard's transport handles; offering no mr_mode bits would hide verbs and efa.
    hints->domain_attr->mr_mode = FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY;
    fi_info* info = nullptr;
    int rc = fi.getinfo(FI_VERSION(FI_MAJOR_VERSION, FI_MINOR_VERSION), nullptr, nullptr, 0, hints,
                        &info);
    if (rc == 0) {
      // One entry per interface and address format: keep each provider once, in rank order.
      for (fi_info* i = info; i != nullptr; i = i->next) {
        if (i->fabric_attr == nullptr || i->fabric_attr->prov_name == nullptr) continue;
        std::string name = i->fabric_attr->prov_name;
        if (std::find(providers.begin(), providers.end(), name) == providers.end()) {
          providers.push_back(std::move(name));
        }
      }
      fi.freeinfo(info);
    } else if (rc != -FI_ENODATA) {
      error = "fi_getinfo: " + fi.Error(rc);
    }
    fi.freeinfo(hints);
  }
  std::lock_guard<std::mutex> lock(probe.mu);
  probe.providers = std::move(providers);
  probe.error = std::move(error);
  probe.done = true;
  probe.cv.notify_all();
}

void DiscoverFabric(const DiscoverOptions& options, Discovery& d) {
  Result<const base::FabricLibrary*> loaded = base::LoadFabricLibrary();
  if (!loaded.ok()) {
    d.sources.fabric = "unavailable";
    d.notes.push_back("libfabric: " + loaded.status().message() + "; no fabric providers listed");
    return;
  }
  const base::FabricLibrary* api = *loaded;
  uint32_t v = api->version();
  d.sources.fabric = fmt::format("libfabric {}.{}", FI_MAJOR(v), FI_MINOR(v));
  auto probe = std::make_shared<FabricProbe>();
  // A provider can block in fi_getinfo (a stuck daemon, an unreachable fabric manager); the
  // thread owns a reference so it can outlive this call if it has to be abandoned.
  std::thread worker([api, probe] { RunFabricProbe(*api, *probe); });
  std::unique_lock<std::mutex> lock(probe->mu);
  if (!probe->cv.wait_for(lock, options.fabric_timeout, [&] { return probe->done; })) {
    lock.unlock();
    worker.detach();
    d.notes.push_back(
        fmt::format("libfabric: fi_getinfo did not answer within {} ms; "
                    "fabric providers not listed",
                    options.fabric_timeout.count()));
    return;
  }
  lock.unlock();
  worker.join();
  d.fabric_providers = probe->providers;
  if (!probe->error.empty()) {
    d.notes.push_back("libfabric: " + probe->error);
  } else if (d.fabric_providers.empty()) {
    d.notes.push_back("libfabric: no provider offers FI_EP_RDM with FI_MSG|FI_TAGGED");
  }
}
#endif

// ---- assembly ---------------------------------------------------------------------------

void DiscoverNuma(const DiscoverOptions& options, [[maybe_unused]] bool live, Discovery& d) {
  std::vector<std::string>& notes = d.notes;
  if (options.use_hwloc) {
#ifdef RAILYARD_WITH_HWLOC
    if (!live) {
      notes.push_back(fmt::format("hwloc skipped: it reads the live system, not sysfs root {}",
                                  options.sysfs_root));
    } else {
      Result<std::vector<NumaNode>> numa = NumaFromHwloc(notes);
      if (numa.ok() && !numa->empty()) {
        d.node.numa = std::move(numa).value();
        d.sources.numa = HwlocVersion();
        return;
      }
      notes.push_back(numa.ok() ? "hwloc found no NUMA node with CPUs: NUMA nodes from sysfs"
                                : "hwloc: " + numa.status().message() + ": NUMA nodes from sysfs");
    }
#else
    notes.push_back("hwloc not built in (RAILYARD_WITH_HWLOC off): NUMA nodes from sysfs");
#endif
  }
  d.node.numa = NumaFromSysfs(options.sysfs_root, notes, d.sources.numa);
}

void DiscoverGpus(const DiscoverOptions& options, bool live, Discovery& d) {
  if (options.use_nvml && live) {
    Result<std::vector<Gpu>> gpus = GpusFromNvml(options.nvml_library);
    if (gpus.ok()) {
      d.node.gpus = std::move(gpus).value();
      d.sources.gpus = "nvml";
      if (d.node.gpus.empty()) d.notes.push_back("NVML reports no GPUs");
      return;
    }
    d.notes.push_back(gpus.status().message() + ": GPUs from PCI class codes");
  } else if (options.use_nvml) {
    d.notes.push_back(fmt::format("NVML skipped: it reads the live system, not sysfs root {}",
                                  options.sysfs_root));
  }
  d.node.gpus = GpusFromPciClass(options.sysfs_root);
  d.sources.gpus = "pci class codes";
  if (d.node.gpus.empty()) {
    d.notes.push_back("no NVIDIA or AMD display-class PCI device: no GPUs");
  }
}

}  // namespace

std::string NormalizePciBusId(std::string_view bus_id) {
  std::string s(base::StripAsciiWhitespace(bus_id));
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (!IsBdf(s)) return s;
  size_t colon = s.find(':');
  size_t zeros = 0;
  while (colon - zeros > 4 && s[zeros] == '0') ++zeros;
  return s.substr(zeros);
}

Result<uint64_t> ParseIbRate(std::string_view text) {
  std::string_view s = base::StripAsciiWhitespace(text);
  size_t space = s.find(' ');
  std::string_view number = s.substr(0, space);
  std::string_view rest =
      space == std::string_view::npos ? "" : base::StripAsciiWhitespace(s.substr(space));
  if (number.empty() || rest.substr(0, 6) != "Gb/sec") {
    return InvalidArgument("expected an InfiniBand rate like \"400 Gb/sec (4X NDR)\", got \"{}\"",
                           s);
  }
  Result<uint64_t> bits = base::ParseRateBits(fmt::format("{}Gbit", number));
  if (!bits.ok()) {
    return InvalidArgument("expected an InfiniBand rate like \"400 Gb/sec (4X NDR)\", got \"{}\"",
                           s);
  }
  return bits;
}

PathClass ClassifyPciPath(std::string_view a_path, int a_numa, std::string_view b_path,
                          int b_numa) {
  PciChain a = ParsePciChain(a_path);
  PciChain b = ParsePciChain(b_path);
  if (a.root.empty() || b.root.empty() || a.bdfs.empty() || b.bdfs.empty() || a.root != b.root) {
    return a_numa == b_numa ? PathClass::kNODE : PathClass::kSYS;
  }
  size_t common = 0;
  while (common < a.bdfs.size() && common < b.bdfs.size() && a.bdfs[common] == b.bdfs[common]) {
    ++common;
  }
  if (common == 0) return PathClass::kPHB;  // separate root ports: through the host bridge
  // Below the deepest shared bridge each side may take one hop to a downstream port and one
  // to the device; anything deeper crosses another switch.
  size_t a_rest = a.bdfs.size() - common, b_rest = b.bdfs.size() - common;
  return a_rest <= 2 && b_rest <= 2 ? PathClass::kPIX : PathClass::kPXB;
}

Result<Discovery> DiscoverNode(const DiscoverOptions& options) {
  if (!base::PathExists(options.sysfs_root)) {
    return NotFound("sysfs root {} does not exist", options.sysfs_root);
  }
  // hwloc and NVML read the running system; with a fake sysfs they would mix two machines.
  const bool live = RealPath(options.sysfs_root) == "/sys";
  Discovery d;
  d.sources.sysfs_root = options.sysfs_root;

  if (!options.hostname.empty()) {
    d.node.name = options.hostname;
  } else {
    char host[256] = {};
    if (gethostname(host, sizeof host - 1) == 0 && host[0] != '\0') {
      d.node.name = host;
    } else {
      d.node.name = "localhost";
      d.notes.push_back(
          fmt::format("gethostname failed ({}): name is \"localhost\"", std::strerror(errno)));
    }
  }

  DiscoverNuma(options, live, d);
  DiscoverGpus(options, live, d);

  std::vector<FoundNic> nics = RdmaNics(options.sysfs_root, d.rdma_netdevs, d.notes);
  std::set<std::string> taken;
  for (const auto& [ib, nets] : d.rdma_netdevs) taken.insert(nets.begin(), nets.end());
  for (FoundNic& n : NetdevNics(options.sysfs_root, taken, d.notes)) nics.push_back(std::move(n));
  d.sources.nics = "sysfs";

  // sysfs says -1 for devices on machines with a single NUMA node: they are on that node.
  const int only_numa = d.node.numa.size() == 1 ? d.node.numa.front().id : -1;
  std::vector<std::string> gpu_dirs;
  for (Gpu& gpu : d.node.gpus) {
    std::string dir;
    if (!gpu.pci_bus_id.empty()) {
      dir = RealPath(options.sysfs_root + "/bus/pci/devices/" + gpu.pci_bus_id);
    }
    if (dir.empty()) {
      d.notes.push_back(
          fmt::format("GPU {} ({}) not found in {}/bus/pci/devices: no NUMA node "
                      "or GPU-NIC paths for it",
                      gpu.index, gpu.pci_bus_id, options.sysfs_root));
    } else {
      gpu.numa_node = NumaOfDevice(dir, dir);
    }
    if (gpu.numa_node < 0) gpu.numa_node = only_numa;
    gpu_dirs.push_back(std::move(dir));
  }
  d.node.gpu_count = static_cast<int>(d.node.gpus.size());

  uint64_t fastest_rdma = 0, fastest_any = 0;
  for (FoundNic& found : nics) {
    if (found.nic.numa_node < 0) found.nic.numa_node = only_numa;
    fastest_any = std::max(fastest_any, found.nic.rate_bits);
    if (found.nic.rdma) fastest_rdma = std::max(fastest_rdma, found.nic.rate_bits);
    d.node.nics.push_back(found.nic);
  }
  // The node's link to its leaf: the fabric NICs when there are any.
  d.node.link_rate_bits = fastest_rdma ? fastest_rdma : fastest_any;

  for (size_t g = 0; g < d.node.gpus.size(); ++g) {
    if (gpu_dirs[g].empty()) continue;
    for (const FoundNic& found : nics) {
      if (found.pci_dir.empty()) continue;
      d.node.gpu_nic_paths.push_back(
          GpuNicPath{d.node.gpus[g].index, found.nic.name,
                     ClassifyPciPath(gpu_dirs[g], d.node.gpus[g].numa_node, found.pci_dir,
                                     found.nic.numa_node)});
    }
  }

  if (options.use_libfabric) {
#ifdef RAILYARD_WITH_OFI
    DiscoverFabric(options, d);
#else
    d.sources.fabric = "not built (RAILYARD_WITH_OFI off)";
    d.notes.push_back("libfabric not built in (RAILYARD_WITH_OFI off): no fabric providers");
#endif
  } else {
    d.sources.fabric = "disabled";
  }
  kLog.Debug("{}: {} NUMA nodes, {} GPUs, {} NICs, {} fabric providers", d.node.name,
             d.node.numa.size(), d.node.gpus.size(), d.node.nics.size(), d.fabric_providers.size());
  return d;
}

nlohmann::json DiscoveryToJson(const Discovery& discovery) {
  nlohmann::json out = nlohmann::json::object();
  out["version"] = 1;
  out["node"] = NodeToJson(discovery.node);
  out["fabric_providers"] = discovery.fabric_providers;
  nlohmann::json netdevs = nlohmann::json::object();
  for (const auto& [ib, nets] : discovery.rdma_netdevs) netdevs[ib] = nets;
  out["rdma_netdevs"] = std::move(netdevs);
  out["notes"] = discovery.notes;
  const DiscoverySources& s = discovery.sources;
  out["discovered_with"] = {{"sysfs_root", s.sysfs_root},
                            {"numa", s.numa},
                            {"gpus", s.gpus},
                            {"nics", s.nics},
                            {"fabric", s.fabric}};
  return out;
}

}  // namespace railyard::topo
