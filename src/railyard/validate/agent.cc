#include "railyard/validate/agent.h"

#include <arpa/inet.h>
#include <fmt/format.h>
#include <netdb.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdlib>
#include <future>
#include <thread>

#include "railyard/base/files.h"
#include "railyard/validate/collective_probe.h"
#include "railyard/validate/storage_probe.h"
#include "railyard/vcluster/link_probe.h"

namespace railyard::validate {
namespace {

using base::Clock;
using base::Deadline;
using base::WaitFd;

// ---- the real probes ----

class SystemAgentProbes final : public AgentProbes {
 public:
  ~SystemAgentProbes() override {
    stop_ = true;
    for (std::thread& t : sinks_) t.join();
  }

  Result<int> StartSink(const std::string& address, Deadline until) override {
    auto ready = std::make_shared<std::promise<std::string>>();
    std::future<std::string> port = ready->get_future();
    vcluster::SinkOptions options{
        .address = address,
        .lifetime = std::min<base::Duration>(until.Remaining(), std::chrono::hours(24)),
        .max_connections = 1 << 20,
        .stop = &stop_};
    // Ends at the agent's deadline or when these probes are destroyed (the agent exits),
    // which sets stop_ and joins it.
    sinks_.emplace_back([options, ready] {
      Status s = vcluster::RunSink(options, [&](std::string where) { ready->set_value(where); });
      if (!s.ok()) ready->set_value("error: " + s.message());
    });
    std::string where = port.get();
    if (where.starts_with("error: ")) return Unavailable("probe sink: {}", where.substr(7));
    return std::atoi(where.substr(where.rfind(':') + 1).c_str());
  }

  Result<double> Send(const Peer& peer, base::Duration duration, Deadline deadline) override {
    RY_ASSIGN_OR_RETURN(
        vcluster::SendResult r,
        vcluster::RunSend(peer.address, static_cast<uint16_t>(peer.port), duration, deadline));
    if (r.bytes == 0) return Unavailable("sink of {} received nothing", peer.host);
    return r.bits_per_second();
  }

  Result<double> RoundTrip(const Peer& peer, Deadline deadline) override;

  Status Storage(const Task& task, Deadline deadline, TaskResult& result) override;

  Result<std::vector<CollectiveFigure>> Allreduce(net::Store& store, const Task& task,
                                                  const AgentInvocation& self,
                                                  const std::string& address,
                                                  Deadline deadline) override {
    CollectiveProbeOptions o{.secret = self.secret,
                             .address = address,
                             .host = self.host,
                             .hosts = task.hosts,
                             .warmup = task.warmup,
                             .iters = std::max(1, task.iters)};
    return RunAllreduceSweep(store, task.key_prefix, task.rank, task.world, task.sizes, deadline,
                             o);
  }

