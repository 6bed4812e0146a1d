// Choosing and creating a transport backend by name, through one registry.
//
//   "tcp"  sockets, always available;
//   "shm"  shared memory, only when every rank runs on this host;
//   "ofi"  libfabric (provider from OfiOptions), when built with it;
//   "auto" shm when every rank is on one host, else ofi when an RDMA provider (verbs, efa,
//          cxi, psm3, opx) is present, else tcp.
// `--transport` flags and RAILYARD_TRANSPORT use these names.
//
// Each backend has its own options struct (TcpOptions, ShmOptions, OfiOptions); a caller
// that does not know the backend in advance fills BackendOptions and the chosen backend
// reads its member:
//
//   RY_ASSIGN_OR_RETURN(std::string name, ResolveTransport("auto", one_host));
//   RY_ASSIGN_OR_RETURN(auto t, NewTransport(name, options, BackendOptions{.ofi = ofi}));
//
// The registry is filled by an explicit RegisterBuiltinTransports call (not by static
// initialisers, which drop factories linked from a static library); a test may register
// its own backend in a registry of its own.
//
// Thread-safety: a TransportRegistry is filled by one thread, then read from any;
// BuiltinTransports() is filled once, thread-safely. "auto" and "ofi" query libfabric.
#pragma once

#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/net/ofi/ofi_transport.h"
#include "railyard/net/shm/shm_transport.h"
#include "railyard/net/tcp/tcp_transport.h"
#include "railyard/net/transport.h"

namespace railyard::net {

// Every backend's own options; a backend reads only its member.
struct BackendOptions {
  TcpOptions tcp;
  ShmOptions shm;
  OfiOptions ofi;
};

class TransportRegistry {
 public:
  // Creates an unstarted transport from the common and the backend options.
  using Factory = std::function<Result<std::unique_ptr<Transport>>(const TransportOptions&,
                                                                   const BackendOptions&)>;

  // ALREADY_EXISTS when `name` is taken; INVALID_ARGUMENT for an empty name or "auto".
  Status Register(std::string name, Factory factory);
  // Every registered name, sorted.
  std::vector<std::string> Names() const;
  bool Has(std::string_view name) const { return factories_.count(name) > 0; }
  // INVALID_ARGUMENT "unknown transport 'x'; registered: ..." for a name not registered.
  Result<std::unique_ptr<Transport>> Create(std::string_view name, const TransportOptions& options,
                                            const BackendOptions& backend = {}) const;

 private:
  std::map<std::string, Factory, std::less<>> factories_;
};

// Registers tcp, shm and (when built with libfabric) ofi. Errors as Register (only on a bug).
Status RegisterBuiltinTransports(TransportRegistry& registry);

// The registry of the built-in backends, filled on first use.
const TransportRegistry& BuiltinTransports();

// BuiltinTransports().Names(): "ofi" (where built), "shm", "tcp".
std::vector<std::string> TransportNames();

// Resolves "auto" (or a concrete name, checked) to a backend name. INVALID_ARGUMENT for an
// unknown name, listing the known ones; FAILED_PRECONDITION for shm across hosts.
Result<std::string> ResolveTransport(std::string_view requested, bool all_ranks_on_one_host);

// BuiltinTransports().Create: an unstarted transport of a resolved backend.
Result<std::unique_ptr<Transport>> NewTransport(std::string_view name,
                                                const TransportOptions& options,
                                                const BackendOptions& backend = {});

}  // namespace railyard::net
