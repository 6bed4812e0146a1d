// The launcher of `railyard run`: starts one host agent (host_agent.h) per placed host and
// spare, runs the job's attempts through them (run_protocol.h), watches every rank, and
// recovers from failures without a human.
//
// One attempt: the launcher writes its plan (which host runs which ranks, the ranks' store
// on the first host, their bindings) and tells the agents to run it. Every status interval
// it reads each agent's status and turns it into observations for the supervisor policy
// (supervisor_policy.h): a rank that exited or was killed (which signal), a rank silent for
// the heartbeat timeout (hung), a straggler (reported, never stopped), a host whose agent is
// gone (its process ended, or its status stood still for agent_timeout). On the first
// failure it stops the whole gang (every agent stops its ranks: SIGTERM to each process
// group, SIGKILL after the grace period), names the cause (rank, host and why: a rank whose
// process is frozen by SIGSTOP or a debugger before the peers that wait on it, a lost host
// before the hangs and errors of the ranks that talk to it, the peer a rank's error names
// before that rank),
// and asks the policy what to do: the failed host is replaced by a spare when one is left
// (it takes exactly that host's ranks, so rank and ring order stay as they were), else the
// same hosts are used again; a lost host without a spare, or a spent restart budget, ends
// the job. The next attempt's ranks resume from the newest checkpoint that verifies: the
// program does that itself from RAILYARD_CKPT_DIR; the launcher verifies which step it is
// and says so.
//
// Every decision is an event (LaunchEvent) given to on_event as it happens, and becomes one
// line of the JSON-lines log (EventJson). Timings of each recovery (detect, stop, restart,
// resume) come back in the outcome, for `railyard bench recover`.
//
//   LaunchSpec spec{.argv = {"train"}, .hosts = placed, .spares = {"node7"}, ...};
//   RY_ASSIGN_OR_RETURN(LaunchOutcome out, RunLaunch(spec));
//   return out.exit_code;
//
// Thread-safety: RunLaunch runs on the calling thread; on_event is called on it.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"
#include "railyard/comm/rank_env.h"
#include "railyard/launch/run_protocol.h"
#include "railyard/launch/supervisor_policy.h"
#include "railyard/net/store.h"
#include "railyard/validate/coordinator.h"

namespace railyard::launch {

// Exit codes of `railyard run` (docs/launch.md lists them).
inline constexpr int kRunSucceeded = 0;
inline constexpr int kRunBadInput = 1;         // usage, placement, agents that never came up
inline constexpr int kRunFailed = 3;           // the job failed and the restart budget is spent
inline constexpr int kRunNoHostLeft = 4;       // a host was lost and no spare is left
inline constexpr int kRunPreflightFailed = 5;  // too few healthy hosts before the start
inline constexpr int kRunDeadline = 6;         // --time-limit passed
inline constexpr int kRunInterrupted = 130;    // SIGINT or SIGTERM: every rank stopped

// How one recovery went, from the failure to every rank stepping again.
struct RecoveryTiming {
  int attempt = 0;            // the attempt that failed
  double detect_ms = 0;       // failure (the rank's end, or its last heartbeat) -> decided
  double stop_ms = 0;         // decided -> every agent reported its ranks ended
  double restart_ms = 0;      // ended -> every rank of the next attempt started
  double resume_ms = 0;       // started -> every rank reported its first step
  double total_ms = 0;        // failure -> every rank stepping again
  int64_t lost_steps = 0;     // steps finished before the failure that were done again
  int64_t resumed_step = -1;  // the first step the next attempt reported
};

struct LaunchEvent {
  base::Clock::time_point at;  // when the launcher made it (monotonic)
  int64_t unix_ms = 0;         // the same, wall clock, for the log
  // "agents_up", "attempt_start", "ranks_running", "progress", "straggler", "failure",
  // "stopped", "restart", "recovered", "give_up", "succeeded", "interrupted", "spare_lost",
  // "deadline"
  std::string kind;
  int attempt = 0;
  int rank = -1;        // -1: not about one rank
  std::string host;     // empty: not about one host
  int64_t step = -1;    // progress, restart (the step resumed from), failure (last step)
  std::string message;  // one line for the terminal
  std::optional<RecoveryTiming> recovery;  // "recovered" only
};

// {"time_ms":..., "event":"failure", "attempt":0, "rank":3, "host":"node1", "step":41,
//  "message":"..."}: fields that are unset (-1, empty) are left out.
std::string EventJson(const LaunchEvent& event);

struct LaunchOutcome {
  int exit_code = kRunSucceeded;
  std::string summary;  // one line: "succeeded after 1 restart (node2 replaced by node7)"
  int restarts = 0;
  std::vector<std::string> hosts;     // of the last attempt
  std::vector<std::string> excluded;  // hosts taken out, in order
  std::vector<RecoveryTiming> recoveries;
};

struct LaunchSpec {
  std::vector<std::string> argv;    // every rank's command
  std::vector<std::string> hosts;   // rank-group order: hosts[g] runs ranks g*P .. g*P+P-1
  std::vector<std::string> spares;  // in the order they are used
  int nproc_per_host = 1;
  std::string ckpt_dir;  // RAILYARD_CKPT_DIR; empty: none
  std::string log_dir;   // <log_dir>/rank-<r>.log per rank; empty: not kept
  comm::EnvList env;     // every rank's extra variables
  std::map<std::string, std::vector<LocalRankSetup>> setup;  // by host: binding per local rank
  std::map<std::string, std::string> node_models;            // by host: topo::NodeToJson text
  SupervisorOptions supervisor;

  // The launcher's store, which agents reach at store_address with `secret`.
  net::Store* store = nullptr;
  std::string store_address;
  std::string secret;
  std::string job_id;  // the store's key prefix, and the ranks' RAILYARD_JOB_ID
  // Starts the agents (the vcluster's exec, ssh, srun: validate/agent_starter.h); each runs
  // `agent_args` after the binary, with "--host H" appended. Null: the agents are started
  // elsewhere (a Kubernetes Indexed Job) and dial in.
  validate::AgentStarter* starter = nullptr;
  std::vector<std::string> agent_args;

  // Ports of the ranks' own store and torchrun's MASTER_PORT on the first host: attempt a
  // uses rank_port + 2a and rank_port + 2a + 1, so a restart never waits on the previous
  // attempt's sockets. 0: free ports of this machine (every host is this machine).
  int rank_port = 29400;
  base::Duration status_interval = std::chrono::milliseconds(100);
  base::Duration agent_timeout = std::chrono::seconds(5);  // status standing still: lost
  base::Duration agent_connect_timeout = std::chrono::seconds(30);
  base::Duration term_grace = std::chrono::seconds(2);  // what the agents use
  base::Deadline deadline = base::Deadline::After(std::chrono::hours(24 * 365));

  // Wakes the launcher early (a signal handler's self-pipe); -1: none. When `interrupted`
  // is set and non-zero (the signal number), every rank is stopped and the job ends.
  int wake_fd = -1;
  const std::atomic<int>* interrupted = nullptr;
  std::function<void(const LaunchEvent&)> on_event;
};

// Runs the job. Errors only for a bad spec and for agents that never came up (naming the
// hosts); how the job itself ended is in the outcome's exit code and summary.
Result<LaunchOutcome> RunLaunch(const LaunchSpec& spec);

}  // namespace railyard::launch
