#include "railyard/net/ofi/fabric_library.h"

#include <stdlib.h>

#include <mutex>

namespace railyard::net {

Result<const FabricLibrary*> LoadFabricForTransport() {
  static std::once_flag once;
  std::call_once(once, [] {
    // RxM posts FI_OFI_RXM_MSG_RX_SIZE receive buffers of FI_OFI_RXM_BUFFER_SIZE (16 KiB)
    // on every connection and zeroes them: 2 MiB per peer at the default of 128. With 64
    // ranks on 2 cores, start-up spent most of its CPU in that memset (28 s for 64 ofi
    // ranks). 32 keeps 512 KiB per peer; 4-rank busbw at 4 KiB, 1 MiB and 16 MiB was level
    // or better (docs/comm.md). Read by the providers when libfabric initialises, so it is
    // set here, once, before loading it; a value the user set wins.
    ::setenv("FI_OFI_RXM_MSG_RX_SIZE", "32", /*overwrite=*/0);
  });
  return base::LoadFabricLibrary();
}

}  // namespace railyard::net
