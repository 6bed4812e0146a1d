// IPv4 socket addresses as text, shared by the tcp transport and the tcp store: peers are
// printed with SockaddrText and "host:port" is read back with ParseIpv4HostPort (numbers
// only, as the transport publishes them) or ResolveHostPort (a store address an operator
// typed, which may name a host). Internal to net/.
//
//   RY_ASSIGN_OR_RETURN(sockaddr_in peer, ParseIpv4HostPort(info.address));
//   log.Info("accepted {}", SockaddrText(from));
//
// Thread-safety: pure functions (getaddrinfo is thread-safe).
#pragma once

#include <netinet/in.h>

#include <string>
#include <string_view>

#include "railyard/base/status.h"

namespace railyard::net::internal {

// "10.0.0.1:5000".
std::string SockaddrText(const sockaddr_in& a);

// "10.0.0.1:5000": a numeric IPv4 address and a port from 1 to 65535; never looks a name up.
// INVALID_ARGUMENT quoting `text` otherwise.
Result<sockaddr_in> ParseIpv4HostPort(std::string_view text);

// As ParseIpv4HostPort, but a host that is not an IPv4 address is looked up (IPv4, first
// answer). UNAVAILABLE naming the host when the lookup fails.
Result<sockaddr_in> ResolveHostPort(std::string_view text);

}  // namespace railyard::net::internal
