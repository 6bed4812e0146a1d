#include "railyard/topo/aws_format.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "railyard/base/files.h"
#include "railyard/topo/testdata_testing.h"
#include "railyard/topo/yaml_format.h"

namespace railyard::topo {
namespace {

using testing::TestData;

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
  EXPECT_EQ(c->nodes[2].gpu_count, 8);  // p6-b200.48xlarge, a 4-layer type
  EXPECT_EQ(c->DomainOf(0, 3), c->DomainOf(1, 3));
  EXPECT_NE(c->DomainOf(0, 2), c->DomainOf(2, 2));
  EXPECT_EQ(c->DomainOf(0, 1), c->DomainOf(2, 1));
}

TEST(AwsFormatTest, MixesThreeAndFourLayerTypesAndSkipsInstancesWithoutNetworkNodes) {
  // AWS: p5 lists 3 network nodes, p6-b200 4 (instances attach at or below layer 3); a stopped
  // instance has NetworkNodes null, a type without instance topology an empty list.
  std::string path = TestData("aws_mixed_layers.json");
  auto text = base::ReadFile(path);
  ASSERT_TRUE(text.ok());
  auto in = ImportAwsInstanceTopology(*text, path);
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  const Cluster& c = in->cluster;
  EXPECT_EQ(c.levels, (std::vector<std::string>{"layer1", "layer2", "layer3", "layer4"}));
  ASSERT_EQ(c.nodes.size(), 4u);
  ASSERT_EQ(in->skipped.size(), 2u);
  EXPECT_EQ(in->skipped[0], "i-0b00000000000000e (p5.48xlarge, line 16): no network nodes");
  EXPECT_EQ(in->skipped[1], "i-0b00000000000000f (t3.micro, line 18): no network nodes");
  // The two p5s share layer-3 node c1 and so its "-direct" leaf; the p6-b200 under c1 has its
  // own layer-4 node; all three share c1; the fourth instance only layer 1.
  int a = c.FindNode("i-0b00000000000000a"), b = c.FindNode("i-0b00000000000000b"),
      p = c.FindNode("i-0b00000000000000c"), d = c.FindNode("i-0b00000000000000d");
  EXPECT_EQ(c.switches[c.DomainOf(a, 3)].name, "nn-0c0000000000000c1-direct");
  EXPECT_EQ(c.DomainOf(a, 3), c.DomainOf(p, 3));
  EXPECT_NE(c.DomainOf(a, 3), c.DomainOf(b, 3));
  EXPECT_EQ(c.switches[c.DomainOf(b, 3)].name, "nn-0d0000000000000d1");
  EXPECT_EQ(c.DomainOf(a, 2), c.DomainOf(b, 2));
  EXPECT_NE(c.DomainOf(a, 1), c.DomainOf(d, 1));
  EXPECT_EQ(c.DomainOf(a, 0), c.DomainOf(d, 0));
  EXPECT_EQ(c.nodes[b].gpu_count, 8);
  // Nothing but skipped instances is an error that says so.
  EXPECT_HAS(ErrorOf(R"({"Instances": [{"InstanceId": "i-1", "NetworkNodes": null}]})"),
             "lists no instances with network nodes (1 without)");
}

TEST(AwsFormatTest, NamesNodesByHostThroughTheHostMap) {
  std::string hosts_path = TestData("aws_hosts.txt");
  auto hosts_text = base::ReadFile(hosts_path);
  ASSERT_TRUE(hosts_text.ok());
  auto hosts = ParseAwsHostMap(*hosts_text, hosts_path);
  ASSERT_TRUE(hosts.ok()) << hosts.status().ToString();
  EXPECT_EQ(hosts->size(), 6u);
  std::string path = TestData("aws_page.json");
  auto text = base::ReadFile(path);
  ASSERT_TRUE(text.ok());
  auto in = ImportAwsInstanceTopology(*text, path, {.hosts = &*hosts, .hosts_source = hosts_path});
  ASSERT_TRUE(in.ok()) << in.status().ToString();
  ASSERT_EQ(in->cluster.nodes.size(), 5u);
  EXPECT_EQ(in->cluster.nodes[0].name, "ip-10-0-1-11.us-east-2.compute.internal");
  EXPECT_EQ(in->cluster.nodes[4].name, "ip-10-0-2-15.us-east-2.compute.internal");
  EXPECT_TRUE(in->skipped.empty());

  // An instance the map does not know is refused, naming it, its line and the map's file.
  std::map<std::string, std::string> partial = *hosts;
  partial.erase("i-0a1b2c3d4e5f60003");
  auto missing =
      ImportAwsInstanceTopology(*text, path, {.hosts = &partial, .hosts_source = "h.txt"});
  ASSERT_FALSE(missing.ok());
  EXPECT_HAS(missing.status().message(), "aws_page.json:");
  EXPECT_HAS(missing.status().message(),
             "instance 'i-0a1b2c3d4e5f60003' (p5.48xlarge) has no host name in h.txt");
  std::map<std::string, std::string> twice = *hosts;
  twice["i-0a1b2c3d4e5f60002"] = twice["i-0a1b2c3d4e5f60001"];
  auto dup = ImportAwsInstanceTopology(*text, path, {.hosts = &twice});
  ASSERT_FALSE(dup.ok());
  EXPECT_HAS(dup.status().message(),
             "instances 'i-0a1b2c3d4e5f60001' (line 4) and 'i-0a1b2c3d4e5f60002' both map to host");
}

TEST(AwsFormatTest, HostMapErrorsNameTheLine) {
  auto err = [](std::string_view text) {
    auto r = ParseAwsHostMap(text, "h.txt");
    EXPECT_FALSE(r.ok()) << text;
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_HAS(err("i-1 a\ni-2\n"), "h.txt:2: expected '<instance-id> <host-name>', got 1 field");
  EXPECT_HAS(err("# c\n\ni-1 a b\n"), "h.txt:3: expected '<instance-id> <host-name>', got 3");
  EXPECT_HAS(err("host1 i-1\n"), "h.txt:1: 'host1' is not an EC2 instance id");
  EXPECT_HAS(err("i-1 a\ni-1 b\n"),
             "h.txt:2: instance 'i-1' is mapped to 'b' here and to 'a' on line 1");
  auto ok = ParseAwsHostMap("i-1 a\r\n  i-2\tb  \n# x\ni-1 a\n", "h.txt");
  ASSERT_TRUE(ok.ok()) << ok.status().ToString();
  EXPECT_EQ(*ok, (std::map<std::string, std::string>{{"i-1", "a"}, {"i-2", "b"}}));
}

TEST(AwsFormatTest, ReportsInconsistentTopologiesNamingInstanceAndLine) {
  auto parents = ParseFile("aws_two_parents.json");
  ASSERT_FALSE(parents.ok());
  EXPECT_HAS(parents.status().message(),
             "aws_two_parents.json:3: network node 'nn-c' sits under "
             "'nn-x' for instance 'i-2' but under 'nn-b' for "
             "instance 'i-1' (line 2)");
}

TEST(AwsFormatTest, RejectsBadInput) {
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
