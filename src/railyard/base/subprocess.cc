#include "railyard/base/subprocess.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstring>

extern char** environ;

namespace railyard::base {
namespace {

int PidfdOpen(pid_t pid) { return static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)); }

void SetNonBlocking(int fd) { ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) | O_NONBLOCK); }

// Child side of fork: only async-signal-safe calls until exec. On failure the errno is
// written to `report_fd` (close-on-exec, so a successful exec closes it silently).
[[noreturn]] void ExecChild(char* const* argv, char* const* envp, const char* path, const char* cwd,
                            int netns_fd, int in_r, int out_w, int err_w, int report_fd,
                            pid_t parent, const cpu_set_t* cpus) {
  auto fail = [&](int stage) {
    int payload[2] = {stage, errno};
    ssize_t ignored = ::write(report_fd, payload, sizeof payload);
    (void)ignored;
    ::_exit(127);
  };
  ::setpgid(0, 0);
  // Die with the parent; the check closes the race where the parent died before prctl.
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (::getppid() != parent) ::_exit(127);
  // Restore default signal handling for the new program.
  sigset_t none;
  sigemptyset(&none);
  ::sigprocmask(SIG_SETMASK, &none, nullptr);
  ::signal(SIGPIPE, SIG_DFL);
  if (netns_fd >= 0 && ::setns(netns_fd, CLONE_NEWNET) != 0) fail(1);
  if (cpus != nullptr && ::sched_setaffinity(0, sizeof *cpus, cpus) != 0) fail(4);
  if (in_r >= 0) {
    ::dup2(in_r, 0);
  } else {
    int devnull = ::open("/dev/null", O_RDONLY);
    if (devnull >= 0) ::dup2(devnull, 0);
  }
  if (out_w >= 0) ::dup2(out_w, 1);
  if (err_w >= 0) ::dup2(err_w, 2);
  if (cwd != nullptr && ::chdir(cwd) != 0) fail(2);
  ::execve(path, argv, envp);
  fail(3);
  ::_exit(127);
}

void AppendCapped(std::string* buf, const char* data, size_t n, size_t cap, bool* truncated) {
  if (buf->size() >= cap) {
    *truncated = true;
    return;
  }
  size_t take = std::min(n, cap - buf->size());
  buf->append(data, take);
  if (take < n) *truncated = true;
}

std::string FirstLine(const std::string& s) {
  size_t start = s.find_first_not_of(" \n\t");
  if (start == std::string::npos) return "";
  size_t end = s.find('\n', start);
  return s.substr(start, end == std::string::npos ? std::string::npos : end - start);
}

}  // namespace

std::string ShellQuote(std::string_view s) {
  bool plain = !s.empty();
  for (char c : s) {
    plain = plain && (std::isalnum(static_cast<unsigned char>(c)) ||
                      std::string_view("-_.:/=@+%,").find(c) != std::string_view::npos);
  }
  if (plain) return std::string(s);
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";  // close the quote, an escaped ', reopen
    } else {
      out += c;
    }
  }
  return out + "'";
}

std::string CommandLine(const std::vector<std::string>& argv) {
  std::string out;
  for (const auto& a : argv) {
    if (!out.empty()) out += ' ';
    out += ShellQuote(a);
  }
  return out;
}

