#include "railyard/topo/kube_export.h"

#include <gtest/gtest.h>

#include "railyard/topo/golden_testing.h"

#include <cstdlib>
#include <set>
#include <string>

#include "railyard/base/files.h"

namespace railyard::topo {
namespace {

using testing::ExpectGolden;

bool IsValidLabel(const std::string& s) {
  auto alnum = [](char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0; };
  if (s.empty()) return true;
  if (s.size() > 63 || !alnum(s.front()) || !alnum(s.back())) return false;
  for (char c : s) {
    if (!alnum(c) && c != '-' && c != '_' && c != '.') return false;
  }
  return true;
}

Node MakeNode(std::string name, int gpus = 8) {
  Node n;
  n.name = std::move(name);
  n.gpu_count = gpus;
  return n;
}

// block0 > spine0 > {leaf0: n0 n1, "Leaf #1 (row B)": n2}; the rack level name has a space.
Cluster SmallCluster() {
  ClusterBuilder b("test");
  b.SetName("train-a");
  b.SetLevels({"block", "spine", "rack group"});
  b.AddSwitch("block0", "block", "", 0);
  b.AddSwitch("spine0", "spine", "block0", 0);
  b.AddSwitch("leaf0", "rack group", "spine0", 0);
  b.AddSwitch("Leaf #1 (row B)", "rack group", "spine0", 0);
  b.AddNode(MakeNode("n0"), "leaf0");
  b.AddNode(MakeNode("n1"), "leaf0");
  b.AddNode(MakeNode("weird node$"), "Leaf #1 (row B)");
  Result<Cluster> c = std::move(b).Finish();
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return std::move(c).value();
}

TEST(KubeLabelValueTest, KeepsValidNames) {
  for (std::string_view s : {"leaf0", "a", "A.b_c-9", "9"}) {
    EXPECT_EQ(KubeLabelValue(s), s);
  }
  std::string max(63, 'a');
  EXPECT_EQ(KubeLabelValue(max), max);
}

TEST(KubeLabelValueTest, HashesInvalidAndLongNamesDistinctly) {
  const std::string long_a = std::string(70, 'a');
  const std::string long_b = std::string(69, 'a') + "b";
  const std::vector<std::string> names = {"Leaf #1 (row B)",
                                          "Leaf #1 (row-B)",
                                          "Leaf-#1 (row B)",
                                          "-leaf",
                                          "leaf-",
                                          "_x_",
                                          "rack/12",
                                          "rack:12",
                                          "日本",
                                          long_a,
                                          long_b,
                                          ".",
                                          "a b",
                                          "a-b"};
  std::set<std::string> seen;
  for (const std::string& n : names) {
    std::string v = KubeLabelValue(n);
    EXPECT_TRUE(IsValidLabel(v)) << n << " -> " << v;
    EXPECT_FALSE(v.empty()) << n;
    EXPECT_TRUE(seen.insert(v).second) << n << " collides: " << v;
    EXPECT_EQ(KubeLabelValue(n), v) << "must be stable";
  }
  // Readable prefix, then 12 hex digits.
  std::string v = KubeLabelValue("Leaf #1 (row B)");
  EXPECT_EQ(v.rfind("Leaf-1-row-B-", 0), 0u) << v;
  EXPECT_EQ(v.size(), std::string("Leaf-1-row-B-").size() + 12);
  EXPECT_EQ(KubeLabelValue(long_a).size(), 63u);
  EXPECT_EQ(KubeLabelValue(long_a).substr(0, 50), std::string(50, 'a'));
  // A name with no usable character is only the hash.
  EXPECT_EQ(KubeLabelValue("日本").size(), 12u);
}

TEST(KubeExportTest, LabelsEveryLevelTopFirst) {
  Cluster c = SmallCluster();
  auto labels = NodeLabels(c, 2);
  ASSERT_EQ(labels.size(), 4u);
  EXPECT_EQ(labels[0], std::make_pair(std::string("railyard.io/block"), std::string("block0")));
  EXPECT_EQ(labels[1], std::make_pair(std::string("railyard.io/spine"), std::string("spine0")));
  EXPECT_EQ(labels[2].first, LevelLabelKey("rack group"));
  EXPECT_EQ(labels[2].second, KubeLabelValue("Leaf #1 (row B)"));
  EXPECT_EQ(labels[3], std::make_pair(std::string(kClusterLabel), std::string("train-a")));
  for (const auto& [key, value] : labels) {
    EXPECT_TRUE(IsValidLabel(key.substr(key.find('/') + 1))) << key;
    EXPECT_TRUE(IsValidLabel(value)) << value;
  }
}

TEST(KubeExportTest, KubectlCommandsGolden) {
  std::string out = KubectlLabelCommands(SmallCluster());
  EXPECT_NE(out.find("kubectl label node n0 railyard.io/block=block0 railyard.io/spine=spine0 "),
            std::string::npos);
  EXPECT_NE(out.find("kubectl label node 'weird node$' "), std::string::npos) << out;
  ExpectGolden("kube_labels.sh", out);
}

TEST(KubeExportTest, LabelsJsonMatchesCommands) {
  Cluster c = SmallCluster();
  nlohmann::json j = NodeLabelsJson(c);
  ASSERT_EQ(j.size(), 3u);
  EXPECT_EQ(j["n1"]["railyard.io/block"], "block0");
  EXPECT_EQ(j["n1"][LevelLabelKey("rack group")], "leaf0");
  EXPECT_EQ(j["n1"][std::string(kClusterLabel)], "train-a");
  EXPECT_EQ(j["weird node$"].size(), 4u);
  ExpectGolden("kube_labels.json", j.dump(2) + "\n");
}

TEST(KubeExportTest, KueueManifestGolden) {
  Cluster c = SmallCluster();
  std::string out = KueueTopologyManifest(c, "train-a");
  EXPECT_NE(out.find("apiVersion: kueue.x-k8s.io/v1beta1\nkind: Topology\n"), std::string::npos);
  // Levels top first, hostname last.
  size_t block = out.find("nodeLabel: \"railyard.io/block\"");
  size_t spine = out.find("nodeLabel: \"railyard.io/spine\"");
  size_t host = out.find("nodeLabel: \"kubernetes.io/hostname\"");
  ASSERT_NE(block, std::string::npos);
  EXPECT_LT(block, spine);
  EXPECT_LT(spine, host);
  EXPECT_NE(out.find("topologyName: \"train-a\""), std::string::npos);
  EXPECT_NE(out.find("cluster.railyard.io/name: \"train-a\""), std::string::npos);
  ExpectGolden("kueue_topology.yaml", out);

  std::string v2 = KueueTopologyManifest(c, "x", "kueue.x-k8s.io/v1beta2");
  EXPECT_NE(v2.find("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor"), std::string::npos);
}

TEST(KubeExportTest, KueueObjectNameIsSanitised) {
  Cluster c = SmallCluster();
  EXPECT_NE(KueueTopologyManifest(c, "Train A!").find("name: \"train-a\""), std::string::npos);
  EXPECT_NE(KueueTopologyManifest(c, "").find("name: \"railyard\""), std::string::npos);
  EXPECT_NE(KueueTopologyManifest(c, "--").find("name: \"railyard\""), std::string::npos);
}

TEST(KubeExportTest, UnnamedClusterGetsDefaultLabelAndDeepTreeWarns) {
  ClusterBuilder b("test");
  std::vector<std::string> levels;
  for (int i = 0; i < 16; ++i) levels.push_back("l" + std::to_string(i));
  b.SetLevels(levels);
  for (int i = 0; i < 16; ++i) {
    b.AddSwitch("s" + std::to_string(i), levels[i], i == 0 ? "" : "s" + std::to_string(i - 1), 0);
  }
  b.AddNode(MakeNode("n0"), "s15");
  Result<Cluster> c = std::move(b).Finish();
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(NodeLabels(*c, 0).back().second, kDefaultClusterLabelValue);
  EXPECT_NE(KueueTopologyManifest(*c, "deep").find("# WARNING"), std::string::npos);
  EXPECT_EQ(KueueTopologyManifest(SmallCluster(), "x").find("WARNING"), std::string::npos);
}

}  // namespace
}  // namespace railyard::topo
