#include "railyard/launch/gang.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <map>
#include <string>
#include <vector>

#include "railyard/base/strings.h"
#include "railyard/base/temp_dir_testing.h"
#include "railyard/vcluster/bandwidth_matrix.h"

namespace railyard::launch {
namespace {

using Env = std::map<std::string, std::string>;

// A gang of three ranks of `script` (sh -c), ranks 0 and 1 on local0 and rank 2 on local1.
GangSpec ThreeRanks(const std::string& script) {
  GangSpec spec;
  spec.argv = {"sh", "-c", script};
  spec.hosts = LocalHosts(2);
  spec.rank_hosts = {0, 0, 1};
  spec.failure_grace = std::chrono::milliseconds(100);
  spec.term_grace = std::chrono::milliseconds(500);
  return spec;
}

// Bounded: every rank of these tests either ends by itself or is stopped long before.
constexpr auto kBound = std::chrono::seconds(60);

Env ParseEnv(const std::string& text) {
  Env env;
  for (std::string_view line : base::SplitLines(text)) {
    auto eq = line.find('=');
    if (eq != std::string_view::npos) env[std::string(line.substr(0, eq))] = line.substr(eq + 1);
  }
  return env;
}

// True once no process is left in the group `pgid`. A member whose parent died is adopted by
// this process (a subreaper, see GangTest) and reaped here; the bound is for a member that was
// never killed.
bool GroupIsGone(pid_t pgid) {
  for (int i = 0; i < 500; ++i) {
    while (::waitpid(-pgid, nullptr, WNOHANG) > 0) {
    }
    if (::kill(-pgid, 0) != 0 && errno == ESRCH) return true;
    timespec ts{0, 10'000'000};
    ::nanosleep(&ts, nullptr);
  }
  return false;
}

// Makes this process the reaper of the ranks' orphaned descendants, so that GroupIsGone sees
// them go as soon as they are killed rather than when init gets round to them.
class GangTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_EQ(::prctl(PR_SET_CHILD_SUBREAPER, 1), 0); }
};

TEST_F(GangTest, EveryRankGetsRailyardsAndTorchrunsEnvironment) {
  GangSpec spec = ThreeRanks("env");
  spec.hosts[1].env = {{"RAILYARD_GANG_TEST_HOST_VAR", "only-on-local1"}};
  spec.job.restart_count = 2;
  spec.job.ckpt_dir = "/ckpt/gang-test";
  spec.job.progress = "/run/gang-test/progress";
  auto gang = Gang::Start(spec);
  ASSERT_TRUE(gang.ok()) << gang.status().ToString();
  GangResult done = gang->Wait(base::Deadline::After(kBound));
  ASSERT_TRUE(done.ok()) << done.Failures();
  ASSERT_EQ(done.ranks.size(), 3u);
  std::vector<Env> envs;
  for (const RankEnd& end : done.ranks) envs.push_back(ParseEnv(end.exit.stdout_text));
  const std::vector<std::string> local_rank = {"0", "1", "0"}, local_size = {"2", "2", "1"},
                                 group = {"0", "0", "1"}, host = {"local0", "local0", "local1"};
  for (int r = 0; r < 3; ++r) {
    SCOPED_TRACE("rank " + std::to_string(r));
    Env& env = envs[r];
    EXPECT_EQ(env["RANK"], std::to_string(r));
    EXPECT_EQ(env["RAILYARD_RANK"], std::to_string(r));
    EXPECT_EQ(env["WORLD_SIZE"], "3");
    EXPECT_EQ(env["LOCAL_RANK"], local_rank[r]);
    EXPECT_EQ(env["LOCAL_WORLD_SIZE"], local_size[r]);
    EXPECT_EQ(env["GROUP_RANK"], group[r]);
    EXPECT_EQ(env["RAILYARD_HOST"], host[r]);
    EXPECT_EQ(env["TORCHELASTIC_RESTART_COUNT"], "2");
    EXPECT_EQ(env["RAILYARD_RESTART_COUNT"], "2");
    EXPECT_EQ(env["RAILYARD_CKPT_DIR"], "/ckpt/gang-test");
    EXPECT_EQ(env["RAILYARD_PROGRESS"], "/run/gang-test/progress");
    EXPECT_EQ(env["MASTER_ADDR"], "127.0.0.1");
    EXPECT_EQ(env["MASTER_PORT"], envs[0]["MASTER_PORT"]);
    EXPECT_EQ(env["RAILYARD_STORE"], envs[0]["RAILYARD_STORE"]);
    EXPECT_EQ(env["RAILYARD_STORE_SERVE"], r == 0 ? "1" : "0");
    EXPECT_EQ(env["RAILYARD_JOB_SECRET"], envs[0]["RAILYARD_JOB_SECRET"]);
    EXPECT_EQ(env["RAILYARD_GANG_TEST_HOST_VAR"], r == 2 ? "only-on-local1" : "");
    // What the rank reads back is what the launcher meant to give it.
    auto back = comm::RankEnvironment::FromEnv(comm::MapEnv(env));
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, gang->environment(r));
  }
  EXPECT_EQ(envs[0]["RAILYARD_JOB_SECRET"].size(), 32u);
  // The store and torchrun's port are distinct: a torch program's own store binds the latter.
  EXPECT_NE(envs[0]["RAILYARD_STORE"], "127.0.0.1:" + envs[0]["MASTER_PORT"]);
}

