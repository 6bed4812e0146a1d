#include "railyard/base/clock.h"

#include <gtest/gtest.h>

namespace railyard::base {
namespace {

using namespace std::chrono_literals;

TEST(DeadlineTest, NeverDoesNotExpire) {
  Deadline d = Deadline::Never();
  EXPECT_TRUE(d.IsNever());
  EXPECT_FALSE(d.Expired());
  EXPECT_EQ(d.PollTimeoutMs(), -1);
  EXPECT_EQ(d.Remaining(), Duration::max());
}

TEST(DeadlineTest, PastDeadlineIsExpiredAndClampsToZero) {
  Deadline d = Deadline::At(Clock::now() - 1s);
  EXPECT_TRUE(d.Expired());
  EXPECT_EQ(d.Remaining(), Duration::zero());
  EXPECT_EQ(d.PollTimeoutMs(), 0);
}

TEST(DeadlineTest, PollTimeoutRoundsUp) {
  // 1.2 ms left must not become 1 ms (a poll would wake before the deadline and spin).
  Deadline d = Deadline::At(Clock::now() + 3600s);
  int ms = d.PollTimeoutMs();
  EXPECT_GT(ms, 3599000);
  EXPECT_LE(ms, 3600000);
  Deadline tiny = Deadline::At(Clock::now() + 10us);
  EXPECT_GE(tiny.PollTimeoutMs(), 0);
  EXPECT_LE(tiny.PollTimeoutMs(), 1);
}

TEST(DeadlineTest, EarliestPicksTheSooner) {
  Deadline a = Deadline::After(10s), b = Deadline::After(20s);
  EXPECT_EQ(Deadline::Earliest(a, b).when(), a.when());
  EXPECT_EQ(Deadline::Earliest(b, a).when(), a.when());
  EXPECT_EQ(Deadline::Earliest(Deadline::Never(), a).when(), a.when());
}

}  // namespace
}  // namespace railyard::base
