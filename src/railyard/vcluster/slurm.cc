#include "railyard/vcluster/slurm.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>
#include <thread>

#include "railyard/base/files.h"
#include "railyard/base/hmac.h"
#include "railyard/base/strings.h"
#include "railyard/base/subprocess.h"
#include "railyard/topo/load.h"
#include "railyard/topo/slurm_format.h"

namespace railyard::vcluster {
namespace {

using namespace std::chrono_literals;

constexpr auto kIdleWait = 30s;          // sinfo shows every node idle within this
constexpr auto kPoll = 200ms;            // between two sinfo calls, bounded by kIdleWait
constexpr auto kDaemonStart = 20s;       // one daemon's start command (it forks and returns)
constexpr auto kKillWait = 5s;           // after SIGKILL
constexpr auto kExitPoll = 20ms;         // while waiting for processes to exit
constexpr size_t kMungeKeyBytes = 1024;  // munge accepts 32 to 1024 bytes
constexpr size_t kLogTail = 600;         // bytes of a daemon's log quoted in an error

// A daemon binary: found in PATH, else in /usr/sbin (root's PATH may lack it under sudo -E).
std::string FindDaemon(const std::string& name) {
  std::string found = base::FindInPath(name);
  if (!found.empty()) return found;
  std::string sbin = "/usr/sbin/" + name;
  return ::access(sbin.c_str(), X_OK) == 0 ? sbin : std::string();
}

std::string ShortHostName() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  std::string h = buf;
  return h.substr(0, h.find('.'));
}

// A TCP port free on `address` right now (slurm.conf needs a number).
Result<int> FreePort(const std::string& address) {
  base::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid()) return ErrnoStatus(errno, "socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (::inet_pton(AF_INET, address.c_str(), &a.sin_addr) != 1) {
    return InvalidArgument("control address '{}' is not an IPv4 address", address);
  }
  socklen_t len = sizeof(a);
  if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
      ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len) != 0) {
    return ErrnoStatus(errno, fmt::format("no free port on {}", address));
  }
  return static_cast<int>(ntohs(a.sin_port));
}

uint64_t MemTotalMb() {
  auto text = base::ReadFile("/proc/meminfo");
  if (!text.ok()) return 1024;
  for (std::string_view line : base::SplitLines(*text)) {
    if (line.substr(0, 9) == "MemTotal:") {
      return std::strtoull(std::string(line.substr(9)).c_str(), nullptr, 10) / 1024;
    }
  }
  return 1024;
}

std::string LogTail(const std::string& path) {
  auto tail = base::ReadFileTail(path, kLogTail);
  if (!tail.ok() || tail->empty()) return fmt::format("(nothing in {})", path);
  return fmt::format("last lines of {}:\n{}", path, *tail);
}

// Runs a daemon's start command; the daemon forks into the background and the command
// returns. Its early output (a fatal error before it forks) goes to `out`.
Status StartDaemon(const std::vector<std::string>& argv, const std::string& conf,
                   const std::string& netns_path, const std::string& out, const std::string& log) {
  base::SpawnOptions o{.argv = argv, .env = {{"SLURM_CONF", conf}}, .netns_path = netns_path};
  // The daemon outlives this command on purpose: it calls setsid and leaves the group.
  o.kill_group_on_exit = false;
  o.output_path = out;
  RY_ASSIGN_OR_RETURN(base::ExitInfo done,
                      base::RunCommand(o, base::Deadline::After(kDaemonStart)));
  if (done.Succeeded()) return Status::Ok();
  auto early = base::ReadFileTail(out, kLogTail);
  return Internal("{} ({}); {}", done.Describe(), early.ok() ? *early : "", LogTail(log));
}

// The pid in a pid file, 0 when there is none.
pid_t PidFromFile(const std::string& path) {
  auto text = base::ReadTrimmedFile(path);
  if (!text || text->empty()) return 0;
  return static_cast<pid_t>(std::strtol(text->c_str(), nullptr, 10));
}

// False for a process that is gone or a zombie (exited, waiting for its reaper).
bool Alive(pid_t pid) {
  auto stat = base::ReadFile(fmt::format("/proc/{}/stat", pid));
  if (!stat.ok()) return false;
  size_t paren = stat->rfind(')');
  return paren == std::string::npos || paren + 2 >= stat->size() || (*stat)[paren + 2] != 'Z';
}

