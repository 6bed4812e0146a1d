#include "railyard/topo/render.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "railyard/base/files.h"
#include "railyard/topo/golden_testing.h"

namespace railyard::topo {
namespace {

using testing::ExpectGolden;

Node MakeNode(std::string name, int gpus) {
  Node n;
  n.name = std::move(name);
  n.gpu_count = gpus;
  return n;
}

Cluster Finish(ClusterBuilder b) {
  Result<Cluster> c = std::move(b).Finish();
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

// spine0 > {leaf0: gpu01-04, leaf1: gpu05-07 + login1}; spine1 > leaf2 (empty); spine2 alone.
Cluster SmallCluster() {
  ClusterBuilder b("test");
  b.SetName("train-a");
  b.SetLevels({"spine", "leaf"});
  b.AddSwitch("spine0", "spine", "", 0);
  b.AddSwitch("spine1", "spine", "", 0);
  b.AddSwitch("spine2", "spine", "", 0);
  b.AddSwitch("leaf0", "leaf", "spine0", 0);
  b.AddSwitch("leaf1", "leaf", "spine0", 0);
  b.AddSwitch("leaf2", "leaf", "spine1", 0);
  for (int i = 1; i <= 7; ++i) {
    b.AddNode(MakeNode(fmt::format("gpu{:02}", i), 8), i <= 4 ? "leaf0" : "leaf1");
  }
  b.AddNode(MakeNode("login1", 0), "leaf1");
  return Finish(std::move(b));
}

// blocks x spines x leaves, 2 nodes of 8 GPUs per leaf, names n0000...
Cluster BigCluster(int blocks, int spines, int leaves) {
  ClusterBuilder b("big");
  b.SetName("big");
  b.SetLevels({"block", "spine", "leaf"});
  int node = 0;
  for (int bl = 0; bl < blocks; ++bl) {
    std::string block = fmt::format("b{}", bl);
    b.AddSwitch(block, "block", "", 0);
    for (int sp = 0; sp < spines; ++sp) {
      std::string spine = fmt::format("{}s{}", block, sp);
      b.AddSwitch(spine, "spine", block, 0);
      for (int lf = 0; lf < leaves; ++lf) {
        std::string leaf = fmt::format("{}l{}", spine, lf);
        b.AddSwitch(leaf, "leaf", spine, 0);
        for (int k = 0; k < 2; ++k) b.AddNode(MakeNode(fmt::format("n{:04}", node++), 8), leaf);
      }
    }
  }
  return Finish(std::move(b));
}

int CountOccurrences(const std::string& text, const std::string& what) {
  int count = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) {
    ++count;
  }
  return count;
}

TEST(RenderTreeTest, SmallClusterGolden) {
  std::string out = RenderTree(SmallCluster());
  EXPECT_EQ(out.substr(0, out.find('\n')), "train-a");
  EXPECT_NE(out.find("├─ spine0 (spine, 8 nodes, 56 GPUs)\n"), std::string::npos) << out;
  EXPECT_NE(out.find("│  ├─ leaf0 (leaf, 4 nodes, 32 GPUs): gpu[01-04]\n"), std::string::npos);
  EXPECT_NE(out.find("│  └─ leaf1 (leaf, 4 nodes, 24 GPUs): gpu[05-07],login1\n"),
            std::string::npos);
  EXPECT_NE(out.find("│  └─ leaf2 (leaf, 0 nodes, 0 GPUs)\n"), std::string::npos);
  EXPECT_NE(out.find("└─ spine2 (spine, 0 nodes, 0 GPUs)\n"), std::string::npos);
  EXPECT_NE(out.find("\n8 nodes, 56 GPUs; levels spine (3) > leaf (3)\n"), std::string::npos);
  ExpectGolden("render_small.txt", out);
}

TEST(RenderTreeTest, ClusterWithoutGpusLeavesGpuCountsOut) {
  ClusterBuilder b("test");
  b.SetLevels({"leaf"});
  b.AddSwitch("leaf0", "leaf", "", 0);
  b.AddNode(MakeNode("node0", 0), "leaf0");
  std::string out = RenderTree(Finish(std::move(b)));
  EXPECT_EQ(out,
            "(unnamed cluster)\n"
            "└─ leaf0 (leaf, 1 node): node0\n"
            "1 node, 0 GPUs; levels leaf (1)\n");
}

TEST(RenderTreeTest, SmallTreesAreNotElided) {
  std::string out = RenderTree(BigCluster(2, 4, 8));  // exactly 64 leaves
  EXPECT_EQ(out.find("more"), std::string::npos);
  EXPECT_EQ(CountOccurrences(out, "(leaf, "), 64);
}

TEST(RenderTreeTest, LargeTreesElideMiddleLeaves) {
  Cluster c = BigCluster(4, 10, 3);  // 120 leaves, 240 nodes
  std::string out = RenderTree(c);
  EXPECT_EQ(CountOccurrences(out, "(leaf, "), kRenderShownLeaves) << out;
  // Every hidden leaf is accounted for in some "… N more leaves …" line.
  int hidden = 0;
  const std::string ellipsis = "… ";
  for (size_t pos = out.find(ellipsis); pos != std::string::npos;
       pos = out.find(ellipsis, pos + 1)) {
    size_t number = pos + ellipsis.size();
    size_t end = out.find(' ', number);
    ASSERT_EQ(out.compare(end, 12, " more leaves"), 0) << out.substr(pos, 40);
    hidden += std::stoi(out.substr(number, end - number));
  }
  EXPECT_EQ(hidden, 120 - kRenderShownLeaves);
  // The first and last leaves are drawn; totals on drawn switches stay exact.
  EXPECT_NE(out.find("b0s0l0 (leaf, 2 nodes, 16 GPUs): n[0000-0001]"), std::string::npos);
  EXPECT_NE(out.find("b3s9l2 (leaf, 2 nodes, 16 GPUs): n[0238-0239]"), std::string::npos);
  EXPECT_NE(out.find("└─ b3 (block, 60 nodes, 480 GPUs)"), std::string::npos);
  EXPECT_NE(out.find("240 nodes, 1920 GPUs; levels block (4) > spine (40) > leaf (120)"),
            std::string::npos);
  EXPECT_LT(CountOccurrences(out, "\n"), 80);
  ExpectGolden("render_elided.txt", out);
}

TEST(HostfileTest, TreeOrderByDefault) {
  Cluster c = SmallCluster();
  EXPECT_EQ(Hostfile(c, {}, 8),
            "gpu01 slots=8\ngpu02 slots=8\ngpu03 slots=8\ngpu04 slots=8\ngpu05 slots=8\n"
            "gpu06 slots=8\ngpu07 slots=8\nlogin1 slots=8\n");
}

TEST(HostfileTest, RankOrderDuplicatesAndDefaultSlots) {
  Cluster c = SmallCluster();
  int login = c.FindNode("login1");
  int gpu03 = c.FindNode("gpu03");
  // A repeated node, and indices out of range, are skipped; slots default to the GPUs (or 1).
  EXPECT_EQ(Hostfile(c, {login, gpu03, login, -1, 99}, 0), "login1 slots=1\ngpu03 slots=8\n");
  EXPECT_EQ(Hostfile(c, {gpu03}, 4), "gpu03 slots=4\n");
}

TEST(HostfileTest, TreeOrderFollowsSwitchesNotInputOrder) {
  ClusterBuilder b("test");
  b.SetLevels({"spine", "leaf"});
  b.AddSwitch("s0", "spine", "", 0);
  b.AddSwitch("l0", "leaf", "s0", 0);
  b.AddSwitch("l1", "leaf", "s0", 0);
  b.AddNode(MakeNode("b", 1), "l1");
  b.AddNode(MakeNode("a", 1), "l0");
  EXPECT_EQ(Hostfile(Finish(std::move(b)), {}, 1), "a slots=1\nb slots=1\n");
}

}  // namespace
}  // namespace railyard::topo
