#include "railyard/topo/kube_export.h"

#include <fmt/ranges.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <set>
#include <string>

#include "railyard/base/files.h"
#include "railyard/topo/golden_testing.h"
#include "railyard/topo/internal/kueue_check_testing.h"

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

std::string Manifest(const Cluster& c, std::string name, KueueApi api = kDefaultKueueApi) {
  Result<std::string> out = KueueTopologyManifest(c, std::move(name), api);
  EXPECT_TRUE(out.ok()) << out.status().ToString();
  return out.ok() ? *out : "";
}

// A cluster of `levels` levels, one switch per level, one node.
Cluster Chain(int levels) {
  ClusterBuilder b("test");
  std::vector<std::string> names;
  for (int i = 0; i < levels; ++i) names.push_back("l" + std::to_string(i));
  b.SetLevels(names);
  for (int i = 0; i < levels; ++i) {
    b.AddSwitch("s" + std::to_string(i), names[i], i == 0 ? "" : "s" + std::to_string(i - 1), 0);
  }
  b.AddNode(MakeNode("n0"), "s" + std::to_string(levels - 1));
  Result<Cluster> c = std::move(b).Finish();
  EXPECT_TRUE(c.ok()) << c.status().ToString();
  return c.ok() ? *c : Cluster{};
}

TEST(KubeExportTest, KueueManifestGolden) {
  Cluster c = SmallCluster();
  std::string out = Manifest(c, "train-a");
  EXPECT_NE(out.find("apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology\n"), std::string::npos);
  // Levels top first, hostname last.
  size_t block = out.find("nodeLabel: railyard.io/block\n");
  size_t spine = out.find("nodeLabel: railyard.io/spine\n");
  size_t host = out.find("nodeLabel: kubernetes.io/hostname\n");
  ASSERT_NE(block, std::string::npos);
  EXPECT_LT(block, spine);
  EXPECT_LT(spine, host);
  EXPECT_NE(out.find("topologyName: train-a\n"), std::string::npos);
  EXPECT_NE(out.find("cluster.railyard.io/name: train-a\n"), std::string::npos);
  ExpectGolden("kueue_topology.yaml", out);
}

TEST(KubeExportTest, KueueApiVersionsNameTheirObjects) {
  Cluster c = SmallCluster();
  // v1alpha1 (Kueue 0.9-0.13): the Topology is alpha, the ResourceFlavor stays v1beta1.
  std::string alpha = Manifest(c, "x", KueueApi::kV1alpha1);
  EXPECT_NE(alpha.find("apiVersion: kueue.x-k8s.io/v1alpha1\nkind: Topology\n"), std::string::npos);
  EXPECT_NE(alpha.find("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\n"),
            std::string::npos);
  EXPECT_EQ(alpha.find("v1beta2"), std::string::npos);
  std::string beta1 = Manifest(c, "x", KueueApi::kV1beta1);
  EXPECT_NE(beta1.find("apiVersion: kueue.x-k8s.io/v1beta1\nkind: Topology\n"), std::string::npos);
  EXPECT_NE(beta1.find("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor\n"),
            std::string::npos);
  std::string beta2 = Manifest(c, "x", KueueApi::kV1beta2);
  EXPECT_NE(beta2.find("apiVersion: kueue.x-k8s.io/v1beta2\nkind: ResourceFlavor\n"),
            std::string::npos);

  EXPECT_EQ(*ParseKueueApi("v1alpha1"), KueueApi::kV1alpha1);
  EXPECT_EQ(*ParseKueueApi("kueue.x-k8s.io/v1beta1"), KueueApi::kV1beta1);
  EXPECT_EQ(KueueApiName(*ParseKueueApi("v1beta2")), "v1beta2");
  Result<KueueApi> bad = ParseKueueApi("v1");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("expected v1alpha1 (Kueue 0.9-0.13)"), std::string::npos);
}

TEST(KubeExportTest, KueueManifestsPassTheCheckFromKueuesApiTypes) {
  // internal/kueue_check_testing.h: rules of apis/kueue/{v1alpha1,v1beta1,v1beta2} at tags
  // v0.9.0 to v0.15.0.
  for (KueueApi api : {KueueApi::kV1alpha1, KueueApi::kV1beta1, KueueApi::kV1beta2}) {
    SCOPED_TRACE(std::string(KueueApiName(api)));
    for (const Cluster& c : {SmallCluster(), Chain(1), Chain(KueueMaxLevels(api) - 1)}) {
      std::string out = Manifest(c, "Train A!", api);
      EXPECT_EQ(internal::CheckKueueManifest(out, api), std::vector<std::string>{}) << out;
    }
  }
}

