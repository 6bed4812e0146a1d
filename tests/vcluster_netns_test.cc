// The virtual cluster for real: network namespaces, bridges, tbf shaping, cut links. Needs
// root and network namespaces; elsewhere every test reports a skip with the reason.
// Each test owns a prefix and a state directory, and TearDown removes the cluster and checks
// that nothing with the prefix is left, also when the test failed half-way.
#include <sys/syscall.h>

#include <nlohmann/json.hpp>

#include "cli_harness.h"
#include "railyard/base/temp_dir_testing.h"

namespace railyard::testing {
namespace {

// Empty when namespaces work here, else why not.
std::string NetnsUnavailableReason() {
  if (::geteuid() != 0)
    return "needs root to create network namespaces (running as uid " +
           std::to_string(::geteuid()) + ")";
  auto r = base::RunCommand({.argv = {"ip", "netns", "add", "rynx-probe"}},
                            base::Deadline::After(std::chrono::seconds(10)));
  if (!r.ok()) return "cannot run ip: " + r.status().message();
  if (!r->Succeeded()) return "network namespaces unavailable: " + r->Describe();
  base::RunCommand({.argv = {"ip", "netns", "delete", "rynx-probe"}},
                   base::Deadline::After(std::chrono::seconds(10)))
      .status()
      .IgnoreError();
  return "";
}

// Names of namespaces and links starting with "<prefix>-".
std::vector<std::string> Leftovers(const std::string& prefix) {
  std::vector<std::string> found;
  for (auto argv : {std::vector<std::string>{"ip", "netns", "list"},
                    std::vector<std::string>{"ip", "-o", "link", "show"}}) {
    auto r = base::RunCommand({.argv = argv}, base::Deadline::After(std::chrono::seconds(10)));
    if (!r.ok()) continue;
    std::string_view text = r->stdout_text;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t end = text.find('\n', pos);
      if (end == std::string_view::npos) end = text.size();
      std::string_view line = text.substr(pos, end - pos);
      pos = end + 1;
      if (argv[1] == "-o") {
        size_t c = line.find(": ");
        if (c == std::string_view::npos) continue;
        line = line.substr(c + 2);
      }
      if (line.substr(0, prefix.size() + 1) == prefix + "-") {
        found.emplace_back(line.substr(0, line.find_first_of(" @:")));
      }
    }
  }
  return found;
}

class VclusterNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static const std::string reason = NetnsUnavailableReason();
    if (!reason.empty()) GTEST_SKIP() << reason;
    // A prefix per test, so ctest -j can run this file beside others.
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    prefix_ = "yn" + std::to_string(std::hash<std::string>{}(info->name()) % 1000);
    ASSERT_FALSE(dir_.empty());
    // A previous crashed run of this very test may have left its cluster.
    RunRailyard(Vc({"down"}));
  }
  void TearDown() override {
    if (prefix_.empty()) return;
    CliResult down = RunRailyard(Vc({"down"}));
    EXPECT_EQ(down.exit_code, 0) << down.err;
    EXPECT_EQ(Leftovers(prefix_), std::vector<std::string>{});
  }
  std::vector<std::string> Vc(std::vector<std::string> args) {
    std::vector<std::string> v = {"vcluster", args[0], "--prefix", prefix_, "--state-dir", dir_};
    v.insert(v.end(), args.begin() + 1, args.end());
    return v;
  }
  void Up(std::vector<std::string> extra) {
    std::vector<std::string> args = {"up", "--mode", "netns"};
    args.insert(args.end(), extra.begin(), extra.end());
    CliResult r = RunRailyard(Vc(args));
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  // bits/s of each measured pair, keyed "src>dst".
  std::map<std::string, double> Matrix(const std::string& pairs, const std::string& per_pair) {
    std::vector<std::string> args = {"matrix", "--json", "--per-pair", per_pair};
    if (!pairs.empty()) args.insert(args.end(), {"--pairs", pairs});
    CliResult r = RunRailyard(Vc(args));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::map<std::string, double> out;
    if (r.exit_code != 0) return out;
    for (const auto& p : nlohmann::json::parse(r.out)) {
      out[p["src"].get<std::string>() + ">" + p["dst"].get<std::string>()] =
          p["bits_per_second"].get<double>();
    }
    return out;
  }

  std::string prefix_;
  base::ScopedTempDir tmp_{"netns"};
  const std::string dir_ = tmp_.path();
};

TEST_F(VclusterNetnsTest, UpEightHostsThenDownLeavesNoTrace) {
  Up({"--hosts", "8", "--leaves", "2", "--leaf-rate", "10Gbit", "--spine-rate", "5Gbit"});
  std::vector<std::string> objects = Leftovers(prefix_);
  int netns = 0;
  for (const auto& o : objects) netns += o.find("-node") != std::string::npos;
  EXPECT_EQ(netns, 8);
  // 8 namespaces + spine bridge + 2 x (leaf bridge + 2 uplink ends) + 8 host ports
  EXPECT_EQ(objects.size(), 8u + 1 + 6 + 8);
  // No namespace has a default route or any route beyond its own subnet.
  auto routes = base::RunCommand({.argv = {"ip", "-n", prefix_ + "-node0", "route", "show"}},
                                 base::Deadline::After(std::chrono::seconds(10)));
  ASSERT_TRUE(routes.ok());
  EXPECT_EQ(routes->stdout_text.find("default"), std::string::npos) << routes->stdout_text;
  EXPECT_NE(routes->stdout_text.find("198.18.0.0/16"), std::string::npos);
  EXPECT_EQ(CountLines(routes->stdout_text), 1) << routes->stdout_text;

  CliResult down = RunRailyard(Vc({"down"}));
  ASSERT_EQ(down.exit_code, 0) << down.err;
  EXPECT_EQ(Leftovers(prefix_), std::vector<std::string>{});
}

