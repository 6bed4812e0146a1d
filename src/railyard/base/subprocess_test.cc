#include "railyard/base/subprocess.h"

#include <gtest/gtest.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "railyard/base/files.h"

namespace railyard::base {
namespace {

using namespace std::chrono_literals;

// True when process `pid` is gone (or a zombie nobody reaps) within `within`. Waits on a
// pidfd, which becomes readable when the process exits: an event, not a sleep.
bool ProcessEnds(pid_t pid, std::chrono::milliseconds within) {
  int fd = static_cast<int>(::syscall(SYS_pidfd_open, pid, 0));
  if (fd < 0) return errno == ESRCH;
  pollfd p{fd, POLLIN, 0};
  int r = ::poll(&p, 1, static_cast<int>(within.count()));
  ::close(fd);
  return r == 1;
}

TEST(SubprocessTest, CapturesOutputAndExitCode) {
  SpawnOptions o{.argv = {"sh", "-c", "echo out; echo err >&2; exit 3"}};
  auto r = RunCommand(o, Deadline::After(10s));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->exit_code, 3);
  EXPECT_EQ(r->stdout_text, "out\n");
  EXPECT_EQ(r->stderr_text, "err\n");
  EXPECT_FALSE(r->Succeeded());
  EXPECT_EQ(r->Describe(), "'sh -c 'echo out; echo err >&2; exit 3'' exited with 3: err");
}

TEST(SubprocessTest, CpusRestrictTheChildsAffinity) {
  // The last CPU this process may use, so the test holds on any machine and any cgroup.
  cpu_set_t mine;
  ASSERT_EQ(::sched_getaffinity(0, sizeof mine, &mine), 0);
  int last = -1;
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &mine)) last = c;
  }
  ASSERT_GE(last, 0);
  SpawnOptions o{.argv = {"sh", "-c", "grep Cpus_allowed_list /proc/self/status"}, .cpus = {last}};
  auto r = RunCommand(o, Deadline::After(10s));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_text, "Cpus_allowed_list:\t" + std::to_string(last) + "\n");

  o.cpus = {CPU_SETSIZE};
  auto bad = Child::Spawn(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("CPU 1024 is outside"), std::string::npos)
      << bad.status().ToString();
}

TEST(SubprocessTest, OutputPathGetsBothStreamsAppended) {
  char dir_tmpl[] = "/tmp/ry-subprocess-XXXXXX";
  ASSERT_NE(::mkdtemp(dir_tmpl), nullptr);
  const std::string path = std::string(dir_tmpl) + "/out.log";
  SpawnOptions o{.argv = {"sh", "-c", "echo out; echo err >&2"}, .output_path = path};
  for (int i = 0; i < 2; ++i) {
    auto r = RunCommand(o, Deadline::After(10s));
    ASSERT_TRUE(r.ok()) << r.status().ToString();
    EXPECT_EQ(r->stdout_text, "");  // nothing captured: it went to the file
  }
  auto text = ReadFile(path);
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  EXPECT_EQ(*text, "out\nerr\nout\nerr\n");
  ::unlink(path.c_str());
  ::rmdir(dir_tmpl);

  o.output_path = "/no/such/dir/out.log";
  auto bad = Child::Spawn(o);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("/no/such/dir/out.log"), std::string::npos);
}

TEST(SubprocessTest, StdinDataIsReadThenEof) {
  // cat ends only at EOF, so its exit proves the pipe was closed after the data.
  SpawnOptions o{.argv = {"cat"}, .stdin_data = "s3cret\nline two\n"};
  auto r = RunCommand(o, Deadline::After(10s));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_text, "s3cret\nline two\n");
  // Without data, stdin is /dev/null: EOF at once.
  auto empty = RunCommand({.argv = {"cat"}}, Deadline::After(10s));
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_EQ(empty->stdout_text, "");
  // A child that never reads does not block Spawn, and exits normally.
  auto ignored = RunCommand({.argv = {"true"}, .stdin_data = "unread"}, Deadline::After(10s));
  ASSERT_TRUE(ignored.ok()) << ignored.status().ToString();
  EXPECT_TRUE(ignored->Succeeded());
  auto big = Child::Spawn({.argv = {"cat"}, .stdin_data = std::string(kMaxStdinData + 1, 'x')});
  EXPECT_EQ(big.status().code(), StatusCode::kInvalidArgument);
}

TEST(SubprocessTest, PassesEnvironmentOverrides) {
  ::setenv("RAILYARD_SUBPROCESS_TEST", "parent", 1);
  SpawnOptions o{.argv = {"sh", "-c", "echo $RAILYARD_SUBPROCESS_TEST-$EXTRA"},
                 .env = {{"RAILYARD_SUBPROCESS_TEST", "child"}, {"EXTRA", "x"}}};
  auto r = RunChecked(o, Deadline::After(10s));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_text, "child-x\n");
}

TEST(SubprocessTest, ClearedEnvironmentHasOnlyGivenVariables) {
  SpawnOptions o{.argv = {"/usr/bin/env"}, .env = {{"ONLY", "1"}}, .inherit_env = false};
  auto r = RunChecked(o, Deadline::After(10s));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->stdout_text, "ONLY=1\n");
}

