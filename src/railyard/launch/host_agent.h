// The host agent of `railyard run`: one per host, started by the launcher (launcher.h)
// through the virtual cluster's exec, ssh or srun, or running as the pod of a Kubernetes
// Indexed Job; it starts and watches that host's ranks and reports them (run_protocol.h).
//
// RunHostAgent says hello, then follows the launcher's control key:
//   - "run" attempt N whose plan lists this host as group g: starts ranks g*P .. g*P+P-1 as
//     a launch::Gang share of the job (their environment: comm/rank_env.h; their binding:
//     the plan's setup), with a progress socket of its own (launch/progress.h) named in
//     their RAILYARD_PROGRESS. A host the plan does not list (a spare) stays idle.
//   - "stop" N: stops its ranks of attempt N (SIGTERM to each process group, SIGKILL
//     term_grace later) and reports them stopped.
//   - "end": stops whatever still runs and returns OK.
// Every status interval it reaps ended ranks, drains the progress socket and rewrites its
// status; the wait between passes is the progress socket's own (a datagram ends it early).
//
// Fencing: when the store cannot be reached for launcher_timeout (the launcher died, or this
// host's link is cut), the agent stops its ranks and returns UNAVAILABLE. A host that has
// lost its launcher must not keep training: the launcher has already given its ranks to a
// spare.
//
//   RY_ASSIGN_OR_RETURN(auto store, net::ConnectTcpStore(addr, secret, deadline));
//   return RunHostAgent({.host = "node3", .job = "run-7f3a"}, *store);
//
// Thread-safety: RunHostAgent may run on several threads at once with distinct hosts (the
// tests run one per host); each owns its ranks.
#pragma once

#include <atomic>
#include <string>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"
#include "railyard/net/store.h"

namespace railyard::launch {

struct HostAgentOptions {
  std::string host;           // the name the launcher knows this host by
  std::string job;            // the store's key prefix
  std::string address;        // this host's address for its ranks; empty: validate::AgentAddress
  std::string store_address;  // the launcher's store, to find the address by route
  // Where the progress socket is made; empty: $TMPDIR, else /tmp.
  std::string socket_dir;
  base::Duration status_interval = std::chrono::milliseconds(100);
  base::Duration launcher_timeout = std::chrono::seconds(10);
  base::Duration term_grace = std::chrono::seconds(2);
  // The whole job: the agent returns DEADLINE_EXCEEDED (its ranks stopped) after it.
  base::Deadline deadline = base::Deadline::After(std::chrono::hours(24 * 365));
  // Set non-zero (the signal number) by a SIGTERM or SIGINT handler: the agent stops its
  // ranks and returns ABORTED within one status interval (a pod's kubelet, srun, ssh).
  const std::atomic<int>* stop_requested = nullptr;
};

// Runs the agent until "end" (OK; its last status says "ended"), fencing (UNAVAILABLE naming
// the store and how long it was unreachable), a stop request (ABORTED) or the deadline.
// INVALID_ARGUMENT for an empty host or job.
Status RunHostAgent(const HostAgentOptions& options, net::Store& store);

}  // namespace railyard::launch
