#include "railyard/launch/supervisor_policy.h"

#include <gtest/gtest.h>
#include <signal.h>

namespace railyard::launch {
namespace {

using namespace std::chrono_literals;
using base::Clock;

// A simulated clock: time points are offsets from an arbitrary zero.
Clock::time_point At(base::Duration d) { return Clock::time_point() + d; }

const std::vector<std::string> kHosts = {"node0", "node1", "node2", "node3"};
constexpr int kProcPerHost = 2;

// Eight healthy ranks on kHosts, all heard from at `heard`, each with the given step times.
Observations Healthy(Clock::time_point now, Clock::time_point heard,
                     std::vector<base::Duration> steps = {}) {
  Observations obs{.now = now, .started = At(0s)};
  std::vector<std::string> rank_hosts = RankHosts(kHosts, kProcPerHost);
  for (int r = 0; r < static_cast<int>(rank_hosts.size()); ++r) {
    obs.ranks.push_back(RankObservation{.rank = r,
                                        .host = rank_hosts[r],
                                        .last_heartbeat = heard,
                                        .last_step = static_cast<int64_t>(steps.size()),
                                        .step_times = steps});
  }
  for (const std::string& h : kHosts) obs.hosts.push_back({.host = h});
  return obs;
}

SupervisorOptions Options() {
  return {
      .heartbeat_timeout = 10s, .straggler_factor = 2.0, .straggler_window = 3, .max_restarts = 2};
}

TEST(SupervisorPolicyTest, HealthyGangHasNoEvents) {
  SupervisorPolicy policy(Options());
  EXPECT_TRUE(policy.Evaluate(Healthy(At(20s), At(19s), {1s, 1s, 1s})).empty());
}

TEST(SupervisorPolicyTest, CrashIsNamedWithRankHostAndSignal) {
  SupervisorPolicy policy(Options());
  Observations obs = Healthy(At(20s), At(19s));
  obs.ranks[5].exit = RankExit{.signal = SIGKILL, .at = At(19500ms)};
  auto events = policy.Evaluate(obs);
  ASSERT_EQ(events.size(), 1u);
  ASSERT_TRUE(std::holds_alternative<RankExited>(events[0]));
  const auto& e = std::get<RankExited>(events[0]);
  EXPECT_EQ(e.rank, 5);
  EXPECT_EQ(e.host, "node2");
  EXPECT_EQ(e.exit.signal, SIGKILL);
  EXPECT_TRUE(IsFailure(events[0]));
  EXPECT_EQ(DescribeEvent(events[0]), "rank 5 on node2 was killed by SIGKILL");
}

TEST(SupervisorPolicyTest, CleanExitIsAnEventButNotAFailure) {
  SupervisorPolicy policy(Options());
  Observations obs = Healthy(At(20s), At(19s));
  obs.ranks[0].exit = RankExit{.code = 0, .at = At(19s)};
  obs.ranks[1].exit = RankExit{.code = 3, .at = At(19s)};
  auto events = policy.Evaluate(obs);
  ASSERT_EQ(events.size(), 2u);
  EXPECT_FALSE(IsFailure(events[0]));
  EXPECT_TRUE(IsFailure(events[1]));
  EXPECT_EQ(DescribeEvent(events[1]), "rank 1 on node0 exited with 3");
  EXPECT_EQ(FirstFailure(events), &events[1]);
}

// A SIGSTOPped rank keeps its process but stops beating: silent for T is a hang, not before.
TEST(SupervisorPolicyTest, StoppedRankIsHungAfterTheTimeout) {
  SupervisorPolicy policy(Options());
  Observations obs = Healthy(At(0s), At(0s));
  obs.ranks[3].last_heartbeat = At(5s);  // stopped right after this beat
  for (auto t = 5s; t <= 25s; t += 1s) {
    obs.now = At(t);
    for (auto& r : obs.ranks) {
      if (r.rank != 3) r.last_heartbeat = At(t);
    }
    auto events = policy.Evaluate(obs);
    if (t < 15s) {
      EXPECT_TRUE(events.empty()) << "at " << t.count() << " s";
      continue;
    }
    ASSERT_EQ(events.size(), 1u) << "at " << t.count() << " s";
    const auto& hung = std::get<RankHung>(events[0]);
    EXPECT_EQ(hung.rank, 3);
    EXPECT_EQ(hung.host, "node1");
    EXPECT_EQ(hung.since, At(5s));
    EXPECT_EQ(hung.silent_for, t - 5s);
  }
  obs.now = At(15s);
  EXPECT_EQ(DescribeEvent(policy.Evaluate(obs)[0]),
            "rank 3 on node1 hung: no heartbeat for 10.0 s");
}

TEST(SupervisorPolicyTest, SilentFromTheStartUsesTheStartupTimeout) {
  SupervisorOptions options = Options();
  options.startup_timeout = 30s;
  SupervisorPolicy policy(options);
  Observations obs = Healthy(At(29s), At(28s));
  obs.ranks[7].last_heartbeat.reset();
  EXPECT_TRUE(policy.Evaluate(obs).empty());
  obs.now = At(30s);
  auto events = policy.Evaluate(obs);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(std::get<RankHung>(events[0]).since, At(0s));
}

TEST(SupervisorPolicyTest, ZeroTimeoutTurnsHangDetectionOff) {
  SupervisorOptions options = Options();
  options.heartbeat_timeout = base::Duration::zero();
  SupervisorPolicy policy(options);
  Observations obs = Healthy(At(1000s), At(0s));
  for (auto& r : obs.ranks) r.last_heartbeat.reset();
  EXPECT_TRUE(policy.Evaluate(obs).empty());
}

TEST(SupervisorPolicyTest, StragglerIsReportedNotAFailure) {
  SupervisorPolicy policy(Options());
  Observations obs = Healthy(At(20s), At(19s), {100ms, 100ms, 100ms});
  // Rank 6's recent steps: one fast, two slow; its median (300 ms) is 3x the others'.
  obs.ranks[6].step_times = {100ms, 100ms, 300ms, 300ms};
  // Rank 2 had one slow step only: its median stays fast.
  obs.ranks[2].step_times = {100ms, 900ms, 100ms};
  auto events = policy.Evaluate(obs);
  ASSERT_EQ(events.size(), 1u);
  const auto& s = std::get<Straggler>(events[0]);
  EXPECT_EQ(s.rank, 6);
  EXPECT_EQ(s.host, "node3");
  EXPECT_EQ(s.step_time, 300ms);
  EXPECT_EQ(s.median, 100ms);
  EXPECT_FALSE(IsFailure(events[0]));
  EXPECT_EQ(FirstFailure(events), nullptr);
  RecoveryDecision d = policy.DecideRecovery(kHosts, {"spare0"}, 0, events);
  EXPECT_FALSE(d.restart);
  EXPECT_EQ(d.hosts, kHosts);
  EXPECT_EQ(d.reason, "no rank or host failed");
}

TEST(SupervisorPolicyTest, TwiceTheMedianIsNotYetAStraggler) {
  SupervisorPolicy policy(Options());
  Observations obs = Healthy(At(20s), At(19s), {100ms});
  obs.ranks[1].step_times = {200ms};
  EXPECT_TRUE(policy.Evaluate(obs).empty());
  obs.ranks[1].step_times = {201ms};
  EXPECT_EQ(policy.Evaluate(obs).size(), 1u);
}

TEST(SupervisorPolicyTest, LostHostHidesItsRanks) {
  SupervisorPolicy policy(Options());
  Observations obs = Healthy(At(100s), At(50s));  // node2's ranks are silent too, but stale
  for (auto& r : obs.ranks) {
    if (r.host != "node2") r.last_heartbeat = At(99s);
  }
  obs.hosts[2].agent_alive = false;
  obs.hosts[2].lost_at = At(51s);
  auto events = policy.Evaluate(obs);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(std::get<HostLost>(events[0]).host, "node2");
  EXPECT_EQ(DescribeEvent(events[0]), "host node2 was lost: its agent is gone");
}

TEST(SupervisorPolicyTest, FirstFailureIsTheEarliest) {
  // Rank 4 was killed; its peers then failed in the collective and exited with 1, later.
  std::vector<SupervisorEvent> events = {
      RankExited{.rank = 1, .host = "node0", .exit = {.code = 1, .at = At(12s)}},
      RankExited{.rank = 4, .host = "node2", .exit = {.signal = SIGKILL, .at = At(10s)}},
      RankHung{.rank = 6, .host = "node3", .since = At(11s), .silent_for = 10s}};
  ASSERT_NE(FirstFailure(events), nullptr);
  EXPECT_EQ(FirstFailure(events), &events[1]);
  // At the same instant a signal is taken before an exit code.
  events[0] = RankExited{.rank = 0, .host = "node0", .exit = {.code = 1, .at = At(10s)}};
  EXPECT_EQ(FirstFailure(events), &events[1]);
}

TEST(SupervisorPolicyTest, SpareTakesExactlyTheFailedHostsRanksInOrder) {
  SupervisorPolicy policy(Options());
  Observations obs = Healthy(At(20s), At(19s));
  obs.ranks[3].exit = RankExit{.signal = SIGKILL, .at = At(19s)};
  RecoveryDecision d = policy.DecideRecovery(kHosts, {"spare0", "spare1"}, 0, policy.Evaluate(obs));
  ASSERT_TRUE(d.restart) << d.reason;
  EXPECT_EQ(d.failed_host, "node1");
  EXPECT_EQ(d.excluded_host, "node1");
  EXPECT_EQ(d.replacement, "spare0");
  EXPECT_EQ(d.hosts, (std::vector<std::string>{"node0", "spare0", "node2", "node3"}));
  EXPECT_EQ(d.spares, (std::vector<std::string>{"spare1"}));
  EXPECT_EQ(d.restart_count, 1);
  EXPECT_EQ(d.reason,
            "rank 3 on node1 was killed by SIGKILL; restarting with spare0 in place of node1");

  std::vector<std::string> before = RankHosts(kHosts, kProcPerHost);
  std::vector<std::string> after = RankHosts(d.hosts, kProcPerHost);
  ASSERT_EQ(after.size(), before.size());
  for (size_t r = 0; r < before.size(); ++r) {
    // Ranks 2 and 3 (node1's, local ranks 0 and 1) move to spare0; every other rank stays.
    EXPECT_EQ(after[r], before[r] == "node1" ? "spare0" : before[r]) << "rank " << r;
  }
}

TEST(SupervisorPolicyTest, NoSpareRestartsOnTheSameHosts) {
  SupervisorPolicy policy(Options());
  Observations obs = Healthy(At(20s), At(5s));  // everyone silent since 5 s: all hung
  obs.ranks[2].last_heartbeat = At(4s);         // rank 2 went silent first
  RecoveryDecision d = policy.DecideRecovery(kHosts, {}, 1, policy.Evaluate(obs));
  ASSERT_TRUE(d.restart) << d.reason;
  EXPECT_EQ(d.failed_host, "node1");
  EXPECT_EQ(d.excluded_host, "");
  EXPECT_EQ(d.hosts, kHosts);
  EXPECT_EQ(d.restart_count, 2);
  EXPECT_NE(d.reason.find("no spare host, restarting on the same hosts"), std::string::npos);
}

TEST(SupervisorPolicyTest, LostHostWithoutSpareGivesUp) {
  SupervisorPolicy policy(Options());
  Observations obs = Healthy(At(20s), At(19s));
  obs.hosts[3].agent_alive = false;
  obs.hosts[3].lost_at = At(18s);
  RecoveryDecision d = policy.DecideRecovery(kHosts, {}, 0, policy.Evaluate(obs));
  EXPECT_FALSE(d.restart);
  EXPECT_EQ(d.failed_host, "node3");
  EXPECT_EQ(d.reason,
            "host node3 was lost: its agent is gone; no spare host is left to take its ranks");
}

TEST(SupervisorPolicyTest, ExhaustedBudgetEndsNamingTheCause) {
  SupervisorPolicy policy(Options());  // max_restarts = 2
  std::vector<std::string> hosts = kHosts;
  std::vector<std::string> spares = {"spare0", "spare1", "spare2"};
  int restarts = 0;
  RecoveryDecision d;
  // Rank 0 is killed on every attempt: two restarts, then the end.
  for (int attempt = 0; attempt < 5; ++attempt) {
    Observations obs = Healthy(At(20s), At(19s));
    std::vector<std::string> rank_hosts = RankHosts(hosts, kProcPerHost);
    for (auto& r : obs.ranks) r.host = rank_hosts[r.rank];
    obs.ranks[0].exit = RankExit{.signal = SIGSEGV, .at = At(19s)};
    d = policy.DecideRecovery(hosts, spares, restarts, policy.Evaluate(obs));
    if (!d.restart) break;
    hosts = d.hosts;
    spares = d.spares;
    restarts = d.restart_count;
  }
  EXPECT_FALSE(d.restart);
  EXPECT_EQ(restarts, 2);
  EXPECT_EQ(hosts, (std::vector<std::string>{"spare1", "node1", "node2", "node3"}));
  EXPECT_EQ(d.failed_host, "spare1");
  EXPECT_EQ(d.reason, "rank 0 on spare1 was killed by SIGSEGV; the restart budget of 2 is spent");
}

TEST(SupervisorPolicyTest, ObservesWhatTheListenerHeard) {
  std::vector<RankProgress> progress(2);
  progress[1].heard = true;
  progress[1].last_heard = At(7s);
  progress[1].last_step = 4;
  progress[1].step_times = {1s, 2s};
  std::vector<RankObservation> ranks = {{.rank = 0, .host = "a"}, {.rank = 1, .host = "a"}};
  ObserveProgress(progress, &ranks);
  EXPECT_FALSE(ranks[0].last_heartbeat.has_value());
  EXPECT_EQ(ranks[1].last_heartbeat, At(7s));
  EXPECT_EQ(ranks[1].last_step, 4);
  EXPECT_EQ(ranks[1].step_times, (std::vector<base::Duration>{1s, 2s}));
}

}  // namespace
}  // namespace railyard::launch
