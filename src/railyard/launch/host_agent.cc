#include "railyard/launch/host_agent.h"

#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <memory>
#include <optional>

#include "railyard/base/config.h"
#include "railyard/base/files.h"
#include "railyard/base/logging.h"
#include "railyard/base/units.h"
#include "railyard/launch/gang.h"
#include "railyard/launch/progress.h"
#include "railyard/launch/run_protocol.h"
#include "railyard/net/interfaces.h"
#include "railyard/topo/nccl_export.h"
#include "railyard/topo/node_json.h"
#include "railyard/validate/agent.h"

namespace railyard::launch {
namespace {

using base::Clock;
using base::Deadline;
using std::chrono::duration_cast;
using std::chrono::microseconds;
using std::chrono::milliseconds;

const base::Logger kLog("launch");

int64_t Ms(base::Duration d) { return duration_cast<milliseconds>(d).count(); }

// One attempt's ranks on this host.
struct Share {
  int attempt = 0;
  Gang gang;
  std::unique_ptr<ProgressListener> progress;
  Clock::time_point started;
  std::vector<Clock::time_point> ended_at;  // per gang rank; set when reaped
};

class Agent {
 public:
  Agent(const HostAgentOptions& options, net::Store& store, std::string address)
      : o_(options), store_(store), address_(std::move(address)) {}

  Status Loop();

 private:
  Status Start(const AttemptPlan& plan);
  // NCCL_SOCKET_IFNAME (the interface of this host's address) and NCCL_TOPO_FILE (written
  // from the plan's node model when it has GPUs), unless the plan's variables set them.
  comm::EnvList NcclEnvironment(const AttemptPlan& plan, int group, const std::string& dir) const;
  void StopShare(const std::string& why);
  // Reaps, drains progress, waits up to one interval.
  void Tend();
  AgentStatus Snapshot() const;
  // Writes the status; tracks how long the store has been unreachable. UNAVAILABLE once it
  // has been for launcher_timeout.
  Status Publish();
  Status Unreachable(const Status& error);

