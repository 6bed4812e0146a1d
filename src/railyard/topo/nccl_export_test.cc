#include "railyard/topo/nccl_export.h"

#include <gtest/gtest.h>

#include <cctype>
#include <string>

#include "railyard/topo/golden_testing.h"
#include "railyard/topo/nccl_xml_check_testing.h"

namespace railyard::topo {
namespace {

using testing::CheckNcclTopology;
using testing::ExpectGolden;
using testing::NcclTopoReport;

std::vector<int> Range(int lo, int hi) {
  std::vector<int> v;
  for (int i = lo; i <= hi; ++i) v.push_back(i);
  return v;
}

// A Sapphire Rapids host as NCCL's cpuid read names it.
NcclExportOptions Options() {
  NcclExportOptions o;
  o.cpu = {"x86_64", "GenuineIntel", 6, 143};
  return o;
}

Result<std::string> Xml(const Node& n) { return NcclTopologyXml(n, Options()); }

size_t Count(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
  return n;
}

// Sysfs spelling, as the file has it: "00000000:1A:00.0" -> "0000:1a:00.0".
std::string SysfsBusId(std::string id) {
  if (id.find(':') > 4) id.erase(0, id.find(':') - 4);
  for (char& c : id) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return id;
}

std::string NcclClass(PathClass p) {
  return p == PathClass::kNODE ? "PHB" : std::string(PathClassName(p));
}

// Exports `n`, checks the file as NCCL loads it, and checks that NCCL computes the model's
// class for every GPU-NIC pair the model states (NODE is PHB to NCCL).
void ExpectNcclAgrees(const Node& n) {
  Result<std::string> xml = Xml(n);
  ASSERT_TRUE(xml.ok()) << xml.status().ToString();
  NcclTopoReport r = CheckNcclTopology(*xml);
  EXPECT_TRUE(r.errors.empty()) << r.Errors() << *xml;
  // NCCL adds <gpu> and <nic> from NVML and its plugin; the file pins none of their values.
  EXPECT_EQ(xml->find("<gpu"), std::string::npos);
  EXPECT_EQ(xml->find("<nic"), std::string::npos);
  ASSERT_FALSE(n.gpu_nic_paths.empty());
  for (const GpuNicPath& p : n.gpu_nic_paths) {
    std::string gpu, nic;
    for (const Gpu& g : n.gpus) {
      if (g.index == p.gpu) gpu = SysfsBusId(g.pci_bus_id);
    }
    for (const Nic& c : n.nics) {
      if (c.name == p.nic) nic = SysfsBusId(c.pci_bus_id);
    }
    EXPECT_EQ(r.Path(gpu, nic), NcclClass(p.path))
        << n.name << ": GPU " << p.gpu << " (" << gpu << ") and " << p.nic << " (" << nic << ")\n"
        << *xml;
  }
}

Node OneSocket(std::string name) {
  Node n;
  n.name = std::move(name);
  n.numa = {{0, Range(0, 31)}};
  return n;
}

// PIX: each GPU shares a PCIe switch with its NIC; across switches the path goes through the
// CPU.
TEST(NcclExportTest, PixNode) {
  Node n = OneSocket("pix01");
  n.gpus = {{0, "", "0000:17:00.0", 0, ""}, {1, "", "0000:2a:00.0", 0, ""}};
  n.gpu_count = 2;
  n.nics = {{"mlx5_0", "0000:18:00.0", 0, 0, 400'000'000'000, true},
            {"mlx5_1", "0000:2b:00.0", 0, 1, 400'000'000'000, true}};
  n.gpu_nic_paths = {{0, "mlx5_0", PathClass::kPIX},
                     {1, "mlx5_1", PathClass::kPIX},
                     {0, "mlx5_1", PathClass::kPHB},
                     {1, "mlx5_0", PathClass::kPHB}};
  ExpectNcclAgrees(n);
  Result<std::string> xml = Xml(n);
  ASSERT_TRUE(xml.ok());
  EXPECT_EQ(Count(*xml, "class=\"0x060400\""), 2u) << *xml;  // one switch per pair
}

// PXB: GPU and NIC behind different switches under one bridge, without crossing the CPU.
TEST(NcclExportTest, PxbNode) {
  Node n = OneSocket("pxb01");
  n.gpus = {{0, "", "0000:1b:00.0", 0, ""}, {1, "", "0000:1c:00.0", 0, ""}};
  n.gpu_count = 2;
  n.nics = {{"mlx5_0", "0000:1d:00.0", 0, 0, 200'000'000'000, true}};
  n.gpu_nic_paths = {{0, "mlx5_0", PathClass::kPXB}, {1, "mlx5_0", PathClass::kPIX}};
  ExpectNcclAgrees(n);
  Result<std::string> xml = Xml(n);
  ASSERT_TRUE(xml.ok());
  // Root bridge over two switches: {GPU 1, NIC} and {GPU 0}.
  EXPECT_EQ(Count(*xml, "class=\"0x060400\""), 3u) << *xml;

  // A PXB pair alone: each device behind its own switch under the common bridge.
  n.gpu_nic_paths = {{0, "mlx5_0", PathClass::kPXB}};
  ExpectNcclAgrees(n);
}

// PHB: same CPU, no common switch (the model's NODE, across host bridges of one NUMA node,
// is PHB to NCCL too).
TEST(NcclExportTest, PhbNode) {
  Node n = OneSocket("phb01");
  n.gpus = {{0, "", "0000:17:00.0", 0, ""}, {1, "", "0000:3a:00.0", 0, ""}};
  n.gpu_count = 2;
  n.nics = {{"mlx5_0", "0000:18:00.0", 0, 0, 100'000'000'000, true}};
  n.gpu_nic_paths = {{0, "mlx5_0", PathClass::kPHB}, {1, "mlx5_0", PathClass::kNODE}};
  ExpectNcclAgrees(n);
  Result<std::string> xml = Xml(n);
  ASSERT_TRUE(xml.ok());
  EXPECT_EQ(xml->find("0x060400"), std::string::npos) << *xml;
}

// SYS: GPU and NIC on different sockets.
TEST(NcclExportTest, SysNode) {
  Node n;
  n.name = "sys01";
  n.numa = {{0, Range(0, 15)}, {1, Range(16, 31)}};
  n.gpus = {{0, "", "0000:17:00.0", 0, ""}};
  n.gpu_count = 1;
  n.nics = {{"mlx5_0", "0000:98:00.0", 1, 0, 400'000'000'000, true}};
  n.gpu_nic_paths = {{0, "mlx5_0", PathClass::kSYS}};
  ExpectNcclAgrees(n);
  // The NIC's socket has no GPU and still carries the CPU identity NCCL needs.
  Result<std::string> xml = Xml(n);
  ASSERT_TRUE(xml.ok());
  EXPECT_EQ(Count(*xml, "arch=\"x86_64\" vendor=\"GenuineIntel\" familyid=\"6\" modelid=\"143\""),
            2u)
      << *xml;
}

// A two-socket box: CPUs 0-15,32-47 on NUMA 0 and 16-31,48-63 on NUMA 1; four GPUs, two
// 400G RDMA NICs and an Ethernet NIC with no bus id; all four path classes.
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
  n.gpu_nic_paths = {{1, "mlx5_0", PathClass::kPIX}, {0, "mlx5_0", PathClass::kPXB},
                     {2, "mlx5_1", PathClass::kPIX}, {3, "mlx5_1", PathClass::kNODE},
                     {0, "mlx5_1", PathClass::kSYS}, {1, "mlx5_1", PathClass::kSYS},
                     {2, "mlx5_0", PathClass::kSYS}, {3, "mlx5_0", PathClass::kSYS}};
  return n;
}

TEST(NcclExportTest, TwoSocketNode) {
  ExpectNcclAgrees(TwoSocketNode());

  Result<std::string> xml = Xml(TwoSocketNode());
  ASSERT_TRUE(xml.ok()) << xml.status().ToString();
  // NUMA 0 = CPUs 0-15 and 32-47: low 16 bits of both 32-bit words, high word first.
  EXPECT_NE(xml->find("<cpu numaid=\"0\" affinity=\"0000ffff,0000ffff\" arch=\"x86_64\""),
            std::string::npos)
      << *xml;
  EXPECT_NE(xml->find("<cpu numaid=\"1\" affinity=\"ffff0000,ffff0000\""), std::string::npos);
  EXPECT_NE(xml->find("<pci busid=\"0000:18:00.0\" class=\"0x020700\" link_speed=\"32.0 GT/s "
                      "PCIe\" link_width=\"16\"/>"),
            std::string::npos);
  // NVML's 8-digit domain and uppercase hex are written in sysfs spelling.
  EXPECT_NE(xml->find("busid=\"0000:1a:00.0\""), std::string::npos);
  EXPECT_EQ(xml->find("eth0"), std::string::npos) << "no bus id: left for NCCL to place";
  EXPECT_EQ(xml->find("<?xml"), std::string::npos);
  // Bridges are numbered in the order they are written, as the clouds' files do.
  EXPECT_LT(xml->find("ffff:ff:01.0"), xml->find("ffff:ff:02.0"));
  EXPECT_LT(xml->find("ffff:ff:03.0"), xml->find("ffff:ff:04.0"));
  EXPECT_EQ(xml->find("ffff:ff:05.0"), std::string::npos);
  ExpectGolden("nccl_topo_two_socket.xml", *xml);
}

TEST(NcclExportTest, WithoutPathsEveryPairIsPhb) {
  Node n = TwoSocketNode();
  n.gpu_nic_paths.clear();
  Result<std::string> xml = Xml(n);
  ASSERT_TRUE(xml.ok());
  NcclTopoReport r = CheckNcclTopology(*xml);
  EXPECT_TRUE(r.errors.empty()) << r.Errors();
  EXPECT_EQ(r.Path("0000:17:00.0", "0000:18:00.0"), "PHB");
  EXPECT_EQ(r.Path("0000:97:00.0", "0000:18:00.0"), "SYS");
  EXPECT_EQ(xml->find("0x060400"), std::string::npos);
}

TEST(NcclExportTest, NumaOnlyNodeIsAPartialFile) {
  Node n;
  n.name = "cpu0";
  n.numa = {{0, Range(0, 3)}};
  NcclExportOptions o;
  o.cpu = {"arm64", "", -1, -1};
  Result<std::string> xml = NcclTopologyXml(n, o);
  ASSERT_TRUE(xml.ok()) << xml.status().ToString();
  EXPECT_EQ(*xml,
            "<system version=\"1\">\n  <cpu numaid=\"0\" affinity=\"0000000f\" arch=\"arm64\"/>\n"
            "</system>\n");
  EXPECT_TRUE(CheckNcclTopology(*xml).errors.empty());
}

TEST(NcclExportTest, DeviceOnANumaNodeNotListedGetsACpuWithoutAffinity) {
  Node n;
  n.name = "n";
  n.gpus = {{0, "", "0000:17:00.0", 3, ""}};
  n.gpu_count = 1;
  Result<std::string> xml = Xml(n);
  ASSERT_TRUE(xml.ok()) << xml.status().ToString();
  EXPECT_NE(xml->find("<cpu numaid=\"3\" arch="), std::string::npos) << *xml;
  NcclTopoReport r = CheckNcclTopology(*xml);
  EXPECT_TRUE(r.errors.empty()) << r.Errors();
  EXPECT_EQ(r.gpus, std::vector<std::string>{"0000:17:00.0"});
}

TEST(NcclExportTest, MultiPortNicSharesOnePciFunction) {
  Node n = OneSocket("n");
  n.gpus = {{0, "", "0000:17:00.0", 0, ""}};
  n.gpu_count = 1;
  n.nics = {{"mlx5_0", "0000:18:00.0", 0, -1, 0, true}, {"mlx5_1", "0000:18:00.0", 0, -1, 0, true}};
  n.gpu_nic_paths = {{0, "mlx5_0", PathClass::kPIX}, {0, "mlx5_1", PathClass::kPIX}};
  ExpectNcclAgrees(n);
  Result<std::string> xml = Xml(n);
  ASSERT_TRUE(xml.ok());
  EXPECT_EQ(Count(*xml, "busid=\"0000:18:00.0\""), 1u) << *xml;
}

TEST(NcclExportTest, NonRdmaNicIsEthernetClass) {
  Node n;
  n.name = "n";
  n.nics = {{"eth0", "0000:01:00.0", 0, -1, 25'000'000'000, false}};
  Result<std::string> xml = Xml(n);
  ASSERT_TRUE(xml.ok()) << xml.status().ToString();
  EXPECT_NE(xml->find("class=\"0x020000\""), std::string::npos);
  EXPECT_TRUE(CheckNcclTopology(*xml).errors.empty());
}

TEST(NcclExportTest, EscapesAttributeValues) {
  Node n = OneSocket("n");
  NcclExportOptions o = Options();
  o.cpu.vendor = "a&b<\"'>";
  Result<std::string> xml = NcclTopologyXml(n, o);
  ASSERT_TRUE(xml.ok()) << xml.status().ToString();
  EXPECT_NE(xml->find("vendor=\"a&amp;b&lt;&quot;&apos;&gt;\""), std::string::npos) << *xml;
}

TEST(NcclExportTest, LinkSpeedAndWidthFromOptions) {
  Node n = TwoSocketNode();
  NcclExportOptions o = Options();
  o.pcie_link_speed = "16.0 GT/s PCIe";
  o.pcie_link_width = 8;
  Result<std::string> xml = NcclTopologyXml(n, o);
  ASSERT_TRUE(xml.ok()) << xml.status().ToString();
  EXPECT_EQ(Count(*xml, "link_speed=\"16.0 GT/s PCIe\" link_width=\"8\""), Count(*xml, "<pci "));
  EXPECT_TRUE(CheckNcclTopology(*xml).errors.empty());
}

TEST(NcclExportTest, OmitsAffinityPastNcclsAttributeLimit) {
  Node n;
  n.name = "big";
  // CPU 895 needs 28 groups: 28 * 9 - 1 = 251 characters, within NCCL's 253.
  n.numa = {{0, Range(0, 447)}, {1, Range(448, 895)}};
  Result<std::string> xml = Xml(n);
  ASSERT_TRUE(xml.ok());
  EXPECT_NE(xml->find("affinity"), std::string::npos);
  EXPECT_TRUE(CheckNcclTopology(*xml).errors.empty()) << CheckNcclTopology(*xml).Errors();
  // CPU 896 needs 29 groups (260 characters): left to NCCL's sysfs read.
  n.numa[1].cpus.push_back(896);
  xml = Xml(n);
  ASSERT_TRUE(xml.ok());
  EXPECT_EQ(xml->find("affinity"), std::string::npos) << *xml;
}

TEST(NcclExportTest, HostCpu) {
  Result<NcclCpu> cpu = HostNcclCpu();
  ASSERT_TRUE(cpu.ok()) << cpu.status().ToString();
  EXPECT_TRUE(cpu->arch == "x86_64" || cpu->arch == "arm64" || cpu->arch == "ppc64") << cpu->arch;
  if (cpu->arch == "x86_64") {
    EXPECT_EQ(cpu->vendor.size(), 12u) << cpu->vendor;
    EXPECT_GT(cpu->family, 0);
  }
  Result<std::string> xml = NcclTopologyXml(TwoSocketNode());
  ASSERT_TRUE(xml.ok()) << xml.status().ToString();
  EXPECT_TRUE(CheckNcclTopology(*xml).errors.empty()) << CheckNcclTopology(*xml).Errors();
}

TEST(NcclExportTest, BadOptions) {
  Node n = TwoSocketNode();
  auto message = [&](const NcclExportOptions& o) {
    Result<std::string> xml = NcclTopologyXml(n, o);
    EXPECT_FALSE(xml.ok());
    return xml.ok() ? std::string() : xml.status().message();
  };
  NcclExportOptions o = Options();
  o.cpu.arch = "riscv64";
  EXPECT_NE(message(o).find("node 'gpu07': NCCL CPU arch 'riscv64'"), std::string::npos);
  o = Options();
  o.cpu.model = -1;
  EXPECT_NE(message(o).find("needs vendor, family and model"), std::string::npos);
  o = Options();
  o.pcie_link_speed = "32 GT/s PCIe";
  EXPECT_NE(message(o).find("link speed '32 GT/s PCIe' is not one NCCL knows"), std::string::npos);
  o = Options();
  o.pcie_link_width = 0;
  EXPECT_NE(message(o).find("link width 0"), std::string::npos);
}

TEST(NcclExportTest, PathsThatDoNotFitOneTree) {
  Node n = TwoSocketNode();
  n.gpu_nic_paths = {{0, "mlx5_1", PathClass::kPIX}};  // different NUMA nodes
  Result<std::string> xml = Xml(n);
  ASSERT_FALSE(xml.ok());
  EXPECT_NE(xml.status().message().find(
                "gpu_nic_paths says PIX for GPU 0 and NIC 'mlx5_1', but they are on NUMA nodes "
                "0 and 1"),
            std::string::npos)
      << xml.status().message();

  n.gpu_nic_paths = {{2, "mlx5_1", PathClass::kSYS}};  // same NUMA node
  EXPECT_FALSE(Xml(n).ok());

  // GPUs 0 and 1 share mlx5_0's switch, so GPU 1 and mlx5_2 cannot be PXB when GPU 0 and
  // mlx5_2 are PIX.
  n = OneSocket("n");
  n.gpus = {{0, "", "0000:17:00.0", 0, ""}, {1, "", "0000:19:00.0", 0, ""}};
  n.gpu_count = 2;
  n.nics = {{"mlx5_0", "0000:18:00.0", 0, -1, 0, true}, {"mlx5_2", "0000:1b:00.0", 0, -1, 0, true}};
  n.gpu_nic_paths = {{0, "mlx5_0", PathClass::kPIX},
                     {1, "mlx5_0", PathClass::kPIX},
                     {0, "mlx5_2", PathClass::kPIX},
                     {1, "mlx5_2", PathClass::kPXB}};
  xml = Xml(n);
  ASSERT_FALSE(xml.ok());
  EXPECT_NE(xml.status().message().find("says PXB for GPU 1 and NIC 'mlx5_2', but its PIX and "
                                        "PXB pairs put them behind one PCI switch, where NCCL "
                                        "computes PIX"),
            std::string::npos)
      << xml.status().message();

  n.gpu_nic_paths = {{0, "mlx5_0", PathClass::kPXB},
                     {0, "mlx5_2", PathClass::kPXB},
                     {1, "mlx5_2", PathClass::kPXB},
                     {1, "mlx5_0", PathClass::kPHB}};
  xml = Xml(n);
  ASSERT_FALSE(xml.ok());
  EXPECT_NE(xml.status().message().find("under one PCI bridge, where NCCL computes PXB"),
            std::string::npos)
      << xml.status().message();
}

TEST(NcclExportTest, Errors) {
  Node empty;
  empty.name = "e";
  empty.gpus = {{0, "", "", 0, ""}, {1, "", "0000:17:00.0", -1, ""}};  // nothing placeable
  empty.gpu_count = 2;
  Result<std::string> xml = Xml(empty);
  ASSERT_FALSE(xml.ok());
  EXPECT_EQ(xml.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(xml.status().message().find("node 'e': nothing to write"), std::string::npos);

  Node bad_bus = TwoSocketNode();
  bad_bus.gpus[2].pci_bus_id = "17:00.0";
  xml = Xml(bad_bus);
  ASSERT_FALSE(xml.ok());
  EXPECT_NE(xml.status().message().find("GPU 2 has PCI bus id '17:00.0'"), std::string::npos)
      << xml.status().message();

  for (const char* bus :
       {"0000:17:00", "0000:1g:00.0", "000:17:00.0", "0000:17-00.0", "000000000:17:00.0"}) {
    Node n = TwoSocketNode();
    n.nics[0].pci_bus_id = bus;
    EXPECT_FALSE(Xml(n).ok()) << bus;
  }

  Node shared = TwoSocketNode();
  shared.gpus[1].pci_bus_id = "0000:1A:00.0";
  xml = Xml(shared);
  ASSERT_FALSE(xml.ok());
  EXPECT_NE(xml.status().message().find("GPU 0 and GPU 1 both have PCI bus id 0000:1a:00.0"),
            std::string::npos)
      << xml.status().message();

  Node gpu_nic = TwoSocketNode();
  gpu_nic.nics[0].pci_bus_id = "0000:17:00.0";
  xml = Xml(gpu_nic);
  ASSERT_FALSE(xml.ok());
  EXPECT_NE(xml.status().message().find("GPU 1 and NIC 'mlx5_0'"), std::string::npos)
      << xml.status().message();
}

}  // namespace
}  // namespace railyard::topo
