// node.fabric_providers: the libfabric providers that answer on this host (fi_getinfo for
// FI_EP_RDM with FI_MSG|FI_TAGGED, through topo's discovery and base/fabric_library.h). The
// failure it catches is the silent one: verbs or efa missing (driver, rdma-core or the
// provider library not installed, a container without the device), so libfabric, NCCL and
// Railyard fall back to tcp and the job runs at a tenth of its speed.
//
// The profile's fabric_provider must be offered; else, when RDMA is expected, one RDMA
// provider must be. SKIPPED when neither is expected (Gate) or, with no expectation, when
// libfabric cannot be loaded; UNKNOWN when it cannot be loaded and something is expected.
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "railyard/validate/check.h"

namespace railyard::validate {
namespace {

// Providers that drive RDMA hardware (as opposed to tcp, udp, sockets, net, shm).
bool IsRdmaProvider(std::string_view name) {
  for (std::string_view p : {"verbs", "efa", "cxi", "psm2", "psm3", "opx", "ucx", "usnic"}) {
    if (name == p) return true;
  }
  return false;
}

class FabricProvidersCheck final : public BasicCheck {
 public:
  FabricProvidersCheck()
      : BasicCheck({.id = "node.fabric_providers",
                    .summary = "the expected libfabric provider (an RDMA one with RDMA) answers",
                    .category = Category::kNode,
                    .cost = Cost::kQuick,
                    .timeout = std::chrono::seconds(4),
                    .needs = {.fabric_provider = true}}) {}

  Outcome Run(const CheckContext& ctx) const override {
    const Profile& p = *ctx.profile;
    bool rdma = p.rdma.value_or(false);
    std::string expected = !p.fabric_provider.empty() ? p.fabric_provider
                           : rdma                     ? "an RDMA provider"
                                                      : "any";
    Result<std::vector<std::string>> listed = ctx.env->FabricProviders();
    if (!listed.ok()) {
      if (listed.status().code() == StatusCode::kUnavailable && expected == "any") {
        return Outcome::Skipped(fmt::format("{}; no provider expected", listed.status().message()));
      }
      return Outcome::Unknown(fmt::format("{}; cannot tell whether {} is available",
                                          listed.status().message(), expected))
          .With("", expected);
    }
    // "verbs;ofi_rxm" -> "verbs": the core provider names what hardware is used.
    std::vector<std::string> cores;
    for (const std::string& name : *listed) {
      std::string core = name.substr(0, name.find(';'));
      if (std::find(cores.begin(), cores.end(), core) == cores.end()) cores.push_back(core);
    }
    std::string found = cores.empty() ? "none" : fmt::format("{}", fmt::join(cores, ", "));
    auto has = [&](auto pred) { return std::any_of(cores.begin(), cores.end(), pred); };
    if (!p.fabric_provider.empty()) {
      if (has([&](const std::string& c) { return c == p.fabric_provider; })) {
        return Outcome::Pass(fmt::format("provider {} available", p.fabric_provider))
            .With(found, expected);
      }
      return Outcome::Fail(
                 fmt::format("provider {} expected, only {} available", p.fabric_provider, found))
          .With(found, expected);
    }
    if (rdma) {
      if (has([](const std::string& c) { return IsRdmaProvider(c); })) {
        return Outcome::Pass(fmt::format("RDMA provider available ({})", found))
            .With(found, expected);
      }
      return Outcome::Fail(fmt::format("RDMA expected, only {} available", found))
          .With(found, expected);
    }
    if (cores.empty()) {
      return Outcome::Warn("no libfabric provider answered").With(found, expected);
    }
    return Outcome::Pass(fmt::format("providers: {}", found)).With(found, expected);
  }
};

}  // namespace

std::unique_ptr<Check> NewFabricProvidersCheck() {
  return std::make_unique<FabricProvidersCheck>();
}

}  // namespace railyard::validate