 private:
  std::atomic<bool> stop_{false};
  std::vector<std::thread> sinks_;
};

Status SystemAgentProbes::Storage(const Task& task, Deadline deadline, TaskResult& result) {
  StorageProbeOptions o{.dir = task.dir, .deadline = deadline};
  if (task.bytes_per_file) o.bytes_per_file = task.bytes_per_file;
  if (task.block_bytes) o.block_bytes = task.block_bytes;
  if (task.files) o.files = task.files;
  auto take = [&](const StorageRate& r) {
    result.bytes_per_s = r.bytes_per_s;
    result.bytes = r.bytes;
    result.seconds = r.seconds;
    result.note = r.note;
  };
  switch (task.kind) {
    case TaskKind::kStorageWrite: {
      RY_ASSIGN_OR_RETURN(StorageRate r, WriteOwnFiles(o));
      take(r);
      return Status::Ok();
    }
    case TaskKind::kStorageRead: {
      RY_ASSIGN_OR_RETURN(StorageRate r, ReadNeighbourFiles(task.neighbour_dir, o));
      take(r);
      return Status::Ok();
    }
    case TaskKind::kMetadata: {
      Status probe = Status::Ok();
      if (task.items > 0) {
        Result<MetadataRate> m = MetadataProbe(task.dir, task.items, deadline);
        if (m.ok()) {
          result.ops_per_s = m->total_ops_per_s;
          result.seconds = m->seconds;
        }
        probe = m.status();
      }
      // The data files of the write phase go too, once every neighbour has read them.
      Status removed = task.cleanup ? RemoveProbeFiles(task.dir) : Status::Ok();
      return probe.ok() ? removed : probe;
    }
    default:
      return InvalidArgument("not a storage task: {}", TaskKindName(task.kind));
  }
}

Result<double> SystemAgentProbes::RoundTrip(const Peer& peer, Deadline deadline) {
  const std::string where = fmt::format("{} ({}:{})", peer.host, peer.address, peer.port);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(peer.port));
  if (::inet_pton(AF_INET, peer.address.c_str(), &sa.sin_addr) != 1) {
    return InvalidArgument("peer {}: '{}' is not an IPv4 address", peer.host, peer.address);
  }
  base::UniqueFd fd(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0));
  if (!fd.valid()) return ErrnoStatus(errno, "latency probe: socket");
  Clock::time_point start = Clock::now();
  if (::connect(fd.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0 &&
      errno != EINPROGRESS) {
    return ErrnoStatus(errno, fmt::format("connect to the probe sink of {}", where));
  }
  RY_RETURN_IF_ERROR(WaitFd(fd.get(), POLLOUT, deadline, fmt::format("connect to {}", where)));
  double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  int err = 0;
  socklen_t len = sizeof err;
  ::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
  if (err != 0) return ErrnoStatus(err, fmt::format("connect to the probe sink of {}", where));
  // A zero-byte probe: the sink answers its 16-byte count and closes.
  ::shutdown(fd.get(), SHUT_WR);
  char buf[64];
  while (WaitFd(fd.get(), POLLIN, deadline, "probe sink answer").ok()) {
    ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n == 0 || (n < 0 && errno != EINTR && errno != EAGAIN)) break;
  }
  return seconds;
}

// ---- tasks ----

const CheckRegistry& BuiltinRegistry() {
  // Never destroyed: node checks abandoned past their timeout may still read it (node_run.h).
  static const CheckRegistry* registry = [] {
    auto* r = new CheckRegistry;
    RegisterBuiltinChecks(*r).IgnoreError();  // fails only on a bug the registry tests catch
    return r;
  }();
  return *registry;
}

// The plan of a node task: its checks with their settings, looked up in `registry`. Checks
// this agent does not know are answered UNKNOWN in `unknown`.
Result<Plan> NodePlan(const Task& task, const CheckRegistry& registry,
                      std::vector<CheckResult>& unknown) {
  Plan plan{.name = task.plan, .source = "coordinator", .profiles = {task.profile}};
  plan.profile_hosts.resize(1);
  for (const NodeCheckSpec& spec : task.checks) {
    const Check* check = registry.Find(spec.id);
    if (check == nullptr) {
      unknown.push_back({.id = spec.id,
                         .outcome = Outcome::Unknown(
                             fmt::format("this agent's railyard has no check '{}'", spec.id))});
      continue;
    }
    PlannedCheck pc{.check = check,
                    .timeout = std::chrono::milliseconds(spec.timeout_ms),
                    .profiles = spec.profiles};
    const Unit unit = check->info().unit;
    if (!spec.warn.empty()) {
      RY_ASSIGN_OR_RETURN(pc.settings.warn, ParseThreshold(spec.warn, unit));
    }
    if (!spec.fail.empty()) {
      RY_ASSIGN_OR_RETURN(pc.settings.fail, ParseThreshold(spec.fail, unit));
    }
    RY_ASSIGN_OR_RETURN(CheckSettings defaults, DefaultSettings(check->info()));
    pc.settings.params = defaults.params;
    for (const auto& [k, v] : spec.params) pc.settings.params[k] = v;
    plan.checks.push_back(std::move(pc));
  }
  return plan;
}

