#include "railyard/validate/node_run.h"

#include <fmt/format.h>

#include <condition_variable>
#include <mutex>
#include <thread>

namespace railyard::validate {
namespace {

using Clock = std::chrono::steady_clock;

// What a check's thread hands back; shared so an abandoned thread can still write to it.
struct Slot {
  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  Outcome outcome;
  Clock::time_point finished;
  // The check's inputs, owned here so an abandoned thread never reads freed memory.
  Profile profile;
  CheckSettings settings;
  std::shared_ptr<NodeEnv> env;
};

std::chrono::milliseconds Since(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(end - start);
}

}  // namespace

NodeReport RunNodeChecks(const Plan& plan, const std::string& host, const Profile& profile,
                         std::shared_ptr<NodeEnv> env, const NodeRunOptions& options) {
  NodeReport report{.host = host, .profile = profile.name};
  Clock::time_point start = Clock::now();
  struct Running {
    const PlannedCheck* planned;
    std::shared_ptr<Slot> slot;
    std::thread thread;
  };
  std::vector<Running> running;
  for (const PlannedCheck& pc : plan.checks) {
    const CheckInfo& info = pc.check->info();
    if (!options.categories.contains(info.category)) continue;
    report.checks.push_back({.id = info.id});
    if (!pc.AppliesTo(profile.name)) {
      report.checks.back().outcome = Outcome::Skipped(fmt::format(
          "plan {} runs it on profiles {} only", plan.name, fmt::join(pc.profiles, ", ")));
      continue;
    }
    if (std::optional<Outcome> gated = Gate(info, profile, options.site)) {
      report.checks.back().outcome = *gated;
      continue;
    }
    auto slot = std::make_shared<Slot>();
    slot->profile = profile;
    slot->settings = pc.settings;
    slot->env = env;
    std::thread t([check = pc.check, slot, host] {
      CheckContext ctx{.host = host,
                       .profile = &slot->profile,
                       .settings = &slot->settings,
                       .env = slot->env.get()};
      Outcome o = check->Run(ctx);
      std::lock_guard<std::mutex> lock(slot->mu);
      slot->outcome = std::move(o);
      slot->finished = Clock::now();
      slot->done = true;
      slot->cv.notify_all();
    });
    running.push_back({&pc, slot, std::move(t)});
  }
  // Each check has its own deadline from the common start; all run at once.
  for (Running& r : running) {
    CheckResult* result = nullptr;
    for (CheckResult& c : report.checks) {
      if (c.id == r.planned->check->info().id) result = &c;
    }
    std::unique_lock<std::mutex> lock(r.slot->mu);
    if (r.slot->cv.wait_until(lock, start + r.planned->timeout, [&] { return r.slot->done; })) {
      result->outcome = r.slot->outcome;
      result->elapsed = Since(start, r.slot->finished);
      lock.unlock();
      r.thread.join();
    } else {
      lock.unlock();
      r.thread.detach();
      ++report.abandoned;
      result->outcome = Outcome::Unknown(
          fmt::format("did not finish within {} ms (its timeout)", r.planned->timeout.count()));
      result->elapsed = r.planned->timeout;
    }
  }
  std::vector<Outcome> outcomes;
  for (const CheckResult& c : report.checks) outcomes.push_back(c.outcome);
  report.overall = Worst(outcomes);
  report.elapsed = Since(start, Clock::now());
  return report;
}

std::string OneLineSummary(const NodeReport& report) {
  const Verdict worst = report.overall.verdict;
  if (worst == Verdict::kPass || worst == Verdict::kSkipped) {
    int passed = 0, skipped = 0;
    for (const CheckResult& c : report.checks) {
      passed += c.outcome.verdict == Verdict::kPass;
      skipped += c.outcome.verdict == Verdict::kSkipped;
    }
    return fmt::format("railyard: {} OK: {} passed, {} skipped", report.host, passed, skipped);
  }
  int more = -1;
  const CheckResult* first = nullptr;
  for (const CheckResult& c : report.checks) {
    if (c.outcome.verdict != worst) continue;
    if (first == nullptr) first = &c;
    ++more;
  }
  std::string line = fmt::format("railyard: {} {}", first->id, first->outcome.ToString());
  if (more > 0) line += fmt::format(" (+{} more)", more);
  return line;
}

}  // namespace railyard::validate
