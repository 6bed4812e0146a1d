#include "railyard/net/internal/pending.h"

#include <fmt/format.h>
#include <gtest/gtest.h>

namespace railyard::net::internal {
namespace {

std::string Name(int r) { return fmt::format("rank {} (node{} pid 7)", r, r); }

TEST(PendingTest, NamesEveryPendingPeerAndDescribesTheFirstFew) {
  std::vector<PendingRequest> left;
  for (int i = 0; i < 6; ++i) {
    left.push_back({.peer = 5 - i % 3, .is_send = i == 0, .tag = 0x10u + i, .bytes = 8});
  }
  left[0].note = " (held)";
  Status st = DeadlinePassed("shm rank 1", left, 7, Name);
  EXPECT_EQ(st.code(), StatusCode::kDeadlineExceeded);
  const std::string& m = st.message();
  EXPECT_NE(m.find("shm rank 1: deadline passed with 6 of 7 requests pending, waiting on "
                   "rank(s) 3,4,5: send to rank 5 (node5 pid 7) tag 0x10 (0 of 8 bytes) (held); "
                   "receive from rank 4"),
            std::string::npos)
      << m;
  EXPECT_NE(m.find("and 2 more"), std::string::npos) << m;
  EXPECT_EQ(m.find("tag 0x14"), std::string::npos) << "only four described: " << m;
}

}  // namespace
}  // namespace railyard::net::internal
