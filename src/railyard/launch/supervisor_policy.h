// Supervisor policy: what the supervisor decides from what it observed, with no processes,
// sockets or clocks of its own, so every rule is tested directly with made-up observations.
//
// Two steps. Evaluate() turns one snapshot of observations (per rank: last heartbeat, exit,
// recent step times; per host: whether its agent is alive) into events that name the rank and
// host: RankExited, RankHung, Straggler, HostLost. DecideRecovery() turns the events of a
// failed attempt into what to do next: which host to exclude, the new host list, restart or
// give up, and why.
//
//   launch::SupervisorPolicy policy(options);
//   std::vector<launch::SupervisorEvent> events = policy.Evaluate(observations);
//   if (launch::FirstFailure(events)) {
//     launch::RecoveryDecision d = policy.DecideRecovery(hosts, spares, restarts, events);
//     ...stop the gang; d.restart ? start on d.hosts : end with d.reason...
//   }
//
// Ranks are laid out by host: rank r runs on hosts[r / nproc_per_host] as local rank
// r % nproc_per_host. A spare therefore takes the failed host's place in the host list, and
// with it exactly that host's ranks, so rank order (and the ring order built on it) is
// unchanged.
//
// Thread-safety: values and const methods; safe to use concurrently.
#pragma once

#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "railyard/base/clock.h"
#include "railyard/launch/progress.h"

namespace railyard::launch {

struct SupervisorOptions {
  // No heartbeat or step for this long means hung. Zero disables hang detection (for a
  // command that does not use the progress API).
  base::Duration heartbeat_timeout = std::chrono::seconds(60);
  // A rank that never reported is hung once this long has passed since the attempt
  // started (imports, data loading and the first collective come before the first beat).
  // Zero: heartbeat_timeout.
  base::Duration startup_timeout = base::Duration::zero();
  // A rank whose step time exceeds straggler_factor x the median rank's is a straggler.
  double straggler_factor = 2.0;
  // A rank's step time is the median of its last straggler_window step durations, so one
  // slow step (a checkpoint, a page fault storm) is not a straggler.
  size_t straggler_window = 5;
  // At most this many restarts; the failure after the last one ends the job.
  int max_restarts = 3;
};

struct RankExit {
  int code = 0;    // exit status; meaningful when signal == 0
  int signal = 0;  // the signal that killed it; 0 when it exited
  base::Clock::time_point at;
  bool failed() const { return signal != 0 || code != 0; }
};

struct RankObservation {
  int rank = 0;
  std::string host;
  // Last heartbeat or step the supervisor heard; nullopt when the rank never reported.
  std::optional<base::Clock::time_point> last_heartbeat;
  std::optional<RankExit> exit;  // set once the rank's process has ended
  int64_t last_step = -1;
  std::vector<base::Duration> step_times;  // recent step durations, oldest first
};

struct HostObservation {
  std::string host;
  bool agent_alive = true;
  base::Clock::time_point lost_at;  // when the agent was found gone; when !agent_alive
};

struct Observations {
  base::Clock::time_point now;
  base::Clock::time_point started;  // when this attempt's ranks were started
  std::vector<RankObservation> ranks;
  std::vector<HostObservation> hosts;
};

// A rank's process ended. A clean exit (code 0) is reported but is not a failure.
struct RankExited {
  int rank = 0;
  std::string host;
  RankExit exit;
  friend bool operator==(const RankExited& a, const RankExited& b) {
    return a.rank == b.rank && a.host == b.host && a.exit.code == b.exit.code &&
           a.exit.signal == b.exit.signal && a.exit.at == b.exit.at;
  }
};
// No heartbeat for heartbeat_timeout (or none at all within startup_timeout).
struct RankHung {
  int rank = 0;
  std::string host;
  base::Clock::time_point since;  // last heartbeat, or the attempt's start when none
  base::Duration silent_for{};
  friend bool operator==(const RankHung&, const RankHung&) = default;
};
// Slower than straggler_factor x the median: reported, never a failure.
struct Straggler {
  int rank = 0;
  std::string host;
  int64_t step = -1;  // the rank's last step, so a caller can report each (rank, step) once
  base::Duration step_time{};
  base::Duration median{};
  friend bool operator==(const Straggler&, const Straggler&) = default;
};
// The host's agent is gone; its ranks' observations are stale and not reported separately.
struct HostLost {
  std::string host;
  base::Clock::time_point at;
  friend bool operator==(const HostLost&, const HostLost&) = default;
};

using SupervisorEvent = std::variant<RankExited, RankHung, Straggler, HostLost>;

// True for events that end the attempt: a failed exit, a hang, a lost host.
bool IsFailure(const SupervisorEvent& event);
// The host an event names.
const std::string& EventHost(const SupervisorEvent& event);
// One line for logs and summaries: "rank 3 on node2 was killed by SIGKILL",
// "rank 1 on node0 hung: no heartbeat for 12.0 s", ...
std::string DescribeEvent(const SupervisorEvent& event);

// The failure that came first, which is taken as the cause (peers of a dead rank fail after
// it): the earliest by time (exit time, last heartbeat of a hung rank, loss of a host); at
// equal times a lost host, then a signal, then a failed exit code, then a hang. nullptr
// when `events` holds no failure. Points into `events`.
const SupervisorEvent* FirstFailure(const std::vector<SupervisorEvent>& events);

struct RecoveryDecision {
  bool restart = false;
  // Why: the cause, and for a give-up why no restart is possible.
  std::string reason;
  std::string failed_host;         // the cause's host; empty without a failure
  std::string excluded_host;       // taken out of the gang; empty when restarting on the same hosts
  std::string replacement;         // the spare now in its place; empty when none
  std::vector<std::string> hosts;  // the next attempt's hosts, same length and order
  std::vector<std::string> spares;  // spares still unused
  int restart_count = 0;            // the next attempt's TORCHELASTIC_RESTART_COUNT
};

// Copies what a ProgressListener knows into the observations of the same ranks (matched by
// RankObservation::rank; ranks it never heard from keep no heartbeat): the last time heard,
// the last step and the step durations.
void ObserveProgress(const std::vector<RankProgress>& progress,
                     std::vector<RankObservation>* ranks);

// The host of each rank for a host list (hosts[r / nproc_per_host]).
std::vector<std::string> RankHosts(const std::vector<std::string>& hosts, int nproc_per_host);

class SupervisorPolicy {
 public:
  explicit SupervisorPolicy(SupervisorOptions options) : options_(options) {}
  const SupervisorOptions& options() const { return options_; }

  // Events in this snapshot: host losses, then exits and hangs in rank order, then
  // stragglers. Ranks on a lost host and ranks that have exited are not also reported as
  // hung, and hung ranks are not stragglers; a clean exit is an event; ranks with no step
  // times take no part in the straggler median (which needs at least two ranks).
  std::vector<SupervisorEvent> Evaluate(const Observations& obs) const;

  // After a failed attempt on `hosts` with `spares` unused, `restarts_done` restarts so far:
  // - no failure in `events`: no restart, reason says so;
  // - restarts_done >= max_restarts: give up, naming the budget and the cause;
  // - a spare exists: the cause's host is excluded and the first spare takes its place;
  // - no spare and the host was lost: give up (its ranks have nowhere to run);
  // - no spare otherwise: restart on the same hosts.
  RecoveryDecision DecideRecovery(const std::vector<std::string>& hosts,
                                  const std::vector<std::string>& spares, int restarts_done,
                                  const std::vector<SupervisorEvent>& events) const;

 private:
  SupervisorOptions options_;
};

}  // namespace railyard::launch
