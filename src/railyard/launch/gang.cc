#include "railyard/launch/gang.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netinet/in.h>
#include <signal.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>

#include "railyard/base/files.h"
#include "railyard/base/hmac.h"
#include "railyard/base/units.h"
#include "railyard/vcluster/bandwidth_matrix.h"

namespace railyard::launch {

Result<int> FreePort(const std::string& ip, int except) {
  for (int attempt = 0; attempt < 8; ++attempt) {
    base::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    if (inet_pton(AF_INET, ip.c_str(), &a.sin_addr) != 1) {
      return InvalidArgument("store address '{}': expected an IPv4 address", ip);
    }
    if (::bind(fd.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
      return ErrnoStatus(errno, fmt::format("finding a free port on {}", ip));
    }
    socklen_t len = sizeof a;
    ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&a), &len);
    int port = ntohs(a.sin_port);
    if (port != except) return port;
  }
  return Unavailable("finding a free port on {}: the kernel kept offering {}", ip, except);
}

namespace {

// Whether `pid` is stopped (SIGSTOP, a debugger): then it cannot act on SIGTERM, and waiting
// for it to do so only delays the SIGKILL that will end it.
}  // namespace

bool ProcessIsStopped(pid_t pid) {
  auto stat = base::ReadFile(fmt::format("/proc/{}/stat", pid));
  if (!stat.ok()) return false;
  size_t paren = stat->rfind(')');  // the command name may hold spaces and parentheses
  if (paren == std::string::npos || paren + 2 >= stat->size()) return false;
  char state = (*stat)[paren + 2];
  return state == 'T' || state == 't';
}

namespace {

constexpr char kLogHeader[] = "--- railyard: ";

std::string HostName() {
  char name[256] = {};
  if (::gethostname(name, sizeof name - 1) != 0 || name[0] == '\0') return "localhost";
  return name;
}

}  // namespace

std::string RankLogPath(const std::string& log_dir, int rank) {
  return fmt::format("{}/rank-{}.log", log_dir, rank);
}

std::vector<GangHost> LocalHosts(int count) {
  std::vector<GangHost> hosts(std::max(count, 1));
  for (size_t i = 0; i < hosts.size(); ++i) {
    hosts[i].name = hosts.size() == 1 ? HostName() : fmt::format("local{}", i);
    hosts[i].address = "127.0.0.1";
  }
  return hosts;
}

Result<std::vector<GangHost>> VirtualHosts(const vcluster::ClusterState& state, int count) {
  const auto& plan = state.plan.hosts;
  if (count > static_cast<int>(plan.size())) {
    return InvalidArgument("{} hosts wanted, but the virtual cluster '{}' has {}", count,
                           state.spec().prefix, plan.size());
  }
  std::vector<GangHost> hosts;
  for (int i = 0; i < count; ++i) {
    vcluster::HostExecution exec = vcluster::ExecutionFor(state, plan[i]);
    hosts.push_back({.name = plan[i].name,
                     .address = plan[i].address,
                     .netns_path = exec.netns_path,
                     .env = std::move(exec.env)});
  }
  return hosts;
}

std::vector<int> RanksInBlocks(int world_size, int per_host) {
  std::vector<int> hosts(std::max(world_size, 0));
  for (int r = 0; r < world_size; ++r) hosts[r] = r / std::max(per_host, 1);
  return hosts;
}

std::string RankEnd::ErrorLine() const {
  const std::string& text = exit.stderr_text;
  size_t at = text.rfind("railyard: error: ");
  if (at != std::string::npos) return text.substr(at, text.find('\n', at) - at);
  // A program's dying words come last: its last non-empty line, not its banner.
  size_t end = text.find_last_not_of(" \t\r\n");
  if (end == std::string::npos) return "";
  size_t start = text.rfind('\n', end);
  start = start == std::string::npos ? 0 : start + 1;
  return text.substr(start, end + 1 - start);
}

std::string RankEnd::Describe() const {
  std::string how = exit.signal != 0 ? fmt::format("was killed by signal {} ({})", exit.signal,
                                                   strsignal(exit.signal))
                                     : fmt::format("exited with status {}", exit.exit_code);
  std::string why = stopped_why.empty() ? ErrorLine() : stopped_why;
  return fmt::format("rank {} (pid {}) {} on {}{}{}", rank, pid, how, host, why.empty() ? "" : ": ",
                     why);
}

std::string GangResult::Failures() const {
  std::string out;
  for (const RankEnd& r : ranks) {
    if (!r.ok()) out += "\n  " + r.Describe();
  }
  return out;
}

