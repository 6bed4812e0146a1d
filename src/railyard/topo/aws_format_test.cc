#include "railyard/topo/aws_format.h"

#include <gtest/gtest.h>

#include <string>

#include "railyard/base/files.h"
#include "railyard/topo/yaml_format.h"

namespace railyard::topo {
namespace {

std::string TestData(const std::string& name) {
  return std::string(RAILYARD_TOPO_TESTDATA) + "/" + name;
}

Result<Cluster> ParseFile(const std::string& name) {
  std::string path = TestData(name);
  RY_ASSIGN_OR_RETURN(std::string text, base::ReadFile(path));
  return ParseAwsInstanceTopology(text, path);
}

std::string ErrorOf(std::string_view json) {
  auto c = ParseAwsInstanceTopology(json, "aws.json");
  EXPECT_FALSE(c.ok()) << json;
  if (c.ok()) return "";
  EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
  return c.status().message();
}

#define EXPECT_HAS(haystack, needle)                               \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
      << (haystack) << "\nmissing: " << (needle)

TEST(AwsFormatTest, ReadsADescribeInstanceTopologyPage) {
  auto c = ParseFile("aws_page.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->levels, (std::vector<std::string>{"layer1", "layer2", "layer3"}));
  // One layer-1 node, two layer-2 nodes, three layer-3 nodes.
  ASSERT_EQ(c->switches.size(), 6u);
  EXPECT_EQ(c->switches[0].name, "nn-4a8b1e0c33d2f7a10");
  EXPECT_EQ(c->switches[0].level, 0);
  ASSERT_EQ(c->nodes.size(), 5u);
  EXPECT_EQ(c->nodes[0].name, "i-0a1b2c3d4e5f60001");
  EXPECT_EQ(c->nodes[0].gpu_count, 8);  // p5.48xlarge
  EXPECT_EQ(c->nodes[4].gpu_count, 0);  // trn1: not GPUs
  EXPECT_EQ(c->TotalGpus(), 32);
  // Instances 1 and 2 share a layer-3 node; 3 shares only layer 2 with them; 4 and 5 only layer 1.
  EXPECT_EQ(c->DomainOf(0, 2), c->DomainOf(1, 2));
  EXPECT_NE(c->DomainOf(0, 2), c->DomainOf(2, 2));
  EXPECT_EQ(c->DomainOf(0, 1), c->DomainOf(2, 1));
  EXPECT_NE(c->DomainOf(0, 1), c->DomainOf(3, 1));
  EXPECT_EQ(c->DomainOf(3, 2), c->DomainOf(4, 2));
  EXPECT_EQ(c->switches[c->DomainOf(3, 2)].name, "nn-1f2e3d4c5b6a79803");
  // The imported tree is a normal cluster: it round-trips through Railyard's own format.
  auto back = ParseTopologyYaml(WriteTopologyYaml(*c), "w.yaml");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_TRUE(*back == *c);
}

TEST(AwsFormatTest, ConcatenatesPagesWithFourLayers) {
  auto c = ParseFile("aws_pages.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->levels, (std::vector<std::string>{"layer1", "layer2", "layer3", "layer4"}));
  ASSERT_EQ(c->nodes.size(), 3u);
  EXPECT_EQ(c->nodes[2].name, "i-00000000000000a03");
  EXPECT_EQ(c->nodes[2].gpu_count, 4);  // p6e-gb200.36xlarge
  EXPECT_EQ(c->DomainOf(0, 3), c->DomainOf(1, 3));
  EXPECT_NE(c->DomainOf(0, 2), c->DomainOf(2, 2));
  EXPECT_EQ(c->DomainOf(0, 1), c->DomainOf(2, 1));
}

TEST(AwsFormatTest, ReportsInconsistentTopologiesNamingInstanceAndLine) {
  auto mixed = ParseFile("aws_mixed_layers.json");
  ASSERT_FALSE(mixed.ok());
  EXPECT_HAS(mixed.status().message(),
             "aws_mixed_layers.json:3: instance 'i-2' lists 4 network "
             "nodes but instance 'i-1' (line 2) lists 3");
  auto parents = ParseFile("aws_two_parents.json");
  ASSERT_FALSE(parents.ok());
  EXPECT_HAS(parents.status().message(),
             "aws_two_parents.json:3: network node 'nn-c' sits under "
             "'nn-x' for instance 'i-2' but under 'nn-b' for "
             "instance 'i-1' (line 2)");
}

TEST(AwsFormatTest, RejectsBadInput) {
  EXPECT_HAS(ErrorOf(R"({"Instances": [
  {"InstanceId": "i-1", "InstanceType": "p5.48xlarge", "NetworkNodes": ["a", "b", "c"]},
  {"InstanceId": "i-2", "InstanceType": "t3.micro", "NetworkNodes": []}]})"),
             "aws.json:3: instance 'i-2' (t3.micro) lists no network nodes");
  EXPECT_HAS(ErrorOf(R"({"Instances": [{"InstanceId": "i-1", "NetworkNodes": null}]})"),
             "lists no network nodes");
  EXPECT_HAS(ErrorOf(R"({"Instances": [{"InstanceId": "i-1", "NetworkNodes": ["a", "b"]}]})"),
             "instance 'i-1' lists 2 network nodes; expected 3 or 4");
  EXPECT_HAS(ErrorOf(R"({"Instances": [
  {"InstanceId": "i-1", "NetworkNodes": ["a", "b", "c"]},
  {"InstanceId": "i-1", "NetworkNodes": ["a", "b", "c"]}]})"),
             "aws.json:3: instance 'i-1' is listed twice (first on line 2)");
  EXPECT_HAS(ErrorOf(R"({"Instances": [
  {"InstanceId": "i-1", "NetworkNodes": ["a", "b", "c"]},
  {"InstanceId": "i-2", "NetworkNodes": ["a", "c", "d"]}]})"),
             "aws.json:3: network node 'c' is at layer 2 for instance 'i-2' but at layer 3");
  EXPECT_HAS(ErrorOf(R"({"Instances": []})"), "lists no instances");
  EXPECT_HAS(ErrorOf(R"([])"), "lists no instances");
  EXPECT_HAS(ErrorOf(R"({"Instances": {}})"), "field 'Instances': expected an array");
  EXPECT_HAS(ErrorOf(R"({"Reservations": []})"), "missing required key 'Instances'");
  EXPECT_HAS(ErrorOf(R"([{"Instances": []}, 7])"), "field '[1]': expected a DescribeInstance");
  EXPECT_HAS(ErrorOf(R"({"Instances": [{"NetworkNodes": ["a", "b", "c"]}]})"),
             "field 'Instances[0]': missing required key 'InstanceId'");
  EXPECT_HAS(ErrorOf(R"({"Instances": [{"InstanceId": 5}]})"),
             "field 'Instances[0].InstanceId': expected a string");
  EXPECT_HAS(ErrorOf(R"({"Instances": [{"InstanceId": "i-1", "NetworkNodes": ["a", 2, "c"]}]})"),
             "NetworkNodes must hold non-empty strings");
  EXPECT_HAS(ErrorOf(R"({"Instances": [{"InstanceId": "i-1", "NetworkNodes": "a"}]})"),
             "NetworkNodes must be an array");
  EXPECT_HAS(ErrorOf("{\"Instances\": [\n  {\"InstanceId\": \"i-1\",\n}]}"), "aws.json:3:");
  EXPECT_HAS(ErrorOf(""), "aws.json");
}

TEST(AwsFormatTest, KnowsGpuInstanceTypes) {
  EXPECT_EQ(AwsInstanceGpus("p4d.24xlarge"), 8);
  EXPECT_EQ(AwsInstanceGpus("p5en.48xlarge"), 8);
  EXPECT_EQ(AwsInstanceGpus("p5.4xlarge"), 1);
  EXPECT_EQ(AwsInstanceGpus("trn2.48xlarge"), 0);
  EXPECT_EQ(AwsInstanceGpus(""), 0);
}

}  // namespace
}  // namespace railyard::topo
