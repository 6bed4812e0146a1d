// The coordinator's run state, shared by its phase files (coordinator.cc: hello, node, clock,
// exit; coordinator_fabric.cc, coordinator_pairs.cc; coordinator_storage.cc). Private to validate/.
//
// Thread-safety: one Run per RunValidation call, used from its thread (the clock phase's
// workers touch only their own host's entry).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "railyard/base/clock.h"
#include "railyard/validate/agent_protocol.h"
#include "railyard/validate/coordinator.h"

namespace railyard::validate::internal {

// Added to a check's timeout for the answer of a task that runs it on the agents (fabric,
// storage, collective phases): the store round trips and the agent's own start-up of the task
// must not turn a check that finished within its timeout into a dead host.
inline constexpr std::chrono::milliseconds kTaskMargin{3'000};

struct HostState {
  std::string name;
  bool live = false;  // said hello and has answered every task so far
  std::string dead_reason;
  Hello hello;
  int seq = 0;  // of the last task sent
  std::unique_ptr<AgentHandle> handle;
  Profile profile;
};

// One task for one host, and what came back.
struct Exchange {
  int host = -1;
  Task task;
  std::optional<TaskResult> result;  // empty: no answer (the host is then dead)
};

class Run {
 public:
  explicit Run(const CoordinatorOptions& options);

  const CoordinatorOptions& options;
  RunReport report;
  std::vector<HostState> hosts;

  std::vector<int> LiveHosts() const;
  Peer PeerOf(int host) const;
  // The plan's settings of `id`, or null when the plan does not run it.
  const PlannedCheck* Planned(std::string_view id) const { return options.plan->Find(id); }

  // Sends every task, then waits until `timeout` for the answers. A host that does not answer
  // in time, or whose agent ends, is marked dead ("did not answer the <kind> task within 5s")
  // and its Exchange keeps no result. Hosts already dead are not asked.
  void Send(std::vector<Exchange>& exchanges, std::chrono::milliseconds timeout,
            std::string_view phase);
  // The value of `key`, waiting until `deadline` or until the host's agent ends
  // (UNAVAILABLE "agent ended: <its exit reason>").
  Result<std::string> Await(int host, const std::string& key, base::Deadline deadline);
  void MarkDead(int host, std::string reason);
  void AddCheck(int host, std::string id, Outcome outcome,
                std::chrono::milliseconds elapsed = std::chrono::milliseconds(0));
  bool HasCheck(int host, std::string_view id) const;
  void Progress(std::string_view phase, std::string_view host, std::string text, int done = 0,
                int total = 0);

 private:
  void Collect(std::vector<Exchange>& exchanges, std::vector<size_t>& pending,
               base::Deadline deadline);
};

// The live hosts a fabric test runs on, numbered 0..n-1 ("local" indices) in report order,
// with the topology restricted to them (when every one is in it), so that the schedule, the
// expected rates and the analysis's view share those numbers.
struct Fabric {
  std::vector<int> live;  // report index of each local index
  std::optional<topo::Cluster> cluster;
  FabricView view;
  Schedule schedule;
  std::vector<std::set<int>> partners;  // local -> local, from the schedule
};
Fabric Setup(const Run& run, std::vector<int> live, int all_pairs_max);

// A check's integer parameter, `fallback` when absent or not a number.
int64_t ParamInt(const PlannedCheck& pc, const std::string& name, int64_t fallback);

// fabric.pair_bandwidth on `f` (coordinator_pairs.cc).
void PairBandwidth(Run& run, const Fabric& f, const PlannedCheck& pc);

// Phases outside coordinator.cc. Each leaves per-host results in report.hosts[i].checks,
// cluster-wide ones in report.cluster_checks.
void RunFabricPhase(Run& run);
void RunStoragePhase(Run& run);
void RunCollectivePhase(Run& run);

}  // namespace railyard::validate::internal
