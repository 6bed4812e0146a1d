#include "railyard/http/extender.h"

#include <gtest/gtest.h>

#include "railyard/place/test_cluster_testing.h"

namespace railyard::http {
namespace {

using nlohmann::json;

topo::Cluster Cluster() { return place::TwoSpineTestCluster(); }

// What kube-scheduler sends with nodeCacheCapable: Go field names, NodeNames, Nodes null.
json Args(std::string group, std::vector<std::string> nodes, std::string required = "") {
  json pod = {{"metadata",
               {{"name", "trainer-0"},
                {"namespace", "ml"},
                {"labels", json::object()},
                {"annotations", json::object()}}},
              {"spec", {{"schedulerName", "default-scheduler"}}}};
  if (!group.empty()) pod["metadata"]["labels"]["railyard.io/group"] = group;
  if (!required.empty()) {
    pod["metadata"]["annotations"]["kueue.x-k8s.io/podset-required-topology"] = required;
  }
  return {{"Pod", pod}, {"Nodes", nullptr}, {"NodeNames", nodes}};
}

TEST(ExtenderTest, KeysMatchCaseInsensitively) {
  json j = {{"NodeNames", 1}, {"pod", 2}};
  ASSERT_NE(FindKey(j, "nodenames"), nullptr);
  ASSERT_NE(FindKey(j, "Pod"), nullptr);
  EXPECT_EQ(FindKey(j, "Nodes"), nullptr);
  EXPECT_EQ(FindKey(json::array(), "Pod"), nullptr);
}

TEST(ExtenderTest, FilterFailsUnknownAndExcludedNodesWithReasons) {
  Extender ext(Cluster());
  ext.SetExcluded({"n3"});
  auto r = ext.Filter(Args("job1", {"n0", "n3", "ghost"}));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["NodeNames"], json({"n0"}));
  EXPECT_EQ((*r)["Nodes"], nullptr);
  EXPECT_NE((*r)["FailedNodes"]["ghost"].get<std::string>().find("not in the Railyard topology"),
            std::string::npos);
  EXPECT_NE((*r)["FailedNodes"]["n3"].get<std::string>().find("excluded"), std::string::npos);
  // The same reasons as unresolvable, so preemption leaves those nodes alone.
  EXPECT_EQ((*r)["FailedAndUnresolvableNodes"], (*r)["FailedNodes"]);
  EXPECT_EQ((*r)["Error"], "");
  EXPECT_EQ(ext.counters().nodes_filtered_out, 2u);
}

// What kube-scheduler sends for a coredns pod when the extender is consulted for every pod:
// whole Node objects, no gang label, no annotation. Nothing is filtered and every score is 0.
TEST(ExtenderTest, PodWithoutGangPassesThroughUntouched) {
  Extender ext(Cluster());
  ext.SetExcluded({"n3"});
  ASSERT_TRUE(ext.RecordBound("job1", "n0").ok());
  json args = {{"Pod",
                {{"metadata",
                  {{"name", "coredns-5d78c9869d-7xq2k"},
                   {"namespace", "kube-system"},
                   {"labels", {{"k8s-app", "kube-dns"}}}}},
                 {"spec", {{"priorityClassName", "system-cluster-critical"}}}}},
               {"Nodes",
                {{"items",
                  {{{"metadata", {{"name", "cpu-a"}}}},
                   {{"metadata", {{"name", "cpu-b"}}}},
                   {{"metadata", {{"name", "n3"}}}}}}}},
               {"NodeNames", nullptr}};
  auto f = ext.Filter(args);
  ASSERT_TRUE(f.ok()) << f.status().ToString();
  ASSERT_EQ((*f)["Nodes"]["items"].size(), 3u);
  EXPECT_EQ((*f)["Nodes"]["items"][0]["metadata"]["name"], "cpu-a");
  EXPECT_TRUE((*f)["FailedNodes"].empty());
  EXPECT_TRUE((*f)["FailedAndUnresolvableNodes"].empty());
  auto p = ext.Prioritize(args);
  ASSERT_TRUE(p.ok()) << p.status().ToString();
  ASSERT_EQ(p->size(), 3u);
  for (const auto& hp : *p) EXPECT_EQ(hp["Score"], 0) << hp.dump();
}

TEST(ExtenderTest, HostnameAndForeignTopologyAnnotations) {
  Extender ext(Cluster());
  ASSERT_TRUE(ext.RecordBound("job1", "n0").ok());
  auto host = ext.Filter(Args("job1", {"n0", "n1"}, "kubernetes.io/hostname"));
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  EXPECT_EQ((*host)["NodeNames"], json({"n0"}));
  // Another tool's label is left to that tool: no constraint, no error.
  auto foreign = ext.Filter(Args("job1", {"n0", "n4"}, "cloud.example.com/block"));
  ASSERT_TRUE(foreign.ok()) << foreign.status().ToString();
  EXPECT_EQ((*foreign)["NodeNames"], json({"n0", "n4"}));
}

TEST(ExtenderTest, BindingsAreIdempotentSoAWatcherCanReplayThem) {
  Extender ext(Cluster());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(ext.RecordBound("job1", "n0").ok());
  ASSERT_TRUE(ext.RecordBound("job1", "n2").ok());
  EXPECT_EQ(ext.bound_pods(), 2u);
  ext.ForgetBound("job1", "n0");
  ext.ForgetBound("job1", "n0");
  ext.ForgetBound("nobody", "n0");
  EXPECT_EQ(ext.bound_pods(), 1u);
  auto r = ext.Prioritize(Args("job1", {"n3", "n1"}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ((*r)[0]["Score"], 10);  // leaf1 of n2
  EXPECT_EQ((*r)[1]["Score"], 5);   // spine0 only: n0 was forgotten
}

TEST(ExtenderTest, FilterWithFullNodeObjectsReturnsThem) {
  Extender ext(Cluster());
  json args = Args("job1", {});
  args.erase("NodeNames");
  args["Nodes"] = {{"items",
                    {{{"metadata", {{"name", "n1"}, {"labels", {{"a", "b"}}}}}},
                     {{"metadata", {{"name", "nX"}}}}}}};
  auto r = ext.Filter(args);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ((*r)["Nodes"]["items"].size(), 1u);
  EXPECT_EQ((*r)["Nodes"]["items"][0]["metadata"]["labels"]["a"], "b");  // passed through whole
  EXPECT_TRUE((*r)["FailedNodes"].contains("nX"));
}

TEST(ExtenderTest, RequiredLevelKeepsTheGroupInOneDomain) {
  Extender ext(Cluster());
  ASSERT_TRUE(ext.RecordBound("job1", "n0").ok());
  auto r = ext.Filter(Args("job1", {"n1", "n2", "n4"}, "railyard.io/spine"));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ((*r)["NodeNames"], json({"n1", "n2"}));  // spine0 only
  EXPECT_NE((*r)["FailedNodes"]["n4"].get<std::string>().find("spine0"), std::string::npos);
  // Another group is not constrained by job1's pods.
  auto other = ext.Filter(Args("job2", {"n4"}, "spine"));
  EXPECT_EQ((*other)["NodeNames"], json({"n4"}));
  // An unknown level is a clear error.
  auto bad = ext.Filter(Args("job1", {"n1"}, "rack"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'rack'"), std::string::npos);
}

TEST(ExtenderTest, PrioritizeScoresClosenessToBoundPods) {
  Extender ext(Cluster());
  auto none = ext.Prioritize(Args("job1", {"n0", "n4"}));
  ASSERT_TRUE(none.ok());
  for (const auto& hp : *none) EXPECT_EQ(hp["Score"], 0);
  ASSERT_TRUE(ext.RecordBound("job1", "n0").ok());
  auto r = ext.Prioritize(Args("job1", {"n1", "n2", "n4", "ghost"}));
  ASSERT_TRUE(r.ok());
  std::map<std::string, int> score;
  for (const auto& hp : *r) score[hp["Host"]] = hp["Score"];
  EXPECT_EQ(score["n1"], 10);  // same leaf
  EXPECT_EQ(score["n2"], 5);   // same spine
  EXPECT_EQ(score["n4"], 0);   // nothing in common
  EXPECT_EQ(score["ghost"], 0);
  ext.ForgetBound("job1", "n0");
  EXPECT_EQ(ext.bound_pods(), 0u);
}

TEST(ExtenderTest, MalformedArgsAreRejectedAndCounted) {
  Extender ext(Cluster());
  EXPECT_FALSE(ext.Filter(json::array()).ok());
  EXPECT_FALSE(ext.Filter(json{{"Pod", 3}}).ok());
  EXPECT_FALSE(ext.Filter(json{{"Pod", json::object()}}).ok());  // no nodes at all
  auto bad = ext.Prioritize(json{{"Pod", json::object()}, {"NodeNames", {1, 2}}});
  EXPECT_FALSE(bad.ok());
  auto level = ext.Filter(Args("job1", {"n0"}, "railyard.io/rack"));
  ASSERT_FALSE(level.ok());
  EXPECT_NE(level.status().message().find("podset-required-topology"), std::string::npos);
  EXPECT_EQ(ext.counters().bad_requests, 5u);
  EXPECT_EQ(ext.RecordBound("g", "ghost").code(), StatusCode::kNotFound);
  EXPECT_EQ(ext.RecordBound("", "n0").code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace railyard::http