std::string FindInPath(const std::string& name) {
  if (name.find('/') != std::string::npos) return name;
  const char* path = ::getenv("PATH");
  std::string dirs = path ? path : "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";
  size_t start = 0;
  while (start <= dirs.size()) {
    size_t end = dirs.find(':', start);
    if (end == std::string::npos) end = dirs.size();
    std::string dir = dirs.substr(start, end - start);
    if (dir.empty()) dir = ".";
    std::string candidate = dir + "/" + name;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

std::string ExitInfo::Describe() const {
  std::string how;
  if (signal != 0) {
    const char* name = sigabbrev_np(signal);
    how = fmt::format("was killed by SIG{}", name ? name : std::to_string(signal));
  } else {
    how = fmt::format("exited with {}", exit_code);
  }
  std::string detail = FirstLine(stderr_text);
  if (detail.empty()) detail = FirstLine(stdout_text);
  if (detail.empty()) return fmt::format("'{}' {}", command, how);
  return fmt::format("'{}' {}: {}", command, how, detail);
}

Result<Child> Child::Spawn(const SpawnOptions& options) {
  if (options.argv.empty()) return InvalidArgument("spawn: empty command line");
  if (options.stdin_data.size() > kMaxStdinData) {
    return InvalidArgument("spawn '{}': {} bytes for its stdin, at most {}",
                           CommandLine(options.argv), options.stdin_data.size(), kMaxStdinData);
  }
  Child child;
  child.command_ = CommandLine(options.argv);
  child.kill_group_on_exit_ = options.kill_group_on_exit;
  child.max_capture_ = options.max_capture_bytes;

  std::string path = FindInPath(options.argv[0]);
  if (path.empty()) {
    return NotFound("cannot run '{}': '{}' not found in PATH", child.command_, options.argv[0]);
  }

  // Everything the child needs is prepared before fork: no allocation after it.
  std::vector<std::string> env_strings;
  if (options.inherit_env) {
    for (char** e = environ; *e != nullptr; ++e) {
      std::string_view kv(*e);
      bool overridden = false;
      for (const auto& [k, v] : options.env) {
        if (kv.size() > k.size() && kv.substr(0, k.size()) == k && kv[k.size()] == '=') {
          overridden = true;
        }
      }
      if (!overridden) env_strings.emplace_back(kv);
    }
  }
  for (const auto& [k, v] : options.env) env_strings.push_back(k + "=" + v);
  std::vector<char*> envp;
  for (auto& s : env_strings) envp.push_back(s.data());
  envp.push_back(nullptr);
  std::vector<std::string> argv_copy = options.argv;
  std::vector<char*> argv;
  for (auto& s : argv_copy) argv.push_back(s.data());
  argv.push_back(nullptr);

  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  for (int cpu : options.cpus) {
    if (cpu < 0 || cpu >= CPU_SETSIZE) {
      return InvalidArgument("spawn '{}': CPU {} is outside 0..{}", child.command_, cpu,
                             CPU_SETSIZE - 1);
    }
    CPU_SET(cpu, &cpus);
  }
  UniqueFd netns;
  if (!options.netns_path.empty()) {
    netns.Reset(::open(options.netns_path.c_str(), O_RDONLY | O_CLOEXEC));
    if (!netns.valid()) {
      return ErrnoStatus(errno,
                         fmt::format("cannot open network namespace '{}'", options.netns_path));
    }
  }
  int in_pipe[2] = {-1, -1}, out_pipe[2] = {-1, -1}, err_pipe[2] = {-1, -1}, report[2] = {-1, -1};
  auto close_all = [&] {
    for (int fd : {in_pipe[0], in_pipe[1], out_pipe[0], out_pipe[1], err_pipe[0], err_pipe[1],
                   report[0], report[1]}) {
      if (fd >= 0) ::close(fd);
    }
  };
  if (!options.stdin_data.empty()) {
    // The data goes into the pipe now, in one write no larger than PIPE_BUF (atomic, never
    // blocks on an empty pipe), and the write end is closed before fork: the child reads it
    // and then EOF, and nothing here can block or take SIGPIPE if it never reads.
    if (::pipe2(in_pipe, O_CLOEXEC) != 0) return ErrnoStatus(errno, "spawn: pipe");
    ssize_t n;
    do {
      n = ::write(in_pipe[1], options.stdin_data.data(), options.stdin_data.size());
    } while (n < 0 && errno == EINTR);
    if (n != static_cast<ssize_t>(options.stdin_data.size())) {
      int err = n < 0 ? errno : EIO;
      close_all();
      return ErrnoStatus(err, fmt::format("spawn '{}': writing its stdin", child.command_));
    }
    ::close(in_pipe[1]);
    in_pipe[1] = -1;
  }
  UniqueFd output;
  if (!options.output_path.empty()) {
    output.Reset(
        ::open(options.output_path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644));
    if (!output.valid()) {
      int err = errno;
      close_all();
      return ErrnoStatus(err, fmt::format("spawn '{}': opening its output file {}", child.command_,
                                          options.output_path));
    }
  }
  const bool to_file = output.valid();
  if ((!to_file && options.capture_stdout && ::pipe2(out_pipe, O_CLOEXEC) != 0) ||
      (!to_file && options.capture_stderr && ::pipe2(err_pipe, O_CLOEXEC) != 0) ||
      ::pipe2(report, O_CLOEXEC) != 0) {
    int err = errno;
    close_all();
    return ErrnoStatus(err, "spawn: pipe");
  }
  const pid_t parent = ::getpid();
  pid_t pid = ::fork();
  if (pid < 0) {
    int err = errno;
    close_all();
    return ErrnoStatus(err, fmt::format("spawn '{}': fork", child.command_));
  }
  if (pid == 0) {
    ExecChild(argv.data(), envp.data(), path.c_str(),
              options.cwd.empty() ? nullptr : options.cwd.c_str(), netns.get(), in_pipe[0],
              to_file ? output.get() : out_pipe[1], to_file ? output.get() : err_pipe[1], report[1],
              parent, options.cpus.empty() ? nullptr : &cpus);
  }
  if (in_pipe[0] >= 0) ::close(in_pipe[0]);
  // Parent. Also set the group here so that a kill right after Spawn reaches it.
  ::setpgid(pid, pid);
  child.pid_ = pid;
  child.pidfd_.Reset(PidfdOpen(pid));
  if (out_pipe[1] >= 0) ::close(out_pipe[1]);
  if (err_pipe[1] >= 0) ::close(err_pipe[1]);
  ::close(report[1]);
  child.out_.Reset(out_pipe[0]);
  child.err_.Reset(err_pipe[0]);
  if (child.out_.valid()) SetNonBlocking(child.out_.get());
  if (child.err_.valid()) SetNonBlocking(child.err_.get());

  int payload[2] = {0, 0};
  ssize_t n;
  do {
    n = ::read(report[0], payload, sizeof payload);
  } while (n < 0 && errno == EINTR);
  ::close(report[0]);
  if (n == static_cast<ssize_t>(sizeof payload)) {
    child.Reap();
    const char* stage = payload[0] == 1   ? "enter network namespace"
                        : payload[0] == 2 ? "change directory"
                        : payload[0] == 4 ? "set the CPU affinity"
                                          : "execute";
    return ErrnoStatus(payload[1], fmt::format("cannot {} for '{}'", stage, child.command_));
  }
  if (!child.pidfd_.valid()) {
    return Internal("spawn '{}': pidfd_open failed: {}", child.command_, std::strerror(errno));
  }
  return child;
}

Child::Child(Child&& other) noexcept { *this = std::move(other); }

Child& Child::operator=(Child&& other) noexcept {
  if (this == &other) return *this;
  Close();
  pid_ = std::exchange(other.pid_, -1);
  exited_ = other.exited_;
  wait_status_ = other.wait_status_;
  kill_group_on_exit_ = other.kill_group_on_exit_;
  max_capture_ = other.max_capture_;
  pidfd_ = std::move(other.pidfd_);
  out_ = std::move(other.out_);
  err_ = std::move(other.err_);
  out_buf_ = std::move(other.out_buf_);
  err_buf_ = std::move(other.err_buf_);
  line_pos_ = other.line_pos_;
  out_truncated_ = other.out_truncated_;
  err_truncated_ = other.err_truncated_;
  command_ = std::move(other.command_);
  return *this;
}

Child::~Child() { Close(); }

void Child::Close() {
  if (pid_ > 0) {
    if (!exited_) {
      SignalGroup(SIGKILL);
      Reap();
    } else if (kill_group_on_exit_) {
      ::kill(-pid_, SIGKILL);
    }
  }
  pid_ = -1;
}

void Child::SignalGroup(int sig) {
  if (pid_ <= 0) return;
  // The group may already be gone; the direct child is signalled too in case it left it.
  ::kill(-pid_, sig);
  if (!exited_) ::kill(pid_, sig);
}

void Child::Reap() {
  if (pid_ <= 0 || exited_) return;
  int status = 0;
  pid_t r;
  do {
    r = ::waitpid(pid_, &status, 0);
  } while (r < 0 && errno == EINTR);
  exited_ = true;
  wait_status_ = status;
  if (kill_group_on_exit_) ::kill(-pid_, SIGKILL);
}

void Child::DrainNonBlocking() {
  char buf[65536];
  for (auto [fd, out, trunc] : {std::tuple{&out_, &out_buf_, &out_truncated_},
                                std::tuple{&err_, &err_buf_, &err_truncated_}}) {
    while (fd->valid()) {
      ssize_t n = ::read(fd->get(), buf, sizeof buf);
      if (n > 0) {
        AppendCapped(out, buf, static_cast<size_t>(n), max_capture_, trunc);
        continue;
      }
      if (n == 0)
        fd->Reset();  // EOF
      else if (errno == EINTR)
        continue;
      else if (errno != EAGAIN)
        fd->Reset();
      break;
    }
  }
}

Status Child::PumpOnce(Deadline deadline, bool* progressed) {
  *progressed = false;
  pollfd fds[3];
  int nfds = 0;
  if (!exited_) fds[nfds++] = {pidfd_.get(), POLLIN, 0};
  if (out_.valid()) fds[nfds++] = {out_.get(), POLLIN, 0};
  if (err_.valid()) fds[nfds++] = {err_.get(), POLLIN, 0};
  if (nfds == 0) return Status::Ok();
  int r = ::poll(fds, static_cast<nfds_t>(nfds), deadline.PollTimeoutMs());
  if (r < 0) {
    if (errno == EINTR) return Status::Ok();
    return ErrnoStatus(errno, "poll");
  }
  if (r == 0) return Status::Ok();
  *progressed = true;
  DrainNonBlocking();
  if (!exited_ && (fds[0].revents & POLLIN)) {
    Reap();
    // Output written before exit is already in the pipes; take it without waiting for
    // EOF, which a surviving grandchild could hold back forever.
    DrainNonBlocking();
  }
  return Status::Ok();
}

Result<ExitInfo> Child::Wait(Deadline deadline) {
  while (!exited_) {
    bool progressed = false;
    RY_RETURN_IF_ERROR(PumpOnce(deadline, &progressed));
    if (!progressed && deadline.Expired() && !exited_) {
      return DeadlineExceeded("'{}' still running at its deadline", command_);
    }
  }
  DrainNonBlocking();
  ExitInfo info;
  info.command = command_;
  if (WIFSIGNALED(wait_status_))
    info.signal = WTERMSIG(wait_status_);
  else
    info.exit_code = WEXITSTATUS(wait_status_);
  info.stdout_text = std::move(out_buf_);
  info.stderr_text = std::move(err_buf_);
  if (out_truncated_) info.stdout_text += "\n[railyard: output truncated]\n";
  if (err_truncated_) info.stderr_text += "\n[railyard: output truncated]\n";
  out_buf_.clear();
  err_buf_.clear();
  line_pos_ = 0;
  return info;
}

Result<std::string> Child::ReadLine(Deadline deadline) {
  for (;;) {
    size_t nl = out_buf_.find('\n', line_pos_);
    if (nl != std::string::npos) {
      std::string line = out_buf_.substr(line_pos_, nl - line_pos_);
      line_pos_ = nl + 1;
      return line;
    }
    if (!out_.valid()) {
      return Unavailable("'{}' closed its output before printing a line{}", command_,
                         exited_ ? " (it exited)" : "");
    }
    if (deadline.Expired()) {
      return DeadlineExceeded("'{}' printed no line before its deadline", command_);
    }
    bool progressed = false;
    RY_RETURN_IF_ERROR(PumpOnce(deadline, &progressed));
  }
}

ExitInfo Child::KillAndReap() {
  SignalGroup(SIGKILL);
  Reap();
  auto info = Wait(Deadline::After(std::chrono::seconds(1)));
  if (info.ok()) return *info;
  ExitInfo fallback;
  fallback.command = command_;
  fallback.signal = SIGKILL;
  return fallback;
}

Result<ExitInfo> RunCommand(const SpawnOptions& options, Deadline deadline) {
  auto start = Clock::now();
  RY_ASSIGN_OR_RETURN(Child child, Child::Spawn(options));
  auto result = child.Wait(deadline);
  if (!result.ok() && result.status().code() == StatusCode::kDeadlineExceeded) {
    child.KillAndReap();
    return DeadlineExceeded("'{}' did not finish within {:.1f}s and was killed",
                            CommandLine(options.argv), SecondsSince(start));
  }
  return result;
}

Result<ExitInfo> RunChecked(const SpawnOptions& options, Deadline deadline) {
  RY_ASSIGN_OR_RETURN(ExitInfo info, RunCommand(options, deadline));
  if (!info.Succeeded()) return Internal("{}", info.Describe());
  return info;
}

}  // namespace railyard::base
