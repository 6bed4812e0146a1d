// The validation agent: the loop each host runs for a coordinator (coordinator.h).
//
// RunAgent publishes hello/<host> (its address and the port of its probe sink), then takes
// task/<host>/1, 2, ... from the store in order, executes each and sets result/<host>/<seq>
// (agent_protocol.h), until an "exit" task, its deadline, or no task within idle_timeout (the
// coordinator went away). A task that fails answers {"ok": false} with the reason; only a
// store that cannot be reached ends the agent with an error.
//
// The agent's address is options.address, else $RAILYARD_VHOST_ADDR (set by the virtual
// cluster's exec), else the local address of the route towards the store (a connected UDP
// socket's getsockname: nothing is sent).
//
// Measurements go through AgentProbes, so tests give agents a fake that answers from a rate
// matrix; NewSystemAgentProbes is the real one:
//   - bandwidth: vcluster/link_probe.h (RunSink here, RunSend to the peer's sink), the rate
//     measured at the receiver;
//   - reachability and latency: a TCP connect to the peer's probe sink; the round trip is the
//     time from SYN to the established connection (the kernel's SYN-ACK, no user-space echo),
//     so it measures the path and the peer's kernel, not its scheduler; the exchange then ends
//     as a zero-byte probe, so the sink's bookkeeping stays clean;
//   - storage and allreduce: storage_probe.h and collective_probe.h.
//
//   AgentOptions o{.invocation = {.host = "n3", .store_address = addr, .run_id = "validate",
//                                 .secret = secret}};
//   RY_ASSIGN_OR_RETURN(auto store, net::ConnectTcpStore(addr, secret, deadline));
//   return RunAgent(o, *store);
//
// Thread-safety: RunAgent may run on several threads at once (tests run one per host) with
// distinct hosts and probes.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"
#include "railyard/net/store.h"
#include "railyard/validate/agent_protocol.h"
#include "railyard/validate/coordinator.h"
#include "railyard/validate/node_env.h"
#include "railyard/validate/registry.h"

namespace railyard::validate {

// What an agent measures with. Each call ends by its deadline.
class AgentProbes {
 public:
  virtual ~AgentProbes() = default;
  // Starts serving probes on `address` until `until`; returns the port peers dial. Once.
  virtual Result<int> StartSink(const std::string& address, base::Deadline until) = 0;
  // Streams to `peer` for `duration`; the rate its sink measured, bits/s.
  virtual Result<double> Send(const Peer& peer, base::Duration duration,
                              base::Deadline deadline) = 0;
  // One round trip to `peer`'s sink, seconds (see the header comment).
  virtual Result<double> RoundTrip(const Peer& peer, base::Deadline deadline) = 0;
  // Storage probes: fill `result`'s rate fields (bytes_per_s, ops_per_s, note) or fail with
  // storage_probe.h's codes. `task` is a storage_write, storage_read or metadata task.
  virtual Status Storage(const Task& task, base::Deadline deadline, TaskResult& result) = 0;
  // The allreduce sweep of an allreduce task, meeting the other ranks through `store`.
  virtual Result<std::vector<CollectiveFigure>> Allreduce(net::Store& store, const Task& task,
                                                          const AgentInvocation& self,
                                                          const std::string& address,
                                                          base::Deadline deadline) = 0;
};

// The real probes (see the header comment). Never null.
std::unique_ptr<AgentProbes> NewSystemAgentProbes();

struct AgentOptions {
  AgentInvocation invocation;
  std::shared_ptr<NodeEnv> env;             // node checks; null: NewSystemNodeEnv()
  const CheckRegistry* registry = nullptr;  // null: the built-in checks (lives until exit)
  AgentProbes* probes = nullptr;            // null: NewSystemAgentProbes()
  std::string address;                      // advertised; empty: see the header comment
  std::chrono::milliseconds idle_timeout{60'000};
  base::Deadline deadline = base::Deadline::After(std::chrono::hours(1));
};

// Runs the agent until "exit" (OK), idle_timeout (DEADLINE_EXCEEDED "no task from the
// coordinator within 60s") or the deadline. UNAVAILABLE when the store cannot be reached;
// INVALID_ARGUMENT for an empty host or run id.
Status RunAgent(const AgentOptions& options, net::Store& store);

// The agent's address as described above, for `store_address` ("ADDR:PORT").
// INVALID_ARGUMENT for a malformed address, UNAVAILABLE when no route leads there.
Result<std::string> AgentAddress(const std::string& store_address);

}  // namespace railyard::validate
