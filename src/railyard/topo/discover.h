// Node discovery: what `railyard discover` prints — this machine as a topo::Node (GPUs, NICs,
// NUMA nodes and GPU-to-NIC PCIe distances) plus the fabric providers that answer here.
//
// Every source is optional and degrades to a simpler one, recording why in `notes`, so a
// laptop with no GPU and no RDMA NIC still gets a valid description:
//
//   NUMA nodes  hwloc (when built with RAILYARD_WITH_HWLOC)  -> sysfs node*/cpulist -> one node
//   GPUs        NVML, loaded with dlopen (never linked)      -> PCI class codes in sysfs
//   NICs        sysfs: class/net and class/infiniband
//   paths       the PCI tree in sysfs (ClassifyPciPath below)
//   providers   libfabric fi_getinfo (when built with RAILYARD_WITH_OFI), time-boxed
//
// Each source is one file under discover/ (listed in discover/sources.h); discover.cc
// assembles them.
//
//   RY_ASSIGN_OR_RETURN(Discovery d, DiscoverNode({}));
//   fmt::print("{}\n", DiscoveryToJson(d).dump(2));
//
// Tests point `sysfs_root` at a fake tree; hwloc and NVML read the live system, so they are
// skipped (with a note) whenever sysfs_root is not "/sys".
//
// Thread-safety: DiscoverNode may run concurrently with itself; the other functions are pure.
#pragma once

#include <chrono>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/topo/model.h"

namespace railyard::topo {

struct DiscoverOptions {
  std::string sysfs_root = "/sys";
  bool use_hwloc = true;
  bool use_libfabric = true;
  bool use_nvml = true;
  // dlopen name of NVML; tests pass a name that does not exist.
  std::string nvml_library = "libnvidia-ml.so.1";
  // fi_getinfo can stall on misconfigured providers; past this, providers are not listed.
  std::chrono::milliseconds fabric_timeout{10000};
  // Overrides gethostname() when non-empty.
  std::string hostname;
};

// Which source produced each part, for the "discovered_with" object.
struct DiscoverySources {
  std::string sysfs_root;
  std::string numa;    // "hwloc (API 2.8)", "sysfs", "sysfs cpu/online (no NUMA information)"
  std::string gpus;    // "nvml", "pci class codes"
  std::string nics;    // "sysfs"
  std::string fabric;  // "libfabric 1.17", "disabled", "not built (RAILYARD_WITH_OFI off)"
};

struct Discovery {
  Node node;
  // Distinct fi_getinfo provider names for FI_EP_RDM with FI_MSG|FI_TAGGED, in the order
  // libfabric ranks them: "verbs;ofi_rxm", "efa", "tcp;ofi_rxm", "shm", "net", ...
  std::vector<std::string> fabric_providers;
  // RDMA device -> its network interfaces ("mlx5_0" -> {"ib0"}); those netdevs are folded
  // into the RDMA device's Nic entry instead of being listed twice.
  std::map<std::string, std::vector<std::string>> rdma_netdevs;
  // What was skipped or guessed, and why, one line each.
  std::vector<std::string> notes;
  DiscoverySources sources;
};

// Discovers this machine. Missing sources are notes, not errors; the only error is a sysfs
// root that does not exist (NOT_FOUND naming it).
Result<Discovery> DiscoverNode(const DiscoverOptions& options);

// {"version": 1, "node": NodeToJson(node), "fabric_providers": [...],
//  "rdma_netdevs": {...}, "notes": [...], "discovered_with": {...}}
nlohmann::json DiscoveryToJson(const Discovery& discovery);

// The PCIe distance between two devices from their sysfs paths (realpaths such as
// "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0/0000:02:08.0/0000:03:00.0"; trailing
// non-PCI components like "virtio2/net/eth0" are ignored) and NUMA nodes (-1 unknown):
//   PIX   both hang off the downstream ports of one PCIe switch (or share one bridge)
//   PXB   they share a bridge below the host bridge, but the path crosses several switches
//   PHB   same root complex (pciDDDD:BB), no shared bridge: through the host bridge
//   NODE  different root complexes, same NUMA node
//   SYS   different NUMA nodes
// A path without a PCI root complex is compared by NUMA node only (NODE or SYS).
// Pure: no file system access.
PathClass ClassifyPciPath(std::string_view a_path, int a_numa, std::string_view b_path, int b_numa);

// "00000000:17:00.0" (NVML) or "0000:17:00.0" -> "0000:17:00.0": lowercase, domain trimmed
// to 4 hex digits when it fits. Returns the input lowercased when it is not a bus id.
std::string NormalizePciBusId(std::string_view bus_id);

// "400 Gb/sec (4X NDR)" (an infiniband port's rate file) -> 400e9. INVALID_ARGUMENT quoting
// the text otherwise.
Result<uint64_t> ParseIbRate(std::string_view text);

}  // namespace railyard::topo
