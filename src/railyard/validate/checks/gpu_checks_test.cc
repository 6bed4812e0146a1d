// gpu.count, gpu.health and gpu.nic_affinity through FakeNodeEnv.
#include <gtest/gtest.h>

#include "railyard/topo/model.h"
#include "railyard/validate/checks/check_testing.h"

namespace railyard::validate {
namespace {

class GpuChecksTest : public CheckTest {
 protected:
  void Gpus(int n) {
    std::vector<GpuState> gpus;
    for (int i = 0; i < n; ++i) {
      gpus.push_back({.index = i,
                      .name = "NVIDIA H200",
                      .ecc_enabled = true,
                      .ecc_uncorrected = 0,
                      .remap_pending = false,
                      .remap_failure = false});
    }
    env_.gpus = gpus;
  }
  std::vector<GpuState>& Listed() { return *env_.gpus; }
  const Profile eight_{.name = "gpu", .gpus = 8};
};

TEST_F(GpuChecksTest, CountAgainstTheProfile) {
  Gpus(8);
  Outcome o = Run("gpu.count", eight_);
  EXPECT_EQ(o.ToString(), "PASS: 8 GPUs (NVIDIA H200)");
  EXPECT_EQ(o.expected, ">= 8");
  Gpus(7);
  EXPECT_EQ(Run("gpu.count", eight_).ToString(),
            "FAIL: 7 GPUs (NVIDIA H200), below fail limit 8 (100% of expected)");
}

TEST_F(GpuChecksTest, SkippedWithoutNvmlOrWithoutGpusExpected) {
  EXPECT_EQ(Run("gpu.count", eight_).ToString(), "SKIPPED: NVML not found (libnvidia-ml.so.1)");
  EXPECT_EQ(Run("gpu.health", eight_).ToString(), "SKIPPED: NVML not found (libnvidia-ml.so.1)");
  Gpus(8);
  EXPECT_EQ(Run("gpu.count", Profile{.name = "cpu", .gpus = 0}).ToString(),
            "SKIPPED: no GPU expected on profile cpu");
}

TEST_F(GpuChecksTest, NvmlFailureIsUnknown) {
  env_.gpus = Unavailable("nvmlInit_v2: Driver Not Loaded (NVML error 9)");
  EXPECT_EQ(Run("gpu.count", eight_).ToString(),
            "UNKNOWN: nvmlInit_v2: Driver Not Loaded (NVML error 9)");
  EXPECT_EQ(Run("gpu.health", eight_).verdict, Verdict::kUnknown);
}

TEST_F(GpuChecksTest, HealthyGpusPass) {
  Gpus(8);
  Outcome o = Run("gpu.health", eight_);
  EXPECT_EQ(o.ToString(), "PASS: 8 GPUs healthy");
  EXPECT_EQ(o.measured, "0 uncorrected ECC");
}

TEST_F(GpuChecksTest, UncorrectedEccAndRemapFailureFailPendingRemapWarns) {
  Gpus(8);
  Listed()[5].remap_pending = true;
  EXPECT_EQ(Run("gpu.health", eight_).ToString(),
            "WARN: GPU 5 has a row remapping pending (reset the GPU)");
  Listed()[3].ecc_uncorrected = 2;
  Listed()[4].remap_failure = true;
  Outcome o = Run("gpu.health", eight_);
  EXPECT_EQ(o.ToString(), "FAIL: GPU 3 has 2 uncorrected ECC errors since boot (+1 more)");
  EXPECT_EQ(o.measured, "2 uncorrected ECC");
}

TEST_F(GpuChecksTest, EccDisabledWarnsAndUnsupportedFieldsAreNotJudged) {
  Gpus(2);
  Listed()[1].ecc_enabled = false;
  EXPECT_EQ(Run("gpu.health", eight_).ToString(), "WARN: GPU 1 runs with ECC disabled");
  env_.gpus = std::vector<GpuState>{{.index = 0, .name = "GeForce"}};
  EXPECT_EQ(Run("gpu.health", eight_).ToString(), "PASS: 1 GPU healthy");
  env_.gpus = std::vector<GpuState>{};
  EXPECT_EQ(Run("gpu.health", eight_).verdict, Verdict::kSkipped);
}

TEST_F(GpuChecksTest, NicAffinityAgainstTheTopology) {
  using topo::PathClass;
  Profile p = eight_;
  EXPECT_EQ(Run("gpu.nic_affinity", p).ToString(),
            "SKIPPED: the topology lists no GPU-NIC paths for node1 (give --topology with them)");
  p.gpu_nic_paths = {{0, "mlx5_0", PathClass::kPIX}, {1, "mlx5_1", PathClass::kPXB}};
  env_.paths =
      std::vector<topo::GpuNicPath>{{0, "mlx5_0", PathClass::kPIX}, {1, "mlx5_1", PathClass::kPIX}};
  Outcome o = Run("gpu.nic_affinity", p);
  EXPECT_EQ(o.ToString(), "PASS: 2 GPU-NIC paths as close as expected");
  EXPECT_EQ(o.measured, "2 of 2 as expected");
  env_.paths = std::vector<topo::GpuNicPath>{{0, "mlx5_0", PathClass::kSYS}};
  EXPECT_EQ(Run("gpu.nic_affinity", p).ToString(),
            "FAIL: GPU 0 to mlx5_0 is SYS, expected PIX or closer (+1 more)");
  env_.paths = Unavailable("sysfs unreadable");
  EXPECT_EQ(Run("gpu.nic_affinity", p).ToString(), "UNKNOWN: sysfs unreadable");
}

TEST(ResolveProfileTest, TheTopologyFillsWhatThePlanLeavesUnset) {
  topo::Cluster c;
  topo::Node n{.name = "gpu1", .link_rate_bits = 400'000'000'000, .gpu_count = 8};
  n.nics.push_back({.name = "mlx5_0", .rdma = true});
  n.gpu_nic_paths.push_back({0, "mlx5_0", topo::PathClass::kPIX});
  c.nodes.push_back(n);
  Profile p = ResolveProfile(Profile{.name = "gpu"}, c, 0);
  EXPECT_EQ(p.gpus, 8);
  EXPECT_EQ(p.nic_rate_bits, 400'000'000'000u);
  EXPECT_EQ(p.rdma, true);
  EXPECT_EQ(p.memlock_bytes, kUnlimited);
  EXPECT_EQ(p.gpu_nic_paths, n.gpu_nic_paths);
  EXPECT_EQ(ResolveProfile(Profile{.gpus = 4}, c, 0).gpus, 4);  // the plan's value wins
}

}  // namespace
}  // namespace railyard::validate
