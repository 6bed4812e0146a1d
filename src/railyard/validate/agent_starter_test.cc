// Agent starters through stand-ins: a fake ssh, srun and kubectl on PATH record the arguments
// they are given and run the command here as the real tools would on the host (ssh through a
// shell, srun and kubectl exec directly), and a fake agent records its own arguments and the
// secret it reads from stdin. That proves the templates' expansion and quoting, and that the
// secret travels on stdin and never on a command line. The real ssh, srun and kubectl are
// exercised where installed, but with no sshd, slurmctld or Kubernetes API here they can only
// be shown to run with the template's arguments and to fail in a way the handle reports.
#include "railyard/validate/agent_starter.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "railyard/base/files.h"
#include "railyard/base/strings.h"
#include "railyard/base/temp_dir_testing.h"
#include "railyard/vcluster/spec.h"

namespace railyard::validate {
namespace {

using Words = std::vector<std::string>;
using namespace std::chrono_literals;

// Sets PATH for one test and puts it back.
class PathGuard {
 public:
  explicit PathGuard(const std::string& path) {
    const char* old = std::getenv("PATH");
    old_ = old ? old : "";
    ::setenv("PATH", path.c_str(), 1);
  }
  ~PathGuard() { ::setenv("PATH", old_.c_str(), 1); }

 private:
  std::string old_;
};

class AgentStarterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::filesystem::create_directories(bin_);
    // ssh: options, then the host, then words the remote shell joins and runs.
    Script(bin_ + "/ssh", Record("ssh") +
                              "while [ $# -gt 0 ]; do case \"$1\" in -o) shift 2;; -*) shift;; "
                              "*) break;; esac; done\nshift\nexec sh -c \"$*\"\n");
    // srun: its options, then the program and its arguments, executed as they are.
    Script(bin_ + "/srun", Record("srun") +
                               "while [ $# -gt 0 ]; do case \"$1\" in --*) shift;; *) break;; "
                               "esac; done\nexec \"$@\"\n");
    // kubectl exec -i POD -- program args...
    Script(bin_ + "/kubectl",
           Record("kubectl") + "while [ \"$1\" != -- ]; do shift; done\nshift\nexec \"$@\"\n");
    // The agent: records its arguments and the secret line, then ends with a reason.
    std::filesystem::create_directories(agent_dir_);
    Script(agent_, Record("agent") + "read -r secret\nprintf '%s' \"$secret\" > '" +
                       dir_.Sub("agent.secret") +
                       "'\necho 'fake agent: starting' >&2\necho 'fake agent: no coordinator' "
                       ">&2\nexit 3\n");
  }

  // Shell lines that write the script's arguments, one per line, to <dir>/<name>.argv.
  std::string Record(const std::string& name) {
    return "#!/bin/sh\nfor a in \"$@\"; do printf '%s\\n' \"$a\"; done > '" +
           dir_.Sub(name + ".argv") + "'\n";
  }
  void Script(const std::string& path, const std::string& text) {
    std::ofstream(path) << text;
    ::chmod(path.c_str(), 0755);
  }
  Words Lines(const std::string& name) {
    auto text = base::ReadFile(dir_.Sub(name));
    EXPECT_TRUE(text.ok()) << text.status().ToString();
    const std::string all = text.ok() ? *text : "";
    Words out;
    for (std::string_view line : base::SplitLines(all)) out.emplace_back(line);
    return out;
  }
  // Starts the agent of node7 through `starter` and waits for it to end.
  std::string RunToEnd(AgentStarter& starter) {
    auto handle = starter.Start(invocation_);
    EXPECT_TRUE(handle.ok()) << handle.status().ToString();
    if (!handle.ok()) return "";
    auto* child = dynamic_cast<ChildAgentHandle*>(handle->get());
    EXPECT_TRUE(child != nullptr && child->WaitEnded(base::Deadline::After(30s)));
    EXPECT_FALSE((*handle)->Running());
    return (*handle)->ExitReason();
  }
  Words AgentWords() {
    return {"validate",   "agent",  "--coordinator", "127.0.0.1:29500", "--run",
            "validate-1", "--host", "node7",         "--secret-stdin"};
  }

  base::ScopedTempDir dir_{"agent-starter"};
  std::string bin_ = dir_.Sub("bin");
  // A directory whose name needs quoting, for the tools that execute their arguments as
  // they are.
  std::string agent_dir_ = dir_.Sub("agent dir's");
  std::string agent_ = agent_dir_ + "/railyard";
  AgentInvocation invocation_{.host = "node7",
                              .store_address = "127.0.0.1:29500",
                              .run_id = "validate-1",
                              .secret = "s3cret-7f3a"};
};