  const HostAgentOptions& o_;
  net::Store& store_;
  std::string address_;
  std::optional<Share> share_;
  AgentStatus::State state_ = AgentStatus::State::kIdle;
  int attempt_ = -1;
  std::string error_;
  uint64_t seq_ = 0;
  std::optional<Clock::time_point> unreachable_since_;
};

Deadline Short(const HostAgentOptions& o) {
  return Deadline::Earliest(Deadline::After(std::chrono::seconds(2)), o.deadline);
}

Status Agent::Unreachable(const Status& error) {
  auto now = Clock::now();
  if (!unreachable_since_) unreachable_since_ = now;
  if (now - *unreachable_since_ >= o_.launcher_timeout) {
    return Unavailable("host agent {}: the launcher's store {} has not answered for {}: {}",
                       o_.host, store_.Describe(), base::FormatDuration(now - *unreachable_since_),
                       error.message());
  }
  return Status::Ok();
}

Status Agent::Publish() {
  ++seq_;
  Status st = store_.Set(RunStatusKey(o_.job, o_.host), ToJson(Snapshot()), Short(o_));
  if (st.ok()) {
    unreachable_since_.reset();
    return st;
  }
  return Unreachable(st);
}

AgentStatus Agent::Snapshot() const {
  AgentStatus s{
      .host = o_.host, .seq = seq_, .state = state_, .attempt = attempt_, .error = error_};
  if (!share_) return s;
  auto now = Clock::now();
  const GangResult& result = share_->gang.result();
  for (int i = 0; i < share_->gang.size(); ++i) {
    const RankEnd& end = result.ranks[i];
    AgentRankStatus r{.rank = end.rank, .pid = end.pid};
    const RankProgress& p = share_->progress->ranks()[end.rank];
    r.heard = p.heard;
    r.silent_ms = Ms(now - (p.heard ? p.last_heard : share_->started));
    r.last_step = p.last_step;
    size_t first = p.step_times.size() > 8 ? p.step_times.size() - 8 : 0;
    for (size_t k = first; k < p.step_times.size(); ++k) {
      r.step_us.push_back(duration_cast<microseconds>(p.step_times[k]).count());
    }
    r.frozen = !share_->gang.ended(i) && ProcessIsStopped(static_cast<pid_t>(end.pid));
    if (share_->gang.ended(i)) {
      r.exited = true;
      r.exit_code = end.exit.signal == 0 ? end.exit.exit_code : 0;
      r.signal = end.exit.signal;
      r.exited_ms_ago = Ms(now - share_->ended_at[i]);
      r.error_line = end.ErrorLine();
      r.stopped_why = end.stopped_why;
    }
    s.ranks.push_back(std::move(r));
  }
  return s;
}

bool HasVariable(const comm::EnvList& env, std::string_view name) {
  return std::any_of(env.begin(), env.end(), [&](const auto& kv) { return kv.first == name; });
}

comm::EnvList Agent::NcclEnvironment(const AttemptPlan& plan, int group,
                                     const std::string& dir) const {
  comm::EnvList env;
  // NCCL's bootstrap and socket transport on the interface this host is reached at.
  if (!HasVariable(plan.env, "NCCL_SOCKET_IFNAME")) {
    auto interfaces = net::ListInterfaces();
    for (const net::NetInterface& nic :
         interfaces.ok() ? *interfaces : std::vector<net::NetInterface>{}) {
      if (nic.ipv4 == address_ && !nic.loopback)
        env.emplace_back("NCCL_SOCKET_IFNAME", "=" + nic.name);
    }
  }
  // NCCL's topology from the node model, with this host's own CPU identity.
  if (!HasVariable(plan.env, "NCCL_TOPO_FILE") &&
      group < static_cast<int>(plan.node_models.size()) && !plan.node_models[group].empty()) {
    auto json = base::ParseJson(plan.node_models[group], "node model");
    auto node =
        json.ok() ? topo::NodeFromJson(*json, "node model") : Result<topo::Node>(json.status());
    if (node.ok() && !node->gpus.empty()) {
      auto xml = topo::NcclTopologyXml(*node);
      const std::string path =
          fmt::format("{}/railyard-{}-{}-nccl-topo.xml", dir, plan.job_id, o_.host);
      Status wrote = xml.ok() ? base::WriteFileAtomic(path, *xml) : xml.status();
      if (wrote.ok()) {
        env.emplace_back("NCCL_TOPO_FILE", path);
      } else {
        kLog.Warn("host agent {}: no NCCL_TOPO_FILE: {}", o_.host, wrote.ToString());
      }
    }
  }
  return env;
}

Status Agent::Start(const AttemptPlan& plan) {
  const int group = plan.GroupOf(o_.host);
  attempt_ = plan.attempt;
  error_.clear();
  if (group < 0) {
    state_ = AgentStatus::State::kIdle;
    return Status::Ok();
  }
  const std::string dir = !o_.socket_dir.empty()             ? o_.socket_dir
                          : std::getenv("TMPDIR") != nullptr ? std::getenv("TMPDIR")
                                                             : "/tmp";
  auto listener = ProgressListener::Bind(
      fmt::format("{}/railyard-{}-{}-{}.progress", dir, plan.job_id, o_.host, plan.attempt),
      {.world_size = plan.world_size});
  GangSpec spec;
  spec.argv = plan.argv;
  GangHost self{.name = o_.host, .address = address_};
  // The virtual cluster's exec put this host's own variables into our environment; the
  // ranks inherit them.
  spec.hosts = {self};
  spec.rank_hosts.assign(plan.nproc_per_host, 0);
  spec.first_rank = group * plan.nproc_per_host;
  spec.world_size = plan.world_size;
  spec.first_group = group;
  spec.store_host = plan.store_host;
  spec.store_port = plan.store_port;
  spec.master_port = plan.master_port;
  spec.term_grace = o_.term_grace;
  spec.job.job_id = plan.job_id;
  spec.job.job_secret = plan.rank_secret;
  spec.job.restart_count = plan.attempt;
  spec.job.ckpt_dir = plan.ckpt_dir;
  spec.log_dir = plan.log_dir;
  if (listener.ok()) spec.job.progress = (*listener)->path();
  if (!plan.setup.empty() && !plan.setup[group].empty()) {
    for (const LocalRankSetup& s : plan.setup[group]) {
      spec.rank_cpus.push_back(s.cpus);
      spec.rank_env.push_back(s.env);
    }
  }
  spec.hosts[0].env = plan.env;
  for (auto& [name, value] : NcclEnvironment(plan, group, dir)) {
    spec.hosts[0].env.emplace_back(std::move(name), std::move(value));
  }
  Result<Gang> gang = listener.ok() ? Gang::Start(spec) : Result<Gang>(listener.status());
  if (!gang.ok()) {
    state_ = AgentStatus::State::kFailed;
    error_ = gang.status().WithContext(fmt::format("host {}", o_.host)).ToString();
    kLog.Warn("{}", error_);
    return Status::Ok();
  }
  share_.emplace(Share{.attempt = plan.attempt,
                       .gang = std::move(*gang),
                       .progress = std::move(*listener),
                       .started = Clock::now()});
  share_->ended_at.assign(share_->gang.size(), Clock::time_point{});
  state_ = AgentStatus::State::kRunning;
  kLog.Info("host agent {}: attempt {}: started ranks {}-{}", o_.host, plan.attempt,
            spec.first_rank, spec.first_rank + plan.nproc_per_host - 1);
  return Status::Ok();
}

void Agent::Tend() {
  auto until = Deadline::Earliest(Deadline::After(o_.status_interval), o_.deadline);
  if (!share_) {
    // Nothing to watch: the wait is the interval itself, bounded by the deadline.
    base::WaitFd(-1, POLLIN, until, "idle").IgnoreError();
    return;
  }
  // Short slices, so that each rank's end is stamped within about 10 ms of it: the launcher
  // orders failures on different hosts by these stamps. Each slice's wait is the progress
  // socket's, which a datagram ends early.
  while (!until.Expired()) {
    for (int i : share_->gang.Reap(milliseconds(1))) share_->ended_at[i] = Clock::now();
    auto polled =
        share_->progress->Poll(Deadline::Earliest(Deadline::After(milliseconds(10)), until));
    if (!polled.ok()) kLog.Warn("{}", polled.status().ToString());
  }
  for (int i : share_->gang.Reap(milliseconds(1))) share_->ended_at[i] = Clock::now();
  if (state_ == AgentStatus::State::kRunning && share_->gang.all_ended()) {
    state_ = AgentStatus::State::kStopped;
  }
}

void Agent::StopShare(const std::string& why) {
  if (!share_) return;
  share_->gang.StopRunning(why);
  auto now = Clock::now();
  for (int i = 0; i < share_->gang.size(); ++i) {
    if (share_->ended_at[i] == Clock::time_point{}) share_->ended_at[i] = now;
  }
  state_ = AgentStatus::State::kStopped;
}

Status Agent::Loop() {
  RY_RETURN_IF_ERROR(store_.Set(RunHelloKey(o_.job, o_.host),
                                ToJson(RunHello{.address = address_, .pid = ::getpid()}),
                                Short(o_)));
  const std::string control_key = RunControlKey(o_.job);
  for (;;) {
    if (o_.stop_requested != nullptr && o_.stop_requested->load() != 0) {
      StopShare(fmt::format("the host agent got signal {}: stopped by its host agent",
                            o_.stop_requested->load()));
      Publish().IgnoreError();
      return Aborted("host agent {}: stopped by signal {}", o_.host, o_.stop_requested->load());
    }
    if (o_.deadline.Expired()) {
      StopShare("the job's deadline passed: stopped by its host agent");
      return DeadlineExceeded("host agent {}: the job's deadline passed", o_.host);
    }
    Result<std::string> text = store_.Get(control_key, Short(o_));
    std::optional<Control> control;
    if (text.ok()) {
      auto parsed = ParseControl(*text, control_key);
      if (!parsed.ok()) return parsed.status();
      control = *parsed;
      unreachable_since_.reset();
    } else if (text.status().code() != StatusCode::kDeadlineExceeded) {
      if (Status st = Unreachable(text.status()); !st.ok()) {
        StopShare("lost the launcher: stopped by its host agent");
        return st;
      }
    }
    if (control) {
      if (control->action == Control::Action::kEnd) {
        StopShare(fmt::format("the job ended ({}): stopped by its host agent", control->why));
        // The launcher waits for this last word before it shuts its store.
        state_ = AgentStatus::State::kEnded;
        Publish().IgnoreError();
        return Status::Ok();
      }
      if (control->action == Control::Action::kStop && share_ &&
          share_->attempt == control->attempt && state_ == AgentStatus::State::kRunning) {
        StopShare(control->why);
      }
      if (control->action == Control::Action::kRun && control->attempt > attempt_) {
        StopShare(fmt::format("attempt {} began: stopped by its host agent", control->attempt));
        share_.reset();
        const std::string key = RunPlanKey(o_.job, control->attempt);
        Result<std::string> plan_text = store_.Get(key, Short(o_));
        if (plan_text.ok()) {
          RY_ASSIGN_OR_RETURN(AttemptPlan plan, ParseAttemptPlan(*plan_text, key));
          RY_RETURN_IF_ERROR(Start(plan));
        } else if (Status st = Unreachable(plan_text.status()); !st.ok()) {
          return st;
        }
      }
    }
    if (Status st = Publish(); !st.ok()) {
      StopShare("lost the launcher: stopped by its host agent");
      return st;
    }
    Tend();
  }
}

}  // namespace

Status RunHostAgent(const HostAgentOptions& options, net::Store& store) {
  if (options.host.empty() || options.job.empty()) {
    return InvalidArgument("a host agent needs its host name and the job's id");
  }
  std::string address = options.address;
  if (address.empty()) {
    RY_ASSIGN_OR_RETURN(address, validate::AgentAddress(options.store_address));
  }
  Agent agent(options, store, address);
  return agent.Loop();
}

}  // namespace railyard::launch
