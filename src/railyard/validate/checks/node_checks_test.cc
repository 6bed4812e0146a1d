// The host-resource node checks (memlock, swap, CPUs, governor, memory, hugepages, sysctl),
// fed through FakeNodeEnv.
#include <gtest/gtest.h>

#include <algorithm>

#include "railyard/validate/checks/check_testing.h"

namespace railyard::validate {
namespace {

using NodeChecksTest = CheckTest;

TEST_F(NodeChecksTest, MemlockUnlimitedExpectedOnRdma) {
  Profile rdma{.name = "gpu", .rdma = true, .memlock_bytes = kUnlimited};
  env_.memlock = kUnlimited;
  EXPECT_EQ(Run("node.memlock", rdma).ToString(), "PASS: memlock limit unlimited");
  env_.memlock = 64 * 1024;
  EXPECT_EQ(Run("node.memlock", rdma).ToString(), "FAIL: memlock limit 64 KiB, expected unlimited");
}

TEST_F(NodeChecksTest, MemlockAgainstAFiniteExpectation) {
  Profile p{.name = "cpu", .memlock_bytes = 1 << 20};
  env_.memlock = 64 * 1024;
  EXPECT_EQ(Run("node.memlock", p).ToString(),
            "FAIL: memlock limit 64 KiB, below fail limit 1 MiB (100% of expected)");
  env_.memlock = 2 << 20;
  EXPECT_EQ(Run("node.memlock", p).verdict, Verdict::kPass);
}

TEST_F(NodeChecksTest, MemlockWithoutExpectationOrReadableLimitIsNeverPass) {
  env_.memlock = 64 * 1024;
  EXPECT_EQ(Run("node.memlock", Profile{.name = "cpu"}).ToString(),
            "SKIPPED: memlock limit 64 KiB; profile cpu expects no limit");
  env_.memlock_error = PermissionDenied("getrlimit(MEMLOCK): denied");
  EXPECT_EQ(Run("node.memlock", Profile{.name = "cpu"}).verdict, Verdict::kUnknown);
}

TEST_F(NodeChecksTest, SwapInUseWarnsThenFails) {
  Profile p;
  env_.files["/proc/meminfo"] = "MemTotal: 100 kB\nSwapTotal:       0 kB\nSwapFree:  0 kB\n";
  EXPECT_EQ(Run("node.swap", p).ToString(), "PASS: swap in use 0 B of 0 B");
  env_.files["/proc/meminfo"] = "SwapTotal: 4194304 kB\nSwapFree: 4194300 kB\n";
  EXPECT_EQ(Run("node.swap", p).ToString(),
            "WARN: swap in use 4 KiB of 4 GiB, above warn limit 0 B");
  env_.files["/proc/meminfo"] = "SwapTotal: 4194304 kB\nSwapFree: 1048576 kB\n";
  EXPECT_EQ(Run("node.swap", p).verdict, Verdict::kFail);
}

TEST_F(NodeChecksTest, SwapUnreadableIsUnknown) {
  EXPECT_EQ(Run("node.swap", Profile{}).ToString(), "UNKNOWN: /proc/meminfo: no such file");
  env_.files["/proc/meminfo"] = "MemTotal: 1 kB\n";
  EXPECT_EQ(Run("node.swap", Profile{}).verdict, Verdict::kUnknown);
}

TEST_F(NodeChecksTest, CpusCountsOnlineCpusAgainstThePlanBound) {
  env_.files["/sys/devices/system/cpu/online"] = "0-3,8-11\n";
  Outcome o = Run("node.cpus", Profile{});
  EXPECT_EQ(o.ToString(), "PASS: 8 CPUs online");
  EXPECT_EQ(o.measured, "8");
  const Check* c = registry_.Find("node.cpus");
  CheckSettings s = *DefaultSettings(c->info());
  s.fail = *ParseThreshold("16", Unit::kCount);
  Profile p;
  CheckContext ctx{.host = "node1", .profile = &p, .settings = &s, .env = &env_};
  EXPECT_EQ(c->Run(ctx).ToString(), "FAIL: 8 CPUs online, below fail limit 16");
}

TEST_F(NodeChecksTest, CpusUnreadableIsUnknown) {
  EXPECT_EQ(Run("node.cpus", Profile{}).verdict, Verdict::kUnknown);
  env_.files["/sys/devices/system/cpu/online"] = "garbage";
  EXPECT_EQ(Run("node.cpus", Profile{}).verdict, Verdict::kUnknown);
}

TEST_F(NodeChecksTest, GovernorPassWarnAndSkipped) {
  const std::string d = "/sys/devices/system/cpu";
  env_.dirs[d] = {"cpu0", "cpu1", "cpufreq", "online"};
  EXPECT_EQ(Run("node.cpu_governor", Profile{}).ToString(),
            "SKIPPED: no cpufreq governor on 2 CPUs (the clock is set by the hypervisor or "
            "firmware)");
  env_.files[d + "/cpu0/cpufreq/scaling_governor"] = "performance\n";
  env_.files[d + "/cpu1/cpufreq/scaling_governor"] = "performance\n";
  EXPECT_EQ(Run("node.cpu_governor", Profile{}).ToString(), "PASS: 2 CPUs use performance");
  env_.files[d + "/cpu1/cpufreq/scaling_governor"] = "powersave\n";
  Outcome o = Run("node.cpu_governor", Profile{});
  EXPECT_EQ(o.ToString(),
            "WARN: 1 of 2 CPUs do not use performance (performance x1, powersave x1)");
  EXPECT_EQ(o.expected, "performance");
  EXPECT_EQ(Run("node.cpu_governor", Profile{}, {{"governor", "powersave"}}).verdict,
            Verdict::kWarn);
}

TEST_F(NodeChecksTest, GovernorUnreadableIsUnknown) {
  EXPECT_EQ(Run("node.cpu_governor", Profile{}).verdict, Verdict::kUnknown);
  env_.dirs["/sys/devices/system/cpu"] = {"online"};
  EXPECT_EQ(Run("node.cpu_governor", Profile{}).ToString(),
            "UNKNOWN: /sys/devices/system/cpu: no cpuN entries");
}

TEST_F(NodeChecksTest, MemoryAvailableAndTotal) {
  env_.files["/proc/meminfo"] = "MemTotal: 104857600 kB\nMemAvailable: 52428800 kB\n";
  EXPECT_EQ(Run("node.memory", Profile{}).ToString(), "PASS: memory available 50 GiB of 100 GiB");
  env_.files["/proc/meminfo"] = "MemTotal: 104857600 kB\nMemAvailable: 1048576 kB\n";
  EXPECT_EQ(Run("node.memory", Profile{}).ToString(),
            "WARN: memory available 1 GiB of 100 GiB, below warn limit 10 GiB (10% of expected)");
  Outcome o = Run("node.memory", Profile{}, {{"min_total", "128GiB"}});
  EXPECT_EQ(o.ToString(), "FAIL: memory total 100 GiB, expected at least 128 GiB");
  EXPECT_EQ(o.measured, "100 GiB");
}

TEST_F(NodeChecksTest, MemoryUnreadableIsUnknown) {
  EXPECT_EQ(Run("node.memory", Profile{}).verdict, Verdict::kUnknown);
  env_.files["/proc/meminfo"] = "MemTotal: 1 kB\n";
  EXPECT_EQ(Run("node.memory", Profile{}).verdict, Verdict::kUnknown);
}

TEST_F(NodeChecksTest, HugepagesSkippedUntilThePlanExpectsSome) {
  env_.files["/proc/meminfo"] =
      "HugePages_Total:      16\nHugePages_Free:       4\nHugepagesize:    2048 kB\n";
  EXPECT_EQ(Run("node.hugepages", Profile{}).ToString(),
            "SKIPPED: 16 huge pages of 2 MiB (4 free); the plan expects none (set min_pages)");
  EXPECT_EQ(Run("node.hugepages", Profile{}, {{"min_pages", "16"}}).verdict, Verdict::kPass);
  EXPECT_EQ(Run("node.hugepages", Profile{}, {{"min_pages", "1024"}}).ToString(),
            "FAIL: 16 huge pages of 2 MiB (4 free), below fail limit 1024 (100% of expected)");
  EXPECT_EQ(Run("node.hugepages", Profile{}, {{"min_pages", "lots"}}).verdict, Verdict::kUnknown);
}

TEST_F(NodeChecksTest, HugepagesUnreadableIsUnknown) {
  EXPECT_EQ(Run("node.hugepages", Profile{}).verdict, Verdict::kUnknown);
  env_.files["/proc/meminfo"] = "MemTotal: 1 kB\n";
  EXPECT_EQ(Run("node.hugepages", Profile{}, {{"min_pages", "8"}}).verdict, Verdict::kUnknown);
}

class SysctlTest : public CheckTest {
 protected:
  void Set(const std::string& key, const std::string& value) {
    std::string path = "/proc/sys/" + key;
    for (char& c : path) c = c == '.' ? '/' : c;
    env_.files[path] = value + "\n";
  }
  void Tuned() {
    Set("net.core.rmem_max", "67108864");
    Set("net.core.wmem_max", "67108864");
    Set("net.ipv4.tcp_rmem", "4096\t131072\t67108864");
    Set("net.ipv4.tcp_wmem", "4096 16384 67108864");
    Set("vm.zone_reclaim_mode", "0");
    Set("kernel.numa_balancing", "0");
  }
};

TEST_F(SysctlTest, TunedHostPasses) {
  Tuned();
  Outcome o = Run("node.sysctl", Profile{});
  EXPECT_EQ(o.verdict, Verdict::kPass) << o.ToString();
  EXPECT_NE(o.reason.find("net.core.rmem_max 64 MiB"), std::string::npos) << o.reason;
}

TEST_F(SysctlTest, DefaultBuffersAndNumaSettingsWarn) {
  Tuned();
  Set("net.core.rmem_max", "212992");
  Set("kernel.numa_balancing", "1");
  EXPECT_EQ(Run("node.sysctl", Profile{}).ToString(),
            "WARN: net.core.rmem_max 208 KiB below 16 MiB (+1 more)");
  EXPECT_EQ(Run("node.sysctl", Profile{}, {{"socket_buffer_min", "128KiB"}}).ToString(),
            "WARN: kernel.numa_balancing is 1, expected 0");
}

TEST_F(SysctlTest, MissingNumaBalancingIsFineButUnreadableBuffersAreUnknown) {
  Tuned();
  env_.files.erase("/proc/sys/kernel/numa_balancing");
  EXPECT_EQ(Run("node.sysctl", Profile{}).verdict, Verdict::kPass);
  env_.files.erase("/proc/sys/net/core/wmem_max");
  EXPECT_EQ(Run("node.sysctl", Profile{}).ToString(),
            "UNKNOWN: net.core.wmem_max: /proc/sys/net/core/wmem_max: no such file");
}

TEST_F(NodeChecksTest, EveryBuiltinCheckHasATimeoutAndParsesItsDefaults) {
  for (const std::string& id : registry_.Ids()) {
    const CheckInfo& info = registry_.Find(id)->info();
    EXPECT_GT(info.timeout.count(), 0) << id;
    // Node and GPU checks run on the host alone within seconds; fabric, storage and
    // collective checks measure for longer, from the coordinator.
    if (info.category == Category::kNode || info.category == Category::kGpu) {
      EXPECT_LE(info.timeout, std::chrono::seconds(5)) << id;
    }
    EXPECT_TRUE(DefaultSettings(info).ok()) << id;
  }
}

TEST_F(NodeChecksTest, SystemEnvReadsThisHost) {
  std::unique_ptr<NodeEnv> env = NewSystemNodeEnv();
  EXPECT_TRUE(env->MemlockLimit().ok());
  Result<std::string> meminfo = env->ReadFile("/proc/meminfo");
  ASSERT_TRUE(meminfo.ok()) << meminfo.status().ToString();
  EXPECT_NE(meminfo->find("SwapTotal:"), std::string::npos);
  Result<std::vector<std::string>> cpus = env->ListDir("/sys/devices/system/cpu");
  ASSERT_TRUE(cpus.ok()) << cpus.status().ToString();
  EXPECT_TRUE(std::is_sorted(cpus->begin(), cpus->end()));
  EXPECT_EQ(env->ListDir("/nonexistent-railyard").status().code(), StatusCode::kNotFound);
  Result<FsSpace> root = env->Space("/");
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  EXPECT_GT(root->total_bytes, 0u);
  EXPECT_EQ(env->Space("/nonexistent-railyard").status().code(), StatusCode::kNotFound);
  // Either answer is legitimate on a build host; what matters is that it answers at all.
  Result<std::vector<GpuState>> gpus = env->Gpus();
  EXPECT_TRUE(gpus.ok() || gpus.status().code() == StatusCode::kNotFound ||
              gpus.status().code() == StatusCode::kUnavailable)
      << gpus.status().ToString();
}

}  // namespace
}  // namespace railyard::validate