Result<Gang> Gang::Start(const GangSpec& spec) {
  const int count = static_cast<int>(spec.rank_hosts.size());
  const int world = spec.world_size > 0 ? spec.world_size : count;
  if (count < 1 || spec.argv.empty()) {
    return InvalidArgument("a gang needs at least one rank and a command");
  }
  if (spec.first_rank < 0 || spec.first_rank + count > world) {
    return InvalidArgument("ranks {} to {} are outside the world of {}", spec.first_rank,
                           spec.first_rank + count - 1, world);
  }
  if ((!spec.rank_cpus.empty() && static_cast<int>(spec.rank_cpus.size()) != count) ||
      (!spec.rank_env.empty() && static_cast<int>(spec.rank_env.size()) != count)) {
    return InvalidArgument("a gang of {} ranks: rank_cpus and rank_env need one entry per rank",
                           count);
  }
  if (!spec.store_host.empty() && (spec.store_port == 0 || spec.master_port == 0)) {
    return InvalidArgument("a gang with its store on {} needs both ports", spec.store_host);
  }
  for (int r = 0; r < count; ++r) {
    int h = spec.rank_hosts[r];
    if (h < 0 || h >= static_cast<int>(spec.hosts.size()) ||
        (r > 0 && h < spec.rank_hosts[r - 1])) {
      return InvalidArgument(
          "rank {}: host index {} is outside the {} hosts or before rank {}'s (a host's ranks "
          "are consecutive)",
          spec.first_rank + r, h, spec.hosts.size(), spec.first_rank + r - 1);
    }
  }
  Gang g;
  g.spec_ = spec;
  comm::RankEnvironment job = spec.job;
  if (job.job_secret.empty()) job.job_secret = base::ToHex(base::RandomBytes(16));
  if (job.job_id.empty()) job.job_id = fmt::format("gang-{}", ::getpid());
  // Rank 0 serves the store on its host; a fresh namespace has the fixed ports free.
  const GangHost& first = spec.hosts[spec.rank_hosts[0]];
  std::string store_host = spec.store_host.empty() ? first.address : spec.store_host;
  int store_port = spec.store_port, master_port = spec.master_port;
  if (spec.store_host.empty() && first.netns_path.empty()) {
    if (store_port == 0) {
      RY_ASSIGN_OR_RETURN(store_port, FreePort(first.address, master_port));
    }
    if (master_port == 0) {
      RY_ASSIGN_OR_RETURN(master_port, FreePort(first.address, store_port));
    }
  }
  if (store_port == 0) store_port = 29400;
  if (master_port == 0) master_port = 29500;

  for (int i = 0; i < count; ++i) {
    const int h = spec.rank_hosts[i];
    const GangHost& host = spec.hosts[h];
    auto first_on_host = std::find(spec.rank_hosts.begin(), spec.rank_hosts.end(), h);
    comm::RankEnvironment e = job;
    e.rank = spec.first_rank + i;
    e.world_size = world;
    e.local_rank = i - static_cast<int>(first_on_host - spec.rank_hosts.begin());
    e.local_world_size =
        static_cast<int>(std::count(spec.rank_hosts.begin(), spec.rank_hosts.end(), h));
    e.group_rank = spec.first_group + h;
    e.host = host.name;
    e.store_address = fmt::format("{}:{}", store_host, store_port);
    e.store_dir.clear();
    e.serve_store = e.rank == 0;
    e.master_addr = store_host;
    e.master_port = master_port;
    // So that environment(i) is what the rank reads back, the host's own variables included.
    for (const auto& [name, value] : host.env) {
      if (name == "RAILYARD_VHOST") e.virtual_host = value;
    }

    base::SpawnOptions s;
    s.argv = spec.argv;
    s.env = e.ToEnv();
    s.env.insert(s.env.end(), host.env.begin(), host.env.end());
    if (!spec.rank_env.empty()) {
      s.env.insert(s.env.end(), spec.rank_env[i].begin(), spec.rank_env[i].end());
    }
    if (!spec.rank_cpus.empty()) s.cpus = spec.rank_cpus[i];
    if (!spec.log_dir.empty() && e.rank != spec.terminal_rank) {
      s.output_path = RankLogPath(spec.log_dir, e.rank);
      std::string header =
          fmt::format("{}attempt {} of job {} on {}, pid of the launcher {}\n", kLogHeader,
                      e.restart_count, e.job_id, host.name, ::getpid());
      Status wrote = base::AppendToFile(s.output_path, header);
      if (!wrote.ok()) {
        return wrote.WithContext(fmt::format("rank {}'s log in {}", e.rank, spec.log_dir));
      }
    }
    s.netns_path = host.netns_path;
    s.capture_stdout = e.rank != spec.terminal_rank;
    s.capture_stderr = e.rank != spec.terminal_rank;
    auto child = base::Child::Spawn(s);
    if (!child.ok()) {
      return child.status().WithContext(fmt::format("starting rank {} on {}", e.rank, host.name));
    }
    g.result_.ranks.push_back({.rank = e.rank, .host = host.name, .pid = child->pid()});
    g.environments_.push_back(std::move(e));
    g.children_.push_back(std::move(*child));
  }
  g.ended_.assign(count, false);
  return g;
}

