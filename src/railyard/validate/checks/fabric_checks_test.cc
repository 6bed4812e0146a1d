// node.ib_ports and node.fabric_providers through FakeNodeEnv.
#include <gtest/gtest.h>

#include "railyard/validate/checks/check_testing.h"

namespace railyard::validate {
namespace {

class FabricChecksTest : public CheckTest {
 protected:
  void Port(const std::string& dev, const std::string& port, const std::string& state,
            const std::string& rate) {
    std::string dir = "/sys/class/infiniband/" + dev + "/ports";
    auto& devs = env_.dirs["/sys/class/infiniband"];
    if (std::find(devs.begin(), devs.end(), dev) == devs.end()) devs.push_back(dev);
    env_.dirs[dir].push_back(port);
    env_.files[dir + "/" + port + "/state"] = state + "\n";
    env_.files[dir + "/" + port + "/rate"] = rate + "\n";
  }
  const Profile rdma_{.name = "gpu", .nic_rate_bits = 400'000'000'000, .rdma = true};
};

TEST_F(FabricChecksTest, ActivePortsAtTheExpectedRatePass) {
  Port("mlx5_0", "1", "4: ACTIVE", "400 Gb/sec (4X NDR)");
  Port("mlx5_1", "1", "4: ACTIVE", "400 Gb/sec (4X NDR)");
  Outcome o = Run("node.ib_ports", rdma_);
  EXPECT_EQ(o.ToString(), "PASS: 2 ports ACTIVE at the expected rate");
  EXPECT_EQ(o.measured, "2 ACTIVE, slowest 400 Gbit/s");
  EXPECT_EQ(o.expected, "ACTIVE, >= 400 Gbit/s");
}

TEST_F(FabricChecksTest, ADownPortOrASlowOneFails) {
  Port("mlx5_0", "1", "4: ACTIVE", "200 Gb/sec (4X HDR)");
  Port("mlx5_1", "1", "1: DOWN", "10 Gb/sec (4X SDR)");
  Outcome o = Run("node.ib_ports", rdma_);
  EXPECT_EQ(o.verdict, Verdict::kFail);
  EXPECT_EQ(o.reason,
            "mlx5_0/1 at 200 Gbit/s, below fail limit 400 Gbit/s (100% of expected) (+1 more)");
  EXPECT_EQ(Run("node.ib_ports", rdma_, {{"devices", "mlx5_1"}}).ToString(),
            "FAIL: mlx5_1/1 is DOWN, expected ACTIVE");
}

TEST_F(FabricChecksTest, RdmaExpectedWithoutDevicesFailsAndNoRdmaIsSkipped) {
  EXPECT_EQ(Run("node.ib_ports", rdma_).ToString(),
            "FAIL: RDMA expected, but /sys/class/infiniband lists no device (no RDMA driver "
            "loaded?)");
  EXPECT_EQ(Run("node.ib_ports", Profile{.name = "cpu", .rdma = false}).ToString(),
            "SKIPPED: no RDMA expected on profile cpu");
}

TEST_F(FabricChecksTest, UnreadablePortStateIsUnknown) {
  env_.dirs["/sys/class/infiniband"] = {"mlx5_0"};
  env_.dirs["/sys/class/infiniband/mlx5_0/ports"] = {"1"};
  EXPECT_EQ(Run("node.ib_ports", rdma_).ToString(),
            "UNKNOWN: /sys/class/infiniband/mlx5_0/ports/1/state: no such file");
}

TEST_F(FabricChecksTest, RdmaExpectedOnlyTcpAvailableFails) {
  env_.providers = std::vector<std::string>{"tcp;ofi_rxm", "tcp", "shm"};
  Outcome o = Run("node.fabric_providers", rdma_);
  EXPECT_EQ(o.ToString(), "FAIL: RDMA expected, only tcp, shm available");
  EXPECT_EQ(o.measured, "tcp, shm");
  env_.providers = std::vector<std::string>{"verbs;ofi_rxm", "tcp;ofi_rxm"};
  EXPECT_EQ(Run("node.fabric_providers", rdma_).ToString(),
            "PASS: RDMA provider available (verbs, tcp)");
}

TEST_F(FabricChecksTest, TheProfilesProviderMustBeOffered) {
  Profile efa{.name = "p5", .rdma = true, .fabric_provider = "efa"};
  env_.providers = std::vector<std::string>{"verbs;ofi_rxm"};
  EXPECT_EQ(Run("node.fabric_providers", efa).ToString(),
            "FAIL: provider efa expected, only verbs available");
  env_.providers = std::vector<std::string>{"efa", "shm"};
  EXPECT_EQ(Run("node.fabric_providers", efa).verdict, Verdict::kPass);
}

TEST_F(FabricChecksTest, WithoutLibfabricUnknownWhenExpectedSkippedOtherwise) {
  EXPECT_EQ(Run("node.fabric_providers", rdma_).ToString(),
            "UNKNOWN: libfabric.so.1 not found; cannot tell whether an RDMA provider is "
            "available");
  EXPECT_EQ(Run("node.fabric_providers", Profile{.name = "any"}).ToString(),
            "SKIPPED: libfabric.so.1 not found; no provider expected");
  EXPECT_EQ(Run("node.fabric_providers", Profile{.name = "cpu", .rdma = false}).ToString(),
            "SKIPPED: no fabric provider expected on profile cpu");
  env_.providers = DeadlineExceeded("libfabric: fi_getinfo did not answer within 1500 ms");
  EXPECT_EQ(Run("node.fabric_providers", Profile{.name = "any"}).verdict, Verdict::kUnknown);
}

}  // namespace
}  // namespace railyard::validate