TEST(KubeExportTest, KueueCheckCatchesWhatKueueRejects) {
  // The check is only worth something if it fails where Kueue would.
  Cluster c = SmallCluster();
  std::string good = Manifest(c, "x", KueueApi::kV1beta2);
  auto errors = [](const std::string& text, KueueApi api) {
    return fmt::format("{}", fmt::join(internal::CheckKueueManifest(text, api), "\n"));
  };
  auto replace = [](std::string s, const std::string& a, const std::string& b) {
    size_t at = s.find(a);
    EXPECT_NE(at, std::string::npos) << a;
    if (at != std::string::npos) s.replace(at, a.size(), b);
    return s;
  };
  EXPECT_NE(errors(good, KueueApi::kV1alpha1).find("expected kueue.x-k8s.io/v1alpha1"),
            std::string::npos);
  EXPECT_EQ(errors(replace(good, "  - nodeLabel: railyard.io/block\n", ""), KueueApi::kV1beta2),
            "");  // fewer levels are fine
  EXPECT_NE(
      errors(replace(good, "  - nodeLabel: railyard.io/spine\n", "  - {}\n"), KueueApi::kV1beta2)
          .find("nodeLabel: required"),
      std::string::npos);
  std::string hostname_first =
      replace(good, "  - nodeLabel: railyard.io/block\n",
              "  - nodeLabel: kubernetes.io/hostname\n  - nodeLabel: railyard.io/block\n");
  EXPECT_NE(errors(hostname_first, KueueApi::kV1beta2).find("lowest level"), std::string::npos);
  EXPECT_NE(errors(hostname_first, KueueApi::kV1beta2).find("must be unique"), std::string::npos);
  EXPECT_NE(errors(replace(good, "railyard.io/block", "railyard.io/Block!"), KueueApi::kV1beta2)
                .find("fails the Pattern"),
            std::string::npos);
  EXPECT_NE(errors(replace(good, "  nodeLabels:\n    cluster.railyard.io/name: train-a\n", ""),
                   KueueApi::kV1beta2)
                .find("at least one nodeLabel is required"),
            std::string::npos);
  EXPECT_NE(errors(replace(good, "  levels:\n", "  extra: 1\n  levels:\n"), KueueApi::kV1beta2)
                .find("spec.extra: unknown field"),
            std::string::npos);
  EXPECT_NE(errors(replace(good, "topologyName: x", "topologyName: y"), KueueApi::kV1beta2)
                .find("no Topology 'y'"),
            std::string::npos);
}

TEST(KubeExportTest, KueueObjectNameIsSanitised) {
  Cluster c = SmallCluster();
  EXPECT_NE(Manifest(c, "Train A!").find("name: train-a\n"), std::string::npos);
  EXPECT_NE(Manifest(c, "").find("name: railyard\n"), std::string::npos);
  EXPECT_NE(Manifest(c, "--").find("name: railyard\n"), std::string::npos);
  EXPECT_NE(Manifest(c, "007").find("name: \"007\"\n"), std::string::npos);
}

TEST(KubeExportTest, UnnamedClusterGetsDefaultLabelAndTooDeepTreeIsRefused) {
  Cluster deep = Chain(16);
  EXPECT_EQ(NodeLabels(deep, 0).back().second, kDefaultClusterLabelValue);
  // 16 levels + hostname exceed every version's maxItems; 7 + hostname fit v1alpha1's 8.
  for (KueueApi api : {KueueApi::kV1alpha1, KueueApi::kV1beta1, KueueApi::kV1beta2}) {
    Result<std::string> out = KueueTopologyManifest(deep, "deep", api);
    ASSERT_FALSE(out.ok());
    EXPECT_EQ(out.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(out.status().message().find("accepts at most"), std::string::npos);
  }
  EXPECT_TRUE(KueueTopologyManifest(Chain(7), "x", KueueApi::kV1alpha1).ok());
  Result<std::string> alpha = KueueTopologyManifest(Chain(8), "x", KueueApi::kV1alpha1);
  ASSERT_FALSE(alpha.ok());
  EXPECT_NE(alpha.status().message().find("at most 8"), std::string::npos);
  EXPECT_TRUE(KueueTopologyManifest(Chain(15), "x", KueueApi::kV1beta2).ok());
}

}  // namespace
}  // namespace railyard::topo
