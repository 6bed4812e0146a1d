// `railyard topo`, `place` and `discover` through the real binary: conversions between the
// formats, placement output, and one clear line with a non-zero exit for each bad input.
#include <fstream>
#include <nlohmann/json.hpp>

#include "cli_harness.h"

namespace railyard::testing {
namespace {

const std::string kData = RAILYARD_TESTDATA;

void ExpectOneLineError(const CliResult& r, const std::string& needle) {
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.err.rfind("railyard: error: ", 0), 0u) << r.err;
  EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
  EXPECT_EQ(CountLines(r.err), 1) << r.err;
}

TEST(TopoCliTest, ShowAndExportsOfASlurmTree) {
  CliResult show = RunRailyard({"topo", "show", "--topology", kData + "/tree.conf"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.out.find("spine1"), std::string::npos) << show.out;
  EXPECT_NE(show.out.find("16"), std::string::npos) << show.out;

  CliResult yaml = RunRailyard(
      {"topo", "export", "--topology", kData + "/tree.conf", "--format", "railyard-yaml"});
  ASSERT_EQ(yaml.exit_code, 0) << yaml.err;
  // Railyard YAML -> Slurm conf again: the same tree.
  base::ScopedTempDir dir_tmp("topo");
  const std::string& dir = dir_tmp.path();
  std::string path = dir + "/t.yaml";
  ASSERT_EQ(RunRailyard({"topo", "export", "--topology", kData + "/tree.conf", "--format",
                         "railyard-yaml", "--out", path})
                .exit_code,
            0);
  CliResult conf = RunRailyard({"topo", "export", "--topology", path, "--format", "slurm-conf"});
  ASSERT_EQ(conf.exit_code, 0) << conf.err;
  EXPECT_NE(conf.out.find("gpu[13-16]"), std::string::npos) << conf.out;
  EXPECT_NE(conf.out.find("SwitchName=spine1"), std::string::npos) << conf.out;

  CliResult labels =
      RunRailyard({"topo", "export", "--topology", path, "--format", "k8s-labels-json"});
  ASSERT_EQ(labels.exit_code, 0) << labels.err;
  auto j = nlohmann::json::parse(labels.out);
  EXPECT_EQ(j["gpu07"]["railyard.io/leaf"], "leaf1");
  EXPECT_EQ(j["gpu07"]["railyard.io/spine"], "spine0");
}

const std::string kTopoData = kData + "/../../src/railyard/topo/testdata";

TEST(TopoCliTest, AwsExportsNameHostsFromTheHostMapAndRefuseInstanceIds) {
  const std::string aws = kTopoData + "/aws_page.json";
  const std::string hosts = kTopoData + "/aws_hosts.txt";
  // Without a map, every format that names nodes is refused; kueue names none.
  for (const char* format : {"slurm-conf", "slurm-yaml", "k8s-labels", "hostfile"}) {
    ExpectOneLineError(RunRailyard({"topo", "export", "--topology", aws, "--format", format}),
                       "pass --aws-hosts FILE");
  }
  CliResult kueue = RunRailyard({"topo", "export", "--topology", aws, "--format", "kueue"});
  EXPECT_EQ(kueue.exit_code, 0) << kueue.err;

  CliResult conf = RunRailyard(
      {"topo", "export", "--topology", aws, "--aws-hosts", hosts, "--format", "slurm-conf"});
  ASSERT_EQ(conf.exit_code, 0) << conf.err;
  EXPECT_NE(conf.out.find("Nodes=ip-10-0-1-11.us-east-2.compute.internal,"), std::string::npos)
      << conf.out;
  EXPECT_EQ(conf.out.find("i-0a1b"), std::string::npos) << conf.out;

  // A map that lacks an instance: refused, naming the instance.
  base::ScopedTempDir dir_tmp("awshosts");
  const std::string& dir = dir_tmp.path();
  std::string partial = dir + "/hosts.txt";
  std::ofstream(partial) << "i-0a1b2c3d4e5f60001 gpu1\ni-0a1b2c3d4e5f60002 gpu2\n";
  ExpectOneLineError(RunRailyard({"topo", "export", "--topology", aws, "--aws-hosts", partial,
                                  "--format", "k8s-labels"}),
                     "instance 'i-0a1b2c3d4e5f60003' (p5.48xlarge) has no host name in " + partial);
  ExpectOneLineError(RunRailyard({"topo", "export", "--topology", kData + "/tree.conf",
                                  "--aws-hosts", partial, "--format", "slurm-conf"}),
                     "--aws-hosts applies to AWS instance topology JSON");
}

TEST(TopoCliTest, AwsShowReportsSkippedInstancesOfAMixedFleet) {
  CliResult show =
      RunRailyard({"topo", "show", "--topology", kTopoData + "/aws_mixed_layers.json"});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_NE(show.err.find("skipped instance i-0b00000000000000e (p5.48xlarge, line 16)"),
            std::string::npos)
      << show.err;
  EXPECT_NE(show.err.find("skipped instance i-0b00000000000000f (t3.micro"), std::string::npos)
      << show.err;
  EXPECT_NE(show.out.find("nn-0c0000000000000c1-direct"), std::string::npos) << show.out;
}

TEST(TopoCliTest, KueueExportTakesTheApiVersion) {
  const std::string tree = kData + "/tree.conf";
  CliResult def = RunRailyard({"topo", "export", "--topology", tree, "--format", "kueue"});
  ASSERT_EQ(def.exit_code, 0) << def.err;
  EXPECT_NE(def.out.find("apiVersion: kueue.x-k8s.io/v1beta2\nkind: Topology"), std::string::npos)
      << def.out;
  CliResult alpha = RunRailyard(
      {"topo", "export", "--topology", tree, "--format", "kueue", "--kueue-api", "v1alpha1"});
  ASSERT_EQ(alpha.exit_code, 0) << alpha.err;
  EXPECT_NE(alpha.out.find("apiVersion: kueue.x-k8s.io/v1alpha1\nkind: Topology"),
            std::string::npos)
      << alpha.out;
  EXPECT_NE(alpha.out.find("apiVersion: kueue.x-k8s.io/v1beta1\nkind: ResourceFlavor"),
            std::string::npos)
      << alpha.out;
  ExpectOneLineError(
      RunRailyard({"topo", "export", "--topology", tree, "--format", "kueue", "--kueue-api", "v2"}),
      "expected v1alpha1 (Kueue 0.9-0.13)");
}

TEST(TopoCliTest, PlaceKeepsASmallJobOnOneLeafAndOrdersRanks) {
  CliResult r = RunRailyard({"place", "--topology", kData + "/tree.conf", "--nodes", "6", "--busy",
                             "gpu01,gpu02", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_EQ(j["hosts"].size(), 6u);
  for (const auto& h : j["hosts"]) {
    EXPECT_NE(h, "gpu01");
    EXPECT_NE(h, "gpu02");
  }
  EXPECT_EQ(j["leaves"].size(), 2u) << r.out;   // 6 nodes need two 4-node leaves
  EXPECT_EQ(j["levels"]["spine"], 1) << r.out;  // ... under one spine
  EXPECT_TRUE(j["explanation"].is_string());
}

TEST(TopoCliTest, PlaceReadsExclusionsFromAFile) {
  base::ScopedTempDir dir_tmp("excl");
  const std::string& dir = dir_tmp.path();
  {
    std::ofstream f(dir + "/bad_hosts");
    f << "# failed validation\ngpu[01-03]\n\ngpu05,gpu06\n";
  }
  CliResult r =
      RunRailyard({"place", "--topology", kData + "/tree.conf", "--nodes", "4", "--exclude",
                   "@" + dir + "/bad_hosts", "--required", "spine", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  for (const auto& h : j["hosts"]) {
    for (const char* bad : {"gpu01", "gpu02", "gpu03", "gpu05", "gpu06"}) EXPECT_NE(h, bad);
  }
  EXPECT_EQ(j["levels"]["spine"], 1);
  // A bad line names the file and the line.
  {
    std::ofstream f(dir + "/broken");
    f << "gpu01\ngpu[9-2]\n";
  }
  CliResult bad = RunRailyard({"place", "--topology", kData + "/tree.conf", "--nodes", "1",
                               "--exclude", "@" + dir + "/broken"});
  ExpectOneLineError(bad, "broken:2");
}

TEST(TopoCliTest, PlaceThatCannotFitExplainsWhy) {
  CliResult r = RunRailyard(
      {"place", "--topology", kData + "/tree.conf", "--nodes", "6", "--required", "leaf"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("leaf"), std::string::npos) << r.err;
  ExpectOneLineError(RunRailyard({"place", "--topology", kData + "/tree.conf", "--nodes", "17"}),
                     "larger than the cluster");
  ExpectOneLineError(RunRailyard({"place", "--topology", kData + "/tree.conf", "--nodes", "2",
                                  "--required", "rack"}),
                     "rack");
  ExpectOneLineError(RunRailyard({"place", "--topology", kData + "/tree.conf", "--nodes", "2",
                                  "--exclude", "gpu99"}),
                     "gpu99");
}

TEST(TopoCliTest, BadTopologiesGetOneClearLine) {
  ExpectOneLineError(RunRailyard({"topo", "show", "--topology", kData + "/cycle.yaml"}),
                     "cycle.yaml");
  ExpectOneLineError(RunRailyard({"topo", "show", "--topology", kData + "/two_leaves.conf"}),
                     "two leaves");
  ExpectOneLineError(RunRailyard({"topo", "show", "--topology", kData + "/bad_range.conf"}), "5-2");
  ExpectOneLineError(RunRailyard({"topo", "show", "--topology", kData + "/nope.yaml"}),
                     "nope.yaml");
  ExpectOneLineError(
      RunRailyard({"topo", "export", "--topology", kData + "/tree.conf", "--format", "excel"}),
      "excel");
  ExpectOneLineError(RunRailyard({"topo", "export", "--topology", kData + "/tree.conf", "--format",
                                  "nccl-xml", "--node", "gpu77"}),
                     "gpu77");
}

// --nccl-cpu and --pcie-link set what the NCCL topology file says of the node's CPU and PCIe
// links (the default CPU is the exporting host's, wrong on a login node); bad values are one
// line naming the flag.
TEST(TopoCliTest, NcclXmlTakesTheNodesCpuAndPcieLink) {
  const std::string example = kData + "/../../examples/topology-2su-rail.yaml";
  auto nccl = [&](std::vector<std::string> more) {
    std::vector<std::string> args = {"topo",     "export",   "--topology", example,
                                     "--format", "nccl-xml", "--node",     "gpu001"};
    args.insert(args.end(), more.begin(), more.end());
    return RunRailyard(args);
  };
  CliResult intel =
      nccl({"--nccl-cpu", "x86_64,GenuineIntel,6,143", "--pcie-link", "16.0 GT/s PCIe,8"});
  ASSERT_EQ(intel.exit_code, 0) << intel.err;
  EXPECT_NE(intel.out.find(R"(arch="x86_64" vendor="GenuineIntel" familyid="6" modelid="143")"),
            std::string::npos)
      << intel.out;
  EXPECT_NE(intel.out.find(R"(link_speed="16.0 GT/s PCIe" link_width="8")"), std::string::npos)
      << intel.out;
  EXPECT_EQ(intel.out.find("32.0 GT/s"), std::string::npos) << intel.out;

  CliResult grace = nccl({"--nccl-cpu", "arm64"});
  ASSERT_EQ(grace.exit_code, 0) << grace.err;
  EXPECT_NE(grace.out.find(R"(arch="arm64")"), std::string::npos) << grace.out;
  EXPECT_EQ(grace.out.find("vendor="), std::string::npos) << grace.out;
  EXPECT_NE(grace.out.find(R"(link_speed="32.0 GT/s PCIe" link_width="16")"), std::string::npos)
      << grace.out;

  // Without --nccl-cpu: this host's CPU, as before.
  CliResult host = nccl({});
  ASSERT_EQ(host.exit_code, 0) << host.err;
  EXPECT_NE(host.out.find("arch=\""), std::string::npos) << host.out;

  ExpectOneLineError(nccl({"--nccl-cpu", "sparc"}), "--nccl-cpu 'sparc'");
  ExpectOneLineError(nccl({"--nccl-cpu", "x86_64"}), "x86_64 needs vendor, family and model");
  ExpectOneLineError(nccl({"--nccl-cpu", "x86_64,GenuineIntel,six,143"}), "family 'six'");
  ExpectOneLineError(nccl({"--nccl-cpu", "arm64,ARM,1,2"}), "x86_64 only");
  ExpectOneLineError(nccl({"--pcie-link", "32.0 GT/s PCIe"}), "--pcie-link '32.0 GT/s PCIe'");
  ExpectOneLineError(nccl({"--pcie-link", "32.0 GT/s PCIe,3"}), "--pcie-link");
  ExpectOneLineError(nccl({"--pcie-link", "33 GT/s,16"}), "--pcie-link '33 GT/s,16'");
  ExpectOneLineError(RunRailyard({"topo", "export", "--topology", example, "--format", "slurm-conf",
                                  "--nccl-cpu", "arm64"}),
                     "--format nccl-xml only");
}

TEST(TopoCliTest, DiscoverPrintsValidJson) {
  CliResult r = RunRailyard({"discover"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out);
  ASSERT_TRUE(j.contains("node"));
  EXPECT_FALSE(j["node"]["name"].get<std::string>().empty());
}

}  // namespace
}  // namespace railyard::testing
