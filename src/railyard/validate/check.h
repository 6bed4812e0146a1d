// A check: one named test of a host, a link, a collective or the storage, with the verdict it
// reaches and why.
//
// Each check lives in its own file under checks/ and describes itself with a CheckInfo: its id
// ("node.memlock"), category, cost, timeout, what it needs to run (root, a GPU, a fabric
// provider, a shared directory), the unit of what it measures and its default warn/fail
// bounds, and the parameters a plan may set. The registry (registry.h) holds them by id; a
// plan (plan.h) picks some and sets their thresholds and parameters per profile.
//
// Run() returns an Outcome, never a Status: a check that cannot decide says UNKNOWN with the
// reason (a file it could not read, a tool that crashed) and one that does not apply says
// SKIPPED. Before Run, the caller asks Gate() whether the check applies to the host at all.
// Node checks read the host through ctx.env (node_env.h), so tests feed them values; fabric,
// collective and storage checks get the runner they drive through the same context.
//
// Thread-safety: a Check is immutable after construction; Run may be called concurrently with
// different contexts.
#pragma once

#include <chrono>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/validate/node_env.h"
#include "railyard/validate/profile.h"
#include "railyard/validate/threshold.h"
#include "railyard/validate/verdict.h"

namespace railyard::validate {

enum class Category { kNode, kFabric, kCollective, kStorage, kGpu };
// kQuick: seconds per host, safe beside running jobs; kFull: minutes, loads the host or
// fabric; kInvasive: disturbs running jobs (saturates links, fills disks), preflight only.
enum class Cost { kQuick, kFull, kInvasive };

std::string_view CategoryName(Category c);  // "node", "fabric", "collective", "storage", "gpu"
std::string_view CostName(Cost c);          // "quick", "full", "invasive"
// INVALID_ARGUMENT listing the valid names otherwise.
Result<Category> ParseCategory(std::string_view s);
Result<Cost> ParseCost(std::string_view s);

struct Needs {
  bool root = false;
  bool gpu = false;              // the profile expects at least one GPU
  bool fabric_provider = false;  // a libfabric provider (the profile's, or any)
  bool shared_dir = false;       // a directory every host sees (storage checks)
};

// A parameter a plan may set for a check ("size: 64MiB"), with its default as text.
struct Param {
  std::string name;
  std::string default_value;
  std::string help;
};

struct CheckInfo {
  std::string id;       // "<category>.<name>", e.g. "node.memlock", "fabric.pair_bandwidth"
  std::string summary;  // one line for --list-checks
  Category category = Category::kNode;
  Cost cost = Cost::kQuick;
  std::chrono::milliseconds timeout{10'000};  // past it the check is UNKNOWN for that host
  Needs needs;
  Unit unit = Unit::kNone;  // of the measured value; kNone: no thresholds
  bool higher_is_better = true;
  std::string default_warn;  // threshold text (threshold.h); empty: none
  std::string default_fail;
  std::vector<Param> params;
};

// What a plan sets for one check: its bounds (defaults from CheckInfo) and parameters (every
// declared one present, defaults filled).
struct CheckSettings {
  std::optional<Threshold> warn;
  std::optional<Threshold> fail;
  std::map<std::string, std::string, std::less<>> params;
};

// The settings of `info` with nothing overridden. INVALID_ARGUMENT when a default threshold
// does not parse (a bug in the check's CheckInfo, caught by the registry's tests).
Result<CheckSettings> DefaultSettings(const CheckInfo& info);

// Everything a check's Run may read. Pointers are borrowed for the call and never null
// unless the comment says so.
struct CheckContext {
  std::string host;
  const Profile* profile = nullptr;  // resolved (ResolveProfile)
  const CheckSettings* settings = nullptr;
  NodeEnv* env = nullptr;  // node checks; null where the check runs elsewhere
};

class Check {
 public:
  virtual ~Check() = default;
  virtual const CheckInfo& info() const = 0;
  virtual Outcome Run(const CheckContext& ctx) const = 0;
};

// The usual base of a check: holds the CheckInfo given at construction, so a check file is
// its descriptor and its Run.
class BasicCheck : public Check {
 public:
  explicit BasicCheck(CheckInfo info) : info_(std::move(info)) {}
  const CheckInfo& info() const final { return info_; }

 private:
  CheckInfo info_;
};

// The base of a check the coordinator runs across hosts (fabric, storage, collective, clock
// offset): its Run, on one host alone (`railyard validate node`), is SKIPPED "runs from the
// coordinator (railyard validate --hosts)", never PASS; the coordinator measures it instead.
class CoordinatorCheck : public BasicCheck {
 public:
  using BasicCheck::BasicCheck;
  Outcome Run(const CheckContext& ctx) const final;
};

// Facts about where a check would run, for Gate.
struct Site {
  bool root = false;
  bool shared_dir = false;  // a shared directory was given
};

// SKIPPED with the reason when `info` does not apply to `profile` or cannot run at `site`
// ("needs a GPU; profile cpu expects none", "needs root"); nullopt when it may run.
std::optional<Outcome> Gate(const CheckInfo& info, const Profile& profile, const Site& site);

// PASS, WARN or FAIL for a measured value against ctx's thresholds: FAIL when the fail bound
// is breached, WARN when the warn bound is, else PASS. `what` starts the reason ("memlock
// limit 64 KiB"); the bound broken and its text follow. UNKNOWN when a bound's reference is
// missing (a median threshold with no fleet median).
Outcome Judge(const CheckInfo& info, const CheckSettings& settings, double measured,
              std::string_view what, const References& refs = {});

}  // namespace railyard::validate
