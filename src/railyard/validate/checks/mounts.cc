// node.mounts: every mount the profile expects is there, with the expected file-system type
// (/proc/mounts). A job that finds NFS where it expects Lustre runs, slowly, and its
// checkpoints stall everyone; a path that is a plain directory on / fills the root disk.
// SKIPPED when the profile expects no mounts.
#include <fmt/format.h>

#include <vector>

#include "railyard/validate/check.h"
#include "railyard/validate/internal/proc_text.h"

namespace railyard::validate {
namespace {

// "nfs" accepts nfs4 as well: the expectation names the family, the kernel the version.
bool TypeMatches(std::string_view expected, std::string_view found) {
  return expected.empty() || found == expected || (expected == "nfs" && found == "nfs4");
}

class MountsCheck final : public BasicCheck {
 public:
  MountsCheck()
      : BasicCheck({.id = "node.mounts",
                    .summary = "the profile's mounts are present with their file-system types",
                    .category = Category::kNode,
                    .cost = Cost::kQuick,
                    .timeout = std::chrono::seconds(2)}) {}

  Outcome Run(const CheckContext& ctx) const override {
    const Profile& p = *ctx.profile;
    if (p.mounts.empty()) {
      return Outcome::Skipped(fmt::format("profile {} expects no mounts", p.name));
    }
    constexpr const char* kPath = "/proc/mounts";
    Result<std::string> text = ctx.env->ReadFile(kPath);
    if (!text.ok()) return Outcome::Unknown(text.status().message());
    std::vector<internal::MountEntry> mounts = internal::ParseMounts(*text);
    std::vector<Outcome> parts;
    std::vector<std::string> found, expected;
    for (const MountExpectation& m : p.mounts) {
      std::string want = m.fs_type.empty() ? "any" : m.fs_type;
      expected.push_back(fmt::format("{} {}", m.path, want));
      const internal::MountEntry* e = internal::MountHolding(mounts, m.path);
      if (e == nullptr || e->mount_point != m.path) {
        std::string on =
            e == nullptr ? "" : fmt::format(" (its path is on {}, {})", e->mount_point, e->fs_type);
        found.push_back(fmt::format("{} missing", m.path));
        parts.push_back(Outcome::Fail(fmt::format("{} is not mounted{}", m.path, on)));
        continue;
      }
      found.push_back(fmt::format("{} {}", m.path, e->fs_type));
      if (!TypeMatches(m.fs_type, e->fs_type)) {
        parts.push_back(Outcome::Fail(fmt::format("{} is {} (from {}), expected {}", m.path,
                                                  e->fs_type, e->device, m.fs_type)));
      } else {
        parts.push_back(Outcome::Pass(fmt::format("{} is {}", m.path, e->fs_type)));
      }
    }
    Outcome worst = Worst(parts);
    if (worst.verdict == Verdict::kPass) {
      worst.reason = fmt::format("{}", fmt::join(found, ", "));
    }
    return std::move(worst).With(fmt::format("{}", fmt::join(found, ", ")),
                                 fmt::format("{}", fmt::join(expected, ", ")));
  }
};

}  // namespace

std::unique_ptr<Check> NewMountsCheck() { return std::make_unique<MountsCheck>(); }

}  // namespace railyard::validate
