// Validation on the virtual cluster, the acceptance cases of docs/validation.md: 8 hosts in
// 2 leaves (9 in 3 for the uplink case) with 200 Mbit/s host links, so the shaped links and
// not the CPUs set the pace. Each case injects one fault with `railyard vcluster`, runs
// `railyard validate --hosts vcluster:<prefix>` as a user would, and reads its JSON report:
// exactly the faulty host, link or uplink is named, and nothing else.
//
// Needs root for the network namespaces; reports a skip with the reason otherwise.
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "cli_harness.h"

namespace railyard::testing {
namespace {

using nlohmann::json;
using std::chrono::seconds;

std::string NetnsUnavailableReason() {
  if (::geteuid() != 0) {
    return "needs root to create network namespaces (running as uid " +
           std::to_string(::geteuid()) + ")";
  }
  return "";
}

struct Validation {
  CliResult cli;
  json report;  // null when no report was written
};

// One cluster per fixture, brought up once for its cases; every case undoes its fault.
class ValidateVclusterTest : public ::testing::Test {
 protected:
  static void UpCluster(const char* prefix, int hosts, int leaves, const char* spine_rate) {
    std::string reason = NetnsUnavailableReason();
    if (!reason.empty()) GTEST_SKIP() << reason;
    RunRailyard({"vcluster", "down", "--prefix", prefix});
    auto up = RunRailyard({"vcluster", "up", "--prefix", prefix, "--hosts", std::to_string(hosts),
                           "--leaves", std::to_string(leaves), "--leaf-rate", "200Mbit",
                           "--spine-rate", spine_rate, "--mode", "netns"});
    ASSERT_EQ(up.exit_code, 0) << up.err;
  }
  static void DownCluster(const char* prefix) {
    if (!NetnsUnavailableReason().empty()) return;
    auto down = RunRailyard({"vcluster", "down", "--prefix", prefix});
    EXPECT_EQ(down.exit_code, 0) << down.err;
  }

