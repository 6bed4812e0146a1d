#include "railyard/topo/nccl_export.h"

#include <gtest/gtest.h>

#include "railyard/topo/golden_testing.h"

#include <cstdlib>
#include <string>

#include "railyard/base/files.h"

namespace railyard::topo {
namespace {

using testing::ExpectGolden;

std::vector<int> Range(int lo, int hi) {
  std::vector<int> v;
  for (int i = lo; i <= hi; ++i) v.push_back(i);
  return v;
}

// A two-socket box: CPUs 0-15,32-47 on NUMA 0 and 16-31,48-63 on NUMA 1; four GPUs, two
// 400G RDMA NICs, an Ethernet NIC with no bus id.
Node TwoSocketNode() {
  Node n;
  n.name = "gpu07";
  std::vector<int> numa0 = Range(0, 15), numa1 = Range(16, 31);
  for (int c : Range(32, 47)) numa0.push_back(c);
  for (int c : Range(48, 63)) numa1.push_back(c);
  n.numa = {{0, numa0}, {1, numa1}};
  n.gpus = {{0, "GPU-0", "00000000:1A:00.0", 0, ""},
            {1, "GPU-1", "0000:17:00.0", 0, ""},
            {2, "GPU-2", "0000:97:00.0", 1, ""},
            {3, "GPU-3", "0000:9a:00.0", 1, ""}};
  n.gpu_count = 4;
  n.nics = {{"mlx5_0", "0000:18:00.0", 0, 0, 400'000'000'000, true},
            {"mlx5_1", "0000:98:00.0", 1, 1, 400'000'000'000, true},
            {"eth0", "", 0, -1, 25'000'000'000, false}};
  return n;
}

TEST(NcclExportTest, TwoSocketNodeGolden) {
  Result<std::string> xml = NcclTopologyXml(TwoSocketNode());
  ASSERT_TRUE(xml.ok()) << xml.status().ToString();
  // NUMA 0 = CPUs 0-15 and 32-47: low 16 bits of both 32-bit words, high word first.
  EXPECT_NE(xml->find("<cpu numaid=\"0\" affinity=\"0000ffff,0000ffff\">"), std::string::npos)
      << *xml;
  EXPECT_NE(xml->find("<cpu numaid=\"1\" affinity=\"ffff0000,ffff0000\">"), std::string::npos);
  // NVML's 8-digit domain and uppercase hex are normalised to sysfs spelling.
  EXPECT_NE(xml->find("busid=\"0000:1a:00.0\""), std::string::npos);
  EXPECT_NE(xml->find("<net name=\"mlx5_0\" speed=\"400000\"/>"), std::string::npos);
  EXPECT_NE(xml->find("class=\"0x020700\""), std::string::npos);
  EXPECT_EQ(xml->find("eth0"), std::string::npos) << "no bus id: left for NCCL to place";
  // Nothing guessed: no fake CPU vendor, no ranks, no empty link speeds.
  for (const char* absent : {"vendor", "GenuineIntel", "rank=", "link_speed", "gdr", "<?xml"}) {
    EXPECT_EQ(xml->find(absent), std::string::npos) << absent;
  }
  // Devices sorted by bus id under their CPU, as NCCL keeps them.
  EXPECT_LT(xml->find("0000:17:00.0"), xml->find("0000:18:00.0"));
  EXPECT_LT(xml->find("0000:18:00.0"), xml->find("0000:1a:00.0"));
  EXPECT_LT(xml->find("numaid=\"0\""), xml->find("0000:17:00.0"));
  EXPECT_LT(xml->find("0000:1a:00.0"), xml->find("numaid=\"1\""));
  ExpectGolden("nccl_topo_two_socket.xml", *xml);
}

TEST(NcclExportTest, NumaOnlyNodeIsAPartialFile) {
  Node n;
  n.name = "cpu0";
  n.numa = {{0, Range(0, 3)}};
  Result<std::string> xml = NcclTopologyXml(n);
  ASSERT_TRUE(xml.ok()) << xml.status().ToString();
  EXPECT_EQ(*xml,
            "<system version=\"1\">\n  <cpu numaid=\"0\" affinity=\"0000000f\"/>\n</system>\n");
}

TEST(NcclExportTest, DeviceOnANumaNodeNotListedGetsACpuWithoutAffinity) {
  Node n;
  n.name = "n";
  n.gpus = {{0, "", "0000:17:00.0", 3, ""}};
  n.gpu_count = 1;
  Result<std::string> xml = NcclTopologyXml(n);
  ASSERT_TRUE(xml.ok()) << xml.status().ToString();
  EXPECT_NE(xml->find("<cpu numaid=\"3\">"), std::string::npos) << *xml;
  EXPECT_NE(xml->find("<gpu dev=\"0\"/>"), std::string::npos);
}

TEST(NcclExportTest, MultiPortNicSharesOnePciFunction) {
  Node n;
  n.name = "n";
  n.numa = {{0, {0}}};
  n.nics = {{"mlx5_0", "0000:18:00.0", 0, -1, 0, true}, {"mlx5_1", "0000:18:00.0", 0, -1, 0, true}};
  Result<std::string> xml = NcclTopologyXml(n);
  ASSERT_TRUE(xml.ok()) << xml.status().ToString();
  EXPECT_NE(xml->find("<nic>\n        <net name=\"mlx5_0\"/>\n        <net name=\"mlx5_1\"/>\n"
                      "      </nic>"),
            std::string::npos)
      << *xml;
  EXPECT_EQ(xml->find("busid=\"0000:18:00.0\""), xml->rfind("busid=\"0000:18:00.0\""));
}

TEST(NcclExportTest, NonRdmaNicIsEthernetClass) {
  Node n;
  n.name = "n";
  n.nics = {{"eth0", "0000:01:00.0", 0, -1, 25'000'000'000, false}};
  Result<std::string> xml = NcclTopologyXml(n);
  ASSERT_TRUE(xml.ok()) << xml.status().ToString();
  EXPECT_NE(xml->find("class=\"0x020000\""), std::string::npos);
  EXPECT_NE(xml->find("speed=\"25000\""), std::string::npos);
}

TEST(NcclExportTest, EscapesAttributeValues) {
  Node n;
  n.name = "n";
  n.nics = {{"a&b<\"'>", "0000:01:00.0", 0, -1, 0, false}};
  Result<std::string> xml = NcclTopologyXml(n);
  ASSERT_TRUE(xml.ok()) << xml.status().ToString();
  EXPECT_NE(xml->find("name=\"a&amp;b&lt;&quot;&apos;&gt;\""), std::string::npos) << *xml;
}

TEST(NcclExportTest, OmitsAffinityPastNcclsAttributeLimit) {
  Node n;
  n.name = "big";
  // CPU 895 needs 28 groups: 28 * 9 - 1 = 251 characters, within NCCL's 255.
  n.numa = {{0, Range(0, 447)}, {1, Range(448, 895)}};
  Result<std::string> xml = NcclTopologyXml(n);
  ASSERT_TRUE(xml.ok());
  EXPECT_NE(xml->find("affinity"), std::string::npos);
  // CPU 896 needs 29 groups (260 characters): left to NCCL's sysfs read.
  n.numa[1].cpus.push_back(896);
  xml = NcclTopologyXml(n);
  ASSERT_TRUE(xml.ok());
  EXPECT_EQ(xml->find("affinity"), std::string::npos) << *xml;
}

TEST(NcclExportTest, Errors) {
  Node empty;
  empty.name = "e";
  empty.gpus = {{0, "", "", 0, ""}, {1, "", "0000:17:00.0", -1, ""}};  // nothing placeable
  empty.gpu_count = 2;
  Result<std::string> xml = NcclTopologyXml(empty);
  ASSERT_FALSE(xml.ok());
  EXPECT_EQ(xml.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(xml.status().message().find("node 'e': nothing to write"), std::string::npos);

  Node bad_bus = TwoSocketNode();
  bad_bus.gpus[2].pci_bus_id = "17:00.0";
  xml = NcclTopologyXml(bad_bus);
  ASSERT_FALSE(xml.ok());
  EXPECT_NE(xml.status().message().find("GPU 2 has PCI bus id '17:00.0'"), std::string::npos)
      << xml.status().message();

  for (const char* bus :
       {"0000:17:00", "0000:1g:00.0", "000:17:00.0", "0000:17-00.0", "000000000:17:00.0"}) {
    Node n = TwoSocketNode();
    n.nics[0].pci_bus_id = bus;
    EXPECT_FALSE(NcclTopologyXml(n).ok()) << bus;
  }

  Node shared = TwoSocketNode();
  shared.gpus[1].pci_bus_id = "0000:1A:00.0";
  xml = NcclTopologyXml(shared);
  ASSERT_FALSE(xml.ok());
  EXPECT_NE(xml.status().message().find("GPU 0 and GPU 1 both have PCI bus id 0000:1a:00.0"),
            std::string::npos)
      << xml.status().message();

  Node gpu_nic = TwoSocketNode();
  gpu_nic.nics[0].pci_bus_id = "0000:17:00.0";
  xml = NcclTopologyXml(gpu_nic);
  ASSERT_FALSE(xml.ok());
  EXPECT_NE(xml.status().message().find("GPU 1 and NIC 'mlx5_0'"), std::string::npos)
      << xml.status().message();
}

}  // namespace
}  // namespace railyard::topo
