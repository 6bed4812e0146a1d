// Validation plans: which checks to run, with which bounds, on which hardware profiles.
//
// A plan is a YAML file (schema in docs/formats.md, "Validation plan"), versioned
// (`version: 1`), or one of the built-in plans `quick` (every registered check of cost quick,
// with its defaults) and `full` (cost quick and full). A file may start from a built-in with
// `include: quick|full` and then list checks to add, retune or disable:
//
//   version: 1
//   name: gpu-lustre
//   include: quick
//   profiles:
//     - {name: gpu, hosts: "gpu[001-128]", gpus: 8, rdma: true, memlock: unlimited,
//        mounts: [{path: /lustre, fs: lustre}]}
//   checks:
//     - {id: node.swap, fail: 256MiB}
//     - {id: node.memlock, profiles: [gpu]}
//
// Unknown checks, fields, parameters and profiles are errors that name the file, the line and
// the nearest valid name: "plan.yaml:9:9: field 'checks[1].id': unknown check 'node.memlok'
// (did you mean 'node.memlock'?)".
//
// Thread-safety: a Plan is a value; its Check pointers borrow from the registry, which must
// outlive it.
#pragma once

#include <chrono>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/validate/check.h"
#include "railyard/validate/profile.h"
#include "railyard/validate/registry.h"

namespace railyard::validate {

inline constexpr int kPlanVersion = 1;

struct PlannedCheck {
  const Check* check = nullptr;  // borrowed from the registry
  CheckSettings settings;
  std::chrono::milliseconds timeout{0};  // the plan's, else the check's own
  std::vector<std::string> profiles;     // empty: every profile
  bool AppliesTo(std::string_view profile) const;
};

struct Plan {
  std::string name;
  std::string source;  // file name, or "built-in"
  std::string description;
  std::vector<Profile> profiles;     // in file order; the last one covers every other host
  std::vector<PlannedCheck> checks;  // sorted by id

  // The first profile whose hosts expression names `host`, else the catch-all one.
  const Profile& ProfileFor(std::string_view host) const;
  // Null when the plan does not run `id`.
  const PlannedCheck* Find(std::string_view id) const;

  // Expanded hosts expression per profile (parallel to profiles; empty set: catch-all).
  std::vector<std::set<std::string, std::less<>>> profile_hosts;
};

// Parses a plan; `source` names it in errors. Errors: INVALID_ARGUMENT as described above.
Result<Plan> ParsePlan(std::string_view text, std::string_view source,
                       const CheckRegistry& registry);

// `quick` or `full`; NOT_FOUND naming the built-in plans otherwise.
Result<Plan> BuiltinPlan(std::string_view name, const CheckRegistry& registry);

// A built-in name, else a file path to read (NOT_FOUND when it does not exist).
Result<Plan> LoadPlan(const std::string& name_or_path, const CheckRegistry& registry);

}  // namespace railyard::validate
