// The coordinator's run state, shared by its phase files (coordinator.cc: hello, node, clock,
// exit; coordinator_fabric.cc; coordinator_storage.cc). Private to validate/.
//
// Thread-safety: one Run per RunValidation call, used from its thread (the clock phase's
// workers touch only their own host's entry).
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "railyard/base/clock.h"
#include "railyard/validate/agent_protocol.h"
#include "railyard/validate/coordinator.h"

namespace railyard::validate::internal {

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

// Phases outside coordinator.cc. Each leaves per-host results in report.hosts[i].checks,
// cluster-wide ones in report.cluster_checks.
void RunFabricPhase(Run& run);
void RunStoragePhase(Run& run);
void RunCollectivePhase(Run& run);

}  // namespace railyard::validate::internal
