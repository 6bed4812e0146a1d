// Subprocess: spawn a command with an environment, capture its output, wait with a deadline,
// and kill its whole process group so that nothing it started outlives it.
//
//   SpawnOptions opts{.argv = {"ip", "-o", "link", "show"}};
//   RY_ASSIGN_OR_RETURN(ExitInfo done, RunCommand(opts, Deadline::After(5s)));
//   if (!done.Succeeded()) return Internal("{}", done.Describe());
//
// Each child gets its own process group and PR_SET_PDEATHSIG(SIGKILL), so it dies with
// Railyard; when a Child is destroyed while running, or when it exits leaving descendants in
// its group, the group is SIGKILLed and reaped. Optionally the child enters a network
// namespace (setns) before exec, which is how `vcluster exec` and the demo run commands
// "on" a virtual host without `ip netns exec`.
//
// Thread-safety: a Child is used by one thread at a time. Spawning from several threads is
// safe (only async-signal-safe calls happen between fork and exec).
#pragma once

#include <sys/types.h>

#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "railyard/base/clock.h"
#include "railyard/base/files.h"
#include "railyard/base/status.h"

namespace railyard::base {

struct SpawnOptions {
  std::vector<std::string> argv;  // argv[0] is looked up in PATH unless it contains '/'
  // Variables set (or overridden) on top of the inherited environment.
  std::vector<std::pair<std::string, std::string>> env;
  bool inherit_env = true;
  std::string cwd;             // empty: inherit
  std::string netns_path;      // e.g. /run/netns/ry-node0; empty: stay in ours
  bool capture_stdout = true;  // false: inherit our stdout
  bool capture_stderr = true;  // false: inherit our stderr
  // Kill the child's process group once the child has exited, so that background
  // descendants do not outlive the command. Off for commands that must daemonise.
  bool kill_group_on_exit = true;
  size_t max_capture_bytes = 16u << 20;  // per stream; excess is dropped and noted
  // Written to the child's stdin, which is then closed (EOF); empty: stdin is /dev/null.
  // At most kMaxStdinData bytes: it is written into the pipe before the child starts, so
  // Spawn never blocks on a child that does not read. How a secret reaches a child without
  // appearing on its command line or in its environment.
  std::string stdin_data;
  // CPUs the child may run on (sched_setaffinity before exec; inherited by what it starts);
  // empty: ours. A CPU number outside 0..CPU_SETSIZE-1 fails the spawn.
  std::vector<int> cpus;
  // Appends the child's stdout and stderr to this file (created 0644 when missing) instead of
  // capturing or inheriting them; capture_stdout and capture_stderr are then ignored.
  std::string output_path;
};

inline constexpr size_t kMaxStdinData = 4096;  // PIPE_BUF: one write, fits any pipe

struct ExitInfo {
  int exit_code = -1;  // valid when signal == 0
  int signal = 0;      // the signal that ended it, 0 if it exited
  std::string stdout_text;
  std::string stderr_text;
  std::string command;  // argv joined, for messages

  bool Succeeded() const { return signal == 0 && exit_code == 0; }
  // "'ip link add ...' exited with 2: <first line of stderr>" or "... killed by SIGKILL".
  std::string Describe() const;
};

class Child {
 public:
  // Starts the command. NOT_FOUND when argv[0] cannot be found or executed, naming it;
  // NOT_FOUND/PERMISSION_DENIED for a bad netns path; INVALID_ARGUMENT for stdin_data over
  // kMaxStdinData.
  static Result<Child> Spawn(const SpawnOptions& options);

  Child(Child&& other) noexcept;
  Child& operator=(Child&& other) noexcept;
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  // Kills the group and reaps when still running.
  ~Child();

  pid_t pid() const { return pid_; }
  bool running() const { return pid_ > 0 && !exited_; }

  // Waits for the child to exit, collecting captured output. DEADLINE_EXCEEDED (naming the
  // command) when it is still running at the deadline; the child is left running.
  Result<ExitInfo> Wait(Deadline deadline);

  // Reads one line of captured stdout (without the newline). UNAVAILABLE when stdout
  // reached EOF first, DEADLINE_EXCEEDED at the deadline.
  Result<std::string> ReadLine(Deadline deadline);

  // Sends `sig` to the child's whole process group.
  void SignalGroup(int sig);

  // SIGKILLs the group and reaps the child; returns how it ended.
  ExitInfo KillAndReap();

 private:
  Child() = default;
  // Polls pipes and the pidfd once until `deadline`; returns false on timeout.
  Status PumpOnce(Deadline deadline, bool* progressed);
  void DrainNonBlocking();
  void Reap();
  void Close();

  pid_t pid_ = -1;
  bool exited_ = false;
  int wait_status_ = 0;
  bool kill_group_on_exit_ = true;
  size_t max_capture_ = 0;
  UniqueFd pidfd_;
  UniqueFd out_;
  UniqueFd err_;
  std::string out_buf_;
  std::string err_buf_;
  size_t line_pos_ = 0;  // ReadLine cursor into out_buf_
  bool out_truncated_ = false;
  bool err_truncated_ = false;
  std::string command_;
};

// Spawns, waits until `deadline`, and on timeout kills the group and returns
// DEADLINE_EXCEEDED naming the command and how long it ran. A non-zero exit is not an error
// here: inspect ExitInfo.
Result<ExitInfo> RunCommand(const SpawnOptions& options, Deadline deadline);

// Like RunCommand, but a non-zero exit becomes an error whose message is Describe().
Result<ExitInfo> RunChecked(const SpawnOptions& options, Deadline deadline);

// `s` as one word for a POSIX shell: unchanged when it is non-empty and has only letters,
// digits and -_.:/=@+%, ; else single-quoted, a ' inside becoming '\'' ("a'b" -> 'a'\''b',
// "" -> ''). For command lines handed to sh, ssh or kubectl, and for messages.
std::string ShellQuote(std::string_view s);

// Joins argv with spaces, each word ShellQuote'd: a line sh runs as the same argv.
std::string CommandLine(const std::vector<std::string>& argv);

// Finds `name` in PATH; empty when absent. Names containing '/' are returned as they are.
std::string FindInPath(const std::string& name);

}  // namespace railyard::base
