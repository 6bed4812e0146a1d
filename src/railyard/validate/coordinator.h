// The validation coordinator: runs a plan over many hosts through one agent per host.
//
// RunValidation starts (or waits for) an agent on every host, then drives them through the
// rendezvous store (net/store.h) in lock-step phases, each with a deadline:
//
//   1. hello      each agent publishes its address and probe port;
//   2. node       node and GPU checks on every host at once (node_run.h);
//   3. clock      clock offset of each host against the coordinator;
//   4. fabric     reachability and latency sweep, then the pair bandwidth schedule
//                 (schedule.h), analysis and re-tests of suspects (analysis.h);
//   5. storage    IOR-easy write/read-neighbour and mdtest-easy on the shared directory;
//   6. collective allreduce sweep over every live host with comm/, and nccl-tests'
//                 all_reduce_perf through its adapter when installed;
//   7. exit       agents are told to leave.
//
// Control flows only through the store: the coordinator sets "<run>/task/<host>/<seq>" and
// waits for "<run>/result/<host>/<seq>"; an agent that does not answer by the phase's
// deadline (dead, hung, cut off) makes its host UNKNOWN for that phase, with the reason, and
// is left out of later phases. The run always finishes and reports: RunValidation fails only
// on bad input (no hosts, a plan without checks), never because a host misbehaved.
//
//   CoordinatorOptions o{.plan = &plan, .hosts = names, .cluster = &cluster, .store = store,
//                        .store_address = "198.18.255.254:29500", .secret = secret,
//                        .starter = starter.get()};
//   RY_ASSIGN_OR_RETURN(RunReport report, RunValidation(o));
//
// Thread-safety: one RunValidation per store namespace (run id) at a time.
#pragma once

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/net/store.h"
#include "railyard/topo/model.h"
#include "railyard/validate/plan.h"
#include "railyard/validate/report.h"

namespace railyard::validate {

// What an agent needs to find its coordinator. The secret proves it to the store and never
// appears on a command line: starters hand it over on stdin or through the environment.
struct AgentInvocation {
  std::string host;           // the host the agent reports as
  std::string store_address;  // "ADDR:PORT" of the coordinator's store
  std::string run_id;         // key prefix of this run in the store
  std::string secret;
  // The agent's words after the binary; empty: `validate agent --coordinator ... --run ...
  // --host ... --secret-stdin`. `railyard run` starts its host agents with its own.
  std::vector<std::string> agent_args;
};

// A started agent, as far as its starter can see it.
class AgentHandle {
 public:
  virtual ~AgentHandle() = default;
  // False once the agent process (or the command that carries it: ssh, srun) has ended.
  virtual bool Running() = 0;
  // How it ended, for reports: "exited with 1: <stderr's last line>", "killed by SIGKILL".
  virtual std::string ExitReason() = 0;
  // Ends it (the whole process group) and reaps; idempotent.
  virtual void Stop() = 0;
};

// Starts agents: the virtual cluster's exec, ssh, srun, kubectl exec, a custom template
// (agent_starter.h), or threads in-process for tests.
class AgentStarter {
 public:
  virtual ~AgentStarter() = default;
  virtual Result<std::unique_ptr<AgentHandle>> Start(const AgentInvocation& invocation) = 0;
  // "vcluster exec", "ssh {host} ...": for messages.
  virtual std::string Describe() const = 0;
};

// Progress for the terminal table: one event per phase start and per host result.
struct ProgressEvent {
  std::string phase;  // "hello", "node", "clock", "fabric", "storage", "collective"
  std::string host;   // empty for phase-level events
  std::string text;   // "round 3/7", "PASS", "UNKNOWN: did not answer within 5s"
  int done = 0;       // steps of this phase finished
  int total = 0;
};

struct CoordinatorOptions {
  const Plan* plan = nullptr;
  std::vector<std::string> hosts;          // at least one; order = report order
  const topo::Cluster* cluster = nullptr;  // optional: profiles, schedule, expected rates
  std::string shared_dir;                  // storage checks; empty: they are SKIPPED
  net::Store* store = nullptr;             // the coordinator's client of its own store
  std::string store_address;               // what agents dial
  std::string secret;
  std::string run_id = "validate";
  AgentStarter* starter = nullptr;  // null: agents already run and dial in
  std::chrono::milliseconds agent_connect_timeout{15'000};
  std::function<void(const ProgressEvent&)> progress;  // may be empty; called on this thread
};

// Runs the plan (see above). INVALID_ARGUMENT for bad options only.
Result<RunReport> RunValidation(const CoordinatorOptions& options);

}  // namespace railyard::validate
