// A hardware profile: what a validation plan expects of a group of hosts.
//
// A plan names profiles ("gpu", "cpu", "storage") and the hosts each covers; a check reads
// the profile of the host it runs on to know what to expect and whether it applies at all
// (a GPU check on a profile that expects no GPU is SKIPPED, with that as its reason). Values
// left unset are taken from the topology by ResolveProfile: the node's link rate, its GPU
// count, whether any of its NICs is RDMA-capable.
//
// Thread-safety: values and pure functions.
#pragma once

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "railyard/topo/model.h"

namespace railyard::validate {

// The memlock limit that means "unlimited" (RLIM_INFINITY), as RDMA registration needs.
inline constexpr uint64_t kUnlimited = std::numeric_limits<uint64_t>::max();

struct MountExpectation {
  std::string path;     // "/lustre"
  std::string fs_type;  // "lustre", "nfs", ...; empty: any type
  friend bool operator==(const MountExpectation&, const MountExpectation&) = default;
};

struct Profile {
  std::string name = "default";
  // A Slurm hostlist expression ("gpu[001-128]") of the hosts this profile covers; empty:
  // every host no earlier profile covers.
  std::string hosts;
  uint64_t nic_rate_bits = 0;   // expected rate of the host's link; 0: from the topology
  int gpus = -1;                // expected GPU count; -1: from the topology
  std::optional<bool> rdma;     // an RDMA provider expected; unset: from the topology's NICs
  std::string fabric_provider;  // libfabric provider expected ("verbs", "efa"); empty: any
  // Smallest acceptable RLIMIT_MEMLOCK; unset: kUnlimited when RDMA is expected, else none.
  std::optional<uint64_t> memlock_bytes;
  std::vector<MountExpectation> mounts;
  // Expected PCIe distance of each GPU to each NIC; from the topology's node (a plan does not
  // set it).
  std::vector<topo::GpuNicPath> gpu_nic_paths;
  friend bool operator==(const Profile&, const Profile&) = default;
};

// `profile` with its unset expectations filled from node `node` of `cluster` (precondition:
// a valid index): nic_rate_bits from link_rate_bits, gpus from gpu_count, rdma from whether
// any NIC is RDMA-capable (false when the node lists no NICs), memlock as documented above,
// gpu_nic_paths from the node's.
Profile ResolveProfile(const Profile& profile, const topo::Cluster& cluster, int node);

}  // namespace railyard::validate
