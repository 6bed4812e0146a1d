// The sources of node discovery, one file each, which topo/discover.cc assembles into a
// Discovery (see discover.h for the order in which they fall back on one another):
//
//   hwloc.cc      NUMA nodes from hwloc     (hwloc_off.cc when built without hwloc)
//   sysfs_numa.cc NUMA nodes from sysfs node*/cpulist, else cpu/online
//   nvml.cc       GPUs from NVML, loaded with dlopen
//   sysfs_pci.cc  GPUs from PCI class codes; bus ids and PCIe path classes
//   sysfs_nics.cc NICs from class/infiniband and class/net
//   libfabric.cc  fabric providers from fi_getinfo (libfabric_off.cc when built without it)
//
// CMake picks hwloc.cc or hwloc_off.cc, libfabric.cc or libfabric_off.cc, so no source
// carries an #ifdef. Internal to topo/discover.cc.
//
// Thread-safety: each function may run concurrently with itself.
#pragma once

#include <map>
#include <set>
#include <string>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/topo/discover.h"
#include "railyard/topo/model.h"

namespace railyard::topo::internal {

// NUMA nodes from hwloc: fills d.node.numa and d.sources.numa and returns true, or notes in
// d.notes why hwloc gave none (not built in, not the live system, no node with CPUs) and
// returns false so the caller falls back to sysfs.
bool NumaFromHwloc(const DiscoverOptions& options, bool live, Discovery& d);

// NUMA nodes with CPUs from <root>/devices/system/node, else one node 0 holding
// <root>/devices/system/cpu/online; `source` names which.
std::vector<NumaNode> NumaFromSysfs(const std::string& root, std::vector<std::string>& notes,
                                    std::string& source);

// GPUs as NVML numbers them, or why NVML cannot be used (NOT_FOUND for a missing library,
// UNIMPLEMENTED for a missing entry point, UNAVAILABLE for a failed call).
Result<std::vector<Gpu>> GpusFromNvml(const std::string& library);

// NVIDIA and AMD display-class PCI functions under <root>/bus/pci/devices, in bus order.
std::vector<Gpu> GpusFromPciClass(const std::string& root);

// A NIC with the realpath of its PCI function in sysfs ("" when not on PCI).
struct FoundNic {
  Nic nic;
  std::string pci_dir;
};

// RDMA devices (InfiniBand, RoCE, EFA) from <root>/class/infiniband; `netdevs` gets each
// device's network interfaces.
std::vector<FoundNic> RdmaNics(const std::string& root,
                               std::map<std::string, std::vector<std::string>>& netdevs,
                               std::vector<std::string>& notes);

// Physical network interfaces from <root>/class/net, except lo and those in `taken`.
std::vector<FoundNic> NetdevNics(const std::string& root, const std::set<std::string>& taken,
                                 std::vector<std::string>& notes);

// Fills d.fabric_providers and d.sources.fabric from libfabric, noting what went wrong
// (not built in, library missing, fi_getinfo past options.fabric_timeout).
void ListFabricProviders(const DiscoverOptions& options, Discovery& d);

}  // namespace railyard::topo::internal
