#include "railyard/place/pod_policy.h"

#include <gtest/gtest.h>

#include <map>

#include "railyard/place/test_cluster_testing.h"
#include "railyard/topo/kube_export.h"

namespace railyard::place {
namespace {

// "Spine Row" is not valid label text, so its label key is hashed.
topo::Cluster Cluster() { return TwoSpineTestCluster("Spine Row"); }

ResolvedPod Resolve(const topo::Cluster& c, PodRequest pod) {
  auto r = ResolvePod(c, pod);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return r.ok() ? *r : ResolvedPod{};
}

std::vector<std::string> Passed(const FilterVerdict& v, const std::vector<std::string>& names) {
  std::vector<std::string> out;
  for (size_t i : v.passed) out.push_back(names[i]);
  return out;
}

std::map<std::string, std::string> Failed(const FilterVerdict& v,
                                          const std::vector<std::string>& names) {
  std::map<std::string, std::string> out;
  for (const auto& [i, reason] : v.failed) out[names[i]] = reason;
  return out;
}

// A coredns-shaped pod: no gang label, no topology annotation, on a cluster with CPU nodes
// Railyard's topology does not list.
TEST(PodPolicyTest, PodWithoutGangOrTopologyPassesEveryNodeWithNeutralScores) {
  const topo::Cluster c = Cluster();
  ResolvedPod pod = Resolve(c, {});
  EXPECT_FALSE(pod.railyard);
  const std::vector<std::string> names = {"cpu-a", "n0", "cpu-b", "n4"};
  FilterVerdict v = FilterNodes(c, pod, names, {0}, {"n4"});
  EXPECT_EQ(Passed(v, names), names);
  EXPECT_TRUE(v.failed.empty());
  EXPECT_EQ(ScoreNodes(c, pod, names, {0}), std::vector<int>(4, 0));
  // A label of another tool makes no pod Railyard's either.
  ResolvedPod kueue = Resolve(c, {.required_topology = "cloud.example.com/topology-block"});
  EXPECT_FALSE(kueue.railyard);
  EXPECT_EQ(Passed(FilterNodes(c, kueue, names, {}, {}), names), names);
}

TEST(PodPolicyTest, GangPodFailsNodesOutsideTheTopologyWithAReason) {
  const topo::Cluster c = Cluster();
  ResolvedPod pod = Resolve(c, {.group = "job1"});
  EXPECT_TRUE(pod.railyard);
  const std::vector<std::string> names = {"cpu-a", "n0", "n3"};
  FilterVerdict v = FilterNodes(c, pod, names, {}, {"n3"});
  EXPECT_EQ(Passed(v, names), std::vector<std::string>({"n0"}));
  auto failed = Failed(v, names);
  ASSERT_EQ(failed.size(), 2u);
  EXPECT_NE(failed["cpu-a"].find("not in the Railyard topology"), std::string::npos);
  EXPECT_NE(failed["cpu-a"].find("gang 'job1'"), std::string::npos);
  EXPECT_NE(failed["n3"].find("excluded"), std::string::npos);
}

TEST(PodPolicyTest, RequiredLevelAcceptsNameLabelKeyHashedKeyAndHostname) {
  const topo::Cluster c = Cluster();
  const std::string hashed = topo::LevelLabelKey("Spine Row");
  ASSERT_NE(hashed, "railyard.io/Spine Row");  // the export hashes this one
  EXPECT_EQ(*ResolveLevel(c, "Spine Row"), 0);
  EXPECT_EQ(*ResolveLevel(c, hashed), 0);
  EXPECT_EQ(*ResolveLevel(c, "railyard.io/leaf"), 1);
  EXPECT_EQ(*ResolveLevel(c, "leaf"), 1);
  EXPECT_EQ(*ResolveLevel(c, "kubernetes.io/hostname"), HostnameLevel(c));
  EXPECT_EQ(*ResolveLevel(c, "cloud.example.com/block"), -1);
  auto bad = ResolveLevel(c, "railyard.io/rack");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'railyard.io/rack'"), std::string::npos);
  EXPECT_NE(bad.status().message().find(hashed), std::string::npos);  // lists the keys
  EXPECT_FALSE(ResolveLevel(c, "rack").ok());

  // The hashed key keeps the gang under one spine.
  const std::vector<std::string> names = {"n1", "n2", "n4"};
  ResolvedPod spine = Resolve(c, {.group = "job1", .required_topology = hashed});
  EXPECT_EQ(spine.required_level, 0);
  FilterVerdict v = FilterNodes(c, spine, names, {0}, {});
  EXPECT_EQ(Passed(v, names), std::vector<std::string>({"n1", "n2"}));
  EXPECT_NE(Failed(v, names)["n4"].find("spine0"), std::string::npos);

  // kubernetes.io/hostname: the whole gang on the node it already uses.
  ResolvedPod host = Resolve(c, {.group = "job1", .required_topology = "kubernetes.io/hostname"});
  EXPECT_TRUE(host.railyard);
  const std::vector<std::string> all = {"n0", "n1", "n4"};
  FilterVerdict hv = FilterNodes(c, host, all, {0}, {});
  EXPECT_EQ(Passed(hv, all), std::vector<std::string>({"n0"}));
  EXPECT_NE(Failed(hv, all)["n1"].find("already on n0"), std::string::npos);
  // Nothing bound yet: every topology node passes.
  EXPECT_EQ(FilterNodes(c, host, all, {}, {}).passed.size(), 3u);

  // Railyard's own annotation takes a level name; an unknown one is an error naming it.
  EXPECT_EQ(Resolve(c, {.group = "g", .required_level = "leaf"}).required_level, 1);
  auto unknown = ResolvePod(c, {.group = "g", .required_level = "rack"});
  ASSERT_FALSE(unknown.ok());
  EXPECT_NE(unknown.status().message().find("railyard.io/required-level"), std::string::npos);
  EXPECT_FALSE(ResolvePod(c, {.group = "g", .required_level = "cloud.example.com/block"}).ok());
}

TEST(PodPolicyTest, RequiredLevelOnlyConstrainsItsOwnGang) {
  const topo::Cluster c = Cluster();
  ResolvedPod other = Resolve(c, {.group = "job2", .required_topology = "railyard.io/leaf"});
  const std::vector<std::string> names = {"n4"};
  // job2 has nothing bound: n4 passes even though job1 sits on leaf0.
  EXPECT_EQ(FilterNodes(c, other, names, {}, {}).passed.size(), 1u);
}

TEST(PodPolicyTest, ScoresFollowClosenessToTheBoundGang) {
  const topo::Cluster c = Cluster();
  ResolvedPod pod = Resolve(c, {.group = "job1"});
  const std::vector<std::string> names = {"n0", "n1", "n2", "n4", "ghost"};
  EXPECT_EQ(ScoreNodes(c, pod, names, {}), std::vector<int>(5, 0));  // nothing bound
  // n0 holds a pod: the same node and its leaf 10, the same spine 5, nothing in common 0.
  EXPECT_EQ(ScoreNodes(c, pod, names, {0}), std::vector<int>({10, 10, 5, 0, 0}));
  // A preferred level alone makes the pod Railyard's but, with no gang, scores stay 0.
  ResolvedPod preferred = Resolve(c, {.preferred_topology = "railyard.io/leaf"});
  EXPECT_TRUE(preferred.railyard);
  EXPECT_EQ(ScoreNodes(c, preferred, names, {0}), std::vector<int>(5, 0));
}

}  // namespace
}  // namespace railyard::place
