// The state file of a virtual cluster: the spec it was built from plus what has been changed
// since (degraded hosts and paths, cut hosts). `up` writes it last (after everything exists)
// and every later command reads it; `down` deletes it last. It is written atomically, so a
// crash leaves either the previous state or the new one.
//
// Format (JSON, "state_version": 1):
//   {"state_version": 1, "prefix": "ry", "mode": "netns", "hosts": 4, "leaves": 2,
//    "leaf_rate_bits": 1000000000, "spine_rate_bits": 500000000, "created": "2026-...",
//    "host_rates": {"node1": 100000000}, "cut": ["node3"],
//    "paths": [{"a": "node0", "b": "node2", "rate_bits": 50000000}],
//    "topology_file": "/run/railyard/vcluster-ry-topology.yaml"}
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

struct ClusterState {
  ClusterPlan plan;
  std::string created;                         // ISO 8601 UTC
  std::map<std::string, uint64_t> host_rates;  // degraded host links (bits/s)
  std::set<std::string> cut;                   // hosts whose link is down
  std::vector<PathDegradation> paths;
  std::string topology_file;

  const ClusterSpec& spec() const { return plan.spec; }
  // The rate currently applied to a host's link (0 = unshaped).
  uint64_t HostRate(const std::string& host) const;
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

// Current UTC time as ISO 8601 ("2026-11-30T19:00:00Z").
std::string NowIso8601();

}  // namespace railyard::vcluster
