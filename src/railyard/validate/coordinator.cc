// RunValidation (coordinator.h): options, the hello, node and clock phases, exit and the
// roll-up. The fabric phase is in coordinator_fabric.cc, storage and collective in
// coordinator_storage.cc; the state they share in coordinator_internal.h.
#include "railyard/validate/coordinator.h"

#include <fmt/chrono.h>
#include <fmt/format.h>

#include <algorithm>
#include <atomic>
#include <set>
#include <thread>

#include "railyard/validate/coordinator_internal.h"

namespace railyard::validate {
namespace internal {
namespace {

using base::Clock;
using base::Deadline;
using std::chrono::milliseconds;

// How long the coordinator waits beyond a check's own timeout for its answer to come back
// through the store.
constexpr milliseconds kStoreMargin{3'000};
// Checks of category node that the coordinator measures itself rather than the agent.
const std::set<std::string, std::less<>> kCoordinatorNodeChecks = {"node.clock_offset"};

std::string Seconds(milliseconds ms) { return fmt::format("{:g}s", ms.count() / 1000.0); }

}  // namespace

Run::Run(const CoordinatorOptions& o) : options(o) {}

std::vector<int> Run::LiveHosts() const {
  std::vector<int> out;
  for (size_t i = 0; i < hosts.size(); ++i) {
    if (hosts[i].live) out.push_back(static_cast<int>(i));
  }
  return out;
}

Peer Run::PeerOf(int host) const {
  const HostState& h = hosts[host];
  return {.host = h.name, .address = h.hello.address, .port = h.hello.probe_port};
}

void Run::MarkDead(int host, std::string reason) {
  HostState& h = hosts[host];
  if (!h.live) return;
  h.live = false;
  h.dead_reason = std::move(reason);
  Progress("", h.name, "UNKNOWN: " + h.dead_reason);
}

Result<std::string> Run::Await(int host, const std::string& key, Deadline deadline) {
  AgentHandle* handle = hosts[host].handle.get();
  for (;;) {
    Deadline slice = Deadline::Earliest(deadline, Deadline::After(milliseconds(200)));
    Result<std::string> v = options.store->Get(key, slice);
    if (v.ok() || v.status().code() != StatusCode::kDeadlineExceeded || deadline.Expired()) {
      return v;
    }
    if (handle != nullptr && !handle->Running()) {
      return Unavailable("agent ended: {}", handle->ExitReason());
    }
  }
}

void Run::AddCheck(int host, std::string id, Outcome outcome, milliseconds elapsed) {
  report.hosts[host].checks.push_back({std::move(id), std::move(outcome), elapsed});
}

bool Run::HasCheck(int host, std::string_view id) const {
  for (const CheckResult& c : report.hosts[host].checks) {
    if (c.id == id) return true;
  }
  return false;
}

void Run::Progress(std::string_view phase, std::string_view host, std::string text, int done,
                   int total) {
  if (options.progress) {
    options.progress({.phase = std::string(phase),
                      .host = std::string(host),
                      .text = std::move(text),
                      .done = done,
                      .total = total});
  }
}

void Run::Collect(std::vector<Exchange>& exchanges, std::vector<size_t>& pending,
                  Deadline deadline) {
  net::Store& store = *options.store;
  // Waits in short slices so that an agent that ended is noticed before the deadline.
  while (!pending.empty()) {
    std::vector<std::string> keys, missing;
    for (size_t e : pending) {
      const Exchange& x = exchanges[e];
      keys.push_back(ResultKey(options.run_id, hosts[x.host].name, hosts[x.host].seq));
    }
    Deadline slice = Deadline::Earliest(deadline, Deadline::After(milliseconds(200)));
    Status waited = store.Wait(keys, slice, &missing);
    if (!waited.ok() && missing.empty()) missing = keys;  // the store did not say which
    if (waited.ok()) missing.clear();
    std::vector<size_t> still;
    for (size_t k = 0; k < pending.size(); ++k) {
      Exchange& x = exchanges[pending[k]];
      HostState& h = hosts[x.host];
      if (std::find(missing.begin(), missing.end(), keys[k]) == missing.end()) {
        Result<std::string> text = store.Get(keys[k], Deadline::After(milliseconds(2'000)));
        Result<TaskResult> r =
            text.ok() ? TaskResultFromJson(*text, keys[k]) : Result<TaskResult>(text.status());
        if (r.ok()) {
          x.result = std::move(*r);
        } else {
          MarkDead(x.host, fmt::format("its answer to the {} task could not be read: {}",
                                       TaskKindName(x.task.kind), r.status().message()));
        }
        continue;
      }
      if (h.handle && !h.handle->Running()) {
        MarkDead(x.host, fmt::format("agent ended during the {} task: {}",
                                     TaskKindName(x.task.kind), h.handle->ExitReason()));
        continue;
      }
      still.push_back(pending[k]);
    }
    pending = std::move(still);
    if (deadline.Expired()) return;
  }
}

void Run::Send(std::vector<Exchange>& exchanges, milliseconds timeout, std::string_view phase) {
  const Deadline deadline = Deadline::After(timeout);
  std::vector<size_t> pending;
  for (size_t e = 0; e < exchanges.size(); ++e) {
    Exchange& x = exchanges[e];
    HostState& h = hosts[x.host];
    if (!h.live) continue;
    // The agent gives up a little before the coordinator does, so that a probe stuck on its
    // peer comes back as the probe's error rather than as this agent's silence.
    if (x.task.timeout_ms == 0) {
      x.task.timeout_ms = (timeout - std::min(timeout / 4, milliseconds(2'000))).count();
    }
    const std::string key = TaskKey(options.run_id, h.name, ++h.seq);
    Status s = options.store->Set(key, ToJson(x.task),
                                  Deadline::Earliest(deadline, Deadline::After(kStoreMargin)));
    if (!s.ok()) {
      MarkDead(x.host, fmt::format("could not hand it the {} task: {}", phase, s.message()));
      continue;
    }
    pending.push_back(e);
  }
  Collect(exchanges, pending, deadline);
  for (size_t e : pending) {
    MarkDead(exchanges[e].host,
             fmt::format("agent did not answer the {} task within {}",
                         TaskKindName(exchanges[e].task.kind), Seconds(timeout)));
  }
}

namespace {

// ---- hello ----

void StartAgents(Run& run) {
  const CoordinatorOptions& o = run.options;
  for (HostState& h : run.hosts) h.dead_reason = "agent did not start";
  if (o.starter == nullptr) return;
  for (HostState& h : run.hosts) {
    Result<std::unique_ptr<AgentHandle>> handle = o.starter->Start(
        {.host = h.name, .store_address = o.store_address, .run_id = o.run_id, .secret = o.secret});
    if (!handle.ok()) {
      h.dead_reason = fmt::format("could not start its agent ({}): {}", o.starter->Describe(),
                                  handle.status().message());
      run.Progress("hello", h.name, "UNKNOWN: " + h.dead_reason);
      continue;
    }
    h.handle = std::move(*handle);
  }
}

void AwaitHellos(Run& run) {
  const CoordinatorOptions& o = run.options;
  const Deadline deadline = Deadline::After(o.agent_connect_timeout);
  std::vector<int> pending;
  for (size_t i = 0; i < run.hosts.size(); ++i) {
    if (o.starter == nullptr || run.hosts[i].handle) pending.push_back(static_cast<int>(i));
  }
  const int total = static_cast<int>(pending.size());
  int done = 0;
  while (!pending.empty()) {
    std::vector<std::string> keys, missing;
    for (int i : pending) keys.push_back(HelloKey(o.run_id, run.hosts[i].name));
    Status waited = o.store->Wait(
        keys, Deadline::Earliest(deadline, Deadline::After(milliseconds(200))), &missing);
    if (!waited.ok() && missing.empty()) missing = keys;
    if (waited.ok()) missing.clear();
    std::vector<int> still;
    for (size_t k = 0; k < pending.size(); ++k) {
      HostState& h = run.hosts[pending[k]];
      if (std::find(missing.begin(), missing.end(), keys[k]) != missing.end()) {
        if (h.handle && !h.handle->Running()) {
          h.dead_reason = "agent ended before it connected: " + h.handle->ExitReason();
          run.Progress("hello", h.name, "UNKNOWN: " + h.dead_reason, ++done, total);
        } else {
          still.push_back(pending[k]);
        }
        continue;
      }
      Result<std::string> text = o.store->Get(keys[k], Deadline::After(kStoreMargin));
      Result<Hello> hello =
          text.ok() ? HelloFromJson(*text, keys[k]) : Result<Hello>(text.status());
      if (!hello.ok()) {
        h.dead_reason = "its hello could not be read: " + hello.status().message();
      } else {
        h.hello = *hello;
        h.live = true;
        run.report.hosts[pending[k]].address = hello->address;
      }
      run.Progress("hello", h.name, h.live ? "connected" : "UNKNOWN: " + h.dead_reason, ++done,
                   total);
    }
    pending = std::move(still);
    if (deadline.Expired()) break;
  }
  for (int i : pending) {
    HostState& h = run.hosts[i];
    // An agent still running only says how long it was waited for; one that ended says how.
    std::string why = h.handle && !h.handle->Running() ? h.handle->ExitReason() : "";
    h.dead_reason = fmt::format("agent did not connect within {}{}{}",
                                Seconds(o.agent_connect_timeout), why.empty() ? "" : ": ", why);
    run.Progress("hello", h.name, "UNKNOWN: " + h.dead_reason, ++done, total);
  }
}

// ---- node ----

NodeCheckSpec SpecOf(const PlannedCheck& pc) {
  NodeCheckSpec s{.id = pc.check->info().id,
                  .warn = pc.settings.warn ? pc.settings.warn->text : "",
                  .fail = pc.settings.fail ? pc.settings.fail->text : "",
                  .timeout_ms = pc.timeout.count(),
                  .profiles = pc.profiles};
  for (const auto& [k, v] : pc.settings.params) s.params[k] = v;
  return s;
}

void RunNodePhase(Run& run) {
  std::vector<NodeCheckSpec> specs;
  milliseconds longest{0};
  for (const PlannedCheck& pc : run.options.plan->checks) {
    const CheckInfo& info = pc.check->info();
    if (info.category != Category::kNode && info.category != Category::kGpu) continue;
    if (kCoordinatorNodeChecks.contains(info.id)) continue;
    specs.push_back(SpecOf(pc));
    longest = std::max(longest, pc.timeout);
  }
  if (specs.empty()) return;
  std::vector<Exchange> xs;
  for (int i : run.LiveHosts()) {
    xs.push_back({.host = i,
                  .task = {.kind = TaskKind::kNode,
                           .plan = run.options.plan->name,
                           .checks = specs,
                           .profile = run.hosts[i].profile,
                           .shared_dir = !run.options.shared_dir.empty()}});
  }
  run.Progress("node", "", fmt::format("{} checks on {} hosts", specs.size(), xs.size()), 0,
               static_cast<int>(xs.size()));
  run.Send(xs, longest + kStoreMargin, "node");
  int done = 0;
  for (Exchange& x : xs) {
    if (!x.result) continue;
    if (!x.result->ok) {
      run.MarkDead(x.host, "node checks could not run: " + x.result->error);
      continue;
    }
    std::vector<Outcome> outcomes;
    for (CheckResult& c : x.result->checks) {
      outcomes.push_back(c.outcome);
      run.report.hosts[x.host].checks.push_back(std::move(c));
    }
    run.Progress("node", run.hosts[x.host].name, Worst(outcomes).ToString(), ++done,
                 static_cast<int>(xs.size()));
  }
}

// ---- clock ----

struct ClockSample {
  double offset_s = 0;       // agent - coordinator midpoint
  double uncertainty_s = 0;  // half the round trip
};

// Three exchanges; the one with the shortest round trip bounds the offset best (NTP's rule).
Result<ClockSample> MeasureClock(Run& run, int host, milliseconds timeout) {
  HostState& h = run.hosts[host];
  std::optional<ClockSample> best;
  for (int i = 0; i < 3; ++i) {
    const int seq = ++h.seq;
    const Deadline deadline = Deadline::After(timeout);
    Task task{.kind = TaskKind::kClock, .timeout_ms = timeout.count()};
    auto t0 = std::chrono::system_clock::now();
    RY_RETURN_IF_ERROR(
        run.options.store->Set(TaskKey(run.options.run_id, h.name, seq), ToJson(task), deadline));
    const std::string key = ResultKey(run.options.run_id, h.name, seq);
    RY_ASSIGN_OR_RETURN(std::string text, run.Await(host, key, deadline));
    auto t1 = std::chrono::system_clock::now();
    RY_ASSIGN_OR_RETURN(TaskResult r, TaskResultFromJson(text, key));
    RY_RETURN_IF_ERROR(r.AsStatus());
    auto ns = [](auto t) {
      return std::chrono::duration_cast<std::chrono::nanoseconds>(t.time_since_epoch()).count();
    };
    double mid = (static_cast<double>(ns(t0)) + static_cast<double>(ns(t1))) / 2;
    ClockSample s{.offset_s = (static_cast<double>(r.realtime_ns) - mid) / 1e9,
                  .uncertainty_s = static_cast<double>(ns(t1) - ns(t0)) / 2e9};
    if (!best || s.uncertainty_s < best->uncertainty_s) best = s;
  }
  return *best;
}

void RunClockPhase(Run& run) {
  const PlannedCheck* pc = run.Planned("node.clock_offset");
  if (pc == nullptr) return;
  std::vector<int> live = run.LiveHosts();
  std::vector<Result<ClockSample>> samples(live.size(), Internal("not measured"));
  run.Progress("clock", "", fmt::format("{} hosts", live.size()), 0, static_cast<int>(live.size()));
  // Hosts in parallel, each on one worker at a time: a slow host does not delay the others'
  // timestamps.
  std::atomic<size_t> next{0};
  std::vector<std::thread> workers;
  for (size_t w = 0; w < std::min<size_t>(live.size(), 16); ++w) {
    workers.emplace_back([&] {
      for (size_t k; (k = next.fetch_add(1)) < live.size();) {
        samples[k] = MeasureClock(run, live[k], pc->timeout + kStoreMargin);
      }
    });
  }
  for (std::thread& t : workers) t.join();
  const CheckInfo& info = pc->check->info();
  for (size_t k = 0; k < live.size(); ++k) {
    const int host = live[k];
    if (!samples[k].ok()) {
      run.MarkDead(host, "clock offset not measured: " + samples[k].status().message());
      continue;
    }
    const ClockSample& s = *samples[k];
    // Only what the round trip cannot explain counts against the host.
    double beyond = std::max(0.0, std::abs(s.offset_s) - s.uncertainty_s);
    std::string what = fmt::format("clock offset {:+.1f} ms (+-{:.1f} ms) against the coordinator",
                                   s.offset_s * 1e3, s.uncertainty_s * 1e3);
    Outcome o = Judge(info, pc->settings, beyond, what);
    run.AddCheck(host, info.id, std::move(o));
    run.Progress("clock", run.hosts[host].name,
                 run.report.hosts[host].checks.back().outcome.ToString(), static_cast<int>(k + 1),
                 static_cast<int>(live.size()));
  }
}

// ---- exit and roll-up ----

void StopAgents(Run& run) {
  std::vector<Exchange> xs;
  for (int i : run.LiveHosts()) xs.push_back({.host = i, .task = {.kind = TaskKind::kExit}});
  // Dead hosts that said hello may merely be slow: they get the exit task too, unawaited.
  for (size_t i = 0; i < run.hosts.size(); ++i) {
    HostState& h = run.hosts[i];
    if (h.live || h.hello.address.empty()) continue;
    Task exit{.kind = TaskKind::kExit};
    run.options.store
        ->Set(TaskKey(run.options.run_id, h.name, ++h.seq), ToJson(exit),
              Deadline::After(milliseconds(500)))
        .IgnoreError();
  }
  run.Send(xs, milliseconds(5'000), "exit");
  for (HostState& h : run.hosts) {
    if (h.handle) h.handle->Stop();
  }
}

// Every check the plan runs on a host has an entry: UNKNOWN with the reason where no phase
// gave it one. Collective checks are cluster-wide and have none.
void FillUnrun(Run& run) {
  for (size_t i = 0; i < run.hosts.size(); ++i) {
    const HostState& h = run.hosts[i];
    for (const PlannedCheck& pc : run.options.plan->checks) {
      const CheckInfo& info = pc.check->info();
      if (info.category == Category::kCollective || run.HasCheck(i, info.id)) continue;
      run.AddCheck(i, info.id,
                   Outcome::Unknown(h.live || h.dead_reason.empty()
                                        ? std::string("the coordinator did not run it")
                                        : h.dead_reason));
    }
    auto& checks = run.report.hosts[i].checks;
    std::sort(checks.begin(), checks.end(),
              [](const CheckResult& a, const CheckResult& b) { return a.id < b.id; });
  }
}

Status CheckOptions(const CoordinatorOptions& o) {
  if (o.plan == nullptr || o.plan->checks.empty()) {
    return InvalidArgument("validation needs a plan with at least one check");
  }
  if (o.hosts.empty()) return InvalidArgument("validation needs at least one host");
  if (o.store == nullptr) return InvalidArgument("validation needs the coordinator's store");
  if (o.run_id.empty()) return InvalidArgument("validation needs a run id");
  std::set<std::string, std::less<>> seen;
  for (const std::string& h : o.hosts) {
    if (h.empty()) return InvalidArgument("the host list holds an empty name");
    if (!seen.insert(h).second) return InvalidArgument("host '{}' is listed twice", h);
  }
  return Status::Ok();
}

std::string NowIso8601() {
  return fmt::format(
      "{:%Y-%m-%dT%H:%M:%SZ}",
      fmt::gmtime(std::chrono::system_clock::to_time_t(std::chrono::system_clock::now())));
}

}  // namespace
}  // namespace internal

Result<RunReport> RunValidation(const CoordinatorOptions& options) {
  using namespace internal;
  RY_RETURN_IF_ERROR(CheckOptions(options));
  const Clock::time_point start = Clock::now();
  Run run(options);
  run.report.plan = options.plan->name;
  run.report.started = NowIso8601();
  for (const std::string& name : options.hosts) {
    // Assigned rather than designated-initialised: GCC 12 then warns that the hello's
    // strings, left to their defaults, "may be used uninitialized".
    HostState h;
    h.name = name;
    h.profile = options.plan->ProfileFor(name);
    int node = options.cluster != nullptr ? options.cluster->FindNode(name) : -1;
    if (node >= 0) h.profile = ResolveProfile(h.profile, *options.cluster, node);
    run.report.hosts.push_back({.name = name, .profile = h.profile.name});
    run.hosts.push_back(std::move(h));
  }
  run.Progress("hello", "",
               options.starter != nullptr ? "starting agents with " + options.starter->Describe()
                                          : "waiting for agents to dial in",
               0, static_cast<int>(run.hosts.size()));
  StartAgents(run);
  AwaitHellos(run);
  RunNodePhase(run);
  RunClockPhase(run);
  RunFabricPhase(run);
  RunStoragePhase(run);
  RunCollectivePhase(run);
  StopAgents(run);
  FillUnrun(run);
  std::sort(run.report.cluster_checks.begin(), run.report.cluster_checks.end(),
            [](const CheckResult& a, const CheckResult& b) { return a.id < b.id; });
  run.report.total_s = base::SecondsSince(start);
  RollUp(run.report);
  return std::move(run.report);
}

}  // namespace railyard::validate
