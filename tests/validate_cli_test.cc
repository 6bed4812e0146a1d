// `railyard validate node` from the command line: Nagios exit codes for each verdict, bad
// input as 3 (UNKNOWN) with file:line and the nearest name, the NHC one-line summary on
// stderr, and a real run on this host that gives every check a verdict and never a PASS to a
// check that did not run. `railyard validate --plan --hosts` and `validate agent`: each bad
// input is one line and exit 3 before anything starts, the dry run prints the schedule, and an
// agent whose coordinator cannot be reached gives up at its deadline.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <set>

#include "cli_harness.h"
#include "railyard/base/files.h"
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

// Exit 3 and exactly one line on stderr containing `want`.
void ExpectBadInput(const CliResult& r, const std::string& want) {
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.err.find(want), std::string::npos) << r.err;
  EXPECT_EQ(testing::CountLines(r.err), 1) << r.err;
  EXPECT_EQ(r.err.rfind("railyard: error: ", 0), 0u) << r.err;
}

TEST_F(ValidateCliTest, RunBadInputIsOneLineAndUnknown) {
  std::string malformed = Plan("checks:\n  - {id: node.cpus, warn: [}\n");
  CliResult r = RunRailyard({"validate", "--plan", malformed, "--hosts", "node[1-4]"});
  ExpectBadInput(r, "--plan " + malformed + ": " + malformed + ":");

  std::string unknown = Plan("checks:\n  - {id: node.memlok}\n");
  r = RunRailyard({"validate", "--plan", unknown, "--hosts", "node[1-4]"});
  ExpectBadInput(r, "did you mean 'node.memlock'?");

  std::string empty = dir_.Sub("hosts");
  std::ofstream(empty) << "# nobody here yet\n\n";
  r = RunRailyard({"validate", "--hosts", empty});
  ExpectBadInput(r, "--hosts: host list '" + empty + "' names no host");
  r = RunRailyard({"validate", "--hosts", "node[1-"});
  ExpectBadInput(r, "--hosts: host list");

  r = RunRailyard({"validate", "--hosts", "vcluster:zz9"},
                  {{"RAILYARD_STATE_DIR", dir_.Sub("state")}});
  ExpectBadInput(r, "no virtual cluster with prefix 'zz9' is up");

  r = RunRailyard({"validate", "--hosts", "node[1-4]", "--agents", "sssh"});
  ExpectBadInput(r,
                 "--agents sssh: expected vcluster, ssh, srun, kubectl, external (did you "
                 "mean 'ssh'?)");
  r = RunRailyard({"validate", "--hosts", "node[1-4]", "--agent-command", "ssh {host}"});
  ExpectBadInput(r, "expected {command}");
  r = RunRailyard({"validate", "--hosts", "node[1-4]", "--agents", "external"});
  ExpectBadInput(r, "--agents external: give --listen ADDR:PORT");
  r = RunRailyard({"validate", "--hosts", "node[1-4]", "--timeout", "forever"});
  ExpectBadInput(r, "--timeout forever: expected a duration");
  r = RunRailyard({"validate", "--hosts", "node[1-4]", "--json", dir_.Sub("no/such/r.json")});
  ExpectBadInput(r, "--json " + dir_.Sub("no/such/r.json") + ": directory");
  r = RunRailyard({"validate", "--hots", "node[1-4]"});
  ExpectBadInput(r, "unexpected argument '--hots'");
  r = RunRailyard({"validate", "--plan", "quick"});
  ExpectBadInput(r, "validate: give --hosts");
}

