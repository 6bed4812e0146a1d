#include "railyard/topo/model.h"

#include <gtest/gtest.h>

namespace railyard::topo {
namespace {

Node N(std::string name, int gpus = 8) {
  Node n;
  n.name = std::move(name);
  n.gpu_count = gpus;
  return n;
}

Result<Cluster> TwoLevel() {
  ClusterBuilder b("t.yaml");
  b.SetLevels({"spine", "leaf"});
  b.AddSwitch("s0", "spine", "", 0);
  b.AddSwitch("l0", "leaf", "s0", 0);
  b.AddSwitch("l1", "leaf", "s0", 0);
  b.AddNode(N("n0"), "l0");
  b.AddNode(N("n1"), "l0");
  b.AddNode(N("n2"), "l1");
  return std::move(b).Finish();
}

TEST(ModelTest, BuildsIndicesAndAnswersDomains) {
  auto c = TwoLevel();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->leaf_level(), 1);
  EXPECT_EQ(c->DomainOf(c->FindNode("n2"), 1), c->FindSwitch("l1"));
  EXPECT_EQ(c->DomainOf(c->FindNode("n2"), 0), c->FindSwitch("s0"));
  EXPECT_EQ(c->NodesUnder(c->FindSwitch("s0")), (std::vector<int>{0, 1, 2}));
  EXPECT_EQ(c->TotalGpus(), 24);
  EXPECT_EQ(c->switches[0].children, (std::vector<int>{1, 2}));
}

TEST(ModelTest, RejectsBrokenTrees) {
  auto fails = [](auto setup, std::string needle) {
    ClusterBuilder b("bad.yaml");
    b.SetLevels({"spine", "leaf"});
    setup(b);
    auto c = std::move(b).Finish();
    ASSERT_FALSE(c.ok());
    EXPECT_NE(c.status().message().find(needle), std::string::npos) << c.status().message();
    EXPECT_NE(c.status().message().find("bad.yaml"), std::string::npos);
  };
  fails([](ClusterBuilder& b) { b.AddSwitch("l0", "leaf", "l0", 0, 3); }, "own parent");
  fails(
      [](ClusterBuilder& b) {
        b.AddSwitch("s0", "spine", "", 0);
        b.AddSwitch("l0", "leaf", "l1", 0);
        b.AddSwitch("l1", "leaf", "l0", 0);
      },
      "one level up");
  fails(
      [](ClusterBuilder& b) {
        b.AddSwitch("s0", "spine", "", 0);
        b.AddSwitch("l0", "leaf", "s0", 0);
        b.AddSwitch("l1", "leaf", "s0", 0);
        b.AddNode(N("n0"), "l0");
        b.AddNode(N("n0"), "l1");
      },
      "under two leaves");
  fails([](ClusterBuilder& b) { b.AddSwitch("x", "core", "", 0, 7); }, "bad.yaml:7");
  fails([](ClusterBuilder& b) { b.AddNode(N("n0"), "nowhere"); }, "'nowhere'");
  fails(
      [](ClusterBuilder& b) {
        b.AddSwitch("s0", "spine", "", 0);
        b.AddNode(N("n0"), "s0");
      },
      "leaf-level");
}

TEST(ModelTest, PathClassNames) {
  EXPECT_EQ(*ParsePathClass("PXB"), PathClass::kPXB);
  EXPECT_EQ(PathClassName(PathClass::kNODE), "NODE");
  EXPECT_FALSE(ParsePathClass("pix").ok());
}

}  // namespace
}  // namespace railyard::topo
