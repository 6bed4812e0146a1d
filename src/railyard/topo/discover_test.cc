#include "railyard/topo/discover.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "railyard/base/temp_dir_testing.h"
#include "railyard/topo/node_json.h"

namespace railyard::topo {
namespace {

namespace fs = std::filesystem;

bool HasNote(const Discovery& d, std::string_view needle) {
  return std::any_of(d.notes.begin(), d.notes.end(), [&](const std::string& note) {
    return note.find(needle) != std::string::npos;
  });
}

std::string Notes(const Discovery& d) {
  std::string out;
  for (const std::string& n : d.notes) out += "\n  " + n;
  return out;
}

// ---- path classes on injected paths -------------------------------------------------------

constexpr const char* kSwitch = "/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0";

TEST(ClassifyPciPathTest, SameSwitchIsPix) {
  std::string gpu = std::string(kSwitch) + "/0000:02:00.0/0000:03:00.0";
  std::string nic = std::string(kSwitch) + "/0000:02:01.0/0000:04:00.0";
  EXPECT_EQ(ClassifyPciPath(gpu, 0, nic, 0), PathClass::kPIX);
  // Two functions of one device share its bridge.
  EXPECT_EQ(ClassifyPciPath(nic, 0, std::string(kSwitch) + "/0000:02:01.0/0000:04:00.1", 0),
            PathClass::kPIX);
  // Trailing non-PCI components (a virtio or net child) do not count as hops.
  EXPECT_EQ(ClassifyPciPath(gpu, 0, nic + "/net/ib0", 0), PathClass::kPIX);
}

TEST(ClassifyPciPathTest, NestedSwitchesArePxb) {
  // The GPU sits behind a second switch hanging off the first one's downstream port.
  std::string gpu = std::string(kSwitch) + "/0000:02:00.0/0000:05:00.0/0000:06:00.0/0000:07:00.0";
  std::string nic = std::string(kSwitch) + "/0000:02:01.0/0000:04:00.0";
  EXPECT_EQ(ClassifyPciPath(gpu, 0, nic, 0), PathClass::kPXB);
  EXPECT_EQ(ClassifyPciPath(nic, 0, gpu, 0), PathClass::kPXB);
}

TEST(ClassifyPciPathTest, SameRootComplexDifferentRootPortsIsPhb) {
  EXPECT_EQ(ClassifyPciPath("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", 0,
                            "/sys/devices/pci0000:00/0000:00:02.0/0000:05:00.0", 0),
            PathClass::kPHB);
}

TEST(ClassifyPciPathTest, OtherRootComplexSameNumaIsNode) {
  EXPECT_EQ(ClassifyPciPath("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", 0,
                            "/sys/devices/pci0000:40/0000:40:01.0/0000:41:00.0", 0),
            PathClass::kNODE);
  // Same bus numbers in another PCI domain are another root complex.
  EXPECT_EQ(ClassifyPciPath("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", 0,
                            "/sys/devices/pci0001:00/0001:00:01.0/0001:01:00.0", 0),
            PathClass::kNODE);
}

TEST(ClassifyPciPathTest, OtherNumaNodeIsSys) {
  EXPECT_EQ(ClassifyPciPath("/sys/devices/pci0000:00/0000:00:01.0/0000:01:00.0", 0,
                            "/sys/devices/pci0000:80/0000:80:01.0/0000:81:00.0", 1),
            PathClass::kSYS);
}

TEST(ClassifyPciPathTest, WithoutPciRootOnlyNumaCounts) {
  EXPECT_EQ(ClassifyPciPath("", 0, "/sys/devices/platform/foo", 0), PathClass::kNODE);
  EXPECT_EQ(ClassifyPciPath("", 0, "", 1), PathClass::kSYS);
  EXPECT_EQ(ClassifyPciPath("garbage::", 0, "/sys/devices/pciZZZZ:00/x", 1), PathClass::kSYS);
}

TEST(NormalizePciBusIdTest, TrimsNvmlDomainAndLowercases) {
  EXPECT_EQ(NormalizePciBusId("00000000:17:00.0"), "0000:17:00.0");
  EXPECT_EQ(NormalizePciBusId("0000:AB:00.1"), "0000:ab:00.1");
  EXPECT_EQ(NormalizePciBusId("10000:01:00.0"), "10000:01:00.0");  // VMD domain
  EXPECT_EQ(NormalizePciBusId("NotABusId"), "notabusid");
}

TEST(ParseIbRateTest, ReadsKernelRateText) {
  EXPECT_EQ(ParseIbRate("400 Gb/sec (4X NDR)").value_or(0), 400'000'000'000ULL);
  EXPECT_EQ(ParseIbRate("2.5 Gb/sec (1X SDR)\n").value_or(0), 2'500'000'000ULL);
  EXPECT_EQ(ParseIbRate("100 Gb/sec").value_or(0), 100'000'000'000ULL);
  for (const char* bad : {"", "fast", "400 Mb/sec", "0 Gb/sec (4X)", "-1 Gb/sec", "Gb/sec"}) {
    Result<uint64_t> r = ParseIbRate(bad);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("Gb/sec"), std::string::npos);
  }
}

// ---- a fake sysfs tree ------------------------------------------------------------------

class FakeSysfs : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(root_.empty()); }

  void Write(const std::string& rel, const std::string& text) {
    fs::path p = fs::path(root_) / rel;
    fs::create_directories(p.parent_path());
    std::ofstream(p) << text;
  }
  // A link at `rel` pointing at the absolute path of `target_rel`, as sysfs links do.
  void Link(const std::string& rel, const std::string& target_rel) {
    fs::path p = fs::path(root_) / rel;
    fs::create_directories(p.parent_path());
    fs::create_directories(fs::path(root_) / target_rel);
    fs::create_directory_symlink(fs::path(root_) / target_rel, p);
  }
  // A PCI function at devices/<dir> with its bus/pci/devices link.
  void PciDevice(const std::string& dir, const std::string& cls, const std::string& vendor,
                 int numa) {
    std::string path = "devices/" + dir;
    Write(path + "/class", cls + "\n");
    Write(path + "/vendor", vendor + "\n");
    Write(path + "/numa_node", std::to_string(numa) + "\n");
    Link("bus/pci/devices/" + fs::path(dir).filename().string(), path);
  }
  void Netdev(const std::string& pci_dir, const std::string& name, const std::string& speed) {
    std::string dir = "devices/" + pci_dir + "/net/" + name;
    Write(dir + "/speed", speed + "\n");
    Link(dir + "/device", "devices/" + pci_dir);
    Link("class/net/" + name, dir);
  }
  void IbDevice(const std::string& pci_dir, const std::string& name, const std::string& state,
                const std::string& rate) {
    std::string dir = "devices/" + pci_dir + "/infiniband/" + name;
    Write(dir + "/ports/1/state", state + "\n");
    Write(dir + "/ports/1/rate", rate + "\n");
    Link(dir + "/device", "devices/" + pci_dir);
    Link("class/infiniband/" + name, dir);
  }

  // Two sockets: GPU0 and mlx5_0 under one PCIe switch, eth0 on another root port of the
  // same root complex, GPU1 on a second root complex of NUMA node 0, mlx5_1 on node 1.
  void BuildTwoSocketNode() {
    Write("devices/system/node/node0/cpulist", "0-3,8-11\n");
    Write("devices/system/node/node1/cpulist", "4-7,12-15\n");
    Write("devices/system/node/node2/cpulist", "\n");  // memory only
    Write("devices/system/node/online", "0-2\n");      // not a node directory
    const std::string sw = "pci0000:00/0000:00:01.0/0000:01:00.0";
    PciDevice(sw + "/0000:02:00.0/0000:03:00.0", "0x030200", "0x10de", 0);
    PciDevice(sw + "/0000:02:01.0/0000:04:00.0", "0x020700", "0x15b3", 0);
    IbDevice(sw + "/0000:02:01.0/0000:04:00.0", "mlx5_0", "4: ACTIVE", "400 Gb/sec (4X NDR)");
    Netdev(sw + "/0000:02:01.0/0000:04:00.0", "ib0", "400000");
    PciDevice("pci0000:00/0000:00:02.0/0000:05:00.0", "0x020000", "0x8086", 0);
    Netdev("pci0000:00/0000:00:02.0/0000:05:00.0", "eth0", "25000");
    PciDevice("pci0000:00/0000:00:1f.0", "0x030000", "0x1a03", 0);  // BMC VGA: not a GPU
    PciDevice("pci0000:40/0000:40:01.0/0000:41:00.0", "0x030200", "0x10de", 0);
    PciDevice("pci0000:80/0000:80:02.0/0000:82:00.0", "0x020700", "0x15b3", 1);
    IbDevice("pci0000:80/0000:80:02.0/0000:82:00.0", "mlx5_1", "1: DOWN", "400 Gb/sec (4X NDR)");
    Write("devices/virtual/net/lo/speed", "\n");
    Link("class/net/lo", "devices/virtual/net/lo");
    Write("devices/virtual/net/veth0/speed", "10000\n");
    Link("class/net/veth0", "devices/virtual/net/veth0");
    Write("devices/virtual/infiniband/rxe0/ports/1/state", "4: ACTIVE\n");
    Link("class/infiniband/rxe0", "devices/virtual/infiniband/rxe0");
  }

  DiscoverOptions Options() const {
    DiscoverOptions o;
    o.sysfs_root = root_;
    o.use_libfabric = false;
    o.hostname = "fake-node";
    return o;
  }

  base::ScopedTempDir tmp_{"discover"};
  const std::string root_ = tmp_.path();
};

TEST_F(FakeSysfs, FindsGpusNicsNumaAndPaths) {
  BuildTwoSocketNode();
  Result<Discovery> r = DiscoverNode(Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  const Discovery& d = *r;
  const Node& n = d.node;
  EXPECT_EQ(n.name, "fake-node");

  ASSERT_EQ(n.numa.size(), 2u) << Notes(d);
  EXPECT_EQ(n.numa[0], (NumaNode{0, {0, 1, 2, 3, 8, 9, 10, 11}}));
  EXPECT_EQ(n.numa[1], (NumaNode{1, {4, 5, 6, 7, 12, 13, 14, 15}}));
  EXPECT_TRUE(HasNote(d, "NUMA node 2 has no CPUs")) << Notes(d);

  ASSERT_EQ(n.gpus.size(), 2u);
  EXPECT_EQ(n.gpu_count, 2);
  EXPECT_EQ(n.gpus[0], (Gpu{0, "", "0000:03:00.0", 0, ""}));
  EXPECT_EQ(n.gpus[1], (Gpu{1, "", "0000:41:00.0", 0, ""}));
  EXPECT_EQ(d.sources.gpus, "pci class codes");
  EXPECT_TRUE(HasNote(d, "NVML skipped")) << Notes(d);

  ASSERT_EQ(n.nics.size(), 3u);  // ib0 folds into mlx5_0; lo, veth0 and rxe0 are left out
  EXPECT_EQ(n.nics[0], (Nic{"mlx5_0", "0000:04:00.0", 0, -1, 400'000'000'000ULL, true}));
  EXPECT_EQ(n.nics[1], (Nic{"mlx5_1", "0000:82:00.0", 1, -1, 400'000'000'000ULL, true}));
  EXPECT_EQ(n.nics[2], (Nic{"eth0", "0000:05:00.0", 0, -1, 25'000'000'000ULL, false}));
  EXPECT_EQ(d.rdma_netdevs.at("mlx5_0"), std::vector<std::string>{"ib0"});
  EXPECT_EQ(d.rdma_netdevs.count("mlx5_1"), 0u);
  EXPECT_EQ(n.link_rate_bits, 400'000'000'000ULL);
  EXPECT_TRUE(HasNote(d, "mlx5_1: no ACTIVE port (port 1: 1: DOWN)")) << Notes(d);
  EXPECT_TRUE(HasNote(d, "veth0")) << Notes(d);
  EXPECT_TRUE(HasNote(d, "rxe0")) << Notes(d);

  std::vector<GpuNicPath> want = {{0, "mlx5_0", PathClass::kPIX}, {0, "mlx5_1", PathClass::kSYS},
                                  {0, "eth0", PathClass::kPHB},   {1, "mlx5_0", PathClass::kNODE},
                                  {1, "mlx5_1", PathClass::kSYS}, {1, "eth0", PathClass::kNODE}};
  EXPECT_EQ(n.gpu_nic_paths, want);
}

TEST_F(FakeSysfs, JsonCarriesTheNodeAndReadsBack) {
  BuildTwoSocketNode();
  Result<Discovery> r = DiscoverNode(Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  nlohmann::json j = nlohmann::json::parse(DiscoveryToJson(*r).dump());
  EXPECT_EQ(j["version"], 1);
  EXPECT_EQ(j["node"]["name"], "fake-node");
  EXPECT_EQ(j["rdma_netdevs"]["mlx5_0"], nlohmann::json::array({"ib0"}));
  EXPECT_TRUE(j["fabric_providers"].is_array());
  EXPECT_EQ(j["notes"].size(), r->notes.size());
  EXPECT_EQ(j["discovered_with"]["gpus"], "pci class codes");
  EXPECT_EQ(j["discovered_with"]["fabric"], "disabled");
  EXPECT_EQ(j["discovered_with"]["sysfs_root"], root_);
  Result<Node> back = NodeFromJson(j["node"], "discover");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r->node);
}

TEST_F(FakeSysfs, SingleNumaNodeClaimsDevicesWithUnknownNode) {
  Write("devices/system/node/node0/cpulist", "0-1\n");
  PciDevice("pci0000:00/0000:00:03.0", "0x020000", "0x1af4", -1);
  // A virtio NIC: the netdev's device is a virtio child of the PCI function.
  Write("devices/pci0000:00/0000:00:03.0/virtio2/net/eth0/speed", "-1\n");
  Link("devices/pci0000:00/0000:00:03.0/virtio2/net/eth0/device",
       "devices/pci0000:00/0000:00:03.0/virtio2");
  Link("class/net/eth0", "devices/pci0000:00/0000:00:03.0/virtio2/net/eth0");
  Result<Discovery> r = DiscoverNode(Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->node.nics.size(), 1u);
  EXPECT_EQ(r->node.nics[0], (Nic{"eth0", "0000:00:03.0", 0, -1, 0, false}));
  EXPECT_TRUE(r->node.gpus.empty());
  EXPECT_TRUE(HasNote(*r, "no GPUs")) << Notes(*r);
}

TEST_F(FakeSysfs, NoNumaDirectoryFallsBackToOnlineCpus) {
  Write("devices/system/cpu/online", "0-3\n");
  Result<Discovery> r = DiscoverNode(Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->node.numa.size(), 1u);
  EXPECT_EQ(r->node.numa[0], (NumaNode{0, {0, 1, 2, 3}}));
  EXPECT_TRUE(HasNote(*r, "no NUMA nodes")) << Notes(*r);
}

TEST_F(FakeSysfs, MalformedFilesBecomeNotes) {
  Write("devices/system/node/node0/cpulist", "0-3\n");
  Write("devices/system/node/node1/cpulist", "zero-three\n");
  PciDevice("pci0000:00/0000:00:01.0/0000:01:00.0", "not-hex", "0x10de", 0);
  PciDevice("pci0000:00/0000:00:02.0/0000:02:00.0", "0x020700", "0x15b3", 7777777);
  IbDevice("pci0000:00/0000:00:02.0/0000:02:00.0", "mlx5_0", "4: ACTIVE", "very fast");
  Result<Discovery> r = DiscoverNode(Options());
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_EQ(r->node.numa.size(), 1u);
  EXPECT_TRUE(HasNote(*r, "node1/cpulist")) << Notes(*r);
  EXPECT_TRUE(r->node.gpus.empty());
  ASSERT_EQ(r->node.nics.size(), 1u);
  EXPECT_EQ(r->node.nics[0].rate_bits, 0u);
  EXPECT_EQ(r->node.nics[0].numa_node, 0);  // out-of-range id treated as unknown
  EXPECT_TRUE(HasNote(*r, "ports/1/rate")) << Notes(*r);
}

TEST(DiscoverNodeTest, MissingRootIsNotFound) {
  DiscoverOptions o;
  o.sysfs_root = "/nonexistent/railyard-sysfs";
  Result<Discovery> r = DiscoverNode(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("/nonexistent/railyard-sysfs"), std::string::npos);
}

// ---- this machine -----------------------------------------------------------------------

TEST(DiscoverNodeTest, ThisMachine) {
  DiscoverOptions o;
  o.fabric_timeout = std::chrono::seconds(30);
  Result<Discovery> r = DiscoverNode(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  char host[256] = {};
  ASSERT_EQ(gethostname(host, sizeof host - 1), 0);
  EXPECT_EQ(r->node.name, host);
  ASSERT_FALSE(r->node.numa.empty()) << Notes(*r);
  EXPECT_FALSE(r->node.numa[0].cpus.empty());
  EXPECT_EQ(r->node.gpu_count, static_cast<int>(r->node.gpus.size()));
  EXPECT_FALSE(r->sources.numa.empty());
  EXPECT_FALSE(r->sources.fabric.empty());

  std::string text = DiscoveryToJson(*r).dump(2);
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  ASSERT_FALSE(j.is_discarded()) << text;
  EXPECT_EQ(j["node"]["name"], host);
  EXPECT_FALSE(j["node"]["numa"].empty()) << text;
  Result<Node> back = NodeFromJson(j["node"], "discover");
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(*back, r->node);
}

TEST(DiscoverNodeTest, MissingNvmlIsANoteNotAnError) {
  DiscoverOptions o;
  o.use_libfabric = false;
  o.nvml_library = "libnvidia-ml-railyard-test-absent.so.1";
  Result<Discovery> r = DiscoverNode(o);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->sources.gpus, "pci class codes");
  EXPECT_TRUE(HasNote(*r,
                      "NVML not found (libnvidia-ml-railyard-test-absent.so.1): GPUs from PCI "
                      "class codes"))
      << Notes(*r);
}

}  // namespace
}  // namespace railyard::topo
