// NUMA nodes from hwloc (compiled when CMake finds hwloc; hwloc_off.cc otherwise).
#include <fmt/format.h>
#include <hwloc.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <memory>

#include "railyard/topo/discover/sources.h"

namespace railyard::topo::internal {
namespace {

// NUMA nodes with their CPUs (OS indices). The whole machine, not just this process's cgroup
// (INCLUDE_DISALLOWED), so the description does not depend on where `discover` ran.
Result<std::vector<NumaNode>> HwlocNuma(std::vector<std::string>& notes) {
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

}  // namespace

bool NumaFromHwloc(const DiscoverOptions& options, bool live, Discovery& d) {
  if (!live) {
    d.notes.push_back(fmt::format("hwloc skipped: it reads the live system, not sysfs root {}",
                                  options.sysfs_root));
    return false;
  }
  Result<std::vector<NumaNode>> numa = HwlocNuma(d.notes);
  if (numa.ok() && !numa->empty()) {
    d.node.numa = std::move(numa).value();
    d.sources.numa = HwlocVersion();
    return true;
  }
  d.notes.push_back(numa.ok() ? "hwloc found no NUMA node with CPUs: NUMA nodes from sysfs"
                              : "hwloc: " + numa.status().message() + ": NUMA nodes from sysfs");
  return false;
}

}  // namespace railyard::topo::internal