struct Agent {
  const AgentOptions& options;
  net::Store& store;
  AgentProbes& probes;
  std::shared_ptr<NodeEnv> env;
  std::string address;

  Deadline TaskDeadline(const Task& task) const {
    auto budget = task.timeout_ms > 0 ? std::chrono::milliseconds(task.timeout_ms)
                                      : std::chrono::milliseconds(10'000);
    return Deadline::Earliest(Deadline::After(budget), options.deadline);
  }

  TaskResult RunNode(const Task& task) {
    TaskResult r;
    const CheckRegistry& registry =
        options.registry != nullptr ? *options.registry : BuiltinRegistry();
    Result<Plan> plan = NodePlan(task, registry, r.checks);
    if (!plan.ok()) return TaskResult::Failed(plan.status());
    NodeRunOptions run{.site = {.root = env->IsRoot(), .shared_dir = task.shared_dir}};
    NodeReport report = RunNodeChecks(*plan, options.invocation.host, task.profile, env, run);
    for (CheckResult& c : report.checks) r.checks.push_back(std::move(c));
    r.abandoned = report.abandoned;
    r.ok = true;
    return r;
  }

  // Reach (one round trip each) or latency (`samples`, median) to every peer.
  TaskResult RunPeers(const Task& task) {
    TaskResult r{.ok = true};
    const Deadline deadline = TaskDeadline(task);
    const int samples = task.kind == TaskKind::kReach ? 1 : std::max(1, task.samples);
    for (const Peer& peer : task.peers) {
      PeerResult pr{.host = peer.host};
      std::vector<double> rtts;
      for (int i = 0; i < samples; ++i) {
        Result<double> rtt = probes.RoundTrip(peer, deadline);
        if (!rtt.ok()) {
          pr.error = rtt.status().message();
          break;
        }
        rtts.push_back(*rtt);
      }
      if (pr.error.empty() && !rtts.empty()) {
        std::nth_element(rtts.begin(), rtts.begin() + rtts.size() / 2, rtts.end());
        pr.ok = true;
        pr.seconds = rtts[rtts.size() / 2];
      }
      r.peers.push_back(std::move(pr));
    }
    return r;
  }

  TaskResult RunSend(const Task& task) {
    Result<double> bits = probes.Send(task.peers.at(0), std::chrono::milliseconds(task.duration_ms),
                                      TaskDeadline(task));
    if (!bits.ok()) return TaskResult::Failed(bits.status());
    return TaskResult{.ok = true, .bits_per_s = *bits};
  }

  TaskResult Execute(const Task& task) {
    switch (task.kind) {
      case TaskKind::kNode:
        return RunNode(task);
      case TaskKind::kClock: {
        auto now = std::chrono::system_clock::now().time_since_epoch();
        return TaskResult{
            .ok = true,
            .realtime_ns = std::chrono::duration_cast<std::chrono::nanoseconds>(now).count()};
      }
      case TaskKind::kReach:
      case TaskKind::kLatency:
        return RunPeers(task);
      case TaskKind::kSend:
        return RunSend(task);
      case TaskKind::kStorageWrite:
      case TaskKind::kStorageRead:
      case TaskKind::kMetadata: {
        TaskResult r;
        Status s = probes.Storage(task, TaskDeadline(task), r);
        if (!s.ok()) return TaskResult::Failed(s);
        r.ok = true;
        return r;
      }
      case TaskKind::kAllreduce: {
        auto figures =
            probes.Allreduce(store, task, options.invocation, address, TaskDeadline(task));
        if (!figures.ok()) return TaskResult::Failed(figures.status());
        return TaskResult{.ok = true, .figures = std::move(*figures)};
      }
      case TaskKind::kExit:
        return TaskResult{.ok = true};
    }
    return TaskResult::Failed(Internal("unhandled task kind"));
  }

  Status Loop() {
    const AgentInvocation& self = options.invocation;
    for (int seq = 1;; ++seq) {
      const std::string key = TaskKey(self.run_id, self.host, seq);
      Deadline wait = Deadline::Earliest(Deadline::After(options.idle_timeout), options.deadline);
      Result<std::string> text = store.Get(key, wait);
      if (!text.ok()) {
        if (text.status().code() != StatusCode::kDeadlineExceeded) return text.status();
        return DeadlineExceeded("agent {}: no task {} from the coordinator within {} ms ({})",
                                self.host, seq, options.idle_timeout.count(), store.Describe());
      }
      Result<Task> task = TaskFromJson(*text, key);
      TaskResult result = task.ok() ? Execute(*task) : TaskResult::Failed(task.status());
      RY_RETURN_IF_ERROR(store.Set(ResultKey(self.run_id, self.host, seq), ToJson(result),
                                   Deadline::After(std::chrono::seconds(10))));
      if (task.ok() && task->kind == TaskKind::kExit) return Status::Ok();
    }
  }
};

}  // namespace

