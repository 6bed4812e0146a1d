// node.free_space: free space on the profile's mounts and the plan's `paths` (default /tmp,
// where jobs, compilers and core dumps spill), from statfs. A full local disk fails a job at
// its first checkpoint or cache write, hours in. Bounds are relative to each file system's
// size by default; a plan may set absolute ones ("fail: 20GiB").
#include <fmt/format.h>

#include <algorithm>
#include <vector>

#include "railyard/base/units.h"
#include "railyard/validate/check.h"

namespace railyard::validate {
namespace {

class FreeSpaceCheck final : public BasicCheck {
 public:
  FreeSpaceCheck()
      : BasicCheck(
            {.id = "node.free_space",
             .summary = "free space on the profile's mounts and the plan's paths",
             .category = Category::kNode,
             .cost = Cost::kQuick,
             .timeout = std::chrono::seconds(2),
             .unit = Unit::kBytes,
             .default_warn = "10% of expected",
             .default_fail = "2% of expected",
             .params = {{"paths", "/tmp", "comma-separated paths checked besides mounts"}}}) {}

  Outcome Run(const CheckContext& ctx) const override {
    std::vector<std::string> paths;
    for (const MountExpectation& m : ctx.profile->mounts) paths.push_back(m.path);
    std::string_view list = ctx.settings->params.find("paths")->second;
    while (!list.empty()) {
      size_t comma = list.find(',');
      std::string path(list.substr(0, comma));
      if (!path.empty() && std::find(paths.begin(), paths.end(), path) == paths.end()) {
        paths.push_back(path);
      }
      list = comma == list.npos ? "" : list.substr(comma + 1);
    }
    if (paths.empty()) return Outcome::Skipped("no path to check (no mounts, paths empty)");
    std::vector<Outcome> parts;
    for (const std::string& path : paths) {
      Result<FsSpace> s = ctx.env->Space(path);
      if (!s.ok()) {
        parts.push_back(Outcome::Unknown(s.status().message()));
        continue;
      }
      parts.push_back(
          Judge(info(), *ctx.settings, static_cast<double>(s->available_bytes),
                fmt::format("{} {} free of {}", path, base::FormatBytes(s->available_bytes),
                            base::FormatBytes(s->total_bytes)),
                {.expected = static_cast<double>(s->total_bytes)}));
    }
    Outcome worst = Worst(parts);
    if (worst.verdict == Verdict::kPass && parts.size() > 1) {
      std::vector<std::string> reasons;
      for (const Outcome& o : parts) reasons.push_back(o.reason);
      worst.reason = fmt::format("{}", fmt::join(reasons, "; "));
    }
    return worst;
  }
};

}  // namespace

std::unique_ptr<Check> NewFreeSpaceCheck() { return std::make_unique<FreeSpaceCheck>(); }

}  // namespace railyard::validate
