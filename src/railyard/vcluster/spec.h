// The plan of a virtual cluster: which hosts, leaves and links exist, what they are called,
// which addresses they get. Pure data and computation, no I/O: `up`, `down`, the state
// file and the tests all derive names from here, so every object carries the cluster's
// prefix and `down` can find them even when the state file is lost.
//
// Layout (two-level tree, as on an oversubscribed fabric):
//
//   spine bridge  <p>-sp
//     |  veth <p>-s<L>d (spine side) <-> <p>-l<L>u (leaf side), tbf at the spine rate
//   leaf bridge   <p>-l<L>
//     |  veth <p>-h<I> (bridge side) <-> eth0 (inside netns <p>-<host>), shaped at the leaf rate
//   host          netns <p>-node<I>, address 198.18.<L>.<I+1>/16
//
// 198.18.0.0/15 is the range RFC 2544 reserves for network benchmarking: it never collides
// with a real network and no namespace has a route out of it. In loopback mode the hosts are
// 127.<X>.<L>.<I+1> on the machine's loopback interface instead, X = LoopbackOctet(prefix), so
// that clusters with different prefixes do not share addresses.
//
// The control address kControlAddress (198.18.255.254/16) sits on the spine bridge in the
// root namespace: a coordinator there listens on it and every host reaches it over its own
// /16 route, without any route out of the range. In loopback mode it is 127.0.0.1.
//
// Thread-safety: values.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "railyard/base/status.h"

namespace railyard::vcluster {

enum class Mode { kNetns, kLoopback };
std::string_view ModeName(Mode mode);

struct ClusterSpec {
  std::string prefix = "ry";     // 1-5 chars [a-z0-9], starts with a letter
  int hosts = 4;                 // 1..kMaxHosts
  int leaves = 2;                // 1..hosts
  uint64_t leaf_rate_bits = 0;   // host <-> leaf link, bits/s; 0 = unshaped
  uint64_t spine_rate_bits = 0;  // leaf <-> spine link, bits/s; 0 = unshaped
  Mode mode = Mode::kNetns;
};

inline constexpr int kMaxHosts = 250;
inline constexpr int kMaxPrefixLength = 5;

// INVALID_ARGUMENT naming the field and what was expected.
Status ValidateSpec(const ClusterSpec& spec);
Status ValidatePrefix(std::string_view prefix);

struct HostPlan {
  int index = 0;
  std::string name;         // node<I>
  int leaf = 0;             // leaf index
  std::string address;      // dotted quad, no prefix length
  std::string netns;        // <p>-node<I>
  std::string bridge_port;  // <p>-h<I>: bridge-side end of the host's veth
};

struct LeafPlan {
  int index = 0;
  std::string name;        // leaf<L>
  std::string bridge;      // <p>-l<L>
  std::string uplink;      // <p>-l<L>u: leaf-side end of the spine veth
  std::string spine_port;  // <p>-s<L>d: spine-side end
  std::vector<int> hosts;  // host indices, ascending
};

struct ClusterPlan {
  ClusterSpec spec;
  std::string spine_bridge;  // <p>-sp
  std::vector<LeafPlan> leaves;
  std::vector<HostPlan> hosts;

  // nullptr when no such host / leaf.
  const HostPlan* FindHost(std::string_view name) const;
  const LeafPlan* FindLeaf(std::string_view name) const;
  // "node[0-7]"-style list of host names, for messages.
  std::string HostList() const;
};

inline constexpr int kSubnetBits = 16;  // /16 inside the namespaces
inline constexpr const char* kControlAddress = "198.18.255.254";
inline constexpr const char* kLoopbackControlAddress = "127.0.0.1";

// Hosts are spread over leaves in contiguous blocks, sizes differing by at most one
// (8 hosts on 3 leaves: 3, 3, 2). Preconditions: ValidateSpec(spec).ok().
ClusterPlan MakePlan(const ClusterSpec& spec);

// Second octet of a loopback-mode cluster's addresses (64..191), derived from the prefix.
int LoopbackOctet(std::string_view prefix);

// Every name the prefix owns starts with "<prefix>-".
std::string OwnedNamePrefix(std::string_view prefix);

}  // namespace railyard::vcluster
