// Running the node checks of a plan on this host: what `railyard validate node` and, later,
// each validation agent do.
//
// Every check of the chosen categories that the plan runs is either SKIPPED (the plan limits
// it to other profiles, or Gate says it does not apply) or run on its own thread against its
// own timeout, all at once, so the whole run takes as long as its slowest check. A check past
// its timeout is UNKNOWN "did not finish within 2s" and its thread is abandoned (detached):
// the run always finishes and reports. Nothing is PASS that did not run.
//
//   auto env = std::shared_ptr<NodeEnv>(NewSystemNodeEnv());
//   NodeReport r = RunNodeChecks(plan, host, profile, env, {});
//   return r.overall.ExitCode();
//
// Thread-safety: RunNodeChecks may be called concurrently. An abandoned check keeps `env`
// alive through its shared_ptr and reads its Check from the registry, which must therefore
// outlive the process's last abandoned check (the registry of a command lives until exit).
#pragma once

#include <chrono>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "railyard/validate/check.h"
#include "railyard/validate/node_env.h"
#include "railyard/validate/plan.h"

namespace railyard::validate {

struct NodeRunOptions {
  Site site;
  // The categories that run on the host alone: node checks and the GPU checks through NVML.
  std::set<Category> categories = {Category::kNode, Category::kGpu};
};

struct CheckResult {
  std::string id;
  Outcome outcome;
  std::chrono::milliseconds elapsed{0};  // until it finished, or until its timeout
};

struct NodeReport {
  std::string host;
  std::string profile;
  std::vector<CheckResult> checks;  // in the plan's order (sorted by id)
  Outcome overall;                  // Worst of the checks' outcomes
  std::chrono::milliseconds elapsed{0};
  // Checks past their timeout whose threads still run. A command should end the process
  // with _Exit after printing, rather than run static destructors under them.
  int abandoned = 0;
};

// Runs the checks of `plan` in `options.categories` for `host` with its resolved `profile`.
// Never fails: every problem is an outcome.
NodeReport RunNodeChecks(const Plan& plan, const std::string& host, const Profile& profile,
                         std::shared_ptr<NodeEnv> env, const NodeRunOptions& options);

// NHC's one-line summary for Slurm's HealthCheckProgram and logs: "railyard: node.memlock
// FAIL: memlock limit 64 KiB, expected unlimited (+1 more)" naming the first check at the
// worst verdict, or "railyard: node OK: 9 passed, 4 skipped".
std::string OneLineSummary(const NodeReport& report);

}  // namespace railyard::validate
