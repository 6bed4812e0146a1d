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

TEST(SpinBudget, WaitsServedByPollingGrowItBackStepByStep) {
  SpinBudget b(100);
  for (int i = 0; i < 10; ++i) b.Slept();
  ASSERT_EQ(b.polls(), SpinBudget::kFloor);
  b.FinishedAfter(1);
  EXPECT_EQ(b.polls(), SpinBudget::kFloor + SpinBudget::kStep);
  for (int i = 0; i < 100; ++i) b.FinishedAfter(1);
  EXPECT_EQ(b.polls(), 100);  // capped at the maximum
}

TEST(SpinBudget, AWaitThatNeededMostOfTheBudgetDoublesIt) {
  SpinBudget b(100);
  for (int i = 0; i < 10; ++i) b.Slept();
  b.FinishedAfter(4);        // all of the floor's 4 polls
  EXPECT_EQ(b.polls(), 12);  // + kStep beats 2 x 4
  b.FinishedAfter(11);
  EXPECT_EQ(b.polls(), 22);  // 2 x 11 beats + kStep
  b.FinishedAfter(60);
  EXPECT_EQ(b.polls(), 100);  // capped at the maximum
}

// The two regimes the budget is for: mostly served by polling keeps it high, mostly ending
// in sleep keeps it low; one odd wait in either does not flip it.
TEST(SpinBudget, SettlesHighWhenPollingPaysAndLowWhenItDoesNot) {
  SpinBudget fast(100);
  for (int i = 0; i < 200; ++i) {
    if (i % 10 == 9) {
      fast.Slept();  // one wait in ten: the peer was descheduled
    } else {
      fast.FinishedAfter(1);
    }
  }
  EXPECT_GE(fast.polls(), 50);

  SpinBudget slow(100);
  for (int i = 0; i < 200; ++i) {
    if (i % 10 == 9) {
      slow.FinishedAfter(1);  // one wait in ten: the data had piled up already
    } else {
      slow.Slept();
    }
  }
  EXPECT_LE(slow.polls(), SpinBudget::kFloor + SpinBudget::kStep);
}

TEST(SpinBudget, ZeroMeansNeverSpin) {
  SpinBudget b(0);  // TcpOptions::spin_polls = 0
  EXPECT_EQ(b.polls(), 0);
  b.Slept();
  EXPECT_EQ(b.polls(), 0);
  b.FinishedAfter(1);
  EXPECT_EQ(b.polls(), 0);
  SpinBudget small(2);  // a maximum below the floor stays the limit
  small.Slept();
  EXPECT_EQ(small.polls(), 2);
  EXPECT_EQ(SpinBudget(-3).polls(), 0);
}

}  // namespace
}  // namespace railyard::net
