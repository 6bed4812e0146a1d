#include "railyard/vcluster/spec.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <set>

namespace railyard::vcluster {
namespace {

ClusterSpec Spec(int hosts, int leaves, std::string prefix = "ry") {
  ClusterSpec s;
  s.hosts = hosts;
  s.leaves = leaves;
  s.prefix = std::move(prefix);
  return s;
}

TEST(SpecTest, RejectsBadCountsWithFlagNames) {
  Status zero = ValidateSpec(Spec(0, 1));
  EXPECT_EQ(zero.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(zero.message().find("--hosts 0"), std::string::npos) << zero.message();
  Status leaves = ValidateSpec(Spec(2, 3));
  EXPECT_NE(leaves.message().find("--leaves 3"), std::string::npos) << leaves.message();
  EXPECT_NE(leaves.message().find("2 hosts"), std::string::npos) << leaves.message();
  EXPECT_FALSE(ValidateSpec(Spec(kMaxHosts + 1, 2)).ok());
  EXPECT_TRUE(ValidateSpec(Spec(8, 2)).ok());
}

TEST(SpecTest, PrefixMustFitInterfaceNames) {
  EXPECT_TRUE(ValidatePrefix("ry").ok());
  EXPECT_TRUE(ValidatePrefix("t1a2b").ok());
  EXPECT_FALSE(ValidatePrefix("").ok());
  EXPECT_FALSE(ValidatePrefix("toolong").ok());
  EXPECT_FALSE(ValidatePrefix("1ry").ok());
  EXPECT_FALSE(ValidatePrefix("r-y").ok());
  EXPECT_FALSE(ValidatePrefix("RY").ok());
}

TEST(SpecTest, HostsSpreadEvenlyInContiguousBlocks) {
  ClusterPlan p = MakePlan(Spec(8, 3));
  ASSERT_EQ(p.leaves.size(), 3u);
  EXPECT_EQ(p.leaves[0].hosts, (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(p.leaves[1].hosts, (std::vector<int>{3, 4, 5}));
  EXPECT_EQ(p.leaves[2].hosts, (std::vector<int>{6, 7}));
  EXPECT_EQ(p.hosts[7].leaf, 2);
  EXPECT_EQ(p.HostList(), "node[0-7]");
}

TEST(SpecTest, EveryNameIsOwnedByThePrefixAndFitsLinux) {
  ClusterPlan p = MakePlan(Spec(kMaxHosts, 10, "abcde"));
  std::set<std::string> names;
  auto check = [&](const std::string& name, bool is_link) {
    EXPECT_EQ(name.rfind("abcde-", 0), 0u) << name;
    if (is_link) {
      EXPECT_LE(name.size(), 15u) << name;  // IFNAMSIZ - 1
    }
    EXPECT_TRUE(names.insert(name).second) << "duplicate " << name;
  };
  check(p.spine_bridge, true);
  for (const auto& l : p.leaves) {
    check(l.bridge, true);
    check(l.uplink, true);
    check(l.spine_port, true);
  }
  for (const auto& h : p.hosts) {
    check(h.netns, false);
    check(h.bridge_port, true);
  }
}

TEST(SpecTest, AddressesAreUniqueAndInTheBenchmarkRange) {
  ClusterPlan p = MakePlan(Spec(20, 4));
  std::set<std::string> addrs;
  for (const auto& h : p.hosts) {
    EXPECT_EQ(h.address.rfind("198.18.", 0), 0u) << h.address;
    EXPECT_TRUE(addrs.insert(h.address).second);
  }
  ClusterSpec lo = Spec(3, 1);
  lo.mode = Mode::kLoopback;
  const std::string a = MakePlan(lo).hosts[2].address;
  EXPECT_EQ(a, fmt::format("127.{}.0.3", LoopbackOctet("ry")));
  lo.prefix = "ryt";
  EXPECT_NE(MakePlan(lo).hosts[2].address, a);  // clusters side by side get their own range
}

TEST(SpecTest, FindHost) {
  ClusterPlan p = MakePlan(Spec(4, 2));
  ASSERT_NE(p.FindHost("node3"), nullptr);
  EXPECT_EQ(p.FindHost("node3")->leaf, 1);
  EXPECT_EQ(p.FindHost("node4"), nullptr);
}

}  // namespace
}  // namespace railyard::vcluster
