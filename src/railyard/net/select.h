// Choosing and creating a transport backend by name.
//
//   "tcp"  sockets, always available;
//   "shm"  shared memory, only when every rank runs on this host;
//   "ofi"  libfabric (provider from OfiOptions / RAILYARD_OFI_PROVIDER), when built with it;
//   "auto" shm when every rank is on one host, else ofi when an RDMA provider (verbs, efa,
//          cxi, psm3, opx) is present, else tcp.
// `--transport` flags and RAILYARD_TRANSPORT use these names.
//
// Thread-safety: pure functions, except that "auto" and "ofi" query libfabric.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/net/ofi/ofi_transport.h"
#include "railyard/net/transport.h"

namespace railyard::net {

// "tcp", "shm", and "ofi" where built.
std::vector<std::string> TransportNames();

// Resolves "auto" (or a concrete name, checked) to a backend name. INVALID_ARGUMENT for an
// unknown name, listing the known ones; FAILED_PRECONDITION for shm across hosts.
Result<std::string> ResolveTransport(std::string_view requested, bool all_ranks_on_one_host);

// Creates an unstarted transport of a resolved backend.
Result<std::unique_ptr<Transport>> NewTransport(std::string_view name,
                                                const TransportOptions& options,
                                                const OfiOptions& ofi = {});

}  // namespace railyard::net