std::string CommandLineOf(pid_t pid) {
  auto text = base::ReadFile(fmt::format("/proc/{}/cmdline", pid));
  if (!text.ok()) return "?";
  std::replace(text->begin(), text->end(), '\0', ' ');
  return std::string(base::StripTrailingAsciiWhitespace(*text));
}

// Identity of a network namespace: nsfs's (device, inode).
std::pair<dev_t, ino_t> NetnsId(const std::string& path) {
  struct stat st {};
  if (::stat(path.c_str(), &st) != 0) return {0, 0};
  return {st.st_dev, st.st_ino};
}

// The daemons of the Slurm cluster in `layout.dir`, and every process inside one of the
// prefix's namespaces (job steps and their tasks, which name no file of ours).
std::set<pid_t> FindSlurmProcesses(const SlurmLayout& layout, std::string_view prefix) {
  std::set<std::pair<dev_t, ino_t>> namespaces;
  if (base::PathExists(layout.dir)) {
    if (DIR* d = ::opendir("/run/netns")) {
      const std::string owned = OwnedNamePrefix(prefix);
      while (dirent* e = ::readdir(d)) {
        if (std::string_view(e->d_name).substr(0, owned.size()) == owned) {
          namespaces.insert(NetnsId(std::string("/run/netns/") + e->d_name));
        }
      }
      ::closedir(d);
    }
  }
  const std::string marker = layout.dir + "/";
  std::set<pid_t> found;
  const pid_t self = ::getpid();
  std::vector<std::string> pid_files = {layout.munged_pid, layout.ctld_pid};
  if (DIR* d = ::opendir(layout.nodes_dir.c_str())) {
    while (dirent* e = ::readdir(d)) {
      if (e->d_name[0] != '.') pid_files.push_back(layout.NodeDir(e->d_name) + "/slurmd.pid");
    }
    ::closedir(d);
  }
  for (const auto& f : pid_files) {
    // A pid file outlives a crash; its pid may since belong to another process.
    pid_t pid = PidFromFile(f);
    if (pid > 0 && pid != self && Alive(pid) &&
        CommandLineOf(pid).find(marker) != std::string::npos) {
      found.insert(pid);
    }
  }
  DIR* proc = ::opendir("/proc");
  if (proc == nullptr) return found;
  while (dirent* e = ::readdir(proc)) {
    char* end = nullptr;
    long pid = std::strtol(e->d_name, &end, 10);
    if (pid <= 0 || *end != '\0' || pid == self || !Alive(pid)) continue;
    if (CommandLineOf(pid).find(marker) != std::string::npos ||
        namespaces.count(NetnsId(fmt::format("/proc/{}/ns/net", pid))) > 0) {
      found.insert(static_cast<pid_t>(pid));
    }
  }
  ::closedir(proc);
  return found;
}

// Waits until none of `pids` is alive; returns those still alive at the deadline.
std::set<pid_t> WaitGone(std::set<pid_t> pids, base::Deadline deadline) {
  for (;;) {
    for (auto it = pids.begin(); it != pids.end();)
      it = Alive(*it) ? std::next(it) : pids.erase(it);
    if (pids.empty() || deadline.Expired()) return pids;
    std::this_thread::sleep_for(kExitPoll);  // a poll interval, bounded by the deadline
  }
}

// `sinfo -N` lines "node0 idle" -> the nodes of `want` that are not idle, with their state.
std::map<std::string, std::string> NotIdle(const std::string& sinfo,
                                           const std::vector<SlurmNode>& want) {
  std::map<std::string, std::string> state;
  for (std::string_view line : base::SplitLines(sinfo)) {
    line = base::StripAsciiWhitespace(line);
    size_t space = line.find(' ');
    if (space == std::string_view::npos) continue;
    state[std::string(line.substr(0, space))] =
        std::string(base::StripAsciiWhitespace(line.substr(space + 1)));
  }
  std::map<std::string, std::string> bad;
  for (const auto& n : want) {
    auto it = state.find(n.name);
    if (it == state.end()) {
      bad[n.name] = "not listed";
    } else if (it->second != "idle") {
      bad[n.name] = it->second;
    }
  }
  return bad;
}

}  // namespace

std::string SlurmLayout::NodeDir(std::string_view host) const {
  return fmt::format("{}/{}", nodes_dir, host);
}