TEST(SubprocessTest, MissingProgramIsNotFoundAndNamed) {
  auto r = RunCommand({.argv = {"railyard-no-such-program", "--x"}}, Deadline::After(10s));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
  EXPECT_NE(r.status().message().find("railyard-no-such-program"), std::string::npos);
}

TEST(SubprocessTest, BadNetnsPathIsReported) {
  auto r = RunCommand({.argv = {"true"}, .netns_path = "/run/netns/railyard-absent"},
                      Deadline::After(10s));
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("/run/netns/railyard-absent"), std::string::npos);
}

TEST(SubprocessTest, DeadlineKillsTheWholeGroup) {
  // The shell starts a background sleeper and prints its pid; the deadline must kill both.
  SpawnOptions o{.argv = {"sh", "-c", "sleep 300 & echo $!; wait"}};
  auto child = Child::Spawn(o);
  ASSERT_TRUE(child.ok()) << child.status().ToString();
  auto line = child->ReadLine(Deadline::After(10s));
  ASSERT_TRUE(line.ok()) << line.status().ToString();
  pid_t sleeper = std::stoi(*line);
  auto waited = child->Wait(Deadline::After(50ms));
  ASSERT_FALSE(waited.ok());
  EXPECT_EQ(waited.status().code(), StatusCode::kDeadlineExceeded);
  ExitInfo info = child->KillAndReap();
  EXPECT_EQ(info.signal, SIGKILL);
  EXPECT_TRUE(ProcessEnds(sleeper, 5000ms)) << "background sleeper " << sleeper << " survived";
}

TEST(SubprocessTest, RunCommandTimeoutNamesCommand) {
  auto r = RunCommand({.argv = {"sleep", "300"}}, Deadline::After(100ms));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kDeadlineExceeded);
  EXPECT_NE(r.status().message().find("'sleep 300' did not finish"), std::string::npos)
      << r.status().message();
}

TEST(SubprocessTest, DescendantsLeftBehindAreKilledAfterExit) {
  // The shell exits at once but leaves a sleeper holding its stdout open: Wait must not hang
  // on the pipe, and the sleeper must not outlive the command.
  auto r = Child::Spawn({.argv = {"sh", "-c", "sleep 300 & echo $!"}});
  ASSERT_TRUE(r.ok());
  auto line = r->ReadLine(Deadline::After(10s));
  ASSERT_TRUE(line.ok());
  pid_t sleeper = std::stoi(*line);
  auto info = r->Wait(Deadline::After(10s));
  ASSERT_TRUE(info.ok()) << info.status().ToString();
  EXPECT_EQ(info->exit_code, 0);
  EXPECT_TRUE(ProcessEnds(sleeper, 5000ms));
}

TEST(SubprocessTest, DestructorKillsRunningChild) {
  pid_t pid;
  {
    auto r = Child::Spawn({.argv = {"sleep", "300"}});
    ASSERT_TRUE(r.ok());
    pid = r->pid();
    EXPECT_TRUE(r->running());
  }
  // Reaped by the destructor: the pid no longer exists (not even as a zombie).
  EXPECT_TRUE(ProcessEnds(pid, 1000ms));
}

TEST(SubprocessTest, ReadLineReportsEofWhenNoLine) {
  auto r = Child::Spawn({.argv = {"true"}});
  ASSERT_TRUE(r.ok());
  auto line = r->ReadLine(Deadline::After(10s));
  ASSERT_FALSE(line.ok());
  EXPECT_EQ(line.status().code(), StatusCode::kUnavailable);
}

TEST(SubprocessTest, CommandLineQuotes) {
  EXPECT_EQ(CommandLine({"ip", "link", "add", "a b", ""}), "ip link add 'a b' ''");
}

TEST(SubprocessTest, ShellQuoteLeavesPlainWordsAndSingleQuotesTheRest) {
  EXPECT_EQ(ShellQuote("node-1.rack_2:8080/x=y@z+%,"), "node-1.rack_2:8080/x=y@z+%,");
  EXPECT_EQ(ShellQuote(""), "''");
  EXPECT_EQ(ShellQuote("a b"), "'a b'");
  EXPECT_EQ(ShellQuote("a'b"), R"('a'\''b')");
  EXPECT_EQ(ShellQuote("$HOME"), "'$HOME'");
  EXPECT_EQ(CommandLine({"echo", "it's"}), R"(echo 'it'\''s')");
}

TEST(SubprocessTest, ShellQuotedWordsReachTheCommandUnchangedThroughSh) {
  const std::vector<std::string> words = {
      "plain",    "", "a b", "it's", "''", "'", "$HOME `id` $(id) \\ \"x\" ; | & * ? ~ # !",
      "tab\tnl\n"};
  std::vector<std::string> argv = {"printf", "[%s]"};
  argv.insert(argv.end(), words.begin(), words.end());
  auto r = RunCommand({.argv = {"sh", "-c", CommandLine(argv)}}, Deadline::After(10s));
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  ASSERT_TRUE(r->Succeeded()) << r->Describe();
  std::string want;
  for (const std::string& w : words) want += "[" + w + "]";
  EXPECT_EQ(r->stdout_text, want);
}

}  // namespace
}  // namespace railyard::base
