#include "railyard/net/internal/probe_set.h"

#include <gtest/gtest.h>

namespace railyard::net::internal {
namespace {

using State = ProbeResult::State;

TEST(ProbeSetTest, SelfIsAliveBadRanksAreDeadTheRestPendingInTheCallersOrder) {
  const int ranks[] = {2, 1, 9, -1, 3};
  ProbeSet p(ranks, 1, 4, "allreduce #3");
  EXPECT_EQ(p.Pending(), (std::vector<size_t>{0, 4}));
  EXPECT_FALSE(p.settled());
  p.Alive(0, "waiting for rank 3");
  p.Alive(0, "ignored: already settled");
  EXPECT_FALSE(p.settled());
  p.Dead(4, "connection refused");
  EXPECT_TRUE(p.settled());
  std::vector<ProbeResult> r = std::move(p).Finish();
  ASSERT_EQ(r.size(), 5u);
  EXPECT_EQ(r[0].rank, 2);
  EXPECT_EQ(r[0].state, State::kAlive);
  EXPECT_EQ(r[0].activity, "waiting for rank 3");
  EXPECT_EQ(r[1].state, State::kAlive);
  EXPECT_EQ(r[1].activity, "allreduce #3");
  EXPECT_EQ(r[2].state, State::kDead);
  EXPECT_EQ(r[2].detail, "no rank 9 in a job of 4 ranks");
  EXPECT_EQ(r[3].state, State::kDead);
  EXPECT_EQ(r[4].state, State::kDead);
  EXPECT_EQ(r[4].detail, "connection refused");
}

TEST(ProbeSetTest, RanksThatNeverAnsweredFinishUnresponsive) {
  const int ranks[] = {0, 1};
  ProbeSet p(ranks, 0, 2, "idle");
  std::vector<ProbeResult> r = std::move(p).Finish("no answer");
  EXPECT_EQ(r[1].state, State::kUnresponsive);
  EXPECT_EQ(r[1].detail, "no answer");
}

}  // namespace
}  // namespace railyard::net::internal
