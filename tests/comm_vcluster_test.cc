// Communication on the virtual cluster (needs root for network namespaces; reports a skip
// with the reason otherwise), over every transport that crosses hosts (tcp; ofi when built):
// an allreduce across 4 virtual hosts gives correct results, and cutting one host's link in
// the middle of the allreduce loop makes every survivor fail naming that host's rank.
#include <gtest/gtest.h>
#include <unistd.h>

#include "cli_harness.h"
#include "railyard/net/select.h"

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
    auto up = RunRailyard({"vcluster", "up", "--prefix", kPrefix, "--hosts", "4", "--leaves", "2",
                           "--leaf-rate", "none", "--spine-rate", "none", "--mode", "netns"});
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

// The transports that cross hosts: every one built in, but shm.
std::vector<std::string> InterHostTransports() {
  std::vector<std::string> out;
  for (const std::string& t : net::TransportNames()) {
    if (t != "shm") out.push_back(t);
  }
  return out;
}

TEST_F(CommVclusterTest, AllreduceAcrossHostsIsCorrect) {
  for (const std::string& transport : InterHostTransports()) {
    auto r = RunRailyard({"bench", "comm", "--vcluster", kPrefix, "--ranks", "4", "--transport",
                          transport, "--sizes", "4KiB:1MiB", "--iters", "2", "--warmup", "1"});
    ASSERT_EQ(r.exit_code, 0) << transport << ": " << r.err;
    EXPECT_NE(r.out.find("one per virtual host"), std::string::npos) << transport << ": " << r.out;
    EXPECT_NE(r.out.find("Out of bounds values : 0 OK"), std::string::npos)
        << transport << ": " << r.out;
  }
}

TEST_F(CommVclusterTest, CutLinkIsNamedByEverySurvivor) {
  // Each transport runs straight after the previous one's `vcluster heal`, which returns only
  // once the healed link passes traffic.
  for (const std::string& transport : InterHostTransports()) {
    base::SpawnOptions o;
    o.argv = {RAILYARD_BINARY, "bench",   "comm",        "--vcluster", kPrefix,
              "--ranks",       "4",       "--transport", transport,    "--sizes",
              "256KiB",        "--iters", "100000",      "--timeout",  "2s"};
    auto launcher = base::Child::Spawn(o);
    ASSERT_TRUE(launcher.ok()) << launcher.status().ToString();
    auto deadline = base::Deadline::After(seconds(60));
    for (;;) {
      auto line = launcher->ReadLine(deadline);
      if (!line.ok()) {
        auto ended = launcher->Wait(base::Deadline::After(seconds(10)));
        FAIL() << transport << ": ranks never started timing: " << line.status().ToString()
               << "; its stderr: " << (ended.ok() ? ended->stderr_text : "(still running)");
      }
      if (line->rfind("# timing", 0) == 0) break;
    }
    auto cut = RunRailyard({"vcluster", "cut", "--prefix", kPrefix, "node2"});
    ASSERT_EQ(cut.exit_code, 0) << cut.err;
    // Bounded only so that a broken build cannot hang the suite.
    auto e = launcher->Wait(base::Deadline::After(seconds(60)));
    ASSERT_TRUE(e.ok()) << e.status().ToString();
    EXPECT_NE(e->exit_code, 0);
    // Ranks report their virtual host's name. Rank 0's error is the launcher's own stderr;
    // the summary then gives every failed rank's first line: the survivors' name rank 2.
    const std::string culprit = "rank 2 (node2 pid";
    const std::string& err = e->stderr_text;
    EXPECT_NE(err.find("bench comm failed"), std::string::npos) << transport << ": " << err;
    EXPECT_NE(err.substr(0, err.find("bench comm failed")).find(culprit), std::string::npos)
        << transport << ": rank 0 does not name " << culprit << ": " << err;
    for (int survivor : {1, 3}) {
      size_t at = err.find(fmt::format("\n  rank {} (pid ", survivor));
      ASSERT_NE(at, std::string::npos)
          << transport << ": no line for rank " << survivor << ": " << err;
      std::string line = err.substr(at + 1, err.find('\n', at + 1) - at - 1);
      EXPECT_NE(line.find(culprit), std::string::npos)
          << transport << ": rank " << survivor << " does not name " << culprit << ": " << line;
    }
    auto heal = RunRailyard({"vcluster", "heal", "--prefix", kPrefix, "node2"});
    ASSERT_EQ(heal.exit_code, 0) << heal.err;
  }
}

// `railyard demo` end to end, on 4 hosts: validation finds the host the demo degraded without
// naming it (and only it), the allreduce step is correct and reports busbw next to the link
// that limits it, the training under `railyard run` is placed around the excluded host, the
// killed rank is named and its job recovers on the spare to the uninterrupted run's weights,
// and the demo removes its cluster.
TEST(DemoTest, ValidationFindsTheDegradedHostAndAllreduceReportsBusbw) {
  std::string reason = NetnsUnavailableReason();
  if (!reason.empty()) GTEST_SKIP() << reason;
  auto r = RunRailyard({"demo", "--prefix", "rdt", "--hosts", "4"}, {}, seconds(300));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("validation excluded: node1\n"), std::string::npos) << r.out;
  size_t placed = r.out.find("  placement: attempt 0: 4 ranks on ");
  ASSERT_NE(placed, std::string::npos) << r.out;
  EXPECT_EQ(r.out.substr(placed, r.out.find('\n', placed) - placed).find("node1"),
            std::string::npos)
      << "the job was placed on the excluded host: " << r.out;
  EXPECT_NE(r.out.find("  named: rank 3 on "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("killed by SIGKILL"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("  weights: byte-identical to the uninterrupted run's"), std::string::npos)
      << r.out;
  size_t step = r.out.find("[5/7] allreduce across the 4 hosts");
  ASSERT_NE(step, std::string::npos) << r.out;
  std::string rest = r.out.substr(step);
  EXPECT_NE(rest.find(", 0 wrong"), std::string::npos) << rest;
  EXPECT_NE(rest.find("busbw"), std::string::npos) << rest;
  EXPECT_NE(rest.find("% of 500 Mbit/s"), std::string::npos) << rest;
  EXPECT_NE(r.out.find("[7/7] tear down"), std::string::npos) << r.out;
  auto list = RunRailyard({"vcluster", "list"});
  EXPECT_EQ(list.out.find("rdt"), std::string::npos) << list.out;
}

}  // namespace
}  // namespace railyard::testing
