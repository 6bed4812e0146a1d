// Failure attribution across real rank processes, for every transport: a rank SIGKILLed or
// SIGSTOPped in the middle of an allreduce loop is named by every survivor, and nobody
// hangs; a store that cannot be reached is named. Ranks are `railyard bench comm --worker`
// processes that meet through a TcpStore served by this test.
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>

#include "railyard/base/hmac.h"
#include "railyard/base/subprocess.h"
#include "railyard/base/temp_dir_testing.h"
#include "railyard/net/select.h"
#include "railyard/net/store/tcp_store_server.h"

namespace railyard {
namespace {

using std::chrono::seconds;

constexpr int kRanks = 4;
// Long enough for lazy connection set-up inside the first operations on a loaded machine
// (sanitizer builds run four of these ranks on two cores).
constexpr const char* kTimeout = "4s";

struct Job {
  std::unique_ptr<net::TcpStoreServer> store;
  std::vector<base::Child> ranks;
};

// Each rank reports host node<r / ranks_per_host>: names to check in messages, and with
// ranks_per_host > 1 the hierarchical allreduce's groups (shm inside a host).
std::string HostOf(int rank, int ranks_per_host) {
  return fmt::format("node{}", rank / ranks_per_host);
}

// shm needs every rank on one host; the other transports run one rank per host name.
int DefaultRanksPerHost(const std::string& transport) { return transport == "shm" ? kRanks : 1; }

Job StartJob(const std::string& transport, const std::string& algorithm = "ring",
             int ranks_per_host = 0, int started = kRanks, const char* setup_timeout = "60s") {
  if (ranks_per_host == 0) ranks_per_host = DefaultRanksPerHost(transport);
  Job job;
  std::string secret = base::ToHex(base::RandomBytes(16));
  auto server = net::TcpStoreServer::Start({.bind_ip = "127.0.0.1", .port = 0, .secret = secret});
  EXPECT_TRUE(server.ok()) << server.status().ToString();
  if (!server.ok()) return job;
  job.store = std::move(*server);
  for (int r = 0; r < started; ++r) {
    base::SpawnOptions o;
    // One size, many iterations: the ranks are inside the timed allreduce loop for as long
    // as the test needs.
    o.argv = {RAILYARD_BINARY,   "bench",      "comm",     "--worker", "--sizes",   "256KiB",
              "--iters",         "100000",     "--warmup", "3",        "--timeout", kTimeout,
              "--setup-timeout", setup_timeout};
    o.env = {{"RAILYARD_RANK", std::to_string(r)},
             {"RAILYARD_WORLD_SIZE", std::to_string(kRanks)},
             {"RAILYARD_STORE", job.store->address()},
             {"RAILYARD_JOB_SECRET", secret},
             {"RAILYARD_TRANSPORT", transport},
             {"RAILYARD_SOCKET_IFNAME", "=lo"},
             {"RAILYARD_OFI_DOMAIN", "lo"},
             {"RAILYARD_COMM_ALGO", algorithm},
             {"RAILYARD_HOST", HostOf(r, ranks_per_host)}};
    auto child = base::Child::Spawn(o);
    EXPECT_TRUE(child.ok()) << child.status().ToString();
    if (child.ok()) job.ranks.push_back(std::move(*child));
  }
  return job;
}

// Rank 0 prints "# timing ..." once every rank is past warm-up and inside the loop. When
// it never does, every rank's end and stderr go into the failure: the reason is there.
void WaitUntilTiming(Job& job) {
  auto deadline = base::Deadline::After(seconds(60));
  for (;;) {
    auto line = job.ranks[0].ReadLine(deadline);
    if (!line.ok()) {
      std::string ends;
      for (size_t r = 0; r < job.ranks.size(); ++r) {
        base::ExitInfo e = job.ranks[r].KillAndReap();
        ends += fmt::format("\nrank {}: {}\n{}", r, e.Describe(), e.stderr_text);
      }
      FAIL() << "rank 0 never started timing: " << line.status().ToString() << ends;
    }
    if (line->rfind("# timing", 0) == 0) return;
  }
}

// Every survivor must exit on its own (not be killed by this bound) with an error naming
// `culprit`.
void ExpectSurvivorsName(Job& job, int culprit, const std::string& transport,
                         int ranks_per_host = 0) {
  if (ranks_per_host == 0) ranks_per_host = DefaultRanksPerHost(transport);
  // The job-wide rank, its host and its pid: what an operator needs to find the process.
  const std::string named = fmt::format("rank {} ({} pid {})", culprit,
                                        HostOf(culprit, ranks_per_host), job.ranks[culprit].pid());
  for (int r = 0; r < kRanks; ++r) {
    if (r == culprit) continue;
    // The bound only keeps a broken build from hanging the suite: survivors report within
    // their 4 s deadline plus about a second.
    auto e = job.ranks[r].Wait(base::Deadline::After(seconds(30)));
    ASSERT_TRUE(e.ok()) << transport << " rank " << r << " did not exit: " << e.status().ToString();
    EXPECT_EQ(e->exit_code, 1) << transport << " rank " << r << ": " << e->stderr_text;
    EXPECT_NE(e->stderr_text.find(named), std::string::npos)
        << transport << " rank " << r << " does not name " << named << ": " << e->stderr_text;
    // The operation and its sequence number: the allreduce loop, or the barrier just before
    // it for a rank that had not left the barrier yet.
    EXPECT_TRUE(e->stderr_text.find("allreduce #") != std::string::npos ||
                e->stderr_text.find("barrier #") != std::string::npos)
        << transport << " rank " << r << " does not name the operation: " << e->stderr_text;
  }
}

class CommFailureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(CommFailureTest, KilledRankIsNamedByEverySurvivor) {
  Job job = StartJob(GetParam());
  ASSERT_EQ(job.ranks.size(), static_cast<size_t>(kRanks));
  ASSERT_NO_FATAL_FAILURE(WaitUntilTiming(job));
  job.ranks[2].SignalGroup(SIGKILL);
  ExpectSurvivorsName(job, 2, GetParam());
}

TEST_P(CommFailureTest, StoppedRankIsNamedByEverySurvivor) {
  Job job = StartJob(GetParam());
  ASSERT_EQ(job.ranks.size(), static_cast<size_t>(kRanks));
  ASSERT_NO_FATAL_FAILURE(WaitUntilTiming(job));
  job.ranks[1].SignalGroup(SIGSTOP);
  ExpectSurvivorsName(job, 1, GetParam());
  job.ranks[1].KillAndReap();
}

// A rank that never starts: the others give up at the set-up deadline, naming it (first
// among those missing: on a slow machine a started rank may be late too, and is named).
TEST_P(CommFailureTest, RankThatNeverStartsIsNamedAtTheSetupDeadline) {
  Job job = StartJob(GetParam(), "ring", 0, kRanks - 1, "5s");
  ASSERT_EQ(job.ranks.size(), static_cast<size_t>(kRanks - 1));
  for (int r = 0; r < kRanks - 1; ++r) {
    auto e = job.ranks[r].Wait(base::Deadline::After(seconds(30)));  // a hang guard only
    ASSERT_TRUE(e.ok()) << GetParam() << " rank " << r << " did not exit";
    EXPECT_NE(e->exit_code, 0) << GetParam() << " rank " << r;
    // "rank 3 never published", or "ranks 1,3 never published" (the list is ascending).
    EXPECT_NE(e->stderr_text.find("3 never published"), std::string::npos)
        << GetParam() << " rank " << r << " does not name rank 3: " << e->stderr_text;
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, CommFailureTest, ::testing::ValuesIn(net::TransportNames()));

// The shm allreduce through the shared window waits on peers' window counters, not on
// messages: a rank killed or stopped there is named too.
class CommFailureWindow : public ::testing::TestWithParam<int> {};

TEST_P(CommFailureWindow, RankSignalledInsideTheWindowAllreduceIsNamed) {
  const int signal = GetParam();
  const int victim = signal == SIGKILL ? 2 : 1;
  Job job = StartJob("shm", "window");
  ASSERT_EQ(job.ranks.size(), static_cast<size_t>(kRanks));
  ASSERT_NO_FATAL_FAILURE(WaitUntilTiming(job));
  job.ranks[victim].SignalGroup(signal);
  ExpectSurvivorsName(job, victim, "shm");
  if (signal == SIGSTOP) job.ranks[victim].KillAndReap();
}

INSTANTIATE_TEST_SUITE_P(KillAndStop, CommFailureWindow, ::testing::Values(SIGKILL, SIGSTOP));

// The hierarchical allreduce (2 hosts x 2 ranks: shm inside each, tcp between the leaders):
// a rank killed or stopped is named by its job-wide rank, whichever group noticed.
class CommFailureHierarchy : public ::testing::TestWithParam<int> {};

TEST_P(CommFailureHierarchy, RankSignalledInsideTheHierarchicalAllreduceIsNamed) {
  const int signal = GetParam();
  const int victim = signal == SIGKILL ? 3 : 2;  // host node1: its member, then its leader
  Job job = StartJob("tcp", "hier", 2);
  ASSERT_EQ(job.ranks.size(), static_cast<size_t>(kRanks));
  ASSERT_NO_FATAL_FAILURE(WaitUntilTiming(job));
  job.ranks[victim].SignalGroup(signal);
  ExpectSurvivorsName(job, victim, "hier", 2);
  if (signal == SIGSTOP) job.ranks[victim].KillAndReap();
}

INSTANTIATE_TEST_SUITE_P(KillAndStop, CommFailureHierarchy, ::testing::Values(SIGKILL, SIGSTOP));

TEST(CommRendezvous, UnreachableStoreIsNamedAtTheDeadline) {
  base::SpawnOptions o;
  o.argv = {RAILYARD_BINARY, "bench",     "comm", "--worker",        "--sizes",
            "4KiB",          "--timeout", "1s",   "--setup-timeout", "1s"};
  // A port nothing listens on: connection refused until the deadline.
  o.env = {{"RAILYARD_RANK", "1"},
           {"RAILYARD_WORLD_SIZE", "2"},
           {"RAILYARD_STORE", "127.0.0.1:9"},
           {"RAILYARD_JOB_SECRET", "x"},
           {"RAILYARD_TRANSPORT", "tcp"},
           {"RAILYARD_SOCKET_IFNAME", "=lo"}};
  auto e = base::RunCommand(o, base::Deadline::After(seconds(30)));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_NE(e->exit_code, 0);
  EXPECT_NE(e->stderr_text.find("127.0.0.1:9"), std::string::npos) << e->stderr_text;
}

// Ranks that meet through a file store on a shared directory, or through MASTER_ADDR and
// MASTER_PORT (torchrun's variables) pointing at a store: the job runs and is correct.
TEST(CommRendezvous, FileStoreAndMasterAddrBothWork) {
  base::ScopedTempDir tmp("filestore");
  ASSERT_FALSE(tmp.path().empty());
  const std::string& dir = tmp.path();
  auto server = net::TcpStoreServer::Start({.bind_ip = "127.0.0.1", .port = 0, .secret = "s"});
  ASSERT_TRUE(server.ok());
  const std::string address = (*server)->address();
  const std::string host = address.substr(0, address.rfind(':'));
  const std::string port = address.substr(address.rfind(':') + 1);
  using Env = std::vector<std::pair<std::string, std::string>>;
  for (const Env& meet :
       {Env{{"RAILYARD_STORE_DIR", dir}}, Env{{"MASTER_ADDR", host}, {"MASTER_PORT", port}}}) {
    std::vector<base::Child> ranks;
    for (int r = 0; r < 3; ++r) {
      base::SpawnOptions o;
      o.argv = {RAILYARD_BINARY, "bench", "comm",   "--worker",  "--sizes", "4KiB:64KiB",
                "--iters",       "2",     "--json", "--timeout", "10s"};
      o.env = meet;
      o.env.insert(o.env.end(), {{"RAILYARD_RANK", std::to_string(r)},
                                 {"RAILYARD_WORLD_SIZE", "3"},
                                 {"RAILYARD_JOB_SECRET", "s"},
                                 {"RAILYARD_TRANSPORT", "tcp"},
                                 {"RAILYARD_SOCKET_IFNAME", "=lo"}});
      auto child = base::Child::Spawn(o);
      ASSERT_TRUE(child.ok()) << child.status().ToString();
      ranks.push_back(std::move(*child));
    }
    for (int r = 0; r < 3; ++r) {
      auto e = ranks[r].Wait(base::Deadline::After(seconds(60)));  // a hang guard only
      ASSERT_TRUE(e.ok()) << meet[0].first << " rank " << r << " did not exit";
      EXPECT_EQ(e->exit_code, 0) << meet[0].first << " rank " << r << ": " << e->stderr_text;
      if (r == 0) {
        EXPECT_NE(e->stdout_text.find("\"wrong\": 0"), std::string::npos)
            << meet[0].first << ": " << e->stdout_text;
      }
    }
  }
}

TEST(CommRendezvous, WrongSecretIsRefused) {
  auto server = net::TcpStoreServer::Start({.bind_ip = "127.0.0.1", .port = 0, .secret = "right"});
  ASSERT_TRUE(server.ok());
  base::SpawnOptions o;
  o.argv = {RAILYARD_BINARY, "bench", "comm", "--worker", "--sizes", "4KiB", "--timeout", "2s"};
  o.env = {{"RAILYARD_RANK", "0"},
           {"RAILYARD_WORLD_SIZE", "1"},
           {"RAILYARD_STORE", (*server)->address()},
           {"RAILYARD_JOB_SECRET", "wrong"},
           {"RAILYARD_TRANSPORT", "tcp"},
           {"RAILYARD_SOCKET_IFNAME", "=lo"}};
  auto e = base::RunCommand(o, base::Deadline::After(seconds(30)));
  ASSERT_TRUE(e.ok()) << e.status().ToString();
  EXPECT_NE(e->exit_code, 0);
  EXPECT_NE(e->stderr_text.find("secret"), std::string::npos) << e->stderr_text;
}

}  // namespace
}  // namespace railyard
