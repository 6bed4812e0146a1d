// NUMA nodes from hwloc, in a build without hwloc (CMake compiles hwloc.cc when it finds it).
#include "railyard/topo/discover/sources.h"

namespace railyard::topo::internal {

bool NumaFromHwloc(const DiscoverOptions&, bool, Discovery& d) {
  d.notes.push_back("hwloc not built in (RAILYARD_WITH_HWLOC off): NUMA nodes from sysfs");
  return false;
}

}  // namespace railyard::topo::internal
