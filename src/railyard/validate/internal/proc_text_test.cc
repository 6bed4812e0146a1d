#include "railyard/validate/internal/proc_text.h"

#include <gtest/gtest.h>

namespace railyard::validate::internal {
namespace {

TEST(ProcTextTest, MeminfoValues) {
  const char* text = "MemTotal:  16 kB\nHugePages_Total:      8\nMemFree: x kB\nSwap: 1 kB\n";
  EXPECT_EQ(MeminfoValue(text, "MemTotal"), 16 * 1024u);
  EXPECT_EQ(MeminfoValue(text, "HugePages_Total"), 8u);
  EXPECT_EQ(MeminfoValue(text, "MemFree"), std::nullopt);
  EXPECT_EQ(MeminfoValue(text, "Mem"), std::nullopt);
  EXPECT_EQ(MeminfoValue(text, "SwapTotal"), std::nullopt);
}

TEST(ProcTextTest, ParseUnsigned) {
  EXPECT_EQ(ParseUnsigned(" 212992\n"), 212992u);
  EXPECT_EQ(ParseUnsigned(""), std::nullopt);
  EXPECT_EQ(ParseUnsigned("12a"), std::nullopt);
  EXPECT_EQ(ParseUnsigned("-1"), std::nullopt);
}

TEST(ProcTextTest, MountsAndTheMountHoldingAPath) {
  std::vector<MountEntry> m = ParseMounts(
      "/dev/sda1 / ext4 rw 0 0\nfs /lustre lustre rw 0 0\nx /mnt/a\\040b xfs rw 0 0\nshort\n");
  ASSERT_EQ(m.size(), 3u);
  EXPECT_EQ(m[2].mount_point, "/mnt/a b");
  EXPECT_EQ(MountHolding(m, "/lustre")->fs_type, "lustre");
  EXPECT_EQ(MountHolding(m, "/lustre/run1")->fs_type, "lustre");
  EXPECT_EQ(MountHolding(m, "/lustrefs")->mount_point, "/");
  EXPECT_EQ(MountHolding(m, "/mnt/a b/c")->fs_type, "xfs");
  EXPECT_EQ(MountHolding({}, "/x"), nullptr);
}

}  // namespace
}  // namespace railyard::validate::internal
