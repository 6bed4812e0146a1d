#include "railyard/net/select.h"

#include "railyard/net/shm/shm_transport.h"
#include "railyard/net/tcp/tcp_transport.h"

namespace railyard::net {
namespace {

bool IsRdmaProvider(std::string_view name) {
  for (std::string_view p : {"verbs", "efa", "cxi", "psm3", "opx"}) {
    if (name.substr(0, p.size()) == p) return true;
  }
  return false;
}

}  // namespace

std::vector<std::string> TransportNames() {
#ifdef RAILYARD_WITH_OFI
  return {"tcp", "shm", "ofi"};
#else
  return {"tcp", "shm"};
#endif
}

Result<std::string> ResolveTransport(std::string_view requested, bool all_ranks_on_one_host) {
  if (requested.empty() || requested == "auto") {
    if (all_ranks_on_one_host) return std::string("shm");
#ifdef RAILYARD_WITH_OFI
    auto providers = ListOfiProviders();
    if (providers.ok()) {
      for (const auto& p : *providers) {
        if (IsRdmaProvider(p)) return std::string("ofi");
      }
    }
#endif
    return std::string("tcp");
  }
  std::string names;
  for (const auto& n : TransportNames()) {
    if (n == requested) {
      if (n == "shm" && !all_ranks_on_one_host) {
        return FailedPrecondition("transport shm needs every rank on one host; these ranks "
                                  "span several (use tcp or ofi)");
      }
      return n;
    }
    names += (names.empty() ? "" : ", ") + n;
  }
  return InvalidArgument("unknown transport '{}'; expected auto, {}", requested, names);
}

Result<std::unique_ptr<Transport>> NewTransport(std::string_view name,
                                                const TransportOptions& options,
                                                const OfiOptions& ofi) {
  if (name == "tcp") return NewTcpTransport(options);
  if (name == "shm") return NewShmTransport(options);
#ifdef RAILYARD_WITH_OFI
  if (name == "ofi") return NewOfiTransport(options, ofi);
#else
  (void)ofi;
#endif
  return InvalidArgument("unknown transport '{}'", name);
}

}  // namespace railyard::net