TEST_F(AgentStarterTest, ShellQuoteSurvivesTheShell) {
  EXPECT_EQ(ShellQuote("node01"), "node01");
  EXPECT_EQ(ShellQuote("--run=a/b:1"), "--run=a/b:1");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("it's"), "'it'\\''s'");
  const std::string hard = "x' $(touch pwned) \"`;|&\n*";
  auto r = base::RunCommand({.argv = {"sh", "-c", "printf '%s' " + ShellQuote(hard)}},
                            base::Deadline::After(10s));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_text, hard);
}

TEST_F(AgentStarterTest, TemplatesAreChecked) {
  EXPECT_TRUE(CheckAgentTemplate("ssh {host} {command}").ok());
  EXPECT_TRUE(CheckAgentTemplate("pdsh -w {host} ${HOME}/bin/x {command}").ok());
  Status missing = CheckAgentTemplate("ssh {host}");
  EXPECT_EQ(missing.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(missing.message().find("expected {command}"), std::string::npos) << missing.ToString();
  EXPECT_NE(CheckAgentTemplate("srun {command}").message().find("expected {host}"),
            std::string::npos);
  Status typo = CheckAgentTemplate("ssh {host} {comand}");
  EXPECT_NE(typo.message().find("unknown placeholder {comand} (did you mean {command}?)"),
            std::string::npos)
      << typo.ToString();
  auto created = TemplateStarter::Create("ssh {command}", "railyard");
  EXPECT_EQ(created.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(ExpandAgentTemplate("x {host} -- {command} {host}", "n1", {"a b", "c"}),
            "x n1 -- 'a b' c n1");
}

TEST_F(AgentStarterTest, SshTemplateGivesTheSecretOnStdinOnly) {
  PathGuard path(bin_ + ":" + std::getenv("PATH"));
  // ssh's remote shell splits the words again: the agent's path must need no quoting.
  std::string plain = dir_.Sub("railyard");
  std::filesystem::copy_file(agent_, plain);
  auto starter = TemplateStarter::Create("ssh", plain);
  ASSERT_TRUE(starter.ok()) << starter.status().ToString();
  EXPECT_EQ((*starter)->Describe(), "ssh -o BatchMode=yes {host} {command}");
  EXPECT_EQ(RunToEnd(**starter), "exited with 3: fake agent: no coordinator");
  Words ssh = {"-o", "BatchMode=yes", "node7", plain};
  for (const auto& w : AgentWords()) ssh.push_back(w);
  EXPECT_EQ(Lines("ssh.argv"), ssh);
  EXPECT_EQ(Lines("agent.argv"), AgentWords());
  EXPECT_EQ(Lines("agent.secret"), Words{"s3cret-7f3a"});
  // Nowhere on a command line: not in the sh -c line, not in what ssh or the agent got.
  base::SpawnOptions s = (*starter)->SpawnFor(invocation_);
  for (const auto& w : s.argv) EXPECT_EQ(w.find("s3cret"), std::string::npos) << w;
  for (const auto& [k, v] : s.env) EXPECT_EQ(v.find("s3cret"), std::string::npos) << k;
  for (const char* f : {"ssh.argv", "agent.argv"}) {
    for (const auto& w : Lines(f)) EXPECT_EQ(w.find("s3cret"), std::string::npos) << f;
  }
  EXPECT_EQ(s.stdin_data, "s3cret-7f3a\n");
}

TEST_F(AgentStarterTest, SrunTemplateQuotesTheCommandWords) {
  PathGuard path(bin_ + ":" + std::getenv("PATH"));
  auto starter = TemplateStarter::Create("srun", agent_);
  ASSERT_TRUE(starter.ok()) << starter.status().ToString();
  EXPECT_EQ(RunToEnd(**starter), "exited with 3: fake agent: no coordinator");
  Words srun = {"--nodes=1", "--ntasks=1", "--nodelist=node7", agent_};
  for (const auto& w : AgentWords()) srun.push_back(w);
  EXPECT_EQ(Lines("srun.argv"), srun);
  EXPECT_EQ(Lines("agent.argv"), AgentWords());
  EXPECT_EQ(Lines("agent.secret"), Words{"s3cret-7f3a"});
}

TEST_F(AgentStarterTest, KubectlTemplateExecsIntoThePod) {
  PathGuard path(bin_ + ":" + std::getenv("PATH"));
  auto starter = TemplateStarter::Create("kubectl", agent_);
  ASSERT_TRUE(starter.ok()) << starter.status().ToString();
  EXPECT_EQ(RunToEnd(**starter), "exited with 3: fake agent: no coordinator");
  Words kubectl = {"exec", "-i", "node7", "--", agent_};
  for (const auto& w : AgentWords()) kubectl.push_back(w);
  EXPECT_EQ(Lines("kubectl.argv"), kubectl);
  EXPECT_EQ(Lines("agent.secret"), Words{"s3cret-7f3a"});
}

TEST_F(AgentStarterTest, CustomTemplate) {
  auto starter = TemplateStarter::Create("env RAILYARD_VHOST={host} {command}", agent_);
  ASSERT_TRUE(starter.ok()) << starter.status().ToString();
  EXPECT_EQ(RunToEnd(**starter), "exited with 3: fake agent: no coordinator");
  EXPECT_EQ(Lines("agent.argv"), AgentWords());
  EXPECT_EQ(Lines("agent.secret"), Words{"s3cret-7f3a"});
}

TEST_F(AgentStarterTest, StopEndsAHungAgent) {
  Script(agent_, "#!/bin/sh\nread -r secret\nexec sleep 600\n");
  auto starter = TemplateStarter::Create("{command} # {host}", agent_);
  ASSERT_TRUE(starter.ok()) << starter.status().ToString();
  auto handle = (*starter)->Start(invocation_);
  ASSERT_TRUE(handle.ok()) << handle.status().ToString();
  EXPECT_TRUE((*handle)->Running());
  EXPECT_EQ((*handle)->ExitReason(), "still running");
  (*handle)->Stop();
  EXPECT_FALSE((*handle)->Running());
  EXPECT_EQ((*handle)->ExitReason(), "stopped by the coordinator");
  (*handle)->Stop();  // idempotent
}

TEST_F(AgentStarterTest, AMissingToolIsOneLineBeforeAnyHost) {
  PathGuard path(dir_.Sub("empty"));
  for (const char* tool : {"ssh", "srun", "kubectl"}) {
    auto starter = TemplateStarter::Create(tool, "railyard");
    EXPECT_EQ(starter.status().code(), StatusCode::kFailedPrecondition);
    EXPECT_NE(starter.status().message().find(std::string("'") + tool + "' is not installed here"),
              std::string::npos)
        << starter.status().ToString();
  }
}

// The real tools, where installed: the built-in template is a command line they accept far
// enough to try the host, and their failure (no such host, no controller, no API server)
// reaches ExitReason. Nothing here has an sshd, slurmctld or Kubernetes API to succeed with.
TEST_F(AgentStarterTest, RealToolsWhereInstalledFailVisibly) {
  int tried = 0;
  for (const char* tool : {"ssh", "srun", "kubectl"}) {
    if (base::FindInPath(tool).empty()) continue;
    ++tried;
    auto starter = TemplateStarter::Create(tool, "railyard");
    ASSERT_TRUE(starter.ok()) << starter.status().ToString();
    AgentInvocation inv = invocation_;
    inv.host = "nohost.invalid";  // RFC 2606: never resolves
    auto handle = (*starter)->Start(inv);
    ASSERT_TRUE(handle.ok()) << handle.status().ToString();
    auto* child = dynamic_cast<ChildAgentHandle*>(handle->get());
    ASSERT_TRUE(child->WaitEnded(base::Deadline::After(60s))) << tool;
    std::string reason = (*handle)->ExitReason();
    EXPECT_TRUE(reason.starts_with("exited with ")) << tool << ": " << reason;
    EXPECT_FALSE(reason.starts_with("exited with 0")) << tool << ": " << reason;
    EXPECT_GT(reason.size(), std::string("exited with 1: ").size()) << tool << ": " << reason;
  }
  if (tried == 0) GTEST_SKIP() << "none of ssh, srun, kubectl is installed";
}

TEST_F(AgentStarterTest, VclusterStarterRunsTheAgentAsTheHost) {
  vcluster::ClusterState state;
  state.plan = vcluster::MakePlan(
      {.prefix = "as", .hosts = 8, .leaves = 2, .mode = vcluster::Mode::kLoopback});
  VclusterStarter starter(state, agent_);
  EXPECT_EQ(starter.Describe(), "vcluster exec (as, loopback mode)");
  auto s = starter.SpawnFor(invocation_);
  ASSERT_TRUE(s.ok()) << s.status().ToString();
  Words argv = {agent_};
  for (const auto& w : AgentWords()) argv.push_back(w);
  EXPECT_EQ(s->argv, argv);
  EXPECT_EQ(s->netns_path, "");  // loopback mode
  EXPECT_EQ(s->stdin_data, "s3cret-7f3a\n");
  bool vhost = false;
  for (const auto& [k, v] : s->env) {
    vhost = vhost || (k == "RAILYARD_VHOST" && v == "node7");
    EXPECT_EQ(v.find("s3cret"), std::string::npos) << k;
  }
  EXPECT_TRUE(vhost);
  EXPECT_EQ(RunToEnd(starter), "exited with 3: fake agent: no coordinator");
  EXPECT_EQ(Lines("agent.secret"), Words{"s3cret-7f3a"});

  state.plan = vcluster::MakePlan({.prefix = "as", .hosts = 8, .mode = vcluster::Mode::kNetns});
  EXPECT_EQ(VclusterStarter(state, agent_).SpawnFor(invocation_)->netns_path,
            "/run/netns/as-node7");
  AgentInvocation stranger = invocation_;
  stranger.host = "node9";
  auto missing = starter.SpawnFor(stranger);
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("node9"), std::string::npos);
}

}  // namespace
}  // namespace railyard::validate
