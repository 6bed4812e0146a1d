// Communication on the virtual cluster (needs root for network namespaces; reports a skip
// with the reason otherwise): an allreduce across 4 virtual hosts gives correct results,
// and cutting one host's link in the middle of the allreduce loop makes every survivor
// fail naming that host's rank, within the deadline.
#include <unistd.h>

#include <gtest/gtest.h>

#include "cli_harness.h"

namespace railyard::testing {
namespace {

using std::chrono::seconds;

constexpr const char* kPrefix = "rcv";

std::string NetnsUnavailableReason() {
  if (::geteuid() != 0) {
    return "needs root to create network namespaces (running as uid " +
           std::to_string(::geteuid()) + ")";
  }
  return "";
}

class CommVclusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string reason = NetnsUnavailableReason();
    if (!reason.empty()) GTEST_SKIP() << reason;
    auto up = RunRailyard({"vcluster", "up", "--prefix", kPrefix, "--hosts", "4", "--leaves",
                           "2", "--leaf-rate", "none", "--spine-rate", "none", "--mode", "netns"});
    ASSERT_EQ(up.exit_code, 0) << up.err;
    up_ = true;
  }
  void TearDown() override {
    if (!up_) return;
    auto down = RunRailyard({"vcluster", "down", "--prefix", kPrefix});
    EXPECT_EQ(down.exit_code, 0) << down.err;
  }
  bool up_ = false;
};

TEST_F(CommVclusterTest, AllreduceAcrossHostsIsCorrect) {
  auto r = RunRailyard({"bench", "comm", "--vcluster", kPrefix, "--ranks", "4", "--transport",
                        "tcp", "--sizes", "4KiB:1MiB", "--iters", "2", "--warmup", "1"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("one per virtual host"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Out of bounds values : 0 OK"), std::string::npos) << r.out;
}

TEST_F(CommVclusterTest, CutLinkIsNamedByEverySurvivor) {
  base::SpawnOptions o;
  o.argv = {RAILYARD_BINARY, "bench", "comm", "--vcluster", kPrefix, "--ranks", "4",
            "--transport", "tcp", "--sizes", "256KiB", "--iters", "100000", "--timeout", "2s"};
  auto launcher = base::Child::Spawn(o);
  ASSERT_TRUE(launcher.ok()) << launcher.status().ToString();
  auto deadline = base::Deadline::After(seconds(60));
  for (;;) {
    auto line = launcher->ReadLine(deadline);
    ASSERT_TRUE(line.ok()) << "ranks never started timing: " << line.status().ToString();
    if (line->rfind("# timing", 0) == 0) break;
  }
  auto cut = RunRailyard({"vcluster", "cut", "--prefix", kPrefix, "node2"});
  ASSERT_EQ(cut.exit_code, 0) << cut.err;
  // Bounded only so that a broken build cannot hang the suite.
  auto e = launcher->Wait(base::Deadline::After(seconds(60)));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_NE(e->exit_code, 0);
  // Rank 0's own error (its stderr is the launcher's) and the launcher's summary.
  EXPECT_NE(e->stderr_text.find("rank 2 ("), std::string::npos) << e->stderr_text;
  EXPECT_NE(e->stderr_text.find("bench comm failed"), std::string::npos) << e->stderr_text;
}

}  // namespace
}  // namespace railyard::testing