SlurmLayout SlurmLayoutFor(const std::string& state_dir, std::string_view prefix) {
  SlurmLayout l;
  l.dir = fmt::format("{}/{}-slurm", state_dir, prefix);
  l.conf = l.dir + "/slurm.conf";
  l.topology_conf = l.dir + "/topology.conf";
  l.munge_dir = l.dir + "/munge";
  l.munge_key = l.munge_dir + "/munge.key";
  l.munge_socket = l.munge_dir + "/munge.socket";
  l.munged_pid = l.munge_dir + "/munged.pid";
  l.munged_log = l.munge_dir + "/munged.log";
  l.munged_seed = l.munge_dir + "/munged.seed";
  l.ctld_dir = l.dir + "/ctld";
  l.ctld_state = l.ctld_dir + "/state";
  l.ctld_pid = l.ctld_dir + "/slurmctld.pid";
  l.ctld_log = l.ctld_dir + "/slurmctld.log";
  l.nodes_dir = l.dir + "/nodes";
  l.health_check = l.dir + "/health-check";
  return l;
}

std::vector<SlurmNode> SlurmNodesFor(const ClusterPlan& plan, int cpus, uint64_t mem_total_mb) {
  std::vector<SlurmNode> nodes;
  const uint64_t share = plan.hosts.empty() ? 0 : mem_total_mb / plan.hosts.size();
  for (const auto& h : plan.hosts) {
    nodes.push_back({h.name, h.address, std::max(cpus, 1), std::max<uint64_t>(share, 1)});
  }
  return nodes;
}

std::string SlurmConfText(const SlurmLayout& l, const SlurmConfOptions& o) {
  std::string c = fmt::format(
      "# slurm.conf written by `railyard vcluster up --slurm` for cluster '{}'; see "
      "docs/slurm.md.\n",
      o.cluster_name);
  auto add = [&c](std::string_view key, std::string_view value) {
    c += fmt::format("{}={}\n", key, value);
  };
  add("ClusterName", o.cluster_name);
  add("SlurmctldHost", fmt::format("{}({})", o.controller_host, o.controller_addr));
  add("SlurmctldPort", std::to_string(o.controller_port));
  add("SlurmdPort", std::to_string(o.slurmd_port));
  add("SlurmUser", "root");
  add("SlurmdUser", "root");
  add("AuthType", "auth/munge");
  add("CredType", "cred/munge");
  // cred_expire also holds a requeued job back (its begin time is now + the credential's
  // lifetime, 120 s by default): 10 s lets a virtual cluster's requeue test run, and is still
  // twice what a step launch takes on a loaded 2-core machine.
  add("AuthInfo", fmt::format("socket={},cred_expire=10", l.munge_socket));
  add("StateSaveLocation", l.ctld_state);
  add("SlurmctldPidFile", l.ctld_pid);
  add("SlurmctldLogFile", l.ctld_log);
  // %n is the node name: every slurmd has its own spool, pid and log file.
  add("SlurmdSpoolDir", l.nodes_dir + "/%n/spool");
  add("SlurmdPidFile", l.nodes_dir + "/%n/slurmd.pid");
  add("SlurmdLogFile", l.nodes_dir + "/%n/slurmd.log");
  add("SlurmctldDebug", "info");
  add("SlurmdDebug", "info");
  add("MailProg", "/bin/true");
  // Namespaces share the machine's cgroup tree: linuxproc tracks a job's processes by parent
  // pid and task/none binds nothing, so no cgroup per node is needed.
  add("ProctrackType", "proctrack/linuxproc");
  add("TaskPlugin", "task/none");
  add("JobAcctGatherType", "jobacct_gather/none");
  add("SelectType", "select/cons_tres");
  add("SelectTypeParameters", "CR_Core");
  // Every slurmd sees the whole machine; the node lines below are what counts.
  add("SlurmdParameters", "config_overrides");
  add("TopologyPlugin", "topology/tree");
  add("ReturnToService", "2");
  if (!o.health_check_program.empty()) {
    add("HealthCheckProgram", o.health_check_program);
    add("HealthCheckInterval", std::to_string(std::max(o.health_check_interval_s, 1)));
  }
  for (const auto& n : o.nodes) {
    c += fmt::format("NodeName={} NodeAddr={} CPUs={} RealMemory={} State=UNKNOWN\n", n.name,
                     n.address, n.cpus, n.real_memory_mb);
  }
  c += "PartitionName=all Nodes=ALL Default=YES MaxTime=INFINITE State=UP\n";
  return c;
}

