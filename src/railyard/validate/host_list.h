// The hosts a validation run covers, from what `railyard validate --hosts` was given.
//
// One spec names the hosts, in one of four forms, told apart in this order:
//
//   vcluster, vcluster:<prefix>   the virtual cluster that is up (default prefix as for
//                                 `railyard vcluster`): its hosts, their addresses, and its
//                                 topology file (so leaves and link rates are known)
//   @FILE, or a path to a file    a topology file (any format topo/load.h reads, recognised by
//                                 content: its nodes and their addresses), else a host file
//   node[01-16],login1            a Slurm hostlist expression (topo/hostlist.h)
//
// A spec with '[' or ',' is always a hostlist; otherwise a spec naming an existing file (or
// containing '/') is a file; '@' makes a file explicit. A host file has one host per line,
// '#' starts a comment, blank lines are skipped; a line may also be a hostlist expression
// ("gpu[001-032]") or an MPI hostfile entry whose words after the first ("slots=8") are
// ignored. Errors name the file and line.
//
//   RY_ASSIGN_OR_RETURN(HostList list, ResolveHosts("node[01-16]"));
//   RY_RETURN_IF_ERROR(AttachTopology(list, "cluster.yaml"));  // optional
//
// Host names are checked to be names a command line and a remote shell pass through
// unchanged (letters, digits, '.', '_', '-'): they end up in ssh, srun and kubectl commands.
//
// Thread-safety: pure functions, apart from reading the files named.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/topo/model.h"
#include "railyard/vcluster/state.h"

namespace railyard::validate {

enum class HostSource { kVcluster, kHostFile, kHostlist, kTopology };
std::string_view HostSourceName(HostSource source);  // "virtual cluster", "host file", ...

struct HostList {
  HostSource source = HostSource::kHostlist;
  std::string spec;                    // as given
  std::vector<std::string> hosts;      // in order, each once
  std::vector<std::string> addresses;  // parallel to hosts; "" where not known
  // The topology: the virtual cluster's or the topology file's, or one attached with
  // AttachTopology; otherwise a single switch over the hosts with no rates known (so that a
  // schedule and profiles always have a cluster to read), and topology_file is empty.
  topo::Cluster cluster;
  std::string topology_file;
  std::optional<vcluster::ClusterState> vcluster;  // kVcluster only
};

struct ResolveHostsOptions {
  std::string state_dir;  // virtual clusters' state files; empty: vcluster::DefaultStateDir()
};

// Resolves `spec` (see above). INVALID_ARGUMENT "host list 'x' names no host" for a list
// without hosts; INVALID_ARGUMENT naming file:line for a bad line, a bad or repeated name;
// NOT_FOUND for a missing file; FAILED_PRECONDITION when the virtual cluster is not up.
Result<HostList> ResolveHosts(std::string_view spec, const ResolveHostsOptions& options = {});

// Host names from a host file's text (see above); `source` names it in errors.
Result<std::vector<std::string>> ParseHostFile(std::string_view text, std::string_view source);

// Replaces the cluster with the topology at `path`, which must name every host of the list
// (NOT_FOUND naming the first that it does not, with the nearest name); addresses the list
// lacks are taken from it.
Status AttachTopology(HostList& list, const std::string& path);

// One switch ("all", level "leaf") over `hosts`, no rates known.
topo::Cluster FlatCluster(const std::vector<std::string>& hosts);

// OK when `name` is a host name the starters can pass on (see above); INVALID_ARGUMENT
// naming it otherwise.
Status CheckHostName(std::string_view name);

}  // namespace railyard::validate