TEST_F(ValidateCliTest, DryRunPrintsTheScheduleAndStartsNothing) {
  // ssh agents on hosts that do not exist: a dry run must not try them.
  CliResult r = RunRailyard(
      {"validate", "--plan", "full", "--hosts", "node[1-8]", "--agents", "ssh", "--dry-run"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("hosts: 8 from hostlist 'node[1-8]' (no topology"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("schedule all-pairs: 8 hosts, 7 rounds, 28 pairs (56 measurements)"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("round 7: 4 pairs:"), std::string::npos) << r.out;
  EXPECT_EQ(r.err, "");
  // A topology file as the host list: its nodes, its tree.
  std::string topology = dir_.Sub("topology.conf");
  std::ofstream(topology) << "SwitchName=leaf0 Nodes=n[1-2]\nSwitchName=leaf1 Nodes=n[3-4]\n"
                             "SwitchName=top Switches=leaf[0-1]\n";
  r = RunRailyard({"validate", "--plan", "full", "--hosts", topology, "--dry-run"});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("hosts: 4 from topology file"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("round 1: 2 pairs: n1<->"), std::string::npos) << r.out;
}

TEST_F(ValidateCliTest, AgentWithAnUnreachableCoordinatorGivesUpAtItsDeadline) {
  std::string secret = dir_.Sub("secret");
  std::ofstream(secret) << "s3cret\n";
  // Port 1 on loopback: refused, and retried until --connect-timeout.
  CliResult r = RunRailyard({"validate", "agent", "--coordinator", "127.0.0.1:1", "--host", "h1",
                             "--secret-file", secret, "--connect-timeout", "1s"},
                            {}, std::chrono::seconds(30));
  ExpectBadInput(r, "validate agent h1: coordinator 127.0.0.1:1 not reachable within 1s");
  // No secret at all, and one from an empty stdin: refused before dialling.
  r = RunRailyard({"validate", "agent", "--coordinator", "127.0.0.1:1", "--host", "h1"},
                  {{"RAILYARD_JOB_SECRET", ""}});
  ExpectBadInput(r, "no job secret");
  r = RunRailyard({"validate", "agent", "--coordinator", "127.0.0.1:1", "--secret-stdin"});
  ExpectBadInput(r, "no job secret");
  r = RunRailyard({"validate", "agent", "--secret-file", secret});
  ExpectBadInput(r, "give --coordinator ADDR:PORT");
  r = RunRailyard({"validate", "agent", "--coordinator", "127.0.0.1:1", "--host", "h1",
                   "--secret-file", secret, "--run", "a b"});
  ExpectBadInput(r, "--run 'a b': expected");
  // A stdin that stays open without a line (a terminal, a stuck carrier): given up on at the
  // connect deadline, not waited for.
  auto piped = base::RunCommand(
      {.argv = {"sh", "-c",
                std::string("sleep 3 | ") + RAILYARD_BINARY +
                    " validate agent --coordinator 127.0.0.1:1 --host h1 --secret-stdin "
                    "--connect-timeout 1s; echo rc=$?"}},
      base::Deadline::After(std::chrono::seconds(30)));
  ASSERT_TRUE(piped.ok()) << piped.status().ToString();
  EXPECT_NE(piped->stdout_text.find("rc=3"), std::string::npos) << piped->stdout_text;
  EXPECT_NE(piped->stderr_text.find("--secret-stdin: no line on stdin before the deadline"),
            std::string::npos)
      << piped->stderr_text;
}

// The whole run without a virtual cluster or root: a custom template starts every "host"'s
// agent on this machine (the store on loopback), except h3's, whose carrier dies at once. The
// run completes, h1 and h2 get verdicts from their agents, h3 is UNKNOWN with the reason its
// starter gave, and the exclude file names it.
TEST_F(ValidateCliTest, RunsAPlanOverAgentsStartedByATemplate) {
  std::string json = dir_.Sub("report.json"), exclude = dir_.Sub("exclude");
  CliResult r = RunRailyard(
      {"validate", "--plan", "quick", "--hosts", "h[1-3]", "--listen", "127.0.0.1:0",
       "--agent-command",
       "if [ {host} = h3 ]; then echo 'h3: no route to host' >&2; exit 7; fi; exec {command}",
       "--timeout", "10s", "--json", json, "--exclude-file", exclude},
      {}, std::chrono::seconds(120));
  EXPECT_EQ(r.exit_code, 3) << r.out << r.err;
  EXPECT_NE(r.out.find("h3"), std::string::npos) << r.out;
  auto text = base::ReadFile(json);
  ASSERT_TRUE(text.ok()) << text.status().ToString() << r.err;
  nlohmann::json j = nlohmann::json::parse(*text);
  ASSERT_EQ(j["hosts"].size(), 3u) << j.dump(2);
  for (int i : {0, 1}) {
    const auto& host = j["hosts"][i];
    EXPECT_NE(host["overall"]["verdict"], "UNKNOWN") << host.dump(2);
    EXPECT_FALSE(host["checks"].empty());
  }
  const auto& h3 = j["hosts"][2];
  EXPECT_EQ(h3["name"], "h3");
  EXPECT_EQ(h3["overall"]["verdict"], "UNKNOWN");
  EXPECT_NE(h3["overall"]["reason"].get<std::string>().find("exited with 7: h3: no route to host"),
            std::string::npos)
      << h3.dump(2);
  auto excluded = base::ReadFile(exclude);
  ASSERT_TRUE(excluded.ok());
  EXPECT_NE(excluded->find("\nh3\n"), std::string::npos) << *excluded;
}

// --slurm-drain against a stand-in scontrol on PATH that records its commands: h1 passes and
// was drained by railyard before (resumed), h2 fails its plan (drained with the check and
// reason), h3's agent never starts (UNKNOWN: neither drained nor resumed).
TEST_F(ValidateCliTest, SlurmDrainActsOnTheVerdicts) {
  std::string bin = dir_.Sub("bin"), log = dir_.Sub("scontrol.log");
  std::filesystem::create_directories(bin);
  std::ofstream(bin + "/scontrol")
      << "#!/bin/sh\necho \"$*\" >> '" << log << "'\n"
      << "if [ \"$1\" = show ]; then\n"
      << "  if [ \"$3\" = h1 ]; then echo \"NodeName=h1 State=IDLE+DRAIN "
         "Reason=railyard: old [root@2026-12-01T00:00:00]\"\n"
      << "  else echo \"NodeName=$3 State=IDLE\"; fi\nfi\n";
  std::filesystem::permissions(bin + "/scontrol", std::filesystem::perms::owner_all);
  std::string plan = Plan(
      "profiles:\n  - {name: bad, hosts: h2}\n  - {name: rest}\n"
      "checks:\n  - {id: node.cpus, fail: 100000, profiles: [bad]}\n"
      "  - {id: node.clock_offset}\n");
  CliResult r =
      RunRailyard({"validate", "--plan", plan, "--hosts", "h[1-3]", "--listen", "127.0.0.1:0",
                   "--agent-command", "if [ {host} = h3 ]; then exit 7; fi; exec {command}",
                   "--timeout", "10s", "--slurm-drain"},
                  {{"PATH", bin + ":" + std::getenv("PATH")}}, std::chrono::seconds(120));
  EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
  auto calls = base::ReadFile(log);
  ASSERT_TRUE(calls.ok()) << r.err;
  EXPECT_NE(calls->find("update NodeName=h1 State=RESUME\n"), std::string::npos) << *calls;
  EXPECT_NE(calls->find("update NodeName=h2 State=DRAIN Reason=railyard: node.cpus: "),
            std::string::npos)
      << *calls;
  EXPECT_EQ(calls->find("h3"), std::string::npos) << *calls;
  EXPECT_NE(r.err.find("h2: drained (railyard: node.cpus: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("h3: left as it is (UNKNOWN"), std::string::npos) << r.err;
}

TEST_F(ValidateCliTest, RunHelpShowsEachWayToStartAgents) {
  CliResult r = RunRailyard({"validate", "--help"});
  EXPECT_EQ(r.exit_code, 0);
  for (const char* want :
       {"--hosts vcluster", "--agents ssh", "--agents srun", "--slurm-drain", "DaemonSet",
        "--agents external", "3 UNKNOWN or bad input", "validate agent --coordinator"}) {
    EXPECT_NE(r.out.find(want), std::string::npos) << want << "\n" << r.out;
  }
  CliResult agent = RunRailyard({"validate", "agent", "--help"});
  EXPECT_EQ(agent.exit_code, 0);
  EXPECT_NE(agent.out.find("--secret-stdin"), std::string::npos) << agent.out;
}

}  // namespace
}  // namespace railyard
