// VirtualCluster: brings a virtual cluster up and down and changes its links.
//
// Every mutating call takes a per-prefix lock (flock on <state_dir>/vcluster-<p>.lock), so
// two commands on the same cluster never interleave. `Up` also makes the cluster's shared
// directory (<state_dir>/<p>-shared, a subdirectory per host) and, in netns mode, the control
// address on the spine bridge; `Down` unmounts what scratch faults mounted there and removes it.
// `Up` is all or nothing: if any step fails, everything created so far is removed before the error
// is returned. `Down` finds objects by their name prefix, not only through the state file, so it
// also cleans up after a crash, and it is idempotent.
//
//   auto runner = MakeSystemRunner(std::chrono::seconds(10));
//   VirtualCluster vc(runner.get(), DefaultStateDir());
//   RY_ASSIGN_OR_RETURN(ClusterState st, vc.Up(spec, progress));
//   ...
//   RY_RETURN_IF_ERROR(vc.Down("ry").status());
//
// Thread-safety: one VirtualCluster per thread; different processes are serialised by the
// lock.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/vcluster/command_runner.h"
#include "railyard/vcluster/spec.h"
#include "railyard/vcluster/state.h"

namespace railyard::vcluster {

using ProgressFn = std::function<void(std::string_view)>;

struct ModeChoice {
  Mode mode = Mode::kNetns;
  std::string reason;  // why loopback was chosen; empty for netns
};

// netns when we are root and a namespace can be created, else loopback with the reason.
ModeChoice DetectMode(CommandRunner* runner, std::string_view prefix);

struct DownReport {
  std::vector<std::string> removed;  // netns and link names removed
  bool had_state = false;            // a state file existed
};

// What `Up` adds to the network.
struct UpOptions {
  bool slurm = false;                // a Slurm cluster on the hosts (slurm.h); netns mode only
  bool slurm_fail_for_test = false;  // fail once the Slurm daemons run (tests the cleanup)
  // With `slurm`: the HealthCheckProgram's command and interval (SlurmStartOptions).
  std::string slurm_health_check;
  int slurm_health_interval_s = 10;
};

struct OwnedObjects {
  std::vector<std::string> netns;
  std::vector<std::string> links;
};

class VirtualCluster {
 public:
  // `runner` is not owned and must outlive this object.
  VirtualCluster(CommandRunner* runner, std::string state_dir);

  // Builds the cluster described by `spec` (mode already decided) and writes the state and
  // topology files. ALREADY_EXISTS when a cluster with this prefix is up;
  // FAILED_PRECONDITION when leftovers with the prefix exist without a state file.
  Result<ClusterState> Up(const ClusterSpec& spec, const ProgressFn& progress = {},
                          const UpOptions& options = {});

  // Removes every namespace and link named "<prefix>-..." and the state files, after stopping
  // the Slurm daemons of the prefix and every process in its namespaces when it ran Slurm
  // (StopSlurm). OK when
  // nothing was there. INTERNAL naming what could not be removed.
  Result<DownReport> Down(std::string_view prefix, const ProgressFn& progress = {});

  // The state of an up cluster; FAILED_PRECONDITION ("no cluster ... is up") otherwise.
  Result<ClusterState> Load(std::string_view prefix) const;

  // All clusters with a state file in the state directory, sorted by prefix.
  Result<std::vector<ClusterState>> List() const;

  // Names of namespaces and links carrying the prefix that exist right now.
  Result<std::vector<std::string>> FindOwned(std::string_view prefix);
  Result<OwnedObjects> ListOwned(std::string_view prefix);

  // Link changes. NOT_FOUND for an unknown host (the message lists the hosts);
  // UNIMPLEMENTED in loopback mode; INVALID_ARGUMENT for a zero rate or a path to itself.
  Status DegradeHost(std::string_view prefix, std::string_view host, uint64_t rate_bits);
  Status DegradePath(std::string_view prefix, std::string_view a, std::string_view b,
                     uint64_t rate_bits);
  // Slows one leaf's uplink to the spine, both directions (tbf on both ends of its veth).
  // NOT_FOUND for an unknown leaf (the message lists the leaves).
  Status DegradeUplink(std::string_view prefix, std::string_view leaf, uint64_t rate_bits);

  // Faults that need no shaping (both modes). A scratch fault mounts over the host's
  // directory under the shared directory: read-only (a bind mount remounted ro) or full (a
  // 1 MiB tmpfs filled to ENOSPC); it needs root (mount). A hidden provider makes every
  // command run on the host through ExecutionFor see FI_PROVIDER=^<providers>.
  Status SetScratchFault(std::string_view prefix, std::string_view host, ScratchFault fault);
  Status HideProvider(std::string_view prefix, std::string_view host, std::string_view provider);
  // Undoes the host's scratch fault and hidden providers.
  Status ClearFaults(std::string_view prefix, std::string_view host);

  // Back to the rates of the spec (hosts, paths, uplinks), every scratch fault unmounted and
  // every provider visible again; cut links stay cut (use Heal). Loopback mode: the faults.
  Status Restore(std::string_view prefix);
  Status Cut(std::string_view prefix, std::string_view host);
  // Returns once both ends of the host's link pass traffic again (as `Up` does for every
  // link), with the neighbour (ARP) entries left by the cut forgotten on both sides;
  // UNAVAILABLE naming the link end when that takes longer than 5 s.
  Status Heal(std::string_view prefix, std::string_view host);

  const std::string& state_dir() const { return state_dir_; }

 private:
  Result<DownReport> DownLocked(std::string_view prefix, const ProgressFn& progress);
  struct LinkEnd {
    std::string netns;  // "" = the root namespace
    std::string dev;
    bool bridge_port = false;
  };
  Status WaitLinksPass(const std::vector<LinkEnd>& ends, std::string_view what);
  std::vector<LinkEnd> HostLinkEnds(const HostPlan& h) const;
  Status BuildNetns(const ClusterState& state, const ProgressFn& progress);
  Status AddControlAddress(ClusterState& state, const ProgressFn& progress);
  Status MakeSharedDir(const ClusterState& state);
  Status UnmountUnder(const std::string& dir);
  Status FillDirectory(const std::string& dir);
  Status ApplyUplinkRate(const ClusterState& state, const LeafPlan& leaf);
  Status ApplyHostShaping(const ClusterState& state, const HostPlan& host);
  Status ApplyLinkRate(const std::string& dev, const std::string& netns, uint64_t rate_bits);
  Status Save(const ClusterState& state);
  Result<ClusterState> LoadForChange(std::string_view prefix) const;
  Result<const HostPlan*> ResolveHost(const ClusterState& state, std::string_view host) const;

  CommandRunner* runner_;
  std::string state_dir_;
};

}  // namespace railyard::vcluster
