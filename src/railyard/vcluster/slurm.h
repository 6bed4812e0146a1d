// A real Slurm cluster on a virtual cluster: `vcluster up --slurm` starts a munged, a
// slurmctld and one slurmd per virtual host, and `vcluster down` stops them and removes their
// files. Everything lives in <state_dir>/<prefix>-slurm (SlurmLayoutFor), so `down` finds the
// daemons after a crash through their pid files and their command lines, without a state file.
//
// Where each daemon runs (docs/slurm.md says why):
//   munged     root namespace; its UNIX socket is a file, reachable from every namespace
//   slurmctld  root namespace, on the cluster's control address (the spine bridge), which
//              every host reaches over its own /16 route
//   slurmd     inside its host's namespace (`slurmd -N <host>`), NodeAddr = the host's address
//
//   RY_RETURN_IF_ERROR(StartSlurm(state_dir, state, progress));  // sets state.slurm_conf
//   ...
//   RY_RETURN_IF_ERROR(StopSlurm(state_dir, prefix, progress));
//
// SlurmConfText and SlurmNodesFor are pure, for tests. Thread-safety: plain blocking calls;
// callers serialise them per prefix (VirtualCluster's lock).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/vcluster/state.h"
#include "railyard/vcluster/vcluster.h"

namespace railyard::vcluster {

// Every path of the Slurm cluster of one prefix.
struct SlurmLayout {
  std::string dir;            // <state_dir>/<prefix>-slurm
  std::string conf;           // dir/slurm.conf
  std::string topology_conf;  // dir/topology.conf
  std::string munge_dir;      // dir/munge: key (0400), socket, pid, log, seed
  std::string munge_key;
  std::string munge_socket;
  std::string munged_pid;
  std::string munged_log;
  std::string munged_seed;
  std::string ctld_dir;    // dir/ctld: state/, slurmctld.pid, slurmctld.log
  std::string ctld_state;  // StateSaveLocation
  std::string ctld_pid;
  std::string ctld_log;
  std::string nodes_dir;     // dir/nodes/<host>/{spool/, slurmd.pid, slurmd.log, health-check.log}
  std::string health_check;  // dir/health-check: the HealthCheckProgram, when one is configured

  std::string NodeDir(std::string_view host) const;
};
SlurmLayout SlurmLayoutFor(const std::string& state_dir, std::string_view prefix);

struct SlurmNode {
  std::string name;     // the virtual host's name: NodeName, and `slurmd -N`
  std::string address;  // NodeAddr
  int cpus = 1;
  uint64_t real_memory_mb = 0;
};

// Every virtual host shares this machine, so each is given all of its `cpus` (a job's tasks
// time-share them, as processes on one machine do) and an equal share of its memory, so that
// Slurm never hands out more memory in all than there is.
std::vector<SlurmNode> SlurmNodesFor(const ClusterPlan& plan, int cpus, uint64_t mem_total_mb);

struct SlurmConfOptions {
  std::string cluster_name;     // ClusterName (the prefix)
  std::string controller_host;  // this machine's short host name (slurmctld checks it)
  std::string controller_addr;  // the control address
  int controller_port = 6817;
  int slurmd_port = 6818;  // one per namespace, so every slurmd has the same
  std::vector<SlurmNode> nodes;
  // HealthCheckProgram and HealthCheckInterval (seconds); none when the program is empty.
  std::string health_check_program;
  int health_check_interval_s = 0;
};

// What `up --slurm` runs besides the daemons.
struct SlurmStartOptions {
  // A shell command line slurmd runs as its HealthCheckProgram on every node, every
  // `health_check_interval_s` seconds and when it starts; "$SLURMD_NODENAME" in it is the
  // node's name. Empty: no health check. It runs from the script SlurmLayout::health_check,
  // which gives it PATH and SLURM_CONF (slurmd passes only SLURMD_NODENAME) and appends its
  // output to the node's health-check.log.
  std::string health_check_command;
  int health_check_interval_s = 10;
  bool fail_for_test = false;  // INTERNAL once every daemon has started, to test the cleanup
};

// The HealthCheckProgram script for `command` (see SlurmStartOptions), pure for tests.
std::string HealthCheckScript(const SlurmLayout& layout, const std::string& command);

// slurm.conf, one setting per line, every path under `layout`.
std::string SlurmConfText(const SlurmLayout& layout, const SlurmConfOptions& options);

// What `up --slurm` needs before it touches anything: FAILED_PRECONDITION for a loopback
// cluster, or naming the first of munged, slurmctld, slurmd, sinfo that is not installed
// (Debian: munge, slurm-wlm).
Status CheckSlurmSpec(const ClusterSpec& spec);

// Generates the key and the configuration, starts the daemons and waits (at most 30 s) until
// sinfo shows every node idle; sets state.slurm_conf. FAILED_PRECONDITION as CheckSlurmSpec,
// or without a control address; on any error the caller runs StopSlurm (VirtualCluster::Up does,
// through Down). UNAVAILABLE naming the nodes that are not idle at the deadline.
Status StartSlurm(const std::string& state_dir, ClusterState& state, const ProgressFn& progress,
                  const SlurmStartOptions& options = {});

// Stops every daemon of the prefix's Slurm cluster (found by pid file, by a command line that
// names its directory, and, for job steps and their tasks, by being inside one of the prefix's
// namespaces while the directory exists) with SIGKILL; then removes the directory. OK when nothing
// is there. INTERNAL naming a process that would not die.
Status StopSlurm(const std::string& state_dir, std::string_view prefix, const ProgressFn& progress);

}  // namespace railyard::vcluster
