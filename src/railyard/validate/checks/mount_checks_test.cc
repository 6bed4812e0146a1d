// node.mounts and node.free_space through FakeNodeEnv.
#include <gtest/gtest.h>

#include "railyard/validate/checks/check_testing.h"

namespace railyard::validate {
namespace {

using MountChecksTest = CheckTest;

constexpr const char* kMounts =
    "/dev/sda1 / ext4 rw,relatime 0 0\n"
    "proc /proc proc rw 0 0\n"
    "10.0.0.5@o2ib:/fs /lustre lustre rw,flock 0 0\n"
    "nas:/home /home nfs4 rw 0 0\n"
    "/dev/nvme0n1 /scratch\\040space xfs rw 0 0\n";

Profile WithMounts(std::vector<MountExpectation> mounts) {
  return Profile{.name = "gpu", .mounts = std::move(mounts)};
}

TEST_F(MountChecksTest, ExpectedMountsWithTheirTypesPass) {
  env_.files["/proc/mounts"] = kMounts;
  Outcome o = Run("node.mounts",
                  WithMounts({{"/lustre", "lustre"}, {"/home", "nfs"}, {"/scratch space", ""}}));
  EXPECT_EQ(o.ToString(), "PASS: /lustre lustre, /home nfs4, /scratch space xfs");
  EXPECT_EQ(o.expected, "/lustre lustre, /home nfs, /scratch space any");
}

TEST_F(MountChecksTest, NfsWhereLustreIsExpectedFails) {
  env_.files["/proc/mounts"] = "nas:/export /lustre nfs rw 0 0\n";
  EXPECT_EQ(Run("node.mounts", WithMounts({{"/lustre", "lustre"}})).ToString(),
            "FAIL: /lustre is nfs (from nas:/export), expected lustre");
}

TEST_F(MountChecksTest, AMissingMountFailsNamingWhereItsPathLives) {
  env_.files["/proc/mounts"] = kMounts;
  EXPECT_EQ(Run("node.mounts", WithMounts({{"/data", "lustre"}})).ToString(),
            "FAIL: /data is not mounted (its path is on /, ext4)");
}

TEST_F(MountChecksTest, SkippedWithoutExpectationsUnknownWithoutProcMounts) {
  EXPECT_EQ(Run("node.mounts", Profile{.name = "cpu"}).ToString(),
            "SKIPPED: profile cpu expects no mounts");
  EXPECT_EQ(Run("node.mounts", WithMounts({{"/lustre", "lustre"}})).ToString(),
            "UNKNOWN: /proc/mounts: no such file");
}

TEST_F(MountChecksTest, FreeSpaceRelativeToEachFileSystem) {
  constexpr uint64_t kGiB = 1ull << 30;
  env_.spaces["/tmp"] = {.total_bytes = 100 * kGiB, .available_bytes = 50 * kGiB};
  env_.spaces["/lustre"] = {.total_bytes = 1000 * kGiB, .available_bytes = 500 * kGiB};
  Profile p = WithMounts({{"/lustre", "lustre"}});
  EXPECT_EQ(Run("node.free_space", p).ToString(),
            "PASS: /lustre 500 GiB free of 1000 GiB; /tmp 50 GiB free of 100 GiB");
  env_.spaces["/tmp"].available_bytes = 5 * kGiB;
  EXPECT_EQ(Run("node.free_space", p).ToString(),
            "WARN: /tmp 5 GiB free of 100 GiB, below warn limit 10 GiB (10% of expected)");
  env_.spaces["/lustre"].available_bytes = 1 * kGiB;
  Outcome o = Run("node.free_space", p);
  EXPECT_EQ(o.verdict, Verdict::kFail) << o.ToString();
  EXPECT_EQ(o.measured, "1 GiB");
}

TEST_F(MountChecksTest, FreeSpaceUnreadablePathIsUnknownAndNoPathIsSkipped) {
  EXPECT_EQ(Run("node.free_space", Profile{}).ToString(),
            "UNKNOWN: statfs /tmp: no such file or directory");
  EXPECT_EQ(Run("node.free_space", Profile{}, {{"paths", ""}}).verdict, Verdict::kSkipped);
}

}  // namespace
}  // namespace railyard::validate
