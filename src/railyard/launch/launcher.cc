#include "railyard/launch/launcher.h"

#include <fmt/format.h>
#include <poll.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include "railyard/base/files.h"
#include "railyard/base/hmac.h"
#include "railyard/base/units.h"
#include "railyard/launch/gang.h"
#include "railyard/storage/checkpoint_reader.h"
#include "railyard/validate/agent_starter.h"

namespace railyard::launch {
namespace {

using base::Clock;
using base::Deadline;
using std::chrono::milliseconds;

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

// What the launcher knows of one agent.
struct AgentView {
  std::unique_ptr<validate::AgentHandle> handle;
  std::string address;
  std::optional<AgentStatus> status;
  Clock::time_point read_at;  // when `status` was read
  uint64_t seq = 0;
  Clock::time_point last_change;  // when its seq last moved
  bool lost = false;
  std::string lost_why;
  Clock::time_point lost_at;
};

// How one attempt ended.
struct AttemptEnd {
  enum class Kind { kSucceeded, kFailed, kInterrupted, kDeadline };
  Kind kind = Kind::kFailed;
  std::vector<SupervisorEvent> events;  // failures seen
  Clock::time_point detected;
};

class Launcher {
 public:
  explicit Launcher(const LaunchSpec& spec) : s_(spec), policy_(spec.supervisor) {}
  Result<LaunchOutcome> Run();

 private:
  void Emit(LaunchEvent e);
  Status StartAgents();
  Status WriteControl(const Control& c);
  // Reads every agent's status once, marking lost agents.
  void ReadStatuses();
  // Waits one status interval, or less when woken.
  void Pause();
  bool Interrupted() const { return s_.interrupted != nullptr && s_.interrupted->load() != 0; }
  Result<AttemptPlan> MakePlan();
  AttemptEnd Watch();
  // Stops the attempt's ranks; collects the failures seen while they stop into `end`.
  void StopAttempt(const std::string& why, AttemptEnd* end);
  Observations Observe(std::set<int>* frozen) const;
  // The cause among `events`: a frozen rank's hang first (its peers only wait on it), else
  // the earliest failure.
  const SupervisorEvent* Cause(const std::vector<SupervisorEvent>& events,
                               const std::set<int>& frozen) const;
  std::string CauseText(const SupervisorEvent& cause) const;
  // The step the next attempt resumes from, as the newest checkpoint that verifies says;
  // -1 when there is none.
  int64_t VerifiedStep();
  void End(const std::string& why);
  bool AllRanksEnded(bool* all_clean) const;
  // Closes the pending recovery's timing (at the next attempt's first step, or its end),
  // records it and says so in a "recovered" event.
  void FinishRecovery();

