#include "railyard/net/internal/failure_state.h"

#include <gtest/gtest.h>

#include <thread>

namespace railyard::net::internal {
namespace {

TEST(FailureStateTest, OkUntilTheFirstErrorWhichStays) {
  FailureState f;
  EXPECT_TRUE(f.status().ok());
  EXPECT_FALSE(f.failed());
  f.Fail(Status::Ok());
  EXPECT_TRUE(f.status().ok()) << "Ok is no failure";
  Status first = DeadlineExceeded("rank 1 pending");
  f.Fail(first);
  EXPECT_EQ(f.status(), first);
  f.Fail(Aborted("rank 0 aborted"));
  EXPECT_EQ(f.status(), first) << "a later error, an abort's too, stays out";
  EXPECT_TRUE(f.failed());
}

TEST(FailureStateTest, OnlyTheFirstAbortRequestCountsFromAnyThread) {
  FailureState f;
  EXPECT_FALSE(f.abort_requested());
  int granted = 0;
  std::thread other([&] { granted += f.RequestAbort("from another thread") ? 1 : 0; });
  other.join();
  granted += f.RequestAbort("second") ? 1 : 0;
  EXPECT_EQ(granted, 1);
  EXPECT_TRUE(f.abort_requested());
  EXPECT_EQ(f.abort_reason(), "from another thread");
  EXPECT_TRUE(f.status().ok()) << "an abort request records no error by itself";
}

}  // namespace
}  // namespace railyard::net::internal
