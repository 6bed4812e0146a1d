// The state file of a virtual cluster: the spec it was built from plus what has been changed
// since (degraded hosts, paths and uplinks, cut hosts, scratch faults, hidden providers). `up`
// writes it last (after everything exists) and every later command reads it; `down` deletes
// it last. It is written atomically, so a crash leaves either the previous state or the new
// one.
//
// Format (JSON, "state_version": 1; the fields after "topology_file" are optional, absent in
// files written before they existed):
//   {"state_version": 1, "prefix": "ry", "mode": "netns", "hosts": 4, "leaves": 2,
//    "leaf_rate_bits": 1000000000, "spine_rate_bits": 500000000, "created": "2026-...",
//    "host_rates": {"node1": 100000000}, "cut": ["node3"],
//    "paths": [{"a": "node0", "b": "node2", "rate_bits": 50000000}],
//    "topology_file": "/run/railyard/vcluster-ry-topology.yaml",
//    "control_address": "198.18.255.254", "shared_dir": "/run/railyard/ry-shared",
//    "uplink_rates": {"leaf0": 40000000}, "scratch_faults": {"node3": "readonly"},
//    "hidden_providers": {"node3": ["tcp"]},
//    "slurm_conf": "/run/railyard/ry-slurm/slurm.conf"}
//
// Thread-safety: values.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/vcluster/spec.h"

namespace railyard::vcluster {

struct PathDegradation {
  std::string a;  // host names, a < b
  std::string b;
  uint64_t rate_bits = 0;
};

// What a scratch fault does to a host's directory under the shared directory.
enum class ScratchFault { kReadOnly, kFull };
std::string_view ScratchFaultName(ScratchFault f);  // "readonly", "full"

struct ClusterState {
  ClusterPlan plan;
  std::string created;                         // ISO 8601 UTC
  std::map<std::string, uint64_t> host_rates;  // degraded host links (bits/s)
  std::set<std::string> cut;                   // hosts whose link is down
  std::vector<PathDegradation> paths;
  std::string topology_file;
  // Where a coordinator in the root namespace listens for the hosts; empty when none.
  std::string control_address;
  // <state_dir>/<prefix>-shared, one subdirectory per host (ScratchDir); empty when none.
  std::string shared_dir;
  std::map<std::string, uint64_t> uplink_rates;        // degraded leaf uplinks (bits/s), by leaf
  std::map<std::string, ScratchFault> scratch_faults;  // by host
  std::map<std::string, std::set<std::string>> hidden_providers;  // by host
  // The generated slurm.conf when the cluster runs Slurm (`up --slurm`, see slurm.h); else empty.
  std::string slurm_conf;

  const ClusterSpec& spec() const { return plan.spec; }
  // The rate currently applied to a host's link (0 = unshaped).
  uint64_t HostRate(const std::string& host) const;
  // The rate currently applied to a leaf's uplink (0 = unshaped).
  uint64_t UplinkRate(const std::string& leaf) const;
  // The host's own directory under shared_dir; empty when there is no shared directory.
  std::string ScratchDir(const std::string& host) const;
};

std::string StateToJson(const ClusterState& state);
// Errors name `source` (the file) and the field.
Result<ClusterState> StateFromJson(std::string_view json, std::string_view source);

// The environment variables that give --prefix and --state-dir their defaults. They are read
// only by DefaultPrefix and DefaultStateDir; `vcluster exec` sets kPrefixEnv for the command it
// runs (ExecutionFor), so `railyard vcluster ...` run on a virtual host finds its own cluster.
inline constexpr const char* kPrefixEnv = "RAILYARD_VCLUSTER_PREFIX";
inline constexpr const char* kStateDirEnv = "RAILYARD_STATE_DIR";

// Default cluster prefix: $RAILYARD_VCLUSTER_PREFIX when set and non-empty, else "ry".
std::string DefaultPrefix();

// Default directory for state files: $RAILYARD_STATE_DIR, else /run/railyard for root, else
// $XDG_RUNTIME_DIR/railyard, else /tmp/railyard-<uid>.
std::string DefaultStateDir();

std::string StateFilePath(const std::string& state_dir, std::string_view prefix);
std::string TopologyFilePath(const std::string& state_dir, std::string_view prefix);
// <state_dir>/<prefix>-shared: derived from the prefix alone, so `down` finds it after a crash.
std::string SharedDirPath(const std::string& state_dir, std::string_view prefix);

// Current UTC time as ISO 8601 ("2026-11-30T19:00:00Z").
std::string NowIso8601();

}  // namespace railyard::vcluster
