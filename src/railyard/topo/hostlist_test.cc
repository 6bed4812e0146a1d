#include "railyard/topo/hostlist.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

namespace railyard::topo {
namespace {

using Names = std::vector<std::string>;

Names Expand(std::string_view expr) {
  auto r = ExpandHostlist(expr);
  EXPECT_TRUE(r.ok()) << expr << ": " << r.status().ToString();
  return r.ok() ? *r : Names{};
}

std::string ExpandError(std::string_view expr) {
  auto r = ExpandHostlist(expr);
  EXPECT_FALSE(r.ok()) << expr << " unexpectedly expanded to " << (r.ok() ? r->size() : 0);
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
  return r.status().message();
}

TEST(HostlistTest, KeepsZeroPadding) {
  Names n = Expand("node[01-32]");
  ASSERT_EQ(n.size(), 32u);
  EXPECT_EQ(n.front(), "node01");
  EXPECT_EQ(n[8], "node09");
  EXPECT_EQ(n.back(), "node32");
  EXPECT_EQ(Expand("n[098-101]"), (Names{"n098", "n099", "n100", "n101"}));
  EXPECT_EQ(Expand("n[8-11]"), (Names{"n8", "n9", "n10", "n11"}));
}

TEST(HostlistTest, ListsRangesAndPlainNames) {
  EXPECT_EQ(Expand("node[1-3,7],gpu5"), (Names{"node1", "node2", "node3", "node7", "gpu5"}));
  EXPECT_EQ(Expand("a,b,c"), (Names{"a", "b", "c"}));
  EXPECT_EQ(Expand(" a , b "), (Names{"a", "b"}));
  EXPECT_EQ(Expand("x[3,1,2]"), (Names{"x3", "x1", "x2"}));
  EXPECT_EQ(Expand("n[5]"), (Names{"n5"}));
  EXPECT_EQ(Expand("n[1-2]x"), (Names{"n1x", "n2x"}));
}

TEST(HostlistTest, SeveralBracketsFormTheProductInOrder) {
  EXPECT_EQ(Expand("rack[1-2]-n[1-2]"), (Names{"rack1-n1", "rack1-n2", "rack2-n1", "rack2-n2"}));
  EXPECT_EQ(Expand("r[1,3]s[01-02]p[7]"), (Names{"r1s01p7", "r1s02p7", "r3s01p7", "r3s02p7"}));
}

TEST(HostlistTest, RejectsBadExpressions) {
  EXPECT_NE(ExpandError("node[5-2]").find("range 5-2 is descending"), std::string::npos);
  EXPECT_NE(ExpandError("node[1-3").find("never closed"), std::string::npos);
  EXPECT_NE(ExpandError("node1-3]").find("no matching '['"), std::string::npos);
  EXPECT_NE(ExpandError("n[1[2]]").find("nested"), std::string::npos);
  EXPECT_NE(ExpandError("a,,b").find("empty item"), std::string::npos);
  EXPECT_NE(ExpandError("a,").find("empty item"), std::string::npos);
  EXPECT_NE(ExpandError(",a").find("empty item"), std::string::npos);
  EXPECT_NE(ExpandError("").find("empty hostlist"), std::string::npos);
  EXPECT_NE(ExpandError("n[]").find("empty brackets"), std::string::npos);
  EXPECT_NE(ExpandError("n[1,,2]").find("empty entry"), std::string::npos);
  EXPECT_NE(ExpandError("n[a-b]").find("not a number"), std::string::npos);
  EXPECT_NE(ExpandError("n[1-]").find("missing"), std::string::npos);
  EXPECT_NE(ExpandError("n[-3]").find("missing"), std::string::npos);
  EXPECT_NE(ExpandError("my node").find("whitespace"), std::string::npos);
  EXPECT_NE(ExpandError("n[1-1234567890123456789]").find("digits"), std::string::npos);
  // The message quotes the whole expression so the caller only adds where it came from.
  EXPECT_NE(ExpandError("ok1,node[5-2]").find("'ok1,node[5-2]'"), std::string::npos);
}

TEST(HostlistTest, CapsTheNumberOfNames) {
  EXPECT_NE(ExpandError("n[1-1000001]").find("more than 1000000"), std::string::npos);
  EXPECT_NE(ExpandError("n[1-1000]m[1-1001]").find("more than"), std::string::npos);
  EXPECT_NE(ExpandError("a[1-600000],b[1-600000]").find("more than"), std::string::npos);
  EXPECT_NE(ExpandError("n[0-999999999999999999]").find("more than"), std::string::npos);
  auto max = ExpandHostlist("n[1-1000000]");
  ASSERT_TRUE(max.ok());
  EXPECT_EQ(max->size(), 1'000'000u);
}

TEST(HostlistTest, CompressesIntoRanges) {
  EXPECT_EQ(CompressHostlist({"node01", "node02", "node03", "node07"}), "node[01-03,07]");
  EXPECT_EQ(CompressHostlist({"a", "b"}), "a,b");
  EXPECT_EQ(CompressHostlist({"n5"}), "n5");
  EXPECT_EQ(CompressHostlist({}), "");
  EXPECT_EQ(CompressHostlist({"n8", "n9", "n10"}), "n[8-10]");
  EXPECT_EQ(CompressHostlist({"n098", "n099", "n100"}), "n[098-100]");
  EXPECT_EQ(CompressHostlist({"n98", "n99", "n100"}), "n[98-100]");
  // A padded range stops before a wider number: readers disagree on what "[08-100]" means.
  Names padded;
  for (int i = 8; i <= 100; ++i) padded.push_back(fmt::format("n{:02}", i));
  EXPECT_EQ(CompressHostlist(padded), "n[08-99,100]");
  EXPECT_EQ(CompressHostlist({"n08", "n09", "n10", "n99", "n100"}), "n[08-10,99-100]");
  EXPECT_EQ(CompressHostlist({"n09", "n10", "n11"}), "n[09-11]");
  EXPECT_EQ(CompressHostlist({"r1-n1", "r1-n2", "r2-n1"}), "r1-n[1-2],r2-n1");
  EXPECT_EQ(CompressHostlist({"gpu1a", "gpu2a", "login"}), "gpu[1-2]a,login");
  // Input order is kept, even when unsorted.
  EXPECT_EQ(CompressHostlist({"n3", "n1", "n2"}), "n[3,1-2]");
  EXPECT_EQ(CompressHostlist({"n1", "n01"}), "n[1,01]");
}

// Expand(Compress(x)) == x, for sorted and unsorted lists of mixed shapes.
TEST(HostlistTest, RoundTripsRandomLists) {
  std::mt19937 rng(12345);
  const std::vector<std::string> prefixes = {"node", "gpu", "r1-n", "x", "dgx-a100-"};
  const std::vector<std::string> suffixes = {"", "", "-ib", "a"};
  for (int trial = 0; trial < 500; ++trial) {
    Names names;
    int n = 1 + static_cast<int>(rng() % 60);
    for (int k = 0; k < n; ++k) {
      const std::string& p = prefixes[rng() % prefixes.size()];
      const std::string& s = suffixes[rng() % suffixes.size()];
      int value = static_cast<int>(rng() % 130);
      int width = static_cast<int>(rng() % 4);  // 0: unpadded
      std::string digits = width == 0 ? std::to_string(value) : fmt::format("{:0{}}", value, width);
      names.push_back(rng() % 10 == 0 ? "login" : p + digits + s);
    }
    if (trial % 2 == 0) std::sort(names.begin(), names.end());
    std::string expr = CompressHostlist(names);
    auto back = ExpandHostlist(expr);
    ASSERT_TRUE(back.ok()) << expr << ": " << back.status().ToString();
    ASSERT_EQ(*back, names) << expr;
  }
}

TEST(HostlistTest, CompressesALargeClusterShort) {
  Names names = Expand("su[1-2]-gpu[001-128]");
  EXPECT_EQ(CompressHostlist(names), "su1-gpu[001-128],su2-gpu[001-128]");
}

}  // namespace
}  // namespace railyard::topo
