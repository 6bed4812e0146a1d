// Fabric providers, in a build without libfabric (CMake compiles libfabric.cc when it finds
// the headers).
#include "railyard/topo/discover/sources.h"

namespace railyard::topo::internal {

void ListFabricProviders(const DiscoverOptions&, Discovery& d) {
  d.sources.fabric = "not built (RAILYARD_WITH_OFI off)";
  d.notes.push_back("libfabric not built in (RAILYARD_WITH_OFI off): no fabric providers");
}

}  // namespace railyard::topo::internal
