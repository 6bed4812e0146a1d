// A gang: the rank processes of one job, started together on local or virtual hosts and
// watched until every one has ended.
//
//   GangSpec spec;
//   spec.argv = {"python3", "train.py"};
//   spec.hosts = LocalHosts(1);
//   spec.rank_hosts = RanksInBlocks(4, 4);  // 4 ranks on host 0
//   RY_ASSIGN_OR_RETURN(Gang gang, Gang::Start(spec));
//   GangResult done = gang.Wait(base::Deadline::After(std::chrono::hours(1)));
//   if (!done.ok()) return Unavailable("training failed:{}", done.Failures());
//
// Start generates the job secret (unless the spec gives one), chooses the rendezvous store
// (on rank 0's host; rank 0 serves it) and torchrun's MASTER_ADDR/MASTER_PORT, and spawns one
// process per rank with its comm::RankEnvironment (comm/rank_env.h) written into its
// environment. Every rank runs in its own process group, which dies with the launcher.
//
// Wait attributes how each rank ended (exit status or signal, and its error line) naming the
// rank and its host. After the first failure the others get `failure_grace` to end by
// themselves (a collective peer reports the failed rank within its own deadline); then, and
// at the deadline, every rank still running is stopped: SIGTERM to its process group,
// SIGKILL `term_grace` later. Nothing a rank started survives its end.
//
// Thread-safety: a Gang is used by one thread at a time, the one that started it (its
// ranks are that thread's children).
#pragma once

#include <sys/types.h>

#include <string>
#include <vector>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"
#include "railyard/base/subprocess.h"
#include "railyard/comm/rank_env.h"
#include "railyard/vcluster/state.h"

namespace railyard::launch {

// Where ranks run.
struct GangHost {
  std::string name;        // named in reports; written as RAILYARD_HOST
  std::string address;     // where the store listens when rank 0 runs here
  std::string netns_path;  // the host's network namespace; empty: the launcher's own
  // Set for every rank on the host after its RankEnvironment, so these win over the job's
  // (vcluster::ExecutionFor's variables, an interface that only this host has).
  comm::EnvList env;
};

// This machine as `count` hosts: its own host name for 1, else local0, local1, ... (ranks
// that pretend to be on different hosts, to exercise the host hierarchy on one machine).
// All on 127.0.0.1.
std::vector<GangHost> LocalHosts(int count);

// The first `count` hosts of a virtual cluster, each entered as vcluster::ExecutionFor says.
// INVALID_ARGUMENT naming the cluster when it has fewer hosts.
Result<std::vector<GangHost>> VirtualHosts(const vcluster::ClusterState& state, int count);

// The host index of each of `world_size` ranks when consecutive ranks fill a host
// `per_host` at a time: 0,0,1,1,2 for 5 ranks 2 per host.
std::vector<int> RanksInBlocks(int world_size, int per_host);

struct GangSpec {
  std::vector<std::string> argv;  // every rank's command; argv[0] is looked up in PATH
  std::vector<GangHost> hosts;
  // The host index of each rank, in rank order, non-decreasing (a host's ranks are
  // consecutive): its size is the world size.
  std::vector<int> rank_hosts;
  // Job-wide fields of every rank's environment: job id (default "gang-<launcher pid>"),
  // secret (default: 16 random bytes in hex), restart count, checkpoint directory,
  // progress endpoint, transport. Rank, sizes, host, store and master fields are the
  // launcher's and are overwritten.
  comm::RankEnvironment job;
  // The store's and MASTER_PORT's ports: 0 chooses a free port on rank 0's address when
  // rank 0 runs in the launcher's namespace, else 29400 and 29500 (a fresh namespace has
  // them free).
  int store_port = 0;
  int master_port = 0;
  // This rank's stdout and stderr are the launcher's; the others' are captured and their
  // error line reported. -1: capture every rank's.
  int terminal_rank = -1;
  base::Duration failure_grace = std::chrono::seconds(10);
  base::Duration term_grace = std::chrono::seconds(2);