void Gang::Record(int i, base::ExitInfo exit) {
  ended_[i] = true;
  RankEnd& end = result_.ranks[i];
  end.exit = std::move(exit);
  if (!spec_.log_dir.empty() && end.rank != spec_.terminal_rank) {
    // This attempt's part of the log's tail is what the rank wrote on its way out.
    auto tail = base::ReadFileTail(RankLogPath(spec_.log_dir, end.rank), 64 << 10);
    if (tail.ok()) {
      size_t header = tail->rfind(kLogHeader);
      end.exit.stderr_text =
          header == std::string::npos ? *tail : tail->substr(tail->find('\n', header) + 1);
    }
  }
  if (!end.ok() && end.stopped_why.empty() && result_.first_failed < 0) {
    result_.first_failed = i;
  }
  // A rank whose output is the launcher's printed its error there.
  if (end.rank == spec_.terminal_rank && !end.ok() && end.exit.signal == 0 &&
      end.stopped_why.empty()) {
    end.stopped_why = "its error is printed above";
  }
}

void Gang::Stop(const std::vector<int>& ranks, const std::string& why) {
  for (int i : ranks) {
    result_.ranks[i].stopped_why = why;
    children_[i].SignalGroup(SIGTERM);
    if (ProcessIsStopped(children_[i].pid())) Record(i, children_[i].KillAndReap());
  }
  auto grace = base::Deadline::After(spec_.term_grace);
  for (int i : ranks) {
    if (ended_[i]) continue;
    auto e = children_[i].Wait(grace);
    Record(i, e.ok() ? std::move(*e) : children_[i].KillAndReap());
  }
}

std::vector<int> Gang::Running() const {
  std::vector<int> running;
  for (int i = 0; i < size(); ++i) {
    if (!ended_[i]) running.push_back(i);
  }
  return running;
}

bool Gang::all_ended() const {
  return std::all_of(ended_.begin(), ended_.end(), [](bool e) { return e; });
}

std::vector<int> Gang::Reap(base::Duration slice) {
  std::vector<int> running = Running(), ended;
  if (running.empty()) return ended;
  auto each = std::max<base::Duration>(slice / running.size(), std::chrono::milliseconds(1));
  for (int i : running) {
    auto e = children_[i].Wait(base::Deadline::After(each));
    if (!e.ok()) continue;
    Record(i, std::move(*e));
    ended.push_back(i);
  }
  return ended;
}

void Gang::StopRunning(const std::string& why) { Stop(Running(), why); }

GangResult Gang::Wait(base::Deadline deadline) {
  std::optional<base::Deadline> grace;
  for (;;) {
    if (all_ended()) break;
    // One pass looks at every running rank once and takes about 20 ms in all: a rank's
    // end is seen within a pass, however many ranks there are.
    auto slice = std::min<base::Duration>(std::chrono::milliseconds(20), deadline.Remaining());
    Reap(slice);
    if (result_.first_failed >= 0 && !grace) {
      grace = base::Deadline::After(spec_.failure_grace);
    }
    std::vector<int> running = Running();
    if (running.empty()) continue;
    if (grace && grace->Expired()) {
      const RankEnd& failed = result_.ranks[result_.first_failed];
      Stop(running,
           fmt::format("still running {} after rank {} on {} failed (stopped, or hung): "
                       "killed by the launcher",
                       base::FormatDuration(spec_.failure_grace), failed.rank, failed.host));
    } else if (deadline.Expired()) {
      result_.deadline_expired = true;
      Stop(running, "still running at the launcher's deadline: killed by the launcher");
    }
  }
  return result_;
}

}  // namespace railyard::launch
