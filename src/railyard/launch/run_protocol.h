// The run protocol: what `railyard run`'s launcher (launcher.h) tells the agent on each host
// (host_agent.h) and what the agent answers, as JSON values in the launcher's rendezvous
// store (the job secret proves both ends).
//
// Keys live under "<job>/":
//   hello/<host>     agent -> Hello {"address", "pid"}: the agent is up; the address its
//                    ranks serve on (rank 0's host serves the ranks' own store there)
//   plan/<attempt>   launcher -> AttemptPlan: who runs which ranks in this attempt, how
//   control          launcher -> Control: "run" an attempt (its plan is set first), "stop"
//                    it, or "end" the job; rewritten in place, read by polling
//   status/<host>    agent -> AgentStatus, rewritten every status interval with a sequence
//                    number, so a launcher that sees it stand still knows the agent is gone
//
// Time crosses the protocol only as ages measured on the agent's own clock ("silent for
// 1200 ms", "exited 40 ms ago"), which the launcher subtracts from the time it read the
// status: no two hosts' clocks are ever compared.
//
// Readers take absent fields as their defaults and reject present ones of the wrong type,
// naming the key and the field.
//
// Thread-safety: values and pure functions.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/comm/rank_env.h"

namespace railyard::launch {

std::string RunHelloKey(std::string_view job, std::string_view host);
std::string RunPlanKey(std::string_view job, int attempt);
std::string RunControlKey(std::string_view job);
std::string RunStatusKey(std::string_view job, std::string_view host);

struct RunHello {
  std::string address;  // IPv4 address of the host, as its ranks are reached
  int64_t pid = 0;
  friend bool operator==(const RunHello&, const RunHello&) = default;
};

// What one local rank is bound to (launch/binding.h): its CPUs and its variables.
struct LocalRankSetup {
  std::vector<int> cpus;  // empty: not bound
  comm::EnvList env;      // CUDA_VISIBLE_DEVICES, NCCL_IB_HCA, ...
  friend bool operator==(const LocalRankSetup&, const LocalRankSetup&) = default;
};

struct AttemptPlan {
  int attempt = 0;  // 0 for the first; it is also the restart count the ranks are told
  int world_size = 0;
  int nproc_per_host = 0;
  // Rank-group order: hosts[g] runs ranks g*nproc_per_host .. (g+1)*nproc_per_host-1 as its
  // local ranks 0..nproc_per_host-1, with GROUP_RANK g. A host not listed idles (a spare).
  std::vector<std::string> hosts;
  std::string store_host;  // hosts[0]'s address: rank 0 serves the ranks' store there
  int store_port = 0;
  int master_port = 0;  // torchrun's MASTER_PORT, a different port
  std::vector<std::string> argv;
  comm::EnvList env;        // every rank's extra variables (NCCL_*, transport settings)
  std::string job_id;       // RAILYARD_JOB_ID of the ranks
  std::string rank_secret;  // RAILYARD_JOB_SECRET of the ranks
  std::string ckpt_dir;     // RAILYARD_CKPT_DIR; may be empty
  std::string log_dir;      // each rank's output: <log_dir>/rank-<r>.log; empty: kept by the agent
  // Per host of `hosts` (same order), per local rank: empty, or nproc_per_host entries.
  std::vector<std::vector<LocalRankSetup>> setup;
  // Per host of `hosts` (same order): its node model as JSON (topo::NodeToJson), "" when
  // unknown. An agent whose node has GPUs writes NCCL_TOPO_FILE from it with its own CPU.
  std::vector<std::string> node_models;
  friend bool operator==(const AttemptPlan&, const AttemptPlan&) = default;

  // The index of `host` in hosts; -1 when it is not in this attempt.
  int GroupOf(std::string_view host) const;
};

struct Control {
  enum class Action { kRun, kStop, kEnd };
  Action action = Action::kRun;
  int attempt = 0;
  std::string why;  // kStop, kEnd: for the agents' logs
  friend bool operator==(const Control&, const Control&) = default;
};

// One rank as its host's agent sees it.
struct AgentRankStatus {
  int rank = 0;
  int64_t pid = 0;
  bool heard = false;      // the rank sent any heartbeat or step
  int64_t silent_ms = 0;   // since its last heartbeat or step; since its start when not heard
  int64_t last_step = -1;  // -1: none reported
  bool frozen = false;     // running but stopped (SIGSTOP, a debugger): it cannot be the victim
  std::vector<int64_t> step_us;  // recent step durations, oldest first (at most 8)
  bool exited = false;
  int exit_code = 0;
  int signal = 0;
  int64_t exited_ms_ago = 0;
  std::string error_line;   // the rank's own error line (launch::RankEnd::ErrorLine)
  std::string stopped_why;  // non-empty when the agent ended it, and why
  friend bool operator==(const AgentRankStatus&, const AgentRankStatus&) = default;
};

struct AgentStatus {
  enum class State {
    kIdle,     // waiting for an attempt that includes this host (a spare, or between)
    kRunning,  // its ranks of `attempt` run (some may have ended)
    kStopped,  // every rank of `attempt` has ended (by itself or stopped)
    kFailed,   // its ranks of `attempt` could not be started: `error` says why
    kEnded,    // the job ended ("end"): the agent's last word before it leaves
  };
  std::string host;
  uint64_t seq = 0;  // increases with every write
  State state = State::kIdle;
  int attempt = -1;
  std::string error;
  std::vector<AgentRankStatus> ranks;
  friend bool operator==(const AgentStatus&, const AgentStatus&) = default;
};

std::string_view AgentStateName(AgentStatus::State state);  // "idle", "running", ... "ended"

std::string ToJson(const RunHello& hello);
std::string ToJson(const AttemptPlan& plan);
std::string ToJson(const Control& control);
std::string ToJson(const AgentStatus& status);

// `key` names the store key in errors: "job/plan/2: field 'hosts[1]': expected a string".
Result<RunHello> ParseRunHello(std::string_view text, std::string_view key);
Result<AttemptPlan> ParseAttemptPlan(std::string_view text, std::string_view key);
Result<Control> ParseControl(std::string_view text, std::string_view key);
Result<AgentStatus> ParseAgentStatus(std::string_view text, std::string_view key);

}  // namespace railyard::launch
