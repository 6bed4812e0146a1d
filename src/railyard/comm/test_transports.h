// The transports a multi-rank test runs over: every backend built into this binary, on
// loopback only (tcp on lo, ofi's tcp;ofi_rxm on the lo domain, shm).
#pragma once

#include <string>
#include <vector>

#include "railyard/net/select.h"
#include "railyard/net/transport_testing.h"

namespace railyard::comm {

struct TestTransport {
  std::string name;
  net::TransportFactory factory;
};

inline std::vector<TestTransport> AvailableTestTransports() {
  std::vector<TestTransport> out;
  for (const std::string& name : net::TransportNames()) {
    out.push_back({name, [name](const net::TransportOptions& o) {
                     net::BackendOptions b;
                     b.ofi.provider = "tcp;ofi_rxm";
                     b.ofi.domain = "lo";
                     return net::NewTransport(name, o, b);
                   }});
  }
  return out;
}

}  // namespace railyard::comm