std::string HealthCheckScript(const SlurmLayout& l, const std::string& command) {
  return fmt::format(
      "#!/bin/sh\n"
      "# HealthCheckProgram of the virtual cluster's Slurm, written by `railyard vcluster up\n"
      "# --slurm --slurm-health-check`. slurmd runs it with SLURMD_NODENAME alone in its\n"
      "# environment, so it sets what the check and scontrol need; each run's output is kept\n"
      "# in the node's health-check.log and shown to slurmd, which logs it when the check fails.\n"
      "export PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin\n"
      "export SLURM_CONF={}\n"
      "log={}/\"$SLURMD_NODENAME\"/health-check.log\n"
      "out=$({} 2>&1)\n"
      "rc=$?\n"
      "printf '%s rc=%s\\n%s\\n' \"$(date -u +%Y-%m-%dT%H:%M:%SZ)\" \"$rc\" \"$out\" >>\"$log\"\n"
      "printf '%s\\n' \"$out\"\n"
      "exit $rc\n",
      base::ShellQuote(l.conf), base::ShellQuote(l.nodes_dir), command);
}

Status CheckSlurmSpec(const ClusterSpec& spec) {
  if (spec.mode != Mode::kNetns) {
    return FailedPrecondition(
        "--slurm needs network namespaces (one slurmd per host, each on its own address); "
        "cluster '{}' would run in loopback mode (run as root, with --mode netns)",
        spec.prefix);
  }
  for (const char* name : {"munged", "slurmctld", "slurmd", "sinfo"}) {
    if (FindDaemon(name).empty()) {
      return FailedPrecondition(
          "{} is not installed; --slurm needs Debian's munge and slurm-wlm (`scripts/bootstrap "
          "--test` installs them)",
          name);
    }
  }
  return Status::Ok();
}

Status StartSlurm(const std::string& state_dir, ClusterState& state, const ProgressFn& progress,
                  const SlurmStartOptions& options) {
  const std::string& prefix = state.spec().prefix;
  RY_RETURN_IF_ERROR(CheckSlurmSpec(state.spec()));
  if (state.control_address.empty()) {
    return FailedPrecondition(
        "--slurm needs the control address {} for slurmctld, and another virtual cluster holds "
        "it; take that one down first",
        kControlAddress);
  }
  const SlurmLayout l = SlurmLayoutFor(state_dir, prefix);
  std::error_code ec;
  std::filesystem::remove_all(l.dir, ec);
  // munged wants its socket's directory searchable by all and writable by its owner only.
  for (const auto& d : {l.munge_dir, l.ctld_state}) RY_RETURN_IF_ERROR(base::MakeDirs(d));
  for (const auto& h : state.plan.hosts) {
    RY_RETURN_IF_ERROR(base::MakeDirs(l.NodeDir(h.name) + "/spool"));
  }
  // munged refuses a key that others can read.
  RY_RETURN_IF_ERROR(base::WriteFileAtomic(l.munge_key, base::RandomBytes(kMungeKeyBytes), 0400));

  RY_ASSIGN_OR_RETURN(topo::Cluster tree, topo::LoadTopology(state.topology_file));
  RY_RETURN_IF_ERROR(base::WriteFileAtomic(l.topology_conf, topo::WriteSlurmTopologyConf(tree)));
  SlurmConfOptions o;
  o.cluster_name = prefix;
  o.controller_host = ShortHostName();
  o.controller_addr = state.control_address;
  RY_ASSIGN_OR_RETURN(o.controller_port, FreePort(state.control_address));
  const long cpus = ::sysconf(_SC_NPROCESSORS_ONLN);
  o.nodes = SlurmNodesFor(state.plan, cpus > 0 ? static_cast<int>(cpus) : 1, MemTotalMb());
  if (!options.health_check_command.empty()) {
    RY_RETURN_IF_ERROR(base::WriteFileAtomic(
        l.health_check, HealthCheckScript(l, options.health_check_command), 0755));
    o.health_check_program = l.health_check;
    o.health_check_interval_s = options.health_check_interval_s;
    if (progress) {
      progress(fmt::format("slurm: health check every {} s: {}", o.health_check_interval_s,
                           options.health_check_command));
    }
  }
  RY_RETURN_IF_ERROR(base::WriteFileAtomic(l.conf, SlurmConfText(l, o)));

  if (progress) progress(fmt::format("slurm: munged ({})", l.munge_socket));
  RY_RETURN_IF_ERROR(StartDaemon({FindDaemon("munged"), "--socket=" + l.munge_socket,
                                  "--key-file=" + l.munge_key, "--pid-file=" + l.munged_pid,
                                  "--log-file=" + l.munged_log, "--seed-file=" + l.munged_seed},
                                 l.conf, "", l.munge_dir + "/munged.out", l.munged_log)
                         .WithContext("starting munged"));
  if (progress) {
    progress(fmt::format("slurm: slurmctld on {}:{}", o.controller_addr, o.controller_port));
  }
  RY_RETURN_IF_ERROR(StartDaemon({FindDaemon("slurmctld"), "-f", l.conf}, l.conf, "",
                                 l.ctld_dir + "/slurmctld.out", l.ctld_log)
                         .WithContext("starting slurmctld"));
  for (const auto& h : state.plan.hosts) {
    if (progress) progress(fmt::format("slurm: slurmd on {} ({})", h.name, h.address));
    // setns, not `ip netns exec`: that one also remounts /sys, hiding the cgroup file system
    // that slurmd's cgroup plugin looks for at start.
    const std::string dir = l.NodeDir(h.name);
    RY_RETURN_IF_ERROR(StartDaemon({FindDaemon("slurmd"), "-N", h.name, "-f", l.conf}, l.conf,
                                   "/run/netns/" + h.netns, dir + "/slurmd.out",
                                   dir + "/slurmd.log")
                           .WithContext(fmt::format("starting slurmd on {}", h.name)));
  }

  if (options.fail_for_test)
    return Internal("slurm: failing after the daemons started (a test's hook)");
  if (progress) progress("slurm: waiting for every node to be idle");
  const base::Deadline deadline = base::Deadline::After(kIdleWait);
  std::map<std::string, std::string> bad;
  for (;;) {
    base::SpawnOptions ask{.argv = {FindDaemon("sinfo"), "-h", "-N", "-o", "%N %T"},
                           .env = {{"SLURM_CONF", l.conf}}};
    auto r = base::RunCommand(ask, base::Deadline::Earliest(deadline, base::Deadline::After(5s)));
    if (r.ok() && r->Succeeded()) {
      bad = NotIdle(r->stdout_text, o.nodes);
      if (bad.empty()) break;
    } else {
      bad.clear();
      for (const auto& n : o.nodes) bad[n.name] = "slurmctld does not answer";
    }
    pid_t ctld = PidFromFile(l.ctld_pid);
    if (ctld > 0 && !Alive(ctld)) {
      return Internal("slurmctld (pid {}) exited; {}", ctld, LogTail(l.ctld_log));
    }
    if (deadline.Expired()) {
      std::string list;
      for (const auto& [node, why] : bad) {
        list += fmt::format("{}{} ({}, log {}/slurmd.log)", list.empty() ? "" : ", ", node, why,
                            l.NodeDir(node));
      }
      return Unavailable("slurm: {} of {} nodes not idle after {} s: {}", bad.size(),
                         o.nodes.size(), kIdleWait.count(), list);
    }
    std::this_thread::sleep_for(kPoll);  // a poll interval, bounded by the deadline
  }
  state.slurm_conf = l.conf;
  return Status::Ok();
}

