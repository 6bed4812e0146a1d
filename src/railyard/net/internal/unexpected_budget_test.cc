#include "railyard/net/internal/unexpected_budget.h"

#include <gtest/gtest.h>

namespace railyard::net::internal {
namespace {

TEST(UnexpectedBudgetTest, HoldsUpToTheLimitAndSaysWhyNotBeyond) {
  UnexpectedBudget b(100);
  EXPECT_TRUE(b.Hold(60, 1).ok());
  EXPECT_TRUE(b.Hold(40, 2).ok());
  EXPECT_EQ(b.held(), 100u);
  Status full = b.Hold(1, 0x33);
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_NE(full.message().find("tag 0x33"), std::string::npos) << full.message();
  EXPECT_NE(full.message().find("hold 100 now"), std::string::npos) << full.message();
  EXPECT_EQ(b.held(), 100u) << "a refused message holds nothing";
  b.Release(60);
  EXPECT_TRUE(b.Hold(50, 3).ok());
  EXPECT_EQ(b.held(), 90u);
}

TEST(UnexpectedBudgetTest, AHugeAnnouncedLengthCannotWrapAround) {
  UnexpectedBudget b;
  EXPECT_TRUE(b.Hold(10, 0).ok());
  EXPECT_EQ(b.Hold(UINT64_MAX, 0).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(b.held(), 10u);
}

}  // namespace
}  // namespace railyard::net::internal
