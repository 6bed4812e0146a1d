// Remediation against a report of four hosts (PASS, FAIL, UNKNOWN, WARN) and a fake scontrol
// that records every command: the exclude file reads back through the hostlist parser place
// uses; Slurm drains only FAIL hosts, resumes only its own drains and never touches a drain
// someone else wrote; the Kubernetes script labels and taints exactly the failing node.
#include "railyard/validate/remediation.h"

#include <gtest/gtest.h>

#include <map>

#include "railyard/base/strings.h"
#include "railyard/topo/hostlist.h"

namespace railyard::validate {
namespace {

using Commands = std::vector<std::vector<std::string>>;

HostEntry Host(std::string name, Verdict v, std::string check, std::string reason) {
  HostEntry h;
  h.name = std::move(name);
  h.checks.push_back({"node.cpus", Outcome::Pass("8 CPUs")});
  h.checks.push_back({std::move(check), Outcome{v, std::move(reason)}});
  h.overall = Worst({h.checks[0].outcome, h.checks[1].outcome});
  return h;
}

RunReport Report() {
  RunReport r;
  r.plan = "quick";
  r.started = "2026-12-02T03:00:00Z";
  r.hosts.push_back(Host("node0", Verdict::kPass, "node.swap", ""));
  r.hosts.push_back(Host("node1", Verdict::kFail, "fabric.pair_bandwidth",
                         "every path of node1 is slow (38 Mbit/s, expected 200 Mbit/s)"));
  r.hosts.push_back(
      Host("node2", Verdict::kUnknown, "node.clock_offset", "agent did not connect within 15s"));
  r.hosts.push_back(Host("node3", Verdict::kWarn, "node.swap", "swap 1 GiB in use"));
  RollUp(r);
  return r;
}

// scontrol as a map from node to its `show node -o` line; records every call.
struct FakeScontrol {
  std::map<std::string, std::string> nodes;
  Commands calls;
  ScontrolRunner Runner() {
    return [this](const std::vector<std::string>& argv) -> Result<base::ExitInfo> {
      calls.push_back(argv);
      base::ExitInfo e;
      e.command = base::CommandLine(argv);
      e.exit_code = 0;
      if (argv.size() >= 4 && argv[1] == "show") {
        auto it = nodes.find(argv[3]);
        if (it == nodes.end()) {
          e.exit_code = 1;
          e.stderr_text = "Node " + argv[3] + " not found\n";
        } else {
          e.stdout_text = it->second + "\n";
        }
      }
      return e;
    };
  }
};

std::string Shown(const std::string& node, const std::string& state, const std::string& reason) {
  std::string s = "NodeName=" + node + " Arch=x86_64 CoresPerSocket=4 State=" + state +
                  " ThreadsPerCore=1 Partitions=batch";
  if (!reason.empty()) s += " Reason=" + reason + " [root@2026-12-01T10:00:00]";
  return s;
}

TEST(RemediationTest, ExcludeFileListsFailAndUnknownAndReadsBackAsAHostlist) {
  std::string text = FormatExcludeFile(Report());
  // What `railyard place --exclude @F` does with it: '#' lines skipped, the rest expanded.
  std::vector<std::string> hosts;
  for (std::string_view line : base::SplitLines(text)) {
    if (line.empty() || line[0] == '#') continue;
    auto names = topo::ExpandHostlist(line);
    ASSERT_TRUE(names.ok()) << line;
    hosts.insert(hosts.end(), names->begin(), names->end());
  }
  EXPECT_EQ(hosts, (std::vector<std::string>{"node1", "node2"}));
  EXPECT_NE(text.find("# FAIL fabric.pair_bandwidth: every path of node1 is slow"),
            std::string::npos)
      << text;
  EXPECT_NE(text.find("# UNKNOWN node.clock_offset: agent did not connect"), std::string::npos)
      << text;
  EXPECT_NE(text.find("2 of 4 hosts FAIL or UNKNOWN"), std::string::npos) << text;
}

TEST(RemediationTest, SlurmDrainsFailingHostsAndResumesOnlyItsOwnDrains) {
  FakeScontrol fake;
  fake.nodes["node0"] = Shown("node0", "IDLE+DRAIN", "railyard: node.swap: swap in use");
  fake.nodes["node1"] = Shown("node1", "IDLE", "");
  fake.nodes["node3"] = Shown("node3", "MIXED+DRAIN", "bad DIMM, ticket 4711");
  std::vector<SlurmAction> done = ApplySlurmDrain(Report(), fake.Runner());
  const Commands updates = [&] {
    Commands u;
    for (const auto& c : fake.calls) {
      if (c[1] == "update") u.push_back(c);
    }
    return u;
  }();
  EXPECT_EQ(updates,
            (Commands{{"scontrol", "update", "NodeName=node0", "State=RESUME"},
                      {"scontrol", "update", "NodeName=node1", "State=DRAIN",
                       "Reason=railyard: fabric.pair_bandwidth: every path of node1 is slow "
                       "(38 Mbit/s, expected 200 Mbit/s)"}}));
  // node2 (UNKNOWN) is neither read nor changed; node3's foreign drain is read, kept.
  for (const auto& c : fake.calls) EXPECT_NE(c[3], "node2") << base::CommandLine(c);
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[0].action, "resume");
  EXPECT_EQ(done[1].action, "drain");
  EXPECT_EQ(done[2].host, "node2");
  EXPECT_EQ(done[2].action, "left");
  EXPECT_NE(FormatSlurmActions(done).find("node1: drained (railyard: fabric.pair_bandwidth"),
            std::string::npos)
      << FormatSlurmActions(done);
}

TEST(RemediationTest, SlurmNeverOverwritesAForeignDrainAndReportsErrors) {
  FakeScontrol fake;
  fake.nodes["node1"] = Shown("node1", "DRAINED", "cable swap");
  // node0 and node3 are unknown to Slurm: an error each, and the others go on.
  std::vector<SlurmAction> done = ApplySlurmDrain(Report(), fake.Runner());
  for (const auto& c : fake.calls) EXPECT_EQ(c[1], "show") << base::CommandLine(c);
  ASSERT_EQ(done.size(), 4u);
  EXPECT_EQ(done[0].action, "error");
  EXPECT_NE(done[0].detail.find("Node node0 not found"), std::string::npos) << done[0].detail;
  EXPECT_EQ(done[1].action, "left");
  EXPECT_EQ(done[1].detail, "already drained by someone else: cable swap");
  // A drain railyard wrote earlier is renewed with the new reason.
  fake.nodes["node1"] = Shown("node1", "DRAINED", "railyard: node.swap: old");
  fake.calls.clear();
  done = ApplySlurmDrain(Report(), fake.Runner());
  bool redrained = false;
  for (const auto& c : fake.calls) redrained = redrained || (c.size() > 3 && c[3] == "State=DRAIN");
  EXPECT_TRUE(redrained);
}

TEST(RemediationTest, KubernetesScriptTaintsOnlyTheFailingNode) {
  std::string script = FormatKubernetesScript(Report());
  EXPECT_NE(script.find("kubectl label node node1 railyard.io/validation=fail --overwrite\n"),
            std::string::npos)
      << script;
  EXPECT_NE(script.find("kubectl taint node node1 "
                        "railyard.io/unhealthy=fabric.pair_bandwidth:NoSchedule --overwrite\n"),
            std::string::npos)
      << script;
  for (const char* node : {"node0", "node3"}) {
    EXPECT_NE(script.find(std::string("kubectl taint node ") + node +
                          " railyard.io/unhealthy:NoSchedule- 2>/dev/null || true\n"),
              std::string::npos)
        << script;
  }
  EXPECT_NE(script.find("kubectl label node node2 railyard.io/validation=unknown"),
            std::string::npos);
  EXPECT_EQ(script.find("taint node node2"), std::string::npos) << script;
  // The script is valid sh.
  auto r = base::RunCommand({.argv = {"sh", "-n", "-c", script}},
                            base::Deadline::After(std::chrono::seconds(10)));
  ASSERT_TRUE(r.ok());
  EXPECT_TRUE(r->Succeeded()) << r->Describe();
}

}  // namespace
}  // namespace railyard::validate