Status StopSlurm(const std::string& state_dir, std::string_view prefix,
                 const ProgressFn& progress) {
  const SlurmLayout l = SlurmLayoutFor(state_dir, prefix);
  // The cluster's state is discarded with its directory, so no daemon needs an orderly
  // shutdown; SIGKILL also reaches job steps that ignore SIGTERM. Scans until one finds
  // nothing: a daemon that was still forking itself into the background (a failed `up` right
  // after starting it) has a child that the previous scan could not see.
  const base::Deadline deadline = base::Deadline::After(kKillWait);
  for (std::set<pid_t> pids = FindSlurmProcesses(l, prefix); !pids.empty();
       pids = FindSlurmProcesses(l, prefix)) {
    if (progress) progress(fmt::format("slurm: stopping {} processes", pids.size()));
    for (pid_t p : pids) ::kill(p, SIGKILL);
    pids = WaitGone(std::move(pids), deadline);
    if (!pids.empty() || deadline.Expired()) {
      if (pids.empty()) pids = FindSlurmProcesses(l, prefix);
      if (pids.empty()) break;
      pid_t p = *pids.begin();
      return Internal("slurm: {} processes still alive {} s after SIGKILL (first: pid {}, {})",
                      pids.size(), kKillWait.count(), p, CommandLineOf(p));
    }
  }
  std::error_code ec;
  std::filesystem::remove_all(l.dir, ec);
  if (ec) return Internal("slurm: cannot remove {}: {}", l.dir, ec.message());
  return Status::Ok();
}

}  // namespace railyard::vcluster
