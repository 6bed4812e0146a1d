// `railyard validate node` from the command line: Nagios exit codes for each verdict, bad
// input as 3 (UNKNOWN) with file:line and the nearest name, the NHC one-line summary on
// stderr, and a real run on this host that gives every check a verdict and never a PASS to a
// check that did not run.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "cli_harness.h"
#include "railyard/base/temp_dir_testing.h"

namespace railyard {
namespace {

using testing::CliResult;
using testing::RunRailyard;

class ValidateCliTest : public ::testing::Test {
 protected:
  // Writes a plan file and returns its path.
  std::string Plan(const std::string& body) {
    std::string path = dir_.Sub("plan.yaml");
    std::ofstream(path) << "version: 1\nname: t\n" << body;
    return path;
  }
  CliResult Node(std::vector<std::string> args) {
    args.insert(args.begin(), {"validate", "node"});
    return RunRailyard(args);
  }
  base::ScopedTempDir dir_{"validate-cli"};
};

TEST_F(ValidateCliTest, ExitCodesFollowNagios) {
  // An impossible CPU count as the warn or the fail bound; a path that does not exist.
  CliResult ok = Node({"--plan", Plan("checks:\n  - {id: node.cpus}\n")});
  EXPECT_EQ(ok.exit_code, 0) << ok.out << ok.err;
  EXPECT_NE(ok.err.find("OK: 1 passed, 0 skipped"), std::string::npos) << ok.err;
  CliResult warn = Node({"--plan", Plan("checks:\n  - {id: node.cpus, warn: 100000}\n")});
  EXPECT_EQ(warn.exit_code, 1) << warn.out << warn.err;
  CliResult fail = Node({"--plan", Plan("checks:\n  - {id: node.cpus, fail: 100000}\n")});
  EXPECT_EQ(fail.exit_code, 2) << fail.out << fail.err;
  EXPECT_NE(fail.err.find("railyard: node.cpus FAIL: "), std::string::npos) << fail.err;
  CliResult unknown =
      Node({"--plan",
            Plan("checks:\n  - {id: node.free_space, params: {paths: /nonexistent-railyard}}\n")});
  EXPECT_EQ(unknown.exit_code, 3) << unknown.out << unknown.err;
  EXPECT_NE(unknown.err.find("railyard: node.free_space UNKNOWN: statfs /nonexistent-railyard"),
            std::string::npos)
      << unknown.err;
}

TEST_F(ValidateCliTest, NfsWhereLustreIsExpectedFailsWithOneLine) {
  std::string plan = Plan(
      "profiles:\n  - {name: hpc, mounts: [{path: /proc, fs: lustre}]}\n"
      "checks:\n  - {id: node.mounts}\n");
  CliResult r = Node({"--plan", plan, "--json"});
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  EXPECT_EQ(r.err, "railyard: node.mounts FAIL: /proc is proc (from proc), expected lustre\n");
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["verdict"], "FAIL");
  EXPECT_EQ(j["exit_code"], 2);
  EXPECT_EQ(j["profile"], "hpc");
  EXPECT_EQ(j["checks"][0]["measured"], "/proc proc");
  EXPECT_EQ(j["checks"][0]["expected"], "/proc lustre");
}

TEST_F(ValidateCliTest, MalformedPlanIsUnknownNamingFileLineAndNearestName) {
  std::string plan = Plan("checks:\n  - {id: node.memlok}\n");
  CliResult r = Node({"--plan", plan});
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find(plan + ":4:"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("did you mean 'node.memlock'?"), std::string::npos) << r.err;
  EXPECT_EQ(testing::CountLines(r.err), 1) << r.err;
}

TEST_F(ValidateCliTest, OtherBadInputIsUnknownToo) {
  CliResult missing = Node({"--plan", dir_.Sub("none.yaml")});
  EXPECT_EQ(missing.exit_code, 3) << missing.err;
  CliResult typo = Node({"--jsn"});
  EXPECT_EQ(typo.exit_code, 3) << typo.err;
  EXPECT_NE(typo.err.find("unexpected argument '--jsn'"), std::string::npos) << typo.err;
  CliResult no_value = Node({"--plan"});
  EXPECT_EQ(no_value.exit_code, 3) << no_value.err;
  CliResult profile = Node({"--plan", "quick", "--profile", "defualt"});
  EXPECT_EQ(profile.exit_code, 3) << profile.err;
  EXPECT_NE(profile.err.find("did you mean 'default'?"), std::string::npos) << profile.err;
  CliResult host =
      Node({"--topology", std::string(RAILYARD_TESTDATA) + "/tree.conf", "--host", "gpu017"});
  EXPECT_EQ(host.exit_code, 3) << host.err;
  EXPECT_NE(host.err.find("--host gpu017: no such node"), std::string::npos) << host.err;
  CliResult bare = RunRailyard({"validate"});
  EXPECT_EQ(bare.exit_code, 3) << bare.err;
}

TEST_F(ValidateCliTest, HelpTeachesExitCodesAndExamples) {
  CliResult r = Node({"--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_NE(r.out.find("3 UNKNOWN or bad input"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("HealthCheckProgram"), std::string::npos) << r.out;
}

TEST_F(ValidateCliTest, TheTopologySetsTheHostsExpectations) {
  // gpu05 has no NICs listed, so RDMA is not expected and the RDMA checks are SKIPPED.
  CliResult r = Node(
      {"--topology", std::string(RAILYARD_TESTDATA) + "/tree.conf", "--host", "gpu05", "--json"});
  ASSERT_NE(r.exit_code, -1) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  EXPECT_EQ(j["host"], "gpu05");
  for (const auto& c : j["checks"]) {
    if (c["id"] == "node.ib_ports") EXPECT_EQ(c["verdict"], "SKIPPED") << c.dump();
  }
}

TEST_F(ValidateCliTest, ThisHostGetsAVerdictPerCheckAndNoUnearnedPass) {
  // Expect what this host cannot have, so checks that cannot run must not pass.
  std::string plan = Plan(
      "include: quick\nprofiles:\n"
      "  - {name: big, gpus: 64, rdma: true, fabric_provider: nosuchprovider}\n");
  CliResult r = Node({"--plan", plan, "--json"});
  ASSERT_GE(r.exit_code, 0) << r.err;
  ASSERT_LE(r.exit_code, 3) << r.err;
  nlohmann::json j = nlohmann::json::parse(r.out);
  const std::set<std::string> verdicts = {"PASS", "WARN", "FAIL", "UNKNOWN", "SKIPPED"};
  std::set<std::string> ids;
  for (const auto& c : j["checks"]) {
    ids.insert(c["id"]);
    EXPECT_TRUE(verdicts.contains(c["verdict"])) << c.dump();
    // A verdict always says why, except a PASS may be terse; a PASS always has a measurement.
    if (c["verdict"] != "PASS") EXPECT_NE(c["reason"], "") << c.dump();
    if (c["verdict"] == "PASS") EXPECT_NE(c["measured"], "") << c.dump();
  }
  for (const char* id : {"node.memlock", "node.swap", "node.cpus", "node.sysctl", "gpu.count",
                         "node.fabric_providers", "node.ib_ports"}) {
    EXPECT_TRUE(ids.contains(id)) << id;
  }
  for (const auto& c : j["checks"]) {
    // No such provider exists, and 64 GPUs on one host is more than any machine has.
    if (c["id"] == "node.fabric_providers" || c["id"] == "gpu.count") {
      EXPECT_NE(c["verdict"], "PASS") << c.dump();
    }
  }
  EXPECT_LT(j["elapsed_s"].get<double>(), 10.0);  // a guard against a hang, not a benchmark
  EXPECT_EQ(testing::CountLines(r.err), 1) << r.err;
}

}  // namespace
}  // namespace railyard
