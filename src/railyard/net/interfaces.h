// Network interfaces: which local IPv4 address a rank listens on and advertises.
//
// The choice follows NCCL_SOCKET_IFNAME's syntax, so operators can reuse what they already
// set for NCCL (Railyard reads it from RAILYARD_SOCKET_IFNAME):
//   "eth,ib"        interfaces whose names start with eth or ib
//   "^docker,lo"    every interface except those starting with docker or lo
//   "=eth0,eth1"    exactly eth0 or eth1
//   "^=eth0"        every interface except exactly eth0
// With no spec, the first up interface that is neither loopback nor a container/VM bridge
// (docker*, virbr*, veth*) is chosen, else loopback: a single-host job still works.
//
//   RY_ASSIGN_OR_RETURN(NetInterface nic, ChooseInterface(GetEnvOr("RAILYARD_SOCKET_IFNAME")));
//   listen_on(nic.ipv4);
//
// ParseInterfaceSpec, FilterInterfaces and ChooseInterfaceFrom are pure, for tests with a
// synthetic interface list. Thread-safety: free functions, safe from any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"

namespace railyard::net {

struct NetInterface {
  std::string name;  // "eth0"
  std::string ipv4;  // dotted quad, "10.0.0.2"
  bool loopback = false;
  bool up = false;  // IFF_UP and IFF_RUNNING: administratively up with a carrier
};

// A parsed RAILYARD_SOCKET_IFNAME / NCCL_SOCKET_IFNAME value.
struct InterfaceSpec {
  bool exclude = false;            // leading '^': the names are the ones NOT to use
  bool exact = false;              // leading '=' (after any '^'): names match whole, not prefix
  std::vector<std::string> names;  // empty only for the empty spec, which matches everything
};

// INVALID_ARGUMENT naming the spec for an empty item ("eth0,,ib0", "^", "eth0,"), an item
// with whitespace or '/', or an item longer than an interface name can be (15 bytes).
Result<InterfaceSpec> ParseInterfaceSpec(std::string_view spec);

// The interfaces of `all` that `spec` selects, in their original order.
std::vector<NetInterface> FilterInterfaces(const std::vector<NetInterface>& all,
                                           const InterfaceSpec& spec);

// Every interface with an IPv4 address (the first address of each), in the kernel's order.
// INTERNAL when getifaddrs fails.
Result<std::vector<NetInterface>> ListInterfaces();

// The interface to use from `all` (see the header comment). With a spec, among the up
// interfaces that match, non-loopback non-bridge ones are preferred. NOT_FOUND when nothing
// matches, listing what is here: "no network interface matches RAILYARD_SOCKET_IFNAME='eth9';
// interfaces here: lo (127.0.0.1), eth0 (10.0.0.2)"; INVALID_ARGUMENT for a malformed spec.
Result<NetInterface> ChooseInterfaceFrom(const std::vector<NetInterface>& all,
                                         std::string_view spec);

// ChooseInterfaceFrom(ListInterfaces(), spec).
Result<NetInterface> ChooseInterface(std::string_view spec);

}  // namespace railyard::net
