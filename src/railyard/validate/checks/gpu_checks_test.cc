// gpu.count and gpu.health through FakeNodeEnv.
#include <gtest/gtest.h>

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

}  // namespace
}  // namespace railyard::validate
