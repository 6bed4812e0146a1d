// Remediation: acting on a validation run's verdicts, each action opt-in.
//
//   exclude file  the hosts to keep jobs off, one per line, in the host-file format that
//                 `railyard place --exclude @F` and the launcher read ('#' lines say why).
//                 FAIL hosts, and UNKNOWN ones: a host whose agent never answered or whose
//                 check could not decide has not been shown healthy, and placement must only
//                 use hosts that have been.
//   Slurm drain   `scontrol update NodeName=H State=DRAIN Reason="railyard: <check>: <why>"`
//                 for each FAIL host not already drained by someone else; for each PASS or
//                 WARN host that is drained with a reason starting "railyard:" (read from
//                 `scontrol show node H -o`), `scontrol update NodeName=H State=RESUME`.
//                 Drains it did not write are never lifted nor overwritten; UNKNOWN hosts are
//                 left as they are (draining on UNKNOWN would drain a whole partition when
//                 the coordinator's own network fails).
//   Kubernetes    a shell script of kubectl commands: FAIL nodes get the label
//                 railyard.io/validation=fail and the taint
//                 railyard.io/unhealthy=<check>:NoSchedule; PASS and WARN nodes get
//                 railyard.io/validation=pass and lose that taint; UNKNOWN nodes get
//                 railyard.io/validation=unknown and keep their taints. Commands rather than
//                 a JSON patch: a patch of spec.taints replaces the whole list, including
//                 taints others set.
//
//   RY_RETURN_IF_ERROR(base::WriteFileAtomic(path, FormatExcludeFile(report)));
//   std::vector<SlurmAction> done = ApplySlurmDrain(report, SystemScontrol());
//
// Thread-safety: pure functions, apart from what the injected runner does.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/base/subprocess.h"
#include "railyard/validate/report.h"

namespace railyard::validate {

// The reason of a host's verdict with the check that gave it: "fabric.pair_bandwidth: every
// path of node3 is slow (...)". Empty for a host without checks.
std::string HostReason(const HostEntry& host);

// Text of the exclude file (see above): a header, then per excluded host a comment with its
// verdict and reason and a line with its name. Only comments when no host is excluded.
std::string FormatExcludeFile(const RunReport& report);

// Runs scontrol with these arguments (argv[0] is "scontrol") and returns how it ended.
using ScontrolRunner = std::function<Result<base::ExitInfo>(const std::vector<std::string>&)>;

// The real scontrol, each call bounded by `timeout`.
ScontrolRunner SystemScontrol(std::chrono::milliseconds timeout = std::chrono::seconds(10));

struct SlurmAction {
  std::string host;
  // "drain", "resume", "left" (drained by someone else, or UNKNOWN), "error".
  std::string action;
  std::string detail;  // the reason written, the foreign reason kept, or the error
};

// The Slurm side of remediation (see above). Never fails as a whole: a node scontrol cannot
// read or update is an "error" action naming scontrol's answer, and the others go on.
std::vector<SlurmAction> ApplySlurmDrain(const RunReport& report, const ScontrolRunner& scontrol);

// One line per action: "node3: drained (railyard: fabric.pair_bandwidth: ...)".
std::string FormatSlurmActions(const std::vector<SlurmAction>& actions);

// The kubectl script (see above).
std::string FormatKubernetesScript(const RunReport& report);

}  // namespace railyard::validate
