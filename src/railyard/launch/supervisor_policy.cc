#include "railyard/launch/supervisor_policy.h"

#include <fmt/format.h>
#include <string.h>

#include <algorithm>
#include <set>

namespace railyard::launch {
namespace {

double Seconds(base::Duration d) { return std::chrono::duration<double>(d).count(); }

std::string DescribeDuration(base::Duration d) {
  double s = Seconds(d);
  if (s < 1.0) return fmt::format("{:.1f} ms", s * 1e3);
  return fmt::format("{:.1f} s", s);
}

std::string SignalName(int signal) {
  const char* name = sigabbrev_np(signal);
  return name ? fmt::format("SIG{}", name) : fmt::format("signal {}", signal);
}

// The lower median: with an even count the faster of the middle two, so a single slow rank
// among two is still measured against the other.
base::Duration LowerMedian(std::vector<base::Duration> v) {
  auto mid = v.begin() + (v.size() - 1) / 2;
  std::nth_element(v.begin(), mid, v.end());
  return *mid;
}

// When a failure happened, and its rank among failures at the same time (lower first).
struct FailureOrder {
  base::Clock::time_point at;
  int kind;
  int rank;
  bool operator<(const FailureOrder& o) const {
    if (at != o.at) return at < o.at;
    if (kind != o.kind) return kind < o.kind;
    return rank < o.rank;
  }
};

FailureOrder OrderOf(const SupervisorEvent& event) {
  if (const auto* lost = std::get_if<HostLost>(&event)) return {lost->at, 0, -1};
  if (const auto* exited = std::get_if<RankExited>(&event)) {
    return {exited->exit.at, exited->exit.signal != 0 ? 1 : 2, exited->rank};
  }
  const auto& hung = std::get<RankHung>(event);
  return {hung.since, 3, hung.rank};
}

}  // namespace

bool IsFailure(const SupervisorEvent& event) {
  if (const auto* exited = std::get_if<RankExited>(&event)) return exited->exit.failed();
  return !std::holds_alternative<Straggler>(event);
}

const std::string& EventHost(const SupervisorEvent& event) {
  return std::visit([](const auto& e) -> const std::string& { return e.host; }, event);
}

std::string DescribeEvent(const SupervisorEvent& event) {
  if (const auto* e = std::get_if<RankExited>(&event)) {
    if (e->exit.signal != 0) {
      return fmt::format("rank {} on {} was killed by {}", e->rank, e->host,
                         SignalName(e->exit.signal));
    }
    return fmt::format("rank {} on {} exited with {}", e->rank, e->host, e->exit.code);
  }
  if (const auto* e = std::get_if<RankHung>(&event)) {
    return fmt::format("rank {} on {} hung: no heartbeat for {}", e->rank, e->host,
                       DescribeDuration(e->silent_for));
  }
  if (const auto* e = std::get_if<Straggler>(&event)) {
    return fmt::format("rank {} on {} is a straggler: step {} took {}, the median rank {}", e->rank,
                       e->host, e->step, DescribeDuration(e->step_time),
                       DescribeDuration(e->median));
  }
  const auto& e = std::get<HostLost>(event);
  return fmt::format("host {} was lost: its agent is gone", e.host);
}

const SupervisorEvent* FirstFailure(const std::vector<SupervisorEvent>& events) {
  const SupervisorEvent* first = nullptr;
  for (const SupervisorEvent& e : events) {
    if (!IsFailure(e)) continue;
    if (first == nullptr || OrderOf(e) < OrderOf(*first)) first = &e;
  }
  return first;
}

void ObserveProgress(const std::vector<RankProgress>& progress,
                     std::vector<RankObservation>* ranks) {
  for (RankObservation& r : *ranks) {
    if (r.rank < 0 || r.rank >= static_cast<int>(progress.size())) continue;
    const RankProgress& p = progress[r.rank];
    if (!p.heard) continue;
    r.last_heartbeat = p.last_heard;
    r.last_step = p.last_step;
    r.step_times.assign(p.step_times.begin(), p.step_times.end());
  }
}

std::vector<std::string> RankHosts(const std::vector<std::string>& hosts, int nproc_per_host) {
  std::vector<std::string> out;
  for (const std::string& h : hosts) out.insert(out.end(), std::max(nproc_per_host, 0), h);
  return out;
}

std::vector<SupervisorEvent> SupervisorPolicy::Evaluate(const Observations& obs) const {
  std::vector<SupervisorEvent> events;
  std::set<std::string> lost;
  for (const HostObservation& h : obs.hosts) {
    if (h.agent_alive) continue;
    lost.insert(h.host);
    events.push_back(HostLost{.host = h.host, .at = h.lost_at});
  }

  base::Duration startup = options_.startup_timeout > base::Duration::zero()
                               ? options_.startup_timeout
                               : options_.heartbeat_timeout;
  // Each running rank's step time, for the median and the straggler test.
  std::vector<std::pair<const RankObservation*, base::Duration>> step_times;
  for (const RankObservation& r : obs.ranks) {
    if (lost.count(r.host) != 0) continue;
    if (r.exit) {
      events.push_back(RankExited{.rank = r.rank, .host = r.host, .exit = *r.exit});
      continue;
    }
    if (options_.heartbeat_timeout > base::Duration::zero()) {
      base::Clock::time_point since = r.last_heartbeat.value_or(obs.started);
      base::Duration limit = r.last_heartbeat ? options_.heartbeat_timeout : startup;
      base::Duration silent = obs.now - since;
      if (silent >= limit) {
        events.push_back(
            RankHung{.rank = r.rank, .host = r.host, .since = since, .silent_for = silent});
        continue;
      }
    }
    if (!r.step_times.empty()) {
      size_t window = std::clamp<size_t>(options_.straggler_window, 1, r.step_times.size());
      step_times.emplace_back(&r, LowerMedian({r.step_times.end() - window, r.step_times.end()}));
    }
  }

  if (step_times.size() >= 2) {
    std::vector<base::Duration> all;
    for (const auto& [r, t] : step_times) all.push_back(t);
    base::Duration median = LowerMedian(all);
    for (const auto& [r, t] : step_times) {
      if (static_cast<double>(t.count()) >
          options_.straggler_factor * static_cast<double>(median.count())) {
        events.push_back(Straggler{.rank = r->rank,
                                   .host = r->host,
                                   .step = r->last_step,
                                   .step_time = t,
                                   .median = median});
      }
    }
  }
  return events;
}

RecoveryDecision SupervisorPolicy::DecideRecovery(
    const std::vector<std::string>& hosts, const std::vector<std::string>& spares,
    int restarts_done, const std::vector<SupervisorEvent>& events) const {
  RecoveryDecision d;
  d.hosts = hosts;
  d.spares = spares;
  d.restart_count = restarts_done;
  const SupervisorEvent* cause = FirstFailure(events);
  if (cause == nullptr) {
    d.reason = "no rank or host failed";
    return d;
  }
  d.failed_host = EventHost(*cause);
  std::string what = DescribeEvent(*cause);
  if (restarts_done >= options_.max_restarts) {
    d.reason = fmt::format("{}; the restart budget of {} is spent", what, options_.max_restarts);
    return d;
  }
  auto slot = std::find(d.hosts.begin(), d.hosts.end(), d.failed_host);
  bool lost = std::holds_alternative<HostLost>(*cause);
  if (slot != d.hosts.end() && !d.spares.empty()) {
    d.excluded_host = d.failed_host;
    d.replacement = d.spares.front();
    d.spares.erase(d.spares.begin());
    *slot = d.replacement;  // the spare takes exactly the failed host's ranks
    d.reason =
        fmt::format("{}; restarting with {} in place of {}", what, d.replacement, d.excluded_host);
  } else if (lost) {
    d.reason = fmt::format("{}; no spare host is left to take its ranks", what);
    return d;
  } else {
    d.reason = fmt::format("{}; no spare host, restarting on the same hosts", what);
  }
  d.restart = true;
  d.restart_count = restarts_done + 1;
  return d;
}

}  // namespace railyard::launch
