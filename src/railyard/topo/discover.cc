// Node discovery's orchestrator: asks each source in discover/ (see discover/sources.h) in
// turn, falls back where one gives nothing, and joins GPUs and NICs into PCIe paths.
#include "railyard/topo/discover.h"

#include <fmt/format.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <set>
#include <utility>

#include "railyard/base/files.h"
#include "railyard/base/logging.h"
#include "railyard/topo/discover/sources.h"
#include "railyard/topo/discover/sysfs.h"
#include "railyard/topo/node_json.h"

namespace railyard::topo {
namespace {

using internal::FoundNic;
using internal::RealPath;

const base::Logger kLog("discover");

void DiscoverNuma(const DiscoverOptions& options, bool live, Discovery& d) {
  if (options.use_hwloc && internal::NumaFromHwloc(options, live, d)) return;
  d.node.numa = internal::NumaFromSysfs(options.sysfs_root, d.notes, d.sources.numa);
}

void DiscoverGpus(const DiscoverOptions& options, bool live, Discovery& d) {
  if (options.use_nvml && live) {
    Result<std::vector<Gpu>> gpus = internal::GpusFromNvml(options.nvml_library);
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
  d.node.gpus = internal::GpusFromPciClass(options.sysfs_root);
  d.sources.gpus = "pci class codes";
  if (d.node.gpus.empty()) {
    d.notes.push_back("no NVIDIA or AMD display-class PCI device: no GPUs");
  }
}

}  // namespace

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

  std::vector<FoundNic> nics = internal::RdmaNics(options.sysfs_root, d.rdma_netdevs, d.notes);
  std::set<std::string> taken;
  for (const auto& [ib, nets] : d.rdma_netdevs) taken.insert(nets.begin(), nets.end());
  for (FoundNic& n : internal::NetdevNics(options.sysfs_root, taken, d.notes))
    nics.push_back(std::move(n));
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
      gpu.numa_node = internal::NumaOfDevice(dir, dir);
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
    internal::ListFabricProviders(options, d);
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
