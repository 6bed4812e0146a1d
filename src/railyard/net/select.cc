#include "railyard/net/select.h"

#include <fmt/ranges.h>

#include <cstdio>
#include <cstdlib>

namespace railyard::net {
namespace {

bool IsRdmaProvider(std::string_view name) {
  for (std::string_view p : {"verbs", "efa", "cxi", "psm3", "opx"}) {
    if (name.substr(0, p.size()) == p) return true;
  }
  return false;
}

}  // namespace

Status TransportRegistry::Register(std::string name, Factory factory) {
  if (name.empty() || name == "auto") {
    return InvalidArgument("transport name '{}' is reserved", name);
  }
  if (Has(name)) return AlreadyExists("transport '{}' is already registered", name);
  factories_.emplace(std::move(name), std::move(factory));
  return Status::Ok();
}

std::vector<std::string> TransportRegistry::Names() const {
  std::vector<std::string> names;
  for (const auto& [name, factory] : factories_) names.push_back(name);
  return names;
}

Result<std::unique_ptr<Transport>> TransportRegistry::Create(std::string_view name,
                                                             const TransportOptions& options,
                                                             const BackendOptions& backend) const {
  auto it = factories_.find(name);
  if (it == factories_.end()) {
    return InvalidArgument("unknown transport '{}'; registered: {}", name,
                           fmt::join(Names(), ", "));
  }
  return it->second(options, backend);
}

Status RegisterBuiltinTransports(TransportRegistry& registry) {
  RY_RETURN_IF_ERROR(
      registry.Register("tcp", [](const TransportOptions& o, const BackendOptions& b) {
        return NewTcpTransport(o, b.tcp);
      }));
  RY_RETURN_IF_ERROR(
      registry.Register("shm", [](const TransportOptions& o, const BackendOptions& b) {
        return NewShmTransport(o, b.shm);
      }));
#ifdef RAILYARD_WITH_OFI
  RY_RETURN_IF_ERROR(
      registry.Register("ofi", [](const TransportOptions& o, const BackendOptions& b) {
        return NewOfiTransport(o, b.ofi);
      }));
#endif
  return Status::Ok();
}

const TransportRegistry& BuiltinTransports() {
  static const TransportRegistry* registry = [] {
    auto* r = new TransportRegistry;
    // Fails only for a duplicate built-in name: a bug, caught by every test.
    if (Status s = RegisterBuiltinTransports(*r); !s.ok()) {
      std::fprintf(stderr, "railyard: %s\n", s.ToString().c_str());
      std::abort();
    }
    return r;
  }();
  return *registry;
}

std::vector<std::string> TransportNames() { return BuiltinTransports().Names(); }

Result<std::string> ResolveTransport(std::string_view requested, bool all_ranks_on_one_host) {
  const TransportRegistry& registry = BuiltinTransports();
  if (requested.empty() || requested == "auto") {
    if (all_ranks_on_one_host && registry.Has("shm")) return std::string("shm");
#ifdef RAILYARD_WITH_OFI
    auto providers = ListOfiProviders();
    if (providers.ok() && registry.Has("ofi")) {
      for (const auto& p : *providers) {
        if (IsRdmaProvider(p)) return std::string("ofi");
      }
    }
#endif
    return std::string("tcp");
  }
  if (!registry.Has(requested)) {
    return InvalidArgument("unknown transport '{}'; expected auto, {}", requested,
                           fmt::join(registry.Names(), ", "));
  }
  if (requested == "shm" && !all_ranks_on_one_host) {
    return FailedPrecondition(
        "transport shm needs every rank on one host; these ranks span several (use tcp or ofi)");
  }
  return std::string(requested);
}

Result<std::unique_ptr<Transport>> NewTransport(std::string_view name,
                                                const TransportOptions& options,
                                                const BackendOptions& backend) {
  return BuiltinTransports().Create(name, options, backend);
}

}  // namespace railyard::net
