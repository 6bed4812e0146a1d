// The quoting rule, and every topo YAML writer read back by PyYAML (a YAML 1.1 reader): names
// and ids that YAML 1.1 would retype must come back as the same strings.
#include "railyard/topo/internal/yaml_quote.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "railyard/topo/internal/pyyaml_testing.h"
#include "railyard/topo/kube_export.h"
#include "railyard/topo/slurm_format.h"
#include "railyard/topo/yaml_format.h"

namespace railyard::topo::internal {
namespace {

// Strings a YAML 1.1 resolver (PyYAML's resolver.py, yaml.org/type/*.html) reads as something
// else when written plain: ints (decimal with leading zeros, hex, octal, base 60), floats
// (exponent, base 60 as in a PCI bus id), bools, nulls, timestamps, merge and value keys.
const std::vector<std::string> kRetyped = {
    "001",        "0",    "-1",   "+7",   "0x1F",         "0o17",      "0b101",
    "1_000",      "1e3",  "1.5",  "1:20", "0000:18:00.0", "190:20:30", ".inf",
    "-.inf",      ".nan", "true", "True", "FALSE",        "yes",       "Yes",
    "no",         "NO",   "on",   "On",   "off",          "OFF",       "y",
    "Y",          "n",    "N",    "null", "Null",         "NULL",      "~",
    "2026-12-01", "<<",   "=",    ""};

// Strings that need quotes for other reasons (indicators, flow characters, spaces, escapes).
const std::vector<std::string> kAwkward = {
    "a: b", "#x", "a #b", "-x",   "[x]",  "gpu[001-004]", "a,b",     "{x}", "*x",
    "&x",   "!x", "|x",   ">x",   "'x",   "\"x",          "%x",      "@x",  "`x",
    " x",   "x ", "a\tb", "a\\b", "a\"b", "line\nbreak",  "bell\x07"};

void SkipWithoutPyYaml() {
  Status s = PyYamlAvailable();
  if (!s.ok()) GTEST_SKIP() << s.ToString();
}

TEST(YamlQuoteTest, PlainOnlyWhenNoResolverCanRetype) {
  for (const char* plain :
       {"gpu001", "su0-spine", "railyard.io/leaf", "kubernetes.io/hostname", "leaf", "hw0", "_x",
        "/dev/x", "nn-4a8b1e0c33d2f7a10", "yess", "Nope", "ON_x", "i-0a1b2c3d4e5f60001"}) {
    EXPECT_FALSE(YamlNeedsQuotes(plain)) << plain;
    EXPECT_EQ(YamlScalar(plain), plain);
  }
  for (const std::string& s : kRetyped) EXPECT_TRUE(YamlNeedsQuotes(s)) << s;
  for (const std::string& s : kAwkward) EXPECT_TRUE(YamlNeedsQuotes(s)) << s;
  EXPECT_EQ(YamlScalar("001"), "\"001\"");
  EXPECT_EQ(YamlScalar("a\"b\\c\nd\x01"), "\"a\\\"b\\\\c\\nd\\x01\"");
}

TEST(YamlQuoteTest, PyYamlReadsEveryQuotedScalarBackAsTheSameString) {
  SkipWithoutPyYaml();
  std::vector<std::string> all = kRetyped;
  all.insert(all.end(), kAwkward.begin(), kAwkward.end());
  std::string text;
  for (size_t i = 0; i < all.size(); ++i) text += fmt::format("k{}: {}\n", i, YamlScalar(all[i]));
  // And the same strings through yaml-cpp's emitter, as the yaml-cpp based writers emit them.
  YAML::Emitter out;
  out << YAML::BeginSeq;
  for (const std::string& s : all) EmitYamlString(out, s);
  out << YAML::EndSeq;
  text += "---\n" + std::string(out.c_str()) + "\n";
  auto docs = ReadWithPyYaml(text);
  ASSERT_TRUE(docs.ok()) << docs.status().ToString() << "\n" << text;
  ASSERT_EQ(docs->size(), 2u);
  for (size_t i = 0; i < all.size(); ++i) {
    EXPECT_EQ((*docs)[0][fmt::format("k{}", i)], all[i]) << YamlScalar(all[i]);
    EXPECT_EQ((*docs)[1][i], all[i]) << all[i];
  }
}

TEST(YamlQuoteTest, PyYamlShowsWhatPlainWritingWouldDo) {
  // The reason for all this, measured on the reader itself: written plain, these change type.
  SkipWithoutPyYaml();
  auto docs = ReadWithPyYaml("a: 001\nb: 0000:18:00.0\nc: on\nd: ~\ne: 1:20\n");
  ASSERT_TRUE(docs.ok()) << docs.status().ToString();
  const nlohmann::json& d = (*docs)[0];
  EXPECT_EQ(d["a"]["__type"], "int");
  EXPECT_EQ(d["b"]["__type"], "float");
  EXPECT_EQ(d["b"]["value"], "1080.0");
  EXPECT_EQ(d["c"]["__type"], "bool");
  EXPECT_EQ(d["d"]["__type"], "NoneType");
  EXPECT_EQ(d["e"]["value"], "80");
}

// A cluster whose every name is one a YAML 1.1 reader would retype.
Cluster AwkwardCluster() {
  ClusterBuilder b("awkward");
  b.SetName("001");
  b.SetLevels({"1:20", "on"});
  b.AddSwitch("true", "1:20", "", 0);
  b.AddSwitch("0x1F", "on", "true", 0);
  b.AddSwitch("null", "on", "true", 0);
  Node a;
  a.name = "1e3";
  a.gpu_count = 1;
  a.gpus = {Gpu{.index = 0, .pci_bus_id = "0000:18:00.0", .numa_node = 0}};
  a.nics = {Nic{.name = "yes", .pci_bus_id = "0000:19:00.0", .numa_node = 0}};
  a.numa = {NumaNode{.id = 0, .cpus = {7}}};
  b.AddNode(a, "0x1F");
  Node c;
  c.name = "0001";
  b.AddNode(c, "null");
  Node d;
  d.name = "~";
  b.AddNode(d, "null");
  auto cluster = std::move(b).Finish();
  EXPECT_TRUE(cluster.ok()) << cluster.status().ToString();
  return cluster.ok() ? *cluster : Cluster{};
}

TEST(YamlExportsTest, RailyardYamlKeepsEveryNameAStringForPyYaml) {
  SkipWithoutPyYaml();
  Cluster c = AwkwardCluster();
  std::string text = WriteTopologyYaml(c);
  auto docs = ReadWithPyYaml(text);
  ASSERT_TRUE(docs.ok()) << docs.status().ToString() << "\n" << text;
  const nlohmann::json& d = (*docs)[0];
  EXPECT_EQ(d["name"], "001") << text;
  EXPECT_EQ(d["levels"], (nlohmann::json{"1:20", "on"})) << text;
  std::vector<std::string> switch_names;
  for (const auto& s : d["switches"]) {
    switch_names.push_back(s["name"]);
    EXPECT_TRUE(s["level"].is_string()) << s.dump();
    if (s.contains("parent")) EXPECT_EQ(s["parent"], "true") << s.dump();
  }
  EXPECT_EQ(switch_names, (std::vector<std::string>{"true", "0x1F", "null"}));
  std::vector<std::string> node_names;
  for (const auto& n : d["nodes"]) {
    node_names.push_back(n["name"].is_string() ? n["name"].get<std::string>() : n["name"].dump());
    EXPECT_TRUE(n["switch"].is_string()) << n.dump();
    if (n["name"] != "1e3") continue;
    EXPECT_EQ(n["gpus"][0]["pci_bus_id"], "0000:18:00.0") << n.dump();
    EXPECT_EQ(n["nics"][0]["name"], "yes") << n.dump();
    EXPECT_EQ(n["nics"][0]["pci_bus_id"], "0000:19:00.0") << n.dump();
    EXPECT_EQ(n["numa"][0]["cpus"], "7") << n.dump();
  }
  EXPECT_EQ(node_names, (std::vector<std::string>{"1e3", "0001", "~"})) << text;
  // Railyard's own reader still reads it back to the same cluster.
  auto back = ParseTopologyYaml(text, "w.yaml");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, c);
}

TEST(YamlExportsTest, SlurmTopologyYamlKeepsEveryNameAStringForPyYaml) {
  SkipWithoutPyYaml();
  Cluster c = AwkwardCluster();
  std::string text = WriteSlurmTopologyYaml(c);
  auto docs = ReadWithPyYaml(text);
  ASSERT_TRUE(docs.ok()) << docs.status().ToString() << "\n" << text;
  const nlohmann::json& entry = (*docs)[0][0];
  EXPECT_EQ(entry["topology"], "001");
  EXPECT_EQ(entry["cluster_default"]["__type"], "bool");  // a real boolean stays one
  std::vector<nlohmann::json> switches(entry["tree"]["switches"].begin(),
                                       entry["tree"]["switches"].end());
  ASSERT_EQ(switches.size(), 3u);
  EXPECT_EQ(switches[0]["switch"], "true");
  EXPECT_EQ(switches[0]["children"], "0x1F,null");
  EXPECT_EQ(switches[1]["nodes"], "1e3");
  EXPECT_EQ(switches[2]["switch"], "null");
  EXPECT_EQ(switches[2]["nodes"], "0001,~");
  auto back = ParseSlurmTopologyYaml(text, "topology.yaml");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->nodes.size(), 3u);
}

TEST(YamlExportsTest, KueueManifestKeepsEveryValueAStringForPyYaml) {
  SkipWithoutPyYaml();
  Cluster c = AwkwardCluster();
  for (KueueApi api : {KueueApi::kV1alpha1, KueueApi::kV1beta1, KueueApi::kV1beta2}) {
    auto text = KueueTopologyManifest(c, "007", api);
    ASSERT_TRUE(text.ok()) << text.status().ToString();
    auto docs = ReadWithPyYaml(*text);
    ASSERT_TRUE(docs.ok()) << docs.status().ToString() << "\n" << *text;
    ASSERT_EQ(docs->size(), 2u);
    EXPECT_EQ((*docs)[0]["metadata"]["name"], "007") << *text;
    EXPECT_EQ((*docs)[1]["spec"]["nodeLabels"][std::string(kClusterLabel)], "001") << *text;
    EXPECT_EQ((*docs)[1]["spec"]["topologyName"], "007") << *text;
    EXPECT_EQ(docs->dump().find("__type"), std::string::npos) << docs->dump();
  }
}

}  // namespace
}  // namespace railyard::topo::internal
