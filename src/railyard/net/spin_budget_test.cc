#include "railyard/net/spin_budget.h"

#include <gtest/gtest.h>

namespace railyard::net {
namespace {

TEST(SpinBudget, StartsAtTheMaximum) {
  SpinBudget b(100);
  EXPECT_EQ(b.polls(), 100);
  EXPECT_EQ(b.max_polls(), 100);
}

TEST(SpinBudget, WaitsThatSleepHalveItDownToTheFloor) {
  SpinBudget b(100);
  b.Slept();
  EXPECT_EQ(b.polls(), 50);
  b.Slept();
  EXPECT_EQ(b.polls(), 25);
  for (int i = 0; i < 10; ++i) b.Slept();
  EXPECT_EQ(b.polls(), SpinBudget::kFloor);  // never zero: a budget must be able to regrow
}

TEST(SpinBudget, GrowsOnlyWhenWaitsFinishNearItsEdge) {
  SpinBudget b(100);
  for (int i = 0; i < 5; ++i) b.Slept();
  ASSERT_EQ(b.polls(), 4);
  b.FinishedAfter(1);  // well inside the budget: no reason to spin longer
  EXPECT_EQ(b.polls(), 4);
  b.FinishedAfter(4);  // at the edge: a longer budget would likely have paid
  EXPECT_EQ(b.polls(), 8);
  b.FinishedAfter(8);
  b.FinishedAfter(16);
  b.FinishedAfter(32);
  EXPECT_EQ(b.polls(), 64);
  b.FinishedAfter(64);
  EXPECT_EQ(b.polls(), 100);  // capped at the maximum
}

TEST(SpinBudget, AWaitFinishingEarlyDoesNotShrinkIt) {
  SpinBudget b(100);
  b.FinishedAfter(3);
  EXPECT_EQ(b.polls(), 100);
}

TEST(SpinBudget, ZeroMeansNeverSpin) {
  SpinBudget b(0);  // RAILYARD_TCP_SPIN=0
  EXPECT_EQ(b.polls(), 0);
  b.Slept();
  EXPECT_EQ(b.polls(), 0);
  b.FinishedAfter(5);
  EXPECT_EQ(b.polls(), 0);
  SpinBudget small(2);  // a maximum below the floor stays the limit
  small.Slept();
  EXPECT_EQ(small.polls(), 2);
  EXPECT_EQ(SpinBudget(-3).polls(), 0);
}

}  // namespace
}  // namespace railyard::net
