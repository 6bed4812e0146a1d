#include "railyard/launch/progress.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <functional>
#include <map>
#include <thread>

#include "railyard/base/temp_dir_testing.h"
#include "railyard/launch/supervisor_policy.h"

namespace railyard::launch {
namespace {

using namespace std::chrono_literals;

// Polls until `listener` has applied `want` events in all, or 30 s pass (a generous guard,
// not a timing assertion).
void PollUntil(ProgressListener& listener, uint64_t want_received, uint64_t want_malformed = 0) {
  base::Deadline deadline = base::Deadline::After(30s);
  while ((listener.received() < want_received || listener.malformed() < want_malformed) &&
         !deadline.Expired()) {
    ASSERT_TRUE(listener.Poll(base::Deadline::Earliest(deadline, base::Deadline::After(1s))).ok());
  }
  ASSERT_GE(listener.received(), want_received);
  ASSERT_GE(listener.malformed(), want_malformed);
}

// A raw datagram, as a script in another language would send it.
void SendRaw(const std::string& path, std::string_view text) {
  int fd = ::socket(AF_UNIX, SOCK_DGRAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ssize_t n =
      ::sendto(fd, text.data(), text.size(), 0, reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  ::close(fd);
  ASSERT_EQ(n, static_cast<ssize_t>(text.size())) << std::strerror(errno);
}

TEST(ProgressWireTest, FormatsAndParsesBothKinds) {
  ProgressEvent beat{.kind = ProgressEvent::Kind::kBeat, .rank = 3, .unix_ns = 17};
  ProgressEvent step{.kind = ProgressEvent::Kind::kStep, .rank = 0, .step = 42, .unix_ns = 99};
  EXPECT_EQ(FormatProgressEvent(beat), "beat 3 17");
  EXPECT_EQ(FormatProgressEvent(step), "step 0 42 99");
  EXPECT_EQ(*ParseProgressEvent("beat 3 17"), beat);
  EXPECT_EQ(*ParseProgressEvent("step 0 42 99\n"), step);
}

TEST(ProgressWireTest, RejectsMalformedWithReason) {
  for (std::string_view bad :
       {"", "beat", "beat 1", "beat 1 2 3", "step 1 2", "hello 1 2", "beat -1 5", "beat 1  5",
        "step 1 x 5", "beat 1 5x", "beat +1 5", "BEAT 1 5", "beat 99999999999 5"}) {
    Result<ProgressEvent> r = ParseProgressEvent(bad);
    ASSERT_FALSE(r.ok()) << "'" << bad << "'";
    EXPECT_NE(r.status().message().find("progress datagram"), std::string::npos);
  }
}

TEST(ProgressReporterTest, DisabledWithoutTheVariable) {
  auto getenv = [](const char*) -> const char* { return nullptr; };
  Result<ProgressReporter> r = ProgressReporter::FromEnvironment(getenv);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_FALSE(r->enabled());
  EXPECT_TRUE(r->Heartbeat().ok());
  EXPECT_TRUE(r->Step(5).ok());
}

TEST(ProgressReporterTest, NeedsARankWhenEnabled) {
  std::map<std::string, std::string> env = {{"RAILYARD_PROGRESS", "/tmp/x.sock"}};
  auto getenv = [&](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  };
  Result<ProgressReporter> r = ProgressReporter::FromEnvironment(getenv);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("RANK"), std::string::npos) << r.status().ToString();
  env["RANK"] = "7";  // torchrun's name is enough
  r = ProgressReporter::FromEnvironment(getenv);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_EQ(r->rank(), 7);
  env["RAILYARD_RANK"] = "2";  // Railyard's own wins
  r = ProgressReporter::FromEnvironment(getenv);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->rank(), 2);
}

TEST(ProgressReporterTest, NoSupervisorIsUnavailableNotFatal) {
  base::ScopedTempDir dir("progress");
  auto r = ProgressReporter::Connect(dir.Sub("absent.sock"), 0);
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  Status st = r->Heartbeat();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << st.ToString();
  EXPECT_NE(st.message().find("absent.sock"), std::string::npos);
}

TEST(ProgressListenerTest, ReportersInThreadsReachTheListener) {
  base::ScopedTempDir dir("progress");
  ASSERT_FALSE(dir.path().empty());
  constexpr int kRanks = 4;
  constexpr int kSteps = 20;
  auto listener = ProgressListener::Bind(dir.Sub("p.sock"), {.world_size = kRanks});
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();

  // Linux queues at most net.unix.max_dgram_qlen (10 by default) datagrams on a socket, so
  // 84 events from 4 senders overflow it unless the listener drains while they send. A rank
  // drops an event it cannot queue; these test ranks send it again (bounded) so that every
  // event is counted.
  std::vector<std::thread> ranks;
  std::vector<Status> errors(kRanks);
  std::string path = (*listener)->path();
  for (int rank = 0; rank < kRanks; ++rank) {
    ranks.emplace_back([&, rank] {
      std::string rank_text = std::to_string(rank);
      auto getenv = [&](const char* name) -> const char* {
        if (std::string_view(name) == kProgressEnvVar) return path.c_str();
        if (std::string_view(name) == "RAILYARD_RANK") return rank_text.c_str();
        return nullptr;
      };
      auto reporter = ProgressReporter::FromEnvironment(getenv);
      if (!reporter.ok()) {
        errors[rank] = reporter.status();
        return;
      }
      base::Deadline deadline = base::Deadline::After(30s);
      auto send = [&](const std::function<Status()>& event) {
        Status st = event();
        while (st.code() == StatusCode::kUnavailable && !deadline.Expired()) {
          std::this_thread::yield();
          st = event();
        }
        return st;
      };
      Status st = send([&] { return reporter->Heartbeat(); });
      for (int step = 0; st.ok() && step < kSteps; ++step) {
        st = send([&] { return reporter->Step(step); });
      }
      errors[rank] = st;
    });
  }
  PollUntil(**listener, kRanks * (1 + kSteps));
  for (auto& t : ranks) t.join();
  for (int rank = 0; rank < kRanks; ++rank) {
    EXPECT_TRUE(errors[rank].ok()) << errors[rank].ToString();
  }
  EXPECT_EQ((*listener)->received(), static_cast<uint64_t>(kRanks * (1 + kSteps)));
  EXPECT_EQ((*listener)->malformed(), 0u);
  for (int rank = 0; rank < kRanks; ++rank) {
    const RankProgress& p = (*listener)->ranks()[rank];
    EXPECT_TRUE(p.heard);
    EXPECT_EQ(p.last_step, kSteps - 1);
    EXPECT_EQ(p.step_times.size(), static_cast<size_t>(kSteps - 1));
    for (base::Duration d : p.step_times) EXPECT_GE(d.count(), 0);
  }
}

TEST(ProgressListenerTest, AFullQueueDropsTheEventWithoutBlocking) {
  base::ScopedTempDir dir("progress");
  auto listener = ProgressListener::Bind(dir.Sub("p.sock"), {.world_size = 1});
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  auto reporter = ProgressReporter::Connect((*listener)->path(), 0);
  ASSERT_TRUE(reporter.ok());
  // Nobody drains: the queue fills (its length is a sysctl, so bounded by a generous cap)
  // and the next event comes back UNAVAILABLE instead of blocking the training loop.
  Status st;
  int sent = 0;
  for (; sent < 100000 && st.ok(); ++sent) st = reporter->Heartbeat();
  EXPECT_EQ(st.code(), StatusCode::kUnavailable) << "after " << sent << " events";
  EXPECT_NE(st.message().find("dropped"), std::string::npos) << st.ToString();
  PollUntil(**listener, 1);
  EXPECT_TRUE((*listener)->ranks()[0].heard);
}

// The listener and the policy together on a real process: a rank that beats, is stopped
// (SIGSTOP keeps its process but silences it) and is reported hung once T has passed since
// its last beat; then killed, and reported as killed by SIGKILL.
TEST(ProgressListenerTest, StoppedRankProcessIsHungThenKilledIsNamed) {
  base::ScopedTempDir dir("progress");
  auto listener = ProgressListener::Bind(dir.Sub("p.sock"), {.world_size = 1});
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  base::Clock::time_point started = base::Clock::now();
  pid_t pid = ::fork();
  ASSERT_GE(pid, 0);
  if (pid == 0) {
    auto reporter = ProgressReporter::Connect((*listener)->path(), 0);
    // Beats every 5 ms for at most a minute, so it cannot outlive a failed test for long.
    for (int i = 0; reporter.ok() && i < 12000; ++i) {
      reporter->Heartbeat().IgnoreError();
      ::usleep(5000);
    }
    ::_exit(0);
  }
  struct Reap {
    pid_t pid;
    ~Reap() {
      if (pid <= 0) return;  // never kill(-1, ...): that would signal every process of ours
      ::kill(pid, SIGKILL);
      ::waitpid(pid, nullptr, 0);
    }
  } reap{pid};
  PollUntil(**listener, 1);
  ASSERT_EQ(::kill(pid, SIGSTOP), 0);

  const auto kTimeout = 300ms;
  SupervisorPolicy policy({.heartbeat_timeout = kTimeout});
  std::vector<SupervisorEvent> events;
  base::Deadline guard = base::Deadline::After(30s);
  while (events.empty() && !guard.Expired()) {
    ASSERT_TRUE((*listener)->Poll(base::Deadline::After(20ms)).ok());
    Observations obs{.now = base::Clock::now(), .started = started};
    obs.ranks.push_back({.rank = 0, .host = "local"});
    ObserveProgress((*listener)->ranks(), &obs.ranks);
    events = policy.Evaluate(obs);
  }
  ASSERT_EQ(events.size(), 1u);
  ASSERT_TRUE(std::holds_alternative<RankHung>(events[0])) << DescribeEvent(events[0]);
  EXPECT_EQ(std::get<RankHung>(events[0]).rank, 0);
  EXPECT_GE(std::get<RankHung>(events[0]).silent_for, kTimeout);
  EXPECT_NE(DescribeEvent(events[0]).find("rank 0 on local hung"), std::string::npos);

  ASSERT_EQ(::kill(pid, SIGKILL), 0);
  int status = 0;
  ASSERT_EQ(::waitpid(pid, &status, 0), pid);
  reap.pid = 0;  // reaped
  ASSERT_TRUE(WIFSIGNALED(status));
  Observations obs{.now = base::Clock::now(), .started = started};
  obs.ranks.push_back({.rank = 0,
                       .host = "local",
                       .exit = RankExit{.signal = WTERMSIG(status), .at = base::Clock::now()}});
  events = policy.Evaluate(obs);
  ASSERT_EQ(events.size(), 1u);
  EXPECT_EQ(DescribeEvent(events[0]), "rank 0 on local was killed by SIGKILL");
}

TEST(ProgressListenerTest, MalformedDatagramsAreCountedNotFatal) {
  base::ScopedTempDir dir("progress");
  auto listener = ProgressListener::Bind(dir.Sub("p.sock"), {.world_size = 2});
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  const std::string& path = (*listener)->path();
  SendRaw(path, "hello");
  SendRaw(path, "beat 5 100");  // rank outside the world
  SendRaw(path, std::string(1000, 'x'));
  SendRaw(path, "beat 1 100\n");  // valid: Python's habit of a newline
  PollUntil(**listener, 1, 3);
  EXPECT_EQ((*listener)->received(), 1u);
  EXPECT_EQ((*listener)->malformed(), 3u);
  EXPECT_NE((*listener)->last_malformed().find("over the limit"), std::string::npos)
      << (*listener)->last_malformed();
  EXPECT_TRUE((*listener)->ranks()[1].heard);
  EXPECT_FALSE((*listener)->ranks()[0].heard);
}

TEST(ProgressListenerTest, StepDurationsComeFromSenderStampsAndHistoryIsBounded) {
  base::ScopedTempDir dir("progress");
  auto listener = ProgressListener::Bind(dir.Sub("p.sock"), {.world_size = 1, .step_history = 3});
  ASSERT_TRUE(listener.ok()) << listener.status().ToString();
  const std::string& path = (*listener)->path();
  SendRaw(path, "step 0 0 1000");
  SendRaw(path, "step 0 1 1100");
  SendRaw(path, "step 0 3 1500");  // two steps in 400 ns: 200 each
  SendRaw(path, "step 0 4 1600");
  SendRaw(path, "step 0 5 1900");
  SendRaw(path, "step 0 2 5000");  // a restarted rank going back: no negative duration
  PollUntil(**listener, 6);
  const RankProgress& p = (*listener)->ranks()[0];
  ASSERT_EQ(p.step_times.size(), 3u);
  EXPECT_EQ(p.step_times[0].count(), 200);
  EXPECT_EQ(p.step_times[1].count(), 100);
  EXPECT_EQ(p.step_times[2].count(), 300);
  EXPECT_EQ(p.last_step, 2);
}

TEST(ProgressListenerTest, PollReturnsZeroAtTheDeadline) {
  base::ScopedTempDir dir("progress");
  auto listener = ProgressListener::Bind(dir.Sub("p.sock"), {.world_size = 1});
  ASSERT_TRUE(listener.ok());
  Result<size_t> n = (*listener)->Poll(base::Deadline::After(10ms));
  ASSERT_TRUE(n.ok());
  EXPECT_EQ(*n, 0u);
}

TEST(ProgressListenerTest, RemovesItsSocketAndReplacesAStaleOne) {
  base::ScopedTempDir dir("progress");
  std::string path = dir.Sub("p.sock");
  {
    auto first = ProgressListener::Bind(path, {.world_size = 1});
    ASSERT_TRUE(first.ok());
    // A second supervisor on a stale path (its predecessor crashed) takes it over, and the
    // first one, going away, leaves the second one's socket in place.
    auto second = ProgressListener::Bind(path, {.world_size = 1});
    ASSERT_TRUE(second.ok()) << second.status().ToString();
    first->reset();
    EXPECT_TRUE(base::PathExists(path));
    SendRaw(path, "beat 0 1");
    PollUntil(**second, 1);
  }
  EXPECT_FALSE(base::PathExists(path));
  // A file that is not a socket is never removed.
  ASSERT_TRUE(base::WriteFileAtomic(path, "precious").ok());
  EXPECT_FALSE(ProgressListener::Bind(path, {.world_size = 1}).ok());
  EXPECT_EQ(*base::ReadFile(path), "precious");
  auto too_long = ProgressListener::Bind(std::string(200, 'a'), {.world_size = 1});
  EXPECT_EQ(too_long.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace railyard::launch