TEST_F(GangTest, ARankThatExitsNonZeroIsNamedWithItsStatusAndTheOthersAreStopped) {
  auto gang = Gang::Start(ThreeRanks(
      "if [ \"$RANK\" = 1 ]; then echo 'disk full on purpose' >&2; exit 3; fi; sleep 1000"));
  ASSERT_TRUE(gang.ok()) << gang.status().ToString();
  GangResult done = gang->Wait(base::Deadline::After(kBound));
  EXPECT_FALSE(done.ok());
  EXPECT_FALSE(done.deadline_expired);
  EXPECT_EQ(done.first_failed, 1);
  EXPECT_EQ(done.ranks[1].exit.exit_code, 3);
  EXPECT_EQ(done.ranks[1].Describe(),
            fmt::format("rank 1 (pid {}) exited with status 3 on local0: disk full on purpose",
                        gang->pid(1)));
  for (int r : {0, 2}) {
    EXPECT_EQ(done.ranks[r].exit.signal, SIGTERM) << done.ranks[r].Describe();
    EXPECT_NE(done.ranks[r].Describe().find("after rank 1 on local0 failed"), std::string::npos)
        << done.ranks[r].Describe();
  }
  EXPECT_NE(done.Failures().find("rank 2 ("), std::string::npos) << done.Failures();
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(GroupIsGone(gang->pid(r))) << "rank " << r;
}

TEST_F(GangTest, ARankKilledBySignalIsNamedWithTheSignal) {
  auto gang = Gang::Start(ThreeRanks("if [ \"$RANK\" = 2 ]; then kill -KILL $$; fi; sleep 1000"));
  ASSERT_TRUE(gang.ok()) << gang.status().ToString();
  GangResult done = gang->Wait(base::Deadline::After(kBound));
  EXPECT_EQ(done.first_failed, 2);
  EXPECT_EQ(done.ranks[2].exit.signal, SIGKILL);
  EXPECT_NE(done.ranks[2].Describe().find(
                fmt::format("rank 2 (pid {}) was killed by signal 9", gang->pid(2))),
            std::string::npos)
      << done.ranks[2].Describe();
  EXPECT_NE(done.ranks[2].Describe().find("on local1"), std::string::npos);
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(GroupIsGone(gang->pid(r))) << "rank " << r;
}

// A rank that ignores SIGTERM, and whose background child holds on too, is SIGKILLed with its
// whole group at the deadline.
TEST_F(GangTest, AHungRankIsKilledAtTheDeadlineLeavingNoProcess) {
  auto gang = Gang::Start(
      ThreeRanks("if [ \"$RANK\" = 1 ]; then trap '' TERM; sleep 1000 & wait; fi; exit 0"));
  ASSERT_TRUE(gang.ok()) << gang.status().ToString();
  GangResult done = gang->Wait(base::Deadline::After(std::chrono::seconds(2)));
  EXPECT_TRUE(done.deadline_expired);
  EXPECT_EQ(done.first_failed, -1);
  // The others exit by themselves; only on a machine too loaded to run them by the deadline
  // are they stopped with rank 1.
  for (int r : {0, 2}) {
    EXPECT_TRUE(done.ranks[r].ok() ||
                done.ranks[r].stopped_why.find("deadline") != std::string::npos)
        << done.ranks[r].Describe();
  }
  EXPECT_EQ(done.ranks[1].exit.signal, SIGKILL);
  EXPECT_NE(done.ranks[1].Describe().find("deadline: killed by the launcher"), std::string::npos)
      << done.ranks[1].Describe();
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(GroupIsGone(gang->pid(r))) << "rank " << r;
}