  static void Vcluster(const char* prefix, std::vector<std::string> args) {
    args.push_back("--prefix");
    args.push_back(prefix);
    args.insert(args.begin(), "vcluster");
    auto r = RunRailyard(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }

  static Validation Validate(const char* prefix, const std::string& plan = "vcluster") {
    base::ScopedTempDir dir;
    const std::string json_path = dir.path() + "/report.json";
    Validation v;
    v.cli = RunRailyard({"validate", "--hosts", std::string("vcluster:") + prefix, "--plan", plan,
                         "--json", json_path},
                        {}, seconds(120));
    std::ifstream in(json_path);
    if (in) {
      std::stringstream text;
      text << in.rdbuf();
      v.report = json::parse(text.str(), nullptr, false);
    }
    return v;
  }

  static std::string HostVerdict(const json& report, const std::string& host) {
    for (const json& h : report["hosts"]) {
      if (h["name"] == host) return h["overall"]["verdict"];
    }
    return "(absent)";
  }

  static std::string CheckVerdict(const json& report, const std::string& host,
                                  const std::string& check) {
    for (const json& h : report["hosts"]) {
      if (h["name"] != host) continue;
      for (const json& c : h["checks"]) {
        if (c["id"] == check) return c["verdict"];
      }
    }
    return "(absent)";
  }

  // "host node5 FAIL", "link node1<->node6 FAIL", ... for each finding that is not a PASS
  // (a transient suspect that re-tests cleared).
  static std::vector<std::string> Findings(const json& report) {
    std::vector<std::string> out;
    for (const json& f : report["fabric"]["findings"]) {
      if (f["verdict"] == "PASS") continue;
      out.push_back(f["kind"].get<std::string>() + " " + f["subject"].get<std::string>() + " " +
                    f["verdict"].get<std::string>());
    }
    return out;
  }

  // Hosts other than `except` whose overall verdict is WARN, FAIL or UNKNOWN.
  // Hosts other than `except` that did not pass. A WARN from storage.throughput alone does not
  // count: every virtual host reads and writes the same disk of one machine, measured while
  // the rest of the suite loads it, so one host's share can dip below the warn limit (70% of
  // the median) without a fault; a FAIL, an UNKNOWN and every other WARN still count, and the
  // storage faults have cases of their own.
  static std::set<std::string> FlaggedHostsBut(const json& report, std::set<std::string> except) {
    std::set<std::string> out;
    for (const json& h : report["hosts"]) {
      std::string name = h["name"];
      std::string verdict = h["overall"]["verdict"];
      if (verdict == "WARN") {
        bool only_storage = true;
        for (const json& c : h["checks"]) {
          std::string v = c.value("verdict", "");
          if (v == "WARN" || v == "FAIL" || v == "UNKNOWN") {
            only_storage = only_storage && c.value("id", "") == "storage.throughput";
          }
        }
        if (only_storage) continue;
      }
      if (!except.contains(name) && verdict != "PASS" && verdict != "SKIPPED") {
        out.insert(name + " " + verdict + ": " + h["overall"]["reason"].get<std::string>());
      }
    }
    return out;
  }
};

constexpr const char* kTwoLeaves = "rvv";

class TwoLeafTest : public ValidateVclusterTest {
 protected:
  // The uplinks carry 4 hosts' traffic at once: 800 Mbit/s keeps them out of the way.
  static void SetUpTestSuite() { UpCluster(kTwoLeaves, 8, 2, "800Mbit"); }
  static void TearDownTestSuite() { DownCluster(kTwoLeaves); }
  void SetUp() override {
    if (!NetnsUnavailableReason().empty()) GTEST_SKIP() << NetnsUnavailableReason();
  }
  void TearDown() override {
    if (!NetnsUnavailableReason().empty()) return;
    Vcluster(kTwoLeaves, {"restore"});
  }
};

TEST_F(TwoLeafTest, CleanClusterPassesEverything) {
  Validation v = Validate(kTwoLeaves);
  ASSERT_TRUE(v.report.is_object()) << v.cli.err;
  EXPECT_EQ(v.cli.exit_code, 0) << v.cli.out << v.cli.err;
  EXPECT_EQ(v.report["overall"]["verdict"], "PASS") << v.report["overall"].dump();
  EXPECT_EQ(v.report["hosts"].size(), 8u);
  EXPECT_EQ(FlaggedHostsBut(v.report, {}), std::set<std::string>{});
  EXPECT_EQ(Findings(v.report), std::vector<std::string>{});
  EXPECT_GT(v.report["fabric"]["pairs"].size(), 0u);
}

TEST_F(TwoLeafTest, OneSlowHostIsTheOnlyOneFailed) {
  Vcluster(kTwoLeaves, {"degrade", "node5", "--rate", "40Mbit"});
  Validation v = Validate(kTwoLeaves);
  ASSERT_TRUE(v.report.is_object()) << v.cli.err;
  EXPECT_EQ(v.cli.exit_code, 2) << v.cli.out << v.cli.err;
  EXPECT_EQ(HostVerdict(v.report, "node5"), "FAIL");
  EXPECT_EQ(FlaggedHostsBut(v.report, {"node5"}), std::set<std::string>{});
  EXPECT_EQ(Findings(v.report), std::vector<std::string>{"host node5 FAIL"});
}

TEST_F(TwoLeafTest, OneSlowPathIsTheLinkNotItsHosts) {
  Vcluster(kTwoLeaves, {"degrade", "node1", "node6", "--rate", "40Mbit"});
  Validation v = Validate(kTwoLeaves);
  ASSERT_TRUE(v.report.is_object()) << v.cli.err;
  EXPECT_EQ(v.cli.exit_code, 2) << v.cli.out << v.cli.err;
  std::vector<std::string> findings = Findings(v.report);
  ASSERT_EQ(findings.size(), 1u) << v.report["fabric"]["findings"].dump();
  EXPECT_EQ(findings[0].rfind("link ", 0), 0u) << findings[0];
  EXPECT_NE(findings[0].find("node1"), std::string::npos) << findings[0];
  EXPECT_NE(findings[0].find("node6"), std::string::npos) << findings[0];
  EXPECT_EQ(FlaggedHostsBut(v.report, {}), std::set<std::string>{});
}

TEST_F(TwoLeafTest, CutHostIsUnknownOrFailedAndTheRunCompletes) {
  Vcluster(kTwoLeaves, {"cut", "node3"});
  Validation v = Validate(kTwoLeaves);
  Vcluster(kTwoLeaves, {"heal", "node3"});
  ASSERT_TRUE(v.report.is_object()) << v.cli.err;
  std::string verdict = HostVerdict(v.report, "node3");
  EXPECT_TRUE(verdict == "UNKNOWN" || verdict == "FAIL") << verdict;
  EXPECT_TRUE(v.cli.exit_code == 2 || v.cli.exit_code == 3) << v.cli.exit_code;
  EXPECT_EQ(FlaggedHostsBut(v.report, {"node3"}), std::set<std::string>{});
}

TEST_F(TwoLeafTest, ReadOnlyScratchFailsStorageOfThatHostOnly) {
  Vcluster(kTwoLeaves, {"fault", "scratch-readonly", "node4"});
  Validation v = Validate(kTwoLeaves);
  ASSERT_TRUE(v.report.is_object()) << v.cli.err;
  EXPECT_EQ(v.cli.exit_code, 2) << v.cli.out << v.cli.err;
  EXPECT_EQ(CheckVerdict(v.report, "node4", "storage.throughput"), "FAIL");
  EXPECT_EQ(FlaggedHostsBut(v.report, {"node4"}), std::set<std::string>{});
}

TEST_F(TwoLeafTest, HiddenProviderFailsThatHostsProviderCheckOnly) {
  // A plan that expects libfabric's tcp provider on every host, as one expecting verbs or efa
  // would on a real fabric; the fault hides it from node2's processes (FI_PROVIDER=^tcp).
  base::ScopedTempDir dir;
  const std::string plan = dir.path() + "/tcp-provider.yaml";
  std::ofstream(plan) << "version: 1\nname: tcp-provider\ninclude: quick\nprofiles:\n"
                         "  - {name: virtual, gpus: 0, rdma: false, fabric_provider: tcp}\n"
                         "checks:\n  - {id: node.sysctl, enabled: false}\n"
                         "  - {id: node.memlock, enabled: false}\n"
                         "  - {id: node.swap, fail: none}\n";
  Vcluster(kTwoLeaves, {"fault", "hide-provider", "node2", "tcp"});
  Validation v = Validate(kTwoLeaves, plan);
  ASSERT_TRUE(v.report.is_object()) << v.cli.err;
  EXPECT_EQ(v.cli.exit_code, 2) << v.cli.out << v.cli.err;
  EXPECT_EQ(CheckVerdict(v.report, "node2", "node.fabric_providers"), "FAIL");
  EXPECT_EQ(FlaggedHostsBut(v.report, {"node2"}), std::set<std::string>{});
}

constexpr const char* kThreeLeaves = "rvu";

class ThreeLeafTest : public ValidateVclusterTest {
 protected:
  static void SetUpTestSuite() { UpCluster(kThreeLeaves, 9, 3, "600Mbit"); }
  static void TearDownTestSuite() { DownCluster(kThreeLeaves); }
  void SetUp() override {
    if (!NetnsUnavailableReason().empty()) GTEST_SKIP() << NetnsUnavailableReason();
  }
};

TEST_F(ThreeLeafTest, SlowUplinkIsNamedNotItsHosts) {
  Vcluster(kThreeLeaves, {"degrade", "--uplink", "leaf1", "--rate", "60Mbit"});
  Validation v = Validate(kThreeLeaves);
  Vcluster(kThreeLeaves, {"restore"});
  ASSERT_TRUE(v.report.is_object()) << v.cli.err;
  EXPECT_EQ(v.cli.exit_code, 2) << v.cli.out << v.cli.err;
  std::vector<std::string> findings = Findings(v.report);
  ASSERT_EQ(findings.size(), 1u) << v.report["fabric"]["findings"].dump();
  EXPECT_EQ(findings[0].rfind("uplink ", 0), 0u) << findings[0];
  EXPECT_NE(findings[0].find("leaf1"), std::string::npos) << findings[0];
  EXPECT_EQ(FlaggedHostsBut(v.report, {}), std::set<std::string>{});
}

}  // namespace
}  // namespace railyard::testing