std::unique_ptr<AgentProbes> NewSystemAgentProbes() {
  return std::make_unique<SystemAgentProbes>();
}

Result<std::string> AgentAddress(const std::string& store_address) {
  if (const char* vhost = std::getenv("RAILYARD_VHOST_ADDR"); vhost != nullptr && *vhost) {
    return std::string(vhost);
  }
  size_t colon = store_address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return InvalidArgument("store address '{}' is not ADDR:PORT", store_address);
  }
  std::string host = store_address.substr(0, colon), port = store_address.substr(colon + 1);
  addrinfo hints{};
  hints.ai_family = AF_INET;
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (int rc = ::getaddrinfo(host.c_str(), port.c_str(), &hints, &found); rc != 0) {
    return Unavailable("cannot resolve store host '{}': {}", host, ::gai_strerror(rc));
  }
  base::UniqueFd fd(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  // A connected UDP socket picks the route's source address; nothing is sent.
  int rc = fd.valid() ? ::connect(fd.get(), found->ai_addr, found->ai_addrlen) : -1;
  int err = errno;
  ::freeaddrinfo(found);
  if (rc != 0) return ErrnoStatus(err, fmt::format("route to store {}", store_address));
  sockaddr_in local{};
  socklen_t len = sizeof local;
  ::getsockname(fd.get(), reinterpret_cast<sockaddr*>(&local), &len);
  char text[INET_ADDRSTRLEN] = {};
  ::inet_ntop(AF_INET, &local.sin_addr, text, sizeof text);
  return std::string(text);
}

Status RunAgent(const AgentOptions& options, net::Store& store) {
  const AgentInvocation& self = options.invocation;
  if (self.host.empty() || self.run_id.empty()) {
    return InvalidArgument("validation agent needs a host name and a run id (got '{}', '{}')",
                           self.host, self.run_id);
  }
  std::unique_ptr<AgentProbes> own_probes;
  AgentProbes* probes = options.probes;
  if (probes == nullptr) probes = (own_probes = NewSystemAgentProbes()).get();
  std::shared_ptr<NodeEnv> env = options.env;
  if (!env) env = std::shared_ptr<NodeEnv>(NewSystemNodeEnv());
  std::string address = options.address;
  if (address.empty()) {
    RY_ASSIGN_OR_RETURN(address, AgentAddress(self.store_address));
  }
  RY_ASSIGN_OR_RETURN(int port, probes->StartSink(address, options.deadline));
  Hello hello{.address = address, .probe_port = port, .pid = ::getpid()};
  RY_RETURN_IF_ERROR(
      store.Set(HelloKey(self.run_id, self.host), ToJson(hello),
                Deadline::Earliest(Deadline::After(std::chrono::seconds(10)), options.deadline)));
  Agent agent{options, store, *probes, std::move(env), address};
  return agent.Loop();
}

}  // namespace railyard::validate
