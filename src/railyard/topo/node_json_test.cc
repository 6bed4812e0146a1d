#include "railyard/topo/node_json.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

#include "railyard/base/config.h"
#include "railyard/base/files.h"
#include "railyard/topo/golden_testing.h"

namespace railyard::topo {
namespace {

using nlohmann::json;

using testing::ExpectGolden;

Node FullNode() {
  Node n;
  n.name = "gpu07";
  n.address = "10.0.0.7";
  n.link_rate_bits = 400'000'000'000;
  n.gpu_count = 2;
  n.gpus = {{0, "GPU-aaaa", "0000:17:00.0", 0, "nvl0"}, {1, "", "0000:97:00.0", 1, ""}};
  n.nics = {{"mlx5_0", "0000:18:00.0", 0, 0, 400'000'000'000, true},
            {"eth0", "", -1, -1, 0, false}};
  n.numa = {{0, {0, 1, 2, 3, 8, 10, 11}}, {1, {4, 5, 6, 7}}};
  n.gpu_nic_paths = {{0, "mlx5_0", PathClass::kPIX}, {1, "mlx5_0", PathClass::kSYS}};
  return n;
}

TEST(NodeJsonTest, WritesDocumentedShape) {
  json j = NodeToJson(FullNode());
  EXPECT_EQ(j["link_rate"], "400 Gbit/s");
  EXPECT_EQ(j["numa"][0]["cpus"], "0-3,8,10-11");
  EXPECT_EQ(j["gpu_nic_paths"][1]["path"], "SYS");
  // Unknown values are left out rather than written as -1 or "".
  EXPECT_FALSE(j["gpus"][1].contains("uuid"));
  EXPECT_FALSE(j["nics"][1].contains("numa_node"));
  EXPECT_FALSE(j["nics"][1].contains("rail"));
  EXPECT_FALSE(j["nics"][1].contains("rate"));
  EXPECT_EQ(j["nics"][1]["rdma"], false);
  ExpectGolden("node_full.json", j.dump(2) + "\n");
}

TEST(NodeJsonTest, RoundTripsFullAndMinimalNodes) {
  Node full = FullNode();
  Result<Node> back = NodeFromJson(NodeToJson(full), "mem");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, full);

  Node minimal;
  minimal.name = "n0";
  json j = NodeToJson(minimal);
  EXPECT_EQ(j, json({{"name", "n0"}, {"gpu_count", 0}}));
  back = NodeFromJson(j, "mem");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, minimal);
}

TEST(NodeJsonTest, RatesThatWouldRoundAreWrittenExactly) {
  Node n;
  n.name = "n";
  n.link_rate_bits = 123'456'789;
  json j = NodeToJson(n);
  EXPECT_EQ(j["link_rate"], "123456789 bit/s");
  Result<Node> back = NodeFromJson(j, "mem");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->link_rate_bits, 123'456'789u);
}

TEST(NodeJsonTest, ReadsIntegerRatesAndDefaultsGpuCount) {
  json j = json::parse(R"({"name": "n", "link_rate": 25000000000,
      "gpus": [{"index": 0}, {"index": 1}],
      "nics": [{"name": "efa0", "rate": "100 Gbit/s", "rdma": true}]})");
  Result<Node> n = NodeFromJson(j, "mem");
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->link_rate_bits, 25'000'000'000u);
  EXPECT_EQ(n->gpu_count, 2);
  EXPECT_EQ(n->gpus[1].numa_node, -1);
  EXPECT_EQ(n->nics[0].rate_bits, 100'000'000'000u);
  EXPECT_EQ(n->nics[0].rail, -1);
}

struct BadCase {
  const char* json;
  const char* message_part;
};

