// The NCCL topology check itself: it must reject what NCCL rejects (the file Railyard wrote
// before, which NCCL refused at init) and compute NCCL's path classes for a file in the form
// the clouds publish.
#include <gtest/gtest.h>

#include <cstdio>
#include <string>

#include "railyard/base/files.h"
#include "railyard/topo/nccl_xml_check_testing.h"
#include "railyard/topo/testdata_testing.h"

namespace railyard::topo::testing {
namespace {

std::string Testdata(const std::string& name) {
  Result<std::string> text = base::ReadFile(testing::TestData(name));
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : std::string();
}

bool HasError(const NcclTopoReport& r, const std::string& part) {
  for (const std::string& e : r.errors) {
    if (e.find(part) != std::string::npos) return true;
  }
  return false;
}

constexpr const char* kCpu =
    "<cpu numaid=\"0\" affinity=\"0000000f\" arch=\"x86_64\" vendor=\"GenuineIntel\" "
    "familyid=\"6\" modelid=\"143\">";
constexpr const char* kLink = " link_speed=\"32.0 GT/s PCIe\" link_width=\"16\"";

std::string Wrap(const std::string& inside) {
  return std::string("<system version=\"1\">\n  ") + kCpu + "\n" + inside + "  </cpu>\n</system>\n";
}

std::string Leaf(const std::string& bus, const std::string& cls) {
  return "<pci busid=\"" + bus + "\" class=\"" + cls + "\"" + kLink + "/>\n";
}

std::string Bridge(const std::string& bus, const std::string& inside) {
  return "<pci busid=\"" + bus + "\" class=\"0x060400\"" + kLink + ">\n" + inside + "</pci>\n";
}

// The NCCL_TOPO_FILE Railyard wrote before: <nic><net/></nic> without link attributes and CPUs
// without arch. NCCL 2.18 to 2.30 stop at "Attribute link_width of node pci not found" for
// the NIC, whose sysfs fill never runs because ncclTopoFillNet finds the <net> by name.
TEST(NcclXmlCheckTest, RejectsTheFileNcclRefused) {
  NcclTopoReport r = CheckNcclTopology(Testdata("nccl_topo_before_fix.xml"));
  EXPECT_TRUE(HasError(r, "Attribute link_width of node pci not found (pci busid=0000:18:00.0)"))
      << r.Errors();
  EXPECT_TRUE(HasError(r, "Attribute link_speed of node pci not found")) << r.Errors();
  EXPECT_TRUE(HasError(r, "Attribute arch of node cpu not found (cpu numaid=1)")) << r.Errors();
  // And every GPU-NIC pair there was PHB or SYS: GPUDirect RDMA off.
  EXPECT_EQ(r.Path("0000:17:00.0", "0000:18:00.0"), "PHB");
  EXPECT_EQ(r.Path("0000:17:00.0", "0000:98:00.0"), "SYS");
}

TEST(NcclXmlCheckTest, CloudFormLoadsWithPixInsideASwitch) {
  NcclTopoReport r = CheckNcclTopology(Testdata("nccl_topo_cloud_form.xml"));
  EXPECT_TRUE(r.errors.empty()) << r.Errors();
  EXPECT_EQ(r.gpus.size(), 8u);
  EXPECT_EQ(r.nics.size(), 4u);
  EXPECT_EQ(r.Path("0001:00:00.0", "0101:00:00.0"), "PIX");
  EXPECT_EQ(r.Path("0002:00:00.0", "0101:00:00.0"), "PIX");
  EXPECT_EQ(r.Path("0003:00:00.0", "0101:00:00.0"), "PHB");  // other switch, same socket
  EXPECT_EQ(r.Path("0005:00:00.0", "0101:00:00.0"), "SYS");  // other socket
  EXPECT_EQ(r.Path("0008:00:00.0", "0104:00:00.0"), "PIX");
}

TEST(NcclXmlCheckTest, PxbThroughTwoBridges) {
  // Root bridge over two switches: GPU behind one, NIC behind the other.
  NcclTopoReport r = CheckNcclTopology(
      Wrap(Bridge("ffff:ff:01.0", Bridge("ffff:ff:02.0", Leaf("0000:1b:00.0", "0x030200")) +
                                      Bridge("ffff:ff:03.0", Leaf("0000:1d:00.0", "0x020700")) +
                                      Leaf("0000:1e:00.0", "0x030200"))));
  EXPECT_TRUE(r.errors.empty()) << r.Errors();
  EXPECT_EQ(r.Path("0000:1b:00.0", "0000:1d:00.0"), "PXB");
  // A GPU directly under the root bridge is still two bridges from the NIC.
  EXPECT_EQ(r.Path("0000:1e:00.0", "0000:1d:00.0"), "PXB");
}

TEST(NcclXmlCheckTest, NicElementWithLinkAttributesIsANic) {
  NcclTopoReport r = CheckNcclTopology(
      Wrap(Bridge("ffff:ff:01.0", Leaf("0000:17:00.0", "0x030200") +
                                      "<pci busid=\"0000:18:00.0\" class=\"0x020700\"" + kLink +
                                      ">\n<nic>\n<net name=\"mlx5_0\"/>\n</nic>\n</pci>\n")));
  EXPECT_TRUE(r.errors.empty()) << r.Errors();
  EXPECT_EQ(r.Path("0000:17:00.0", "0000:18:00.0"), "PIX");
}

TEST(NcclXmlCheckTest, RequiredCpuAttributes) {
  auto check = [](const std::string& cpu) {
    return CheckNcclTopology("<system version=\"1\">\n  " + cpu + "\n" +
                             Leaf("0000:17:00.0", "0x030200") + "  </cpu>\n</system>\n");
  };
  EXPECT_TRUE(check("<cpu numaid=\"0\" arch=\"arm64\">").errors.empty());
  EXPECT_TRUE(HasError(check("<cpu numaid=\"0\" arch=\"x86_64\">"),
                       "Attribute vendor of node cpu not found"));
  EXPECT_TRUE(HasError(check("<cpu numaid=\"0\" arch=\"x86_64\" vendor=\"AuthenticAMD\">"),
                       "Attribute familyid of node cpu not found"));
  EXPECT_TRUE(HasError(check("<cpu numaid=\"0\" arch=\"riscv\">"), "kvDictCpuArch"));
  EXPECT_TRUE(HasError(check("<cpu arch=\"arm64\">"), "Attribute numaid of node cpu not found"));
  EXPECT_TRUE(
      HasError(check("<cpu numaid=\"0\" affinity=\"fff\" arch=\"arm64\">"), "not a sysfs cpumap"));
}

TEST(NcclXmlCheckTest, PciValuesNcclWouldNotRead) {
  auto check = [](const std::string& pci) { return CheckNcclTopology(Wrap(pci)); };
  EXPECT_TRUE(HasError(check("<pci busid=\"0000:17:00.0\" class=\"0x030200\" link_speed=\"16 "
                             "GT/s PCIe\" link_width=\"16\"/>\n"),
                       "kvDictPciGen"));
  EXPECT_TRUE(HasError(check(Leaf("0000:1A:00.0", "0x030200")), "lowercase"));
  EXPECT_TRUE(HasError(check(Leaf("0000:17:00.0", "0x030200") + Leaf("0000:17:00.0", "0x020700")),
                       "a second <pci> with this busid"));
  EXPECT_TRUE(HasError(check(Bridge("ffff:ff:01.0", "")), "nothing under it"));
  EXPECT_TRUE(HasError(check("<gpu dev=\"0\"/>\n"), "<gpu> under <cpu> is skipped by NCCL"));
  // 8 switches of 8 NICs: 74 elements, and 2 more per NIC that NCCL adds: within 256.
  std::string switches;
  for (int b = 0; b < 8; ++b) {
    std::string leaves;
    for (int d = 0; d < 8; ++d) {
      char bus[16];
      std::snprintf(bus, sizeof bus, "0000:%02x:%02x.0", 0x20 + b, d);
      leaves += Leaf(bus, "0x020700");
    }
    switches += Bridge("ffff:ff:0" + std::to_string(b + 1) + ".0", leaves);
  }
  EXPECT_TRUE(check(switches).errors.empty()) << check(switches).Errors();
  // Twice that (duplicate bus ids aside): 146 elements, 20 + 256 that NCCL adds.
  EXPECT_TRUE(HasError(check(switches + switches), "NCCL_TOPO_XML_MAX_NODES"));
  EXPECT_TRUE(
      HasError(check("<pci busid=\"0000:17:00.0\" class=\"0x030200\" link_width=\"16\"/>\n"),
               "Attribute link_speed of node pci not found"));
}

TEST(NcclXmlCheckTest, TokenizerRules) {
  const std::string good = Wrap(Leaf("0000:17:00.0", "0x030200"));
  EXPECT_TRUE(CheckNcclTopology(good).errors.empty());
  EXPECT_TRUE(CheckNcclTopology("<!-- a comment -->\n" + good).errors.empty());

  auto first_error = [](const std::string& text) {
    NcclTopoReport r = CheckNcclTopology(text);
    return r.errors.empty() ? std::string("(none)") : r.errors.front();
  };
  EXPECT_NE(first_error("<?xml version=\"1.0\"?>\n" + good).find("expected '>'"),
            std::string::npos);
  EXPECT_NE(first_error("\t" + good).find("expecting '<'"), std::string::npos);
  EXPECT_NE(first_error("<system\nversion=\"1\">\n</system>\n").find("expected '>'"),
            std::string::npos);
  EXPECT_NE(first_error("<system version=\"1\" >\n</system>\n").find("empty attribute"),
            std::string::npos);
  EXPECT_NE(first_error("<system version=1>\n</system>\n").find("quote"), std::string::npos);
  EXPECT_NE(first_error("<system version='1'>\n</system>\n").find("single-quoted"),
            std::string::npos);
  EXPECT_NE(first_error("<system version=\"1\">\n</cpu>\n").find("mismatch"), std::string::npos);
  EXPECT_NE(first_error("<system version=\"1\">\n").find("unterminated <system>"),
            std::string::npos);
  EXPECT_NE(first_error("<system version=\"2\">\n</system>\n").find("wrong version 2"),
            std::string::npos);
  EXPECT_NE(first_error("<system name=\"" + std::string(254, 'a') + "\" version=\"1\"/>\n")
                .find("too long"),
            std::string::npos);
  EXPECT_EQ(first_error("<system name=\"" + std::string(253, 'a') + "\" version=\"1\"/>\n"),
            "(none)");
  std::string wide;
  for (int i = 0; i < 33; ++i)
    wide += "<cpu numaid=\"" + std::to_string(i) + "\" arch=\"arm64\"/>\n";
  EXPECT_NE(first_error("<system version=\"1\">\n" + wide + "</system>\n").find("MAX_SUBS"),
            std::string::npos);
  std::string many = "<system version=\"1\"";
  for (int i = 0; i < 16; ++i) many += " a" + std::to_string(i) + "=\"x\"";
  EXPECT_NE(first_error(many + "/>\n").find("past the 16th"), std::string::npos);
}

}  // namespace
}  // namespace railyard::topo::testing
