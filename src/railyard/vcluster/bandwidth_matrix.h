// Host-to-host bandwidth of a virtual cluster: starts a probe sink on every host, then runs
// a timed sender on each ordered pair in turn (one pair at a time, so pairs do not share
// links and the matrix shows each path alone).
//
// Probes are `railyard probe sink|send` processes started inside the hosts' namespaces (or,
// in loopback mode, bound to the hosts' loopback addresses), so the measurement crosses the
// same veths, bridges and shapers as any workload would.
//
// Thread-safety: a plain blocking call.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"
#include "railyard/vcluster/state.h"

namespace railyard::vcluster {

struct MatrixOptions {
  std::string railyard_binary;  // path of the `railyard` executable
  base::Duration per_pair = std::chrono::milliseconds(300);
  uint16_t port = 5201;
  // Pairs to measure; empty = every ordered pair (src != dst).
  std::vector<std::pair<int, int>> pairs;
  // Called after each pair with (src, dst, bits/s).
  std::function<void(int, int, double)> on_pair;
};

// bits/s, [src][dst]; the diagonal and unmeasured pairs are 0.
using BandwidthMatrix = std::vector<std::vector<double>>;

// Errors name the pair and the host whose probe failed.
Result<BandwidthMatrix> MeasureBandwidth(const ClusterState& state, const MatrixOptions& options);

// The SpawnOptions prefix for running a command "on" a host: netns_path in netns mode, and
// the environment variables RAILYARD_VHOST, RAILYARD_VHOST_ADDR, RAILYARD_VCLUSTER_PREFIX;
// with a shared directory RAILYARD_VCLUSTER_SHARED_DIR and RAILYARD_VHOST_SCRATCH (the host's
// own subdirectory); with a control address RAILYARD_VCLUSTER_CONTROL_ADDR; and when providers
// are hidden from the host, FI_PROVIDER=^<provider>,... (overriding any inherited value).
struct HostExecution {
  std::string netns_path;  // empty in loopback mode
  std::vector<std::pair<std::string, std::string>> env;
};
HostExecution ExecutionFor(const ClusterState& state, const HostPlan& host);

}  // namespace railyard::vcluster