// A stopped rank cannot act on SIGTERM: it is SIGKILLed at once rather than after the term
// grace (long here, so a regression shows as a slow case).
TEST_F(GangTest, AStoppedRankIsKilledWithoutWaitingForSigterm) {
  base::ScopedTempDir tmp("gang");
  ASSERT_FALSE(tmp.path().empty());
  // Rank 1 publishes its pid and stops itself; rank 0 fails once it sees rank 1 stopped.
  GangSpec spec =
      ThreeRanks(fmt::format("d={}; case $RANK in "
                             "1) echo $$ > $d/p.tmp && mv $d/p.tmp $d/p; kill -STOP $$ ;; "
                             "0) until [ -s $d/p ]; do :; done; p=$(cat $d/p); "
                             "until grep -q '^State:.T' /proc/$p/status; do :; done; exit 3 ;; "
                             "*) sleep 1000 ;; esac",
                             tmp.path()));
  spec.term_grace = std::chrono::seconds(30);
  auto gang = Gang::Start(spec);
  ASSERT_TRUE(gang.ok()) << gang.status().ToString();
  GangResult done = gang->Wait(base::Deadline::After(kBound));
  EXPECT_EQ(done.first_failed, 0);
  EXPECT_EQ(done.ranks[0].exit.exit_code, 3);
  EXPECT_EQ(done.ranks[1].exit.signal, SIGKILL) << done.ranks[1].Describe();
  EXPECT_NE(done.ranks[1].Describe().find("killed by the launcher"), std::string::npos);
  EXPECT_EQ(done.ranks[2].exit.signal, SIGTERM) << done.ranks[2].Describe();
  for (int r = 0; r < 3; ++r) EXPECT_TRUE(GroupIsGone(gang->pid(r))) << "rank " << r;
}

TEST_F(GangTest, VirtualHostsAreEnteredAsVclusterExecEntersThem) {
  vcluster::ClusterSpec cs;
  cs.prefix = "rgt";
  cs.hosts = 3;
  vcluster::ClusterState state;
  state.plan = vcluster::MakePlan(cs);
  auto hosts = VirtualHosts(state, 2);
  ASSERT_TRUE(hosts.ok()) << hosts.status().ToString();
  ASSERT_EQ(hosts->size(), 2u);
  for (int i = 0; i < 2; ++i) {
    const GangHost& h = (*hosts)[i];
    EXPECT_EQ(h.name, state.plan.hosts[i].name);
    EXPECT_EQ(h.address, state.plan.hosts[i].address);
    EXPECT_EQ(h.netns_path, vcluster::ExecutionFor(state, state.plan.hosts[i]).netns_path);
    EXPECT_FALSE(h.netns_path.empty());
    EXPECT_NE(std::find(h.env.begin(), h.env.end(),
                        std::pair<std::string, std::string>("RAILYARD_VHOST", h.name)),
              h.env.end());
  }
  auto too_many = VirtualHosts(state, 4);
  EXPECT_EQ(too_many.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(too_many.status().message().find("'rgt' has 3"), std::string::npos)
      << too_many.status().ToString();
}

TEST_F(GangTest, ACommandThatCannotStartIsNamedWithRankAndHost) {
  GangSpec spec = ThreeRanks("");
  spec.argv = {"/nonexistent/railyard-gang-test"};
  auto gang = Gang::Start(spec);
  ASSERT_FALSE(gang.ok());
  EXPECT_NE(gang.status().message().find("starting rank 0 on local0"), std::string::npos)
      << gang.status().ToString();
  spec = ThreeRanks("true");
  spec.rank_hosts = {0, 1, 0};
  EXPECT_EQ(Gang::Start(spec).status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace railyard::launch
