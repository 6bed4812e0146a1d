// The shipped node checks, fed through FakeNodeEnv.
#include <gtest/gtest.h>

#include "railyard/validate/node_env_testing.h"
#include "railyard/validate/registry.h"

namespace railyard::validate {
namespace {

class NodeChecksTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_TRUE(RegisterBuiltinChecks(registry_).ok()); }

  Outcome Run(std::string_view id, const Profile& profile) {
    const Check* check = registry_.Find(id);
    EXPECT_NE(check, nullptr) << id;
    CheckSettings settings = *DefaultSettings(check->info());
    CheckContext ctx{.host = "node1", .profile = &profile, .settings = &settings, .env = &env_};
    return check->Run(ctx);
  }

  CheckRegistry registry_;
  FakeNodeEnv env_;
};

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

TEST_F(NodeChecksTest, SystemEnvReadsThisHost) {
  std::unique_ptr<NodeEnv> env = NewSystemNodeEnv();
  EXPECT_TRUE(env->MemlockLimit().ok());
  Result<std::string> meminfo = env->ReadFile("/proc/meminfo");
  ASSERT_TRUE(meminfo.ok()) << meminfo.status().ToString();
  EXPECT_NE(meminfo->find("SwapTotal:"), std::string::npos);
}

}  // namespace
}  // namespace railyard::validate
