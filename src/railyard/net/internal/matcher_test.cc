#include "railyard/net/internal/matcher.h"

#include <gtest/gtest.h>

#include <memory>

namespace railyard::net::internal {
namespace {

TEST(MatcherTest, AReceiveTakesTheOldestMessageOfItsPeerAndTag) {
  Matcher<int, std::string> m;
  EXPECT_FALSE(m.TakeRecv(1, 7).has_value());
  m.AddMessage(1, 7, "first");
  m.AddMessage(2, 7, "other peer");
  m.AddMessage(1, 8, "other tag");
  m.AddMessage(1, 7, "second");
  EXPECT_EQ(m.TakeMessage(1, 7), "first");
  EXPECT_EQ(m.TakeMessage(1, 7), "second");
  EXPECT_FALSE(m.TakeMessage(1, 7).has_value());
  EXPECT_EQ(m.TakeMessage(1, 8), "other tag");
  EXPECT_EQ(m.TakeMessage(2, 7), "other peer");
  EXPECT_TRUE(m.empty());
}

TEST(MatcherTest, AMessageTakesTheOldestWaitingReceive) {
  Matcher<int, std::string> m;
  m.AddRecv(3, 1, 10);
  m.AddRecv(3, 1, 11);
  m.AddRecv(3, 2, 12);
  EXPECT_FALSE(m.TakeMessage(3, 1).has_value()) << "no message waits";
  EXPECT_EQ(m.TakeRecv(3, 1), 10);
  EXPECT_EQ(m.TakeRecv(3, 1), 11);
  EXPECT_FALSE(m.TakeRecv(3, 1).has_value());
  EXPECT_EQ(m.TakeRecv(3, 2), 12);
  EXPECT_TRUE(m.empty());
}

TEST(MatcherTest, AnAbandonedReceiveLeavesTheQueueInOrder) {
  Matcher<int, std::string> m;
  m.AddRecv(0, 5, 1);
  m.AddRecv(0, 5, 2);
  m.AddRecv(0, 5, 3);
  EXPECT_TRUE(m.RemoveRecv(0, 5, 2));
  EXPECT_FALSE(m.RemoveRecv(0, 5, 2)) << "already gone";
  EXPECT_FALSE(m.RemoveRecv(0, 6, 1)) << "another tag";
  EXPECT_EQ(m.TakeRecv(0, 5), 1);
  EXPECT_EQ(m.TakeRecv(0, 5), 3);
  EXPECT_TRUE(m.empty());
}

TEST(MatcherTest, HoldsMoveOnlyMessages) {
  Matcher<int, std::unique_ptr<int>> m;
  m.AddMessage(0, 0, std::make_unique<int>(42));
  std::optional<std::unique_ptr<int>> got = m.TakeMessage(0, 0);
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(**got, 42);
}

}  // namespace
}  // namespace railyard::net::internal