TEST_F(VclusterNetnsTest, EveryHostReachesEveryOther) {
  Up({"--hosts", "4", "--leaves", "2"});
  auto m = Matrix("", "100ms");
  ASSERT_EQ(m.size(), 12u);
  for (const auto& [pair, bits] : m) EXPECT_GT(bits, 1e6) << pair;
}

TEST_F(VclusterNetnsTest, DegradedHostIsSlowerThanAHealthyOneInTheSameRun) {
  Up({"--hosts", "4", "--leaves", "2", "--leaf-rate", "1Gbit", "--spine-rate", "1Gbit"});
  CliResult d = RunRailyard(Vc({"degrade", "node1", "--rate", "100Mbit"}));
  ASSERT_EQ(d.exit_code, 0) << d.err;
  auto m = Matrix("node0:node1,node1:node0,node2:node3,node3:node2", "300ms");
  ASSERT_EQ(m.size(), 4u);
  // 100 Mbit/s against 1 Gbit/s: half is a wide margin for a loaded 2-core machine.
  EXPECT_LT(m["node0>node1"], 0.5 * m["node2>node3"]);
  EXPECT_LT(m["node1>node0"], 0.5 * m["node3>node2"]);

  // One path: only that pair slows down.
  ASSERT_EQ(RunRailyard(Vc({"restore"})).exit_code, 0);
  ASSERT_EQ(RunRailyard(Vc({"degrade", "node0", "node2", "--rate", "50Mbit"})).exit_code, 0);
  auto p = Matrix("node0:node2,node0:node3", "300ms");
  EXPECT_LT(p["node0>node2"], 0.5 * p["node0>node3"]);
}

TEST_F(VclusterNetnsTest, CrossLeafTrafficIsCappedByTheSpine) {
  Up({"--hosts", "4", "--leaves", "2", "--leaf-rate", "1Gbit", "--spine-rate", "200Mbit"});
  auto m = Matrix("node0:node1,node0:node2", "300ms");
  EXPECT_LT(m["node0>node2"], 0.5 * m["node0>node1"]);
}

TEST_F(VclusterNetnsTest, CutHostIsUnreachableUntilHealed) {
  Up({"--hosts", "3", "--leaves", "1"});
  ASSERT_EQ(RunRailyard(Vc({"cut", "node2"})).exit_code, 0);
  CliResult status = RunRailyard(Vc({"status"}));
  EXPECT_NE(status.out.find("CUT"), std::string::npos) << status.out;
  CliResult cut =
      RunRailyard(Vc({"matrix", "--json", "--per-pair", "100ms", "--pairs", "node0:node2"}));
  EXPECT_NE(cut.exit_code, 0);
  EXPECT_NE(cut.err.find("node2"), std::string::npos) << cut.err;
  ASSERT_EQ(RunRailyard(Vc({"heal", "node2"})).exit_code, 0);
  auto m = Matrix("node0:node2", "100ms");
  EXPECT_GT(m["node0>node2"], 1e6);
}

TEST_F(VclusterNetnsTest, FailedUpRemovesWhatItBuilt) {
  // Fail the 20th ip/tc command (in the middle of the first leaf's hosts).
  CliResult r = RunRailyard(
      Vc({"up", "--mode", "netns", "--hosts", "4", "--leaves", "2", "--fail-at-for-test", "20"}));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("everything it created was removed"), std::string::npos) << r.err;
  EXPECT_EQ(Leftovers(prefix_), std::vector<std::string>{});
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/vcluster-" + prefix_ + ".json"));
}

TEST_F(VclusterNetnsTest, DownCleansUpAfterACrashThatLostTheStateFile) {
  Up({"--hosts", "2", "--leaves", "1"});
  std::filesystem::remove(dir_ + "/vcluster-" + prefix_ + ".json");
  CliResult again = RunRailyard(Vc({"up", "--mode", "netns", "--hosts", "2", "--leaves", "1"}));
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.err.find("leftover"), std::string::npos) << again.err;
  CliResult down = RunRailyard(Vc({"down"}));
  ASSERT_EQ(down.exit_code, 0) << down.err;
  EXPECT_EQ(Leftovers(prefix_), std::vector<std::string>{});
}

TEST_F(VclusterNetnsTest, ExecRunsInsideTheHostsNamespace) {
  Up({"--hosts", "2", "--leaves", "1"});
  CliResult r = RunRailyard(Vc({"exec", "node1", "--", "ip", "-o", "-4", "addr", "show", "eth0"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("198.18.0.2/16"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace railyard::testing