  const LaunchSpec& s_;
  SupervisorPolicy policy_;
  std::map<std::string, AgentView> agents_;
  std::vector<std::string> hosts_, spares_;
  int attempt_ = 0;
  Clock::time_point attempt_started_;
  std::set<std::pair<int, int64_t>> stragglers_seen_;
  std::map<int, std::string> error_lines_;  // rank -> its own error line, this attempt
  int64_t last_step_ = -1;                  // the highest step any rank reported
  std::set<int> frozen_;                    // ranks frozen when the failure was seen
  bool ending_ = false;                     // the end was announced: agents leave
  // Recovery timing: when the failure happened, when its ranks had all stopped, when the
  // next attempt's ranks all ran and all stepped, and its first step.
  Clock::time_point failed_at_, stopped_at_;
  std::optional<Clock::time_point> ranks_running_at_, first_step_at_;
  int64_t first_step_ = -1;
  int64_t recovery_last_step_ = -1;
  int64_t resumed_from_ = -1;  // the verified checkpoint step the next attempt resumes at
  std::optional<RecoveryTiming> pending_recovery_;
  LaunchOutcome out_;
};

void Launcher::Emit(LaunchEvent e) {
  e.at = Clock::now();
  e.unix_ms =
      std::chrono::duration_cast<milliseconds>(std::chrono::system_clock::now().time_since_epoch())
          .count();
  if (e.attempt == 0) e.attempt = attempt_;
  if (s_.on_event) s_.on_event(e);
}

Status Launcher::WriteControl(const Control& c) {
  return s_.store->Set(RunControlKey(s_.job_id), ToJson(c),
                       Deadline::After(std::chrono::seconds(5)));
}

void Launcher::Pause() {
  base::WaitFd(s_.wake_fd, POLLIN,
               Deadline::Earliest(Deadline::After(s_.status_interval), s_.deadline), "launcher")
      .IgnoreError();
  if (s_.wake_fd >= 0) {
    char drain[64];
    while (::read(s_.wake_fd, drain, sizeof drain) > 0) {
    }
  }
}

Status Launcher::StartAgents() {
  std::vector<std::string> all = hosts_;
  all.insert(all.end(), spares_.begin(), spares_.end());
  for (const std::string& h : all) {
    AgentView& v = agents_[h];
    if (s_.starter == nullptr) continue;
    validate::AgentInvocation inv{
        .host = h, .store_address = s_.store_address, .run_id = s_.job_id, .secret = s_.secret};
    inv.agent_args = s_.agent_args;
    inv.agent_args.push_back("--host");
    inv.agent_args.push_back(h);
    auto handle = s_.starter->Start(inv);
    if (!handle.ok()) {
      return handle.status().WithContext(fmt::format("starting the agent of {}", h));
    }
    v.handle = std::move(*handle);
  }
  // Every agent says hello within the connect timeout.
  auto deadline = Deadline::Earliest(Deadline::After(s_.agent_connect_timeout), s_.deadline);
  for (const std::string& h : all) {
    AgentView& v = agents_[h];
    for (;;) {
      auto text = s_.store->Get(RunHelloKey(s_.job_id, h),
                                Deadline::Earliest(Deadline::After(milliseconds(200)), deadline));
      if (text.ok()) {
        RY_ASSIGN_OR_RETURN(RunHello hello, ParseRunHello(*text, RunHelloKey(s_.job_id, h)));
        v.address = hello.address;
        v.last_change = Clock::now();
        break;
      }
      if (v.handle != nullptr && !v.handle->Running()) {
        return Unavailable("the agent of {} ended before it said hello: {}", h,
                           v.handle->ExitReason());
      }
      if (deadline.Expired()) {
        return DeadlineExceeded(
            "the agent of {} did not say hello within {} ({}): is railyard installed there, "
            "and does it reach the launcher's store at {}?",
            h, base::FormatDuration(s_.agent_connect_timeout),
            s_.starter ? s_.starter->Describe() : "agents started elsewhere", s_.store_address);
      }
      if (Interrupted()) return Aborted("interrupted while the agents started");
    }
  }
  Emit({.kind = "agents_up",
        .message = fmt::format("{} host agents up ({} for the job, {} spare)", all.size(),
                               hosts_.size(), spares_.size())});
  return Status::Ok();
}

void Launcher::ReadStatuses() {
  for (auto& [host, v] : agents_) {
    if (v.lost) continue;
    auto now = Clock::now();
    const std::string key = RunStatusKey(s_.job_id, host);
    auto text = s_.store->Get(key, Deadline::After(milliseconds(500)));
    if (text.ok()) {
      auto st = ParseAgentStatus(*text, key);
      if (st.ok()) {
        if (st->seq != v.seq) {
          v.seq = st->seq;
          v.last_change = now;
        }
        v.status = std::move(*st);
        v.read_at = now;
      }
    }
    if (v.handle != nullptr && !v.handle->Running()) {
      v.lost = true;
      v.lost_why = fmt::format("its agent ended: {}", v.handle->ExitReason());
      v.lost_at = now;
    } else if (now - v.last_change > s_.agent_timeout) {
      v.lost = true;
      v.lost_why = fmt::format("its agent has not reported for {}",
                               base::FormatDuration(now - v.last_change));
      v.lost_at = v.last_change;
    }
  }
  for (const std::string& host : hosts_) {
    const AgentView& v = agents_[host];
    if (!v.status || v.status->attempt != attempt_) continue;
    for (const AgentRankStatus& r : v.status->ranks) {
      if (!r.error_line.empty()) error_lines_[r.rank] = r.error_line;
      last_step_ = std::max(last_step_, r.last_step);
    }
  }
  // A lost spare can no longer replace anyone (at the end, agents leave: that is no loss).
  for (auto it = spares_.begin(); !ending_ && it != spares_.end();) {
    const AgentView& v = agents_[*it];
    if (v.lost) {
      Emit({.kind = "spare_lost",
            .host = *it,
            .message = fmt::format("spare {} is gone: {}", *it, v.lost_why)});
      it = spares_.erase(it);
    } else {
      ++it;
    }
  }
}

Result<AttemptPlan> Launcher::MakePlan() {
  AttemptPlan p;
  p.attempt = attempt_;
  p.nproc_per_host = s_.nproc_per_host;
  p.hosts = hosts_;
  p.world_size = s_.nproc_per_host * static_cast<int>(hosts_.size());
  p.store_host = agents_[hosts_[0]].address;
  if (s_.rank_port == 0) {
    RY_ASSIGN_OR_RETURN(p.store_port, FreePort("127.0.0.1"));
    RY_ASSIGN_OR_RETURN(p.master_port, FreePort("127.0.0.1", p.store_port));
  } else {
    p.store_port = s_.rank_port + 2 * attempt_;
    p.master_port = p.store_port + 1;
  }
  p.argv = s_.argv;
  p.env = s_.env;
  p.job_id = s_.job_id;
  p.rank_secret = base::ToHex(base::RandomBytes(16));
  p.ckpt_dir = s_.ckpt_dir;
  p.log_dir = s_.log_dir;
  for (const std::string& h : hosts_) {
    auto it = s_.setup.find(h);
    p.setup.push_back(it == s_.setup.end() ? std::vector<LocalRankSetup>{} : it->second);
    auto model = s_.node_models.find(h);
    p.node_models.push_back(model == s_.node_models.end() ? "" : model->second);
  }
  return p;
}

Observations Launcher::Observe(std::set<int>* frozen) const {
  Observations obs{.now = Clock::now(), .started = attempt_started_};
  for (const std::string& host : hosts_) {
    const AgentView& v = agents_.at(host);
    obs.hosts.push_back({.host = host, .agent_alive = !v.lost, .lost_at = v.lost_at});
    if (!v.status || v.status->attempt != attempt_) continue;
    if (v.status->state == AgentStatus::State::kFailed) {
      // Its ranks could not start: each counts as having exited with 127, as a shell says.
      int first = static_cast<int>(std::find(hosts_.begin(), hosts_.end(), host) - hosts_.begin()) *
                  s_.nproc_per_host;
      obs.ranks.push_back(
          {.rank = first, .host = host, .exit = RankExit{.code = 127, .at = v.read_at}});
      continue;
    }
    for (const AgentRankStatus& r : v.status->ranks) {
      RankObservation o{.rank = r.rank, .host = host, .last_step = r.last_step};
      if (r.heard) o.last_heartbeat = v.read_at - milliseconds(r.silent_ms);
      for (int64_t us : r.step_us) o.step_times.push_back(std::chrono::microseconds(us));
      // Ranks the launcher stopped are not failures of their own.
      if (r.exited && r.stopped_why.empty()) {
        o.exit = RankExit{.code = r.exit_code,
                          .signal = r.signal,
                          .at = v.read_at - milliseconds(r.exited_ms_ago)};
      }
      if (r.exited && !r.stopped_why.empty()) continue;
      if (r.frozen && frozen != nullptr) frozen->insert(r.rank);
      obs.ranks.push_back(std::move(o));
    }
  }
  return obs;
}

// The rank a peer's error blames: comm's errors name the rank that failed as ": rank N (host
// pid P)" ("allreduce #27 ... on rank 0 failed: rank 1 (node1 pid 42): connection closed");
// when a line names several (a rank that aborted the job because another failed), the last
// is the root. -1 when the line names none.
int BlamedRank(const std::string& error_line) {
  constexpr std::string_view kMark = ": rank ";
  int blamed = -1;
  for (size_t at = error_line.find(kMark); at != std::string::npos;
       at = error_line.find(kMark, at + 1)) {
    const char* begin = error_line.data() + at + kMark.size();
    const char* end = error_line.data() + error_line.size();
    int rank = -1;
    auto [next, ec] = std::from_chars(begin, end, rank);
    if (ec == std::errc() && end - next >= 2 && next[0] == ' ' && next[1] == '(') blamed = rank;
  }
  return blamed;
}

const SupervisorEvent* Launcher::Cause(const std::vector<SupervisorEvent>& events,
                                       const std::set<int>& frozen) const {
  for (const SupervisorEvent& e : events) {
    if (const auto* hung = std::get_if<RankHung>(&e); hung && frozen.count(hung->rank)) return &e;
  }
  // A lost host explains the hangs and errors of the ranks that talk to it: its ranks' own
  // reports stopped with it, so they cannot show that they failed first.
  const SupervisorEvent* lost = nullptr;
  for (const SupervisorEvent& e : events) {
    const auto* l = std::get_if<HostLost>(&e);
    if (l != nullptr && (lost == nullptr || l->at < std::get<HostLost>(*lost).at)) lost = &e;
  }
  if (lost != nullptr) return lost;
  const SupervisorEvent* first = FirstFailure(events);
  // A rank that failed because a peer did names that peer; when the peer's own failure is
  // among the events, it is the cause, whichever host's clock stamped its end first.
  for (int hops = 0; first != nullptr && hops < 4; ++hops) {
    const auto* exited = std::get_if<RankExited>(first);
    if (exited == nullptr || exited->exit.signal != 0) break;
    auto line = error_lines_.find(exited->rank);
    int blamed = line == error_lines_.end() ? -1 : BlamedRank(line->second);
    if (blamed < 0 || blamed == exited->rank ||
        blamed >= s_.nproc_per_host * static_cast<int>(hosts_.size())) {
      break;
    }
    const SupervisorEvent* next = nullptr;
    for (const SupervisorEvent& e : events) {
      if (!IsFailure(e)) continue;
      if (const auto* x = std::get_if<RankExited>(&e); x && x->rank == blamed) next = &e;
      if (const auto* h = std::get_if<RankHung>(&e); h && h->rank == blamed) next = &e;
      if (const auto* l = std::get_if<HostLost>(&e);
          l && RankHosts(hosts_, s_.nproc_per_host)[blamed] == l->host) {
        next = &e;
      }
    }
    if (next == nullptr) break;
    first = next;
  }
  return first;
}

std::string Launcher::CauseText(const SupervisorEvent& cause) const {
  std::string text = DescribeEvent(cause);
  if (const auto* exited = std::get_if<RankExited>(&cause)) {
    auto it = error_lines_.find(exited->rank);
    if (it != error_lines_.end() && !it->second.empty()) text += ": " + it->second;
  } else if (const auto* lost = std::get_if<HostLost>(&cause)) {
    text += ": " + agents_.at(lost->host).lost_why;
  }
  return text;
}

bool Launcher::AllRanksEnded(bool* all_clean) const {
  *all_clean = true;
  for (const std::string& host : hosts_) {
    const AgentView& v = agents_.at(host);
    if (!v.status || v.status->attempt != attempt_) return false;
    if (v.status->state == AgentStatus::State::kFailed) {
      *all_clean = false;
      continue;
    }
    if (v.status->state != AgentStatus::State::kStopped) return false;
    for (const AgentRankStatus& r : v.status->ranks) {
      if (r.signal != 0 || r.exit_code != 0) *all_clean = false;
    }
  }
  return true;
}

AttemptEnd Launcher::Watch() {
  bool running_said = false;
  auto progress_said = Clock::now();
  for (;;) {
    ReadStatuses();
    std::set<int> frozen;
    Observations obs = Observe(&frozen);
    std::vector<SupervisorEvent> events = policy_.Evaluate(obs);
    for (const SupervisorEvent& e : events) {
      const auto* slow = std::get_if<Straggler>(&e);
      if (slow && stragglers_seen_.insert({slow->rank, slow->step}).second) {
        Emit({.kind = "straggler",
              .rank = slow->rank,
              .host = slow->host,
              .step = slow->step,
              .message = DescribeEvent(e)});
      }
    }
    const SupervisorEvent* cause = Cause(events, frozen);
    // Ranks hang when a host they wait on is cut off, and that host's agent falls silent at
    // the same moment: while some agent is silent, a hang waits for the agent timeout to say
    // whether its host is lost (then the loss is the cause) or only slow to report.
    if (cause != nullptr && std::holds_alternative<RankHung>(*cause)) {
      bool silent = false;
      for (const std::string& host : hosts_) {
        const AgentView& v = agents_[host];
        silent = silent || (!v.lost && Clock::now() - v.last_change > std::chrono::seconds(1));
      }
      if (silent) {
        Pause();
        continue;
      }
    }
    // A frozen rank explains its waiting peers' hangs, but their silence can pass the timeout
    // one status read before its own does: wait for its own, which comes within that spread.
    if (cause != nullptr && !frozen.empty()) {
      const auto* hung = std::get_if<RankHung>(cause);
      if (hung != nullptr && frozen.count(hung->rank) == 0) {
        Pause();
        continue;
      }
    }
    if (cause != nullptr) {
      AttemptEnd end{.kind = AttemptEnd::Kind::kFailed, .events = events, .detected = Clock::now()};
      frozen_ = frozen;
      return end;
    }
    // Said once every rank of the attempt runs, then the step every few seconds.
    int running = 0;
    int64_t min_step = -1;
    bool all_stepped = true;
    for (const RankObservation& r : obs.ranks) {
      if (!r.exit) ++running;
      if (r.last_step < 0) all_stepped = false;
      min_step = min_step < 0 ? r.last_step : std::min(min_step, r.last_step);
    }
    const int world = s_.nproc_per_host * static_cast<int>(hosts_.size());
    if (!running_said && running == world) {
      running_said = true;
      ranks_running_at_ = Clock::now();
      Emit({.kind = "ranks_running",
            .message = fmt::format("all {} ranks running on {} hosts", world, hosts_.size())});
    }
    if (all_stepped && static_cast<int>(obs.ranks.size()) == world) {
      if (!first_step_at_) {
        first_step_at_ = Clock::now();
        first_step_ = min_step;
        FinishRecovery();
      }
      if (Clock::now() - progress_said >= std::chrono::seconds(5)) {
        progress_said = Clock::now();
        Emit({.kind = "progress",
              .step = min_step,
              .message = fmt::format("every rank past step {}", min_step)});
      }
    }
    bool clean = false;
    if (AllRanksEnded(&clean) && clean) {
      return {.kind = AttemptEnd::Kind::kSucceeded, .detected = Clock::now()};
    }
    if (Interrupted()) return {.kind = AttemptEnd::Kind::kInterrupted, .detected = Clock::now()};
    if (s_.deadline.Expired()) {
      return {.kind = AttemptEnd::Kind::kDeadline, .detected = Clock::now()};
    }
    Pause();
  }
}

void Launcher::FinishRecovery() {
  if (!pending_recovery_) return;
  RecoveryTiming t = *pending_recovery_;
  pending_recovery_.reset();
  if (ranks_running_at_) t.restart_ms = MsBetween(stopped_at_, *ranks_running_at_);
  if (ranks_running_at_ && first_step_at_) {
    t.resume_ms = MsBetween(*ranks_running_at_, *first_step_at_);
    t.total_ms = MsBetween(failed_at_, *first_step_at_);
    t.resumed_step = first_step_;
  }
  // Steps finished before the failure that the next attempt runs again: from the step its
  // checkpoint resumes at, else from the first step it reported.
  int64_t from = resumed_from_ >= 0 ? resumed_from_ : first_step_;
  if (from >= 0) t.lost_steps = std::max<int64_t>(0, recovery_last_step_ + 1 - from);
  out_.recoveries.push_back(t);
  Emit({.kind = "recovered",
        .step = t.resumed_step,
        .message = fmt::format("recovered from attempt {}'s failure: detect {:.0f} ms, stop {:.0f} "
                               "ms, restart {:.0f} ms, resume {:.0f} ms, total {:.0f} ms, {} "
                               "steps done again",
                               t.attempt, t.detect_ms, t.stop_ms, t.restart_ms, t.resume_ms,
                               t.total_ms, t.lost_steps),
        .recovery = t});
}

void Launcher::StopAttempt(const std::string& why, AttemptEnd* end) {
  WriteControl({.action = Control::Action::kStop, .attempt = attempt_, .why = why}).IgnoreError();
  auto deadline = Deadline::After(s_.term_grace + s_.agent_timeout + std::chrono::seconds(2));
  for (;;) {
    ReadStatuses();
    bool all = true;
    for (const std::string& host : hosts_) {
      const AgentView& v = agents_[host];
      if (v.lost) continue;
      if (!v.status || v.status->attempt != attempt_ ||
          (v.status->state != AgentStatus::State::kStopped &&
           v.status->state != AgentStatus::State::kFailed)) {
        all = false;
      }
    }
    if (end != nullptr) {
      std::set<int> frozen;
      Observations obs = Observe(&frozen);
      // Only what happened by itself: ranks the agents stopped are left out by Observe.
      for (SupervisorEvent& e : policy_.Evaluate(obs)) {
        if (IsFailure(e) &&
            std::find(end->events.begin(), end->events.end(), e) == end->events.end()) {
          end->events.push_back(std::move(e));
        }
      }
    }
    if (all) return;
    if (deadline.Expired()) {
      for (const std::string& host : hosts_) {
        AgentView& v = agents_[host];
        if (!v.lost && (!v.status || v.status->state == AgentStatus::State::kRunning)) {
          v.lost = true;
          v.lost_why = "its agent did not stop its ranks in time";
          v.lost_at = Clock::now();
        }
      }
      return;
    }
    Pause();
  }
}

int64_t Launcher::VerifiedStep() {
  if (s_.ckpt_dir.empty()) return -1;
  storage::ReaderOptions o;
  o.verify_on_open = true;
  auto reader = storage::LoadLatest(s_.ckpt_dir, o);
  if (!reader.ok()) return -1;
  return (*reader)->step();
}

void Launcher::End(const std::string& why) {
  ending_ = true;
  WriteControl({.action = Control::Action::kEnd, .attempt = attempt_, .why = why}).IgnoreError();
  // Every agent still there stops what runs and says "ended" before the store goes away:
  // agents started elsewhere (Kubernetes pods) must see the end, not the store vanish.
  auto deadline = Deadline::After(s_.term_grace + std::chrono::seconds(3));
  for (;;) {
    ReadStatuses();
    bool all = true;
    for (const auto& [host, v] : agents_) {
      if (!v.lost && (!v.status || v.status->state != AgentStatus::State::kEnded)) all = false;
    }
    if (all || deadline.Expired()) break;
    Pause();
  }
  // Their carriers (vcluster exec, ssh) end with them.
  for (auto& [host, v] : agents_) {
    if (v.handle == nullptr) continue;
    auto* child = dynamic_cast<validate::ChildAgentHandle*>(v.handle.get());
    if (child != nullptr) child->WaitEnded(deadline);
    v.handle->Stop();
  }
}

Result<LaunchOutcome> Launcher::Run() {
  hosts_ = s_.hosts;
  spares_ = s_.spares;
  RY_RETURN_IF_ERROR(StartAgents());
  for (;;) {
    RY_ASSIGN_OR_RETURN(AttemptPlan plan, MakePlan());
    RY_RETURN_IF_ERROR(s_.store->Set(RunPlanKey(s_.job_id, attempt_), ToJson(plan),
                                     Deadline::After(std::chrono::seconds(5))));
    attempt_started_ = Clock::now();
    ranks_running_at_.reset();
    first_step_at_.reset();
    first_step_ = -1;
    error_lines_.clear();
    RY_RETURN_IF_ERROR(WriteControl({.action = Control::Action::kRun, .attempt = attempt_}));
    Emit({.kind = "attempt_start",
          .message = fmt::format("attempt {}: {} ranks on {}", attempt_, plan.world_size,
                                 fmt::join(hosts_, ","))});
    AttemptEnd end = Watch();
    // An attempt that ended before every rank stepped still closes its recovery.
    FinishRecovery();
    if (end.kind == AttemptEnd::Kind::kSucceeded) {
      out_.exit_code = kRunSucceeded;
      out_.summary =
          out_.restarts == 0
              ? "succeeded"
              : fmt::format("succeeded after {} restart{}{}", out_.restarts,
                            out_.restarts == 1 ? "" : "s",
                            out_.excluded.empty()
                                ? ""
                                : fmt::format(" ({} excluded)", fmt::join(out_.excluded, ", ")));
      Emit({.kind = "succeeded", .message = out_.summary});
      End("succeeded");
      out_.hosts = hosts_;
      return out_;
    }
    if (end.kind == AttemptEnd::Kind::kInterrupted || end.kind == AttemptEnd::Kind::kDeadline) {
      const bool interrupted = end.kind == AttemptEnd::Kind::kInterrupted;
      std::string why = interrupted
                            ? fmt::format("interrupted by signal {} ({})", s_.interrupted->load(),
                                          strsignal(s_.interrupted->load()))
                            : "the job's time limit passed";
      StopAttempt(why + ": stopped by the launcher", nullptr);
      out_.exit_code = interrupted ? 128 + s_.interrupted->load() : kRunDeadline;
      out_.summary = why + "; every rank stopped";
      Emit({.kind = interrupted ? "interrupted" : "deadline", .message = out_.summary});
      End(why);
      out_.hosts = hosts_;
      return out_;
    }
    // A failure: stop the gang, then name the cause. Other ranks' ends seen while stopping
    // (the killed rank's own, reported by a slower host agent; a host found lost) can show
    // that what was seen first only reacted to the real cause.
    std::string first_why = CauseText(*Cause(end.events, frozen_));
    StopAttempt(fmt::format("attempt {} failed ({}): stopped by the launcher", attempt_, first_why),
                &end);
    stopped_at_ = Clock::now();
    const SupervisorEvent* cause = Cause(end.events, frozen_);
    failed_at_ = [&] {
      if (const auto* e = std::get_if<RankExited>(cause)) return e->exit.at;
      // A hung rank failed when it fell silent: detection includes the heartbeat timeout.
      if (const auto* e = std::get_if<RankHung>(cause)) return e->since;
      if (const auto* e = std::get_if<HostLost>(cause)) return e->at;
      return end.detected;
    }();
    failed_at_ = std::min(failed_at_, end.detected);
    int cause_rank = -1;
    if (const auto* e = std::get_if<RankExited>(cause)) cause_rank = e->rank;
    if (const auto* e = std::get_if<RankHung>(cause)) cause_rank = e->rank;
    Emit({.kind = "failure",
          .rank = cause_rank,
          .host = EventHost(*cause),
          .step = last_step_,
          .message = CauseText(*cause)});
    Emit({.kind = "stopped",
          .message = fmt::format("every rank of attempt {} stopped in {:.0f} ms", attempt_,
                                 MsBetween(end.detected, stopped_at_))});
    std::vector<SupervisorEvent> decisive = {*cause};
    RecoveryDecision d = policy_.DecideRecovery(hosts_, spares_, out_.restarts, decisive);
    RecoveryTiming timing{.attempt = attempt_,
                          .detect_ms = MsBetween(failed_at_, end.detected),
                          .stop_ms = MsBetween(end.detected, stopped_at_)};
    if (!d.restart) {
      const bool no_host =
          std::holds_alternative<HostLost>(*cause) && out_.restarts < s_.supervisor.max_restarts;
      out_.exit_code = no_host ? kRunNoHostLeft : kRunFailed;
      out_.summary = fmt::format("failed: {}", d.reason);
      Emit({.kind = "give_up", .host = d.failed_host, .message = out_.summary});
      End(out_.summary);
      out_.hosts = hosts_;
      return out_;
    }
    if (!d.excluded_host.empty()) out_.excluded.push_back(d.excluded_host);
    hosts_ = d.hosts;
    spares_ = d.spares;
    ++out_.restarts;
    int64_t resume = VerifiedStep();
    resumed_from_ = resume;
    recovery_last_step_ = last_step_;
    pending_recovery_ = timing;
    Emit({.kind = "restart",
          .host = d.replacement,
          .step = resume,
          .message = fmt::format(
              "restart {} of {}: {}; {}", out_.restarts, s_.supervisor.max_restarts, d.reason,
              resume >= 0
                  ? fmt::format("the ranks resume from checkpoint step {} (verified)", resume)
                  : std::string("no checkpoint verifies: the ranks start over"))});
    ++attempt_;
    last_step_ = -1;
  }
}

}  // namespace

std::string EventJson(const LaunchEvent& e) {
  nlohmann::json j = {{"time_ms", e.unix_ms}, {"event", e.kind}, {"attempt", e.attempt}};
  if (e.rank >= 0) j["rank"] = e.rank;
  if (!e.host.empty()) j["host"] = e.host;
  if (e.step >= 0) j["step"] = e.step;
  if (!e.message.empty()) j["message"] = e.message;
  if (e.recovery) {
    const RecoveryTiming& t = *e.recovery;
    j["recovery"] = {{"attempt", t.attempt},       {"detect_ms", t.detect_ms},
                     {"stop_ms", t.stop_ms},       {"restart_ms", t.restart_ms},
                     {"resume_ms", t.resume_ms},   {"total_ms", t.total_ms},
                     {"lost_steps", t.lost_steps}, {"resumed_step", t.resumed_step}};
  }
  return j.dump();
}

Result<LaunchOutcome> RunLaunch(const LaunchSpec& spec) {
  if (spec.argv.empty()) return InvalidArgument("run: no command given (put it after --)");
  if (spec.hosts.empty()) return InvalidArgument("run: no hosts to run on");
  if (spec.nproc_per_host < 1) {
    return InvalidArgument("run: --nproc-per-host {}: expected 1 or more", spec.nproc_per_host);
  }
  if (spec.store == nullptr || spec.job_id.empty()) {
    return InvalidArgument("run: the launcher needs its store and a job id");
  }
  Launcher launcher(spec);
  return launcher.Run();
}

}  // namespace railyard::launch