TEST(NodeJsonTest, RejectsBadInputNamingTheField) {
  const BadCase cases[] = {
      {R"({"address": "x"})", "missing required key 'name'"},
      {R"({"name": ""})", "field 'name'"},
      {R"({"name": "n", "gpu": []})", "unknown key 'gpu'"},
      {R"({"name": "n", "gpus": [{"index": -1}]})", "field 'gpus[0].index'"},
      {R"({"name": "n", "gpus": [{"index": 0, "numa": 1}]})", "unknown key 'numa'"},
      {R"({"name": "n", "gpus": [{"index": 0}, {"index": 0}]})", "GPU index 0 is listed twice"},
      {R"({"name": "n", "gpus": [{"index": 0}], "gpu_count": 4})", "gpu_count is 4"},
      {R"({"name": "n", "link_rate": "fast"})", "field 'link_rate'"},
      {R"({"name": "n", "link_rate": -5})", "field 'link_rate'"},
      {R"({"name": "n", "nics": [{"name": "a"}, {"name": "a"}]})", "NIC 'a' is listed twice"},
      {R"({"name": "n", "nics": [{"name": "a", "rdma": "yes"}]})", "field 'nics[0].rdma'"},
      {R"({"name": "n", "nics": [{"name": "a", "rail": -2}]})", "field 'nics[0].rail'"},
      {R"({"name": "n", "numa": [{"id": 0, "cpus": "3-1"}]})", "field 'numa[0].cpus'"},
      {R"({"name": "n", "numa": [{"id": 0}, {"id": 0}]})", "NUMA node 0 is listed twice"},
      {R"({"name": "n", "gpu_nic_paths": [{"gpu": 0, "nic": "a", "path": "PIX"}]})",
       "GPU 0 is not in"},
      {R"({"name": "n", "gpus": [{"index": 0}],
           "gpu_nic_paths": [{"gpu": 0, "nic": "a", "path": "PIX"}]})",
       "NIC 'a' is not in"},
      {R"({"name": "n", "gpus": [{"index": 0}], "nics": [{"name": "a"}],
           "gpu_nic_paths": [{"gpu": 0, "nic": "a", "path": "FAR"}]})",
       "field 'gpu_nic_paths[0].path'"},
      {R"({"name": "n", "gpus": {"index": 0}})", "field 'gpus'"},
      {R"([1, 2])", "expected an object"},
  };
  for (const BadCase& c : cases) {
    Result<Node> n = NodeFromJson(json::parse(c.json), "node.json");
    ASSERT_FALSE(n.ok()) << c.json;
    EXPECT_EQ(n.status().code(), StatusCode::kInvalidArgument) << c.json;
    EXPECT_NE(n.status().message().find(c.message_part), std::string::npos)
        << c.json << " -> " << n.status().message();
    EXPECT_NE(n.status().message().find("node.json"), std::string::npos) << c.json;
  }
}

TEST(NodeJsonTest, EmbeddedNodeAllowsExtraKeysAndNamesItsPath) {
  json j = json::parse(R"({"name": "n", "switch": "leaf0"})");
  base::FieldContext ctx("topo.yaml", "nodes[3]");
  Result<Node> n = NodeFromJson(j, ctx, {"switch"});
  ASSERT_TRUE(n.ok()) << n.status().ToString();
  EXPECT_EQ(n->name, "n");
  EXPECT_EQ(n->leaf, -1);

  n = NodeFromJson(json::parse(R"({"name": "n", "swtich": "leaf0"})"), ctx, {"switch"});
  ASSERT_FALSE(n.ok());
  EXPECT_NE(n.status().message().find("topo.yaml: field 'nodes[3]'"), std::string::npos)
      << n.status().message();
  EXPECT_NE(n.status().message().find("'swtich'"), std::string::npos);
}

TEST(CpuListTest, FormatsRanges) {
  EXPECT_EQ(FormatCpuList({}), "");
  EXPECT_EQ(FormatCpuList({5}), "5");
  EXPECT_EQ(FormatCpuList({0, 1, 2, 3, 8, 10, 11}), "0-3,8,10-11");
  EXPECT_EQ(FormatCpuList({11, 10, 3, 3, 2, 1, 0}), "0-3,10-11");
  EXPECT_EQ(FormatCpuList({0, 2, 4}), "0,2,4");
}

TEST(CpuListTest, ParsesLinuxSyntax) {
  auto parse = [](std::string_view s) {
    Result<std::vector<int>> r = ParseCpuList(s);
    EXPECT_TRUE(r.ok()) << s << ": " << r.status().ToString();
    return r.value_or({});
  };
  EXPECT_EQ(parse(""), std::vector<int>{});
  EXPECT_EQ(parse("7"), std::vector<int>{7});
  EXPECT_EQ(parse("0-3,8,10-11"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse("0-3,8,10-11\n"), (std::vector<int>{0, 1, 2, 3, 8, 10, 11}));
  EXPECT_EQ(parse(" 8 , 0-1 "), (std::vector<int>{0, 1, 8}));
  EXPECT_EQ(parse("2-3,0-2"), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(parse("0-15:2/4"), (std::vector<int>{0, 1, 4, 5, 8, 9, 12, 13}));
  EXPECT_EQ(parse("1-6:1/4"), (std::vector<int>{1, 5}));
  EXPECT_EQ(parse("65535").size(), 1u);
  EXPECT_EQ(parse("0-65535,0-65535,0-65535").size(), 65536u);
}

TEST(CpuListTest, RoundTrips) {
  for (std::string_view s : {"0", "0-1", "0-15,32-47", "1,3,5-9,100"}) {
    Result<std::vector<int>> r = ParseCpuList(s);
    ASSERT_TRUE(r.ok()) << s;
    EXPECT_EQ(FormatCpuList(*r), s);
  }
}

TEST(CpuListTest, RejectsMalformedText) {
  for (std::string_view s : {",", "1,,2", "a", "1-", "-1", "3-1", "1-2-3", "0x10", "65536",
                             "99999999999999", "0-7:0/4", "0-7:5/4", "0-7:2", "4:1/2", "0-7:1/0"}) {
    Result<std::vector<int>> r = ParseCpuList(s);
    ASSERT_FALSE(r.ok()) << s;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("cpu list"), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace railyard::topo
