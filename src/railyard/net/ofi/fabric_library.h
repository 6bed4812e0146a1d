// net/ofi's libfabric: the process-wide loader of base/fabric_library.h, plus the RxM
// receive-buffer default the transport wants set before libfabric initialises.
//
//   RY_ASSIGN_OR_RETURN(const FabricLibrary* fi, LoadFabricForTransport());
//
// Thread-safety: LoadFabricForTransport may be called from any thread.
#pragma once

#include "railyard/base/fabric_library.h"

namespace railyard::net {

using base::FabricLibrary;
using base::FidOwner;

// base::LoadFabricLibrary, after setting FI_OFI_RXM_MSG_RX_SIZE to 32 unless the user set it.
// The providers read it when libfabric initialises (its first fi_getinfo), so a process that
// listed providers through topo's discovery first keeps RxM's default there, as before the
// loaders were shared.
Result<const FabricLibrary*> LoadFabricForTransport();

}  // namespace railyard::net