  // A share of a larger job, as a host agent starts it (launch/host_agent.h): the ranks of
  // this spec are numbered from first_rank in a world of world_size (0: these ranks are the
  // world), their hosts' group ranks start at first_group, and when store_host is set the
  // store is there (rank 0's host, perhaps another machine) at store_port and master_port,
  // which must then both be given. Rank 0 serves the store only if it is in this spec.
  int first_rank = 0;
  int world_size = 0;
  int first_group = 0;
  std::string store_host;
  // Per rank of this spec: empty, or one entry per rank. The CPUs it may run on
  // (base::SpawnOptions::cpus) and variables set after its host's (its hardware binding,
  // launch/binding.h).
  std::vector<std::vector<int>> rank_cpus;
  std::vector<comm::EnvList> rank_env;
  // When set, rank r's stdout and stderr are appended to <log_dir>/rank-<r>.log (after a
  // header line naming the attempt and host) instead of being captured, and its error line
  // is read back from there. The terminal rank's output stays the launcher's.
  std::string log_dir;
};

// A free TCP port on IPv4 address `ip` other than `except` (bound and released: the rank
// that serves on it binds it right away).
Result<int> FreePort(const std::string& ip, int except = 0);

// <log_dir>/rank-<rank>.log: where GangSpec::log_dir puts a rank's output.
std::string RankLogPath(const std::string& log_dir, int rank);

// Whether process `pid` is stopped (SIGSTOP, a debugger: state T or t in /proc/<pid>/stat).
bool ProcessIsStopped(pid_t pid);

// How one rank ended.
struct RankEnd {
  int rank = 0;
  std::string host;
  pid_t pid = -1;  // also its process group
  base::ExitInfo exit;
  std::string stopped_why;  // non-empty when the launcher ended it, and why

  bool ok() const { return exit.Succeeded(); }
  // The rank's own error line: the last "railyard: error: " line of its stderr (log lines
  // before it are not the cause), else its last non-empty line; "" when none.
  std::string ErrorLine() const;
  // "rank 1 (pid 42) was killed by signal 9 (Killed) on node1: <why or error line>".
  std::string Describe() const;
};

struct GangResult {
  std::vector<RankEnd> ranks;  // in rank order, one per rank of the gang
  int first_failed = -1;       // index in `ranks` of the first to fail; -1: none did
  bool deadline_expired = false;

  bool ok() const { return first_failed < 0 && !deadline_expired; }
  // "\n  <Describe()>" for every rank that did not succeed, in rank order.
  std::string Failures() const;
};

class Gang {
 public:
  // Spawns every rank. INVALID_ARGUMENT for a spec without ranks or with a bad host index;
  // a rank that cannot be started fails the whole start naming the rank and host (the
  // ranks already started are killed).
  static Result<Gang> Start(const GangSpec& spec);

  Gang(Gang&&) noexcept = default;
  Gang& operator=(Gang&&) noexcept = default;
  // Kills every rank still running (SIGKILL to its group).
  ~Gang() = default;

  // Ranks of this gang are indexed 0..size()-1; environment(i).rank is the job's rank
  // (first_rank + i).
  int size() const { return static_cast<int>(children_.size()); }
  pid_t pid(int i) const { return children_[i].pid(); }
  const std::string& host(int i) const { return spec_.hosts[spec_.rank_hosts[i]].name; }
  const comm::RankEnvironment& environment(int i) const { return environments_[i]; }

  // Waits until every rank has ended, stopping them as the header says. Call once, and not
  // after Reap or StopRunning.
  GangResult Wait(base::Deadline deadline);

  // For a supervisor with its own loop (launch/host_agent.h) instead of Wait:
  // Reap looks at each running rank once, about `slice` in all, records the ranks that have
  // ended and returns their indices in order; StopRunning stops every rank still running
  // (SIGTERM to its group, SIGKILL term_grace later; at once when it is stopped), recording
  // `why` for each; result() is how each rank ended so far (first_failed and the RankEnd of
  // each ended rank).
  std::vector<int> Reap(base::Duration slice);
  void StopRunning(const std::string& why);
  bool ended(int i) const { return ended_[i]; }
  bool all_ended() const;
  const GangResult& result() const { return result_; }

 private:
  Gang() = default;
  // SIGTERM to each listed rank's group, SIGKILL to those still running `term_grace` later;
  // records `why` for each.
  void Stop(const std::vector<int>& ranks, const std::string& why);
  void Record(int i, base::ExitInfo exit);
  std::vector<int> Running() const;

  GangSpec spec_;
  std::vector<comm::RankEnvironment> environments_;
  std::vector<base::Child> children_;
  std::vector<bool> ended_;
  GangResult result_;
};

}  // namespace railyard::launch
