#include "railyard/net/internal/request_table.h"

#include <gtest/gtest.h>

namespace railyard::net::internal {
namespace {

struct TestOp {
  uint64_t id = 0;
  bool internal = false;
};

TEST(RequestTableTest, IdsAreFreshAndNeverReused) {
  RequestTable<TestOp> t;
  TestOp* a = t.Add();
  TestOp* b = t.Add();
  EXPECT_EQ(a->id, 1u);
  EXPECT_EQ(b->id, 2u);
  t.Erase(b->id);
  EXPECT_EQ(t.Add()->id, 3u);
  EXPECT_EQ(t.Find(2), nullptr);
  EXPECT_EQ(t.Find(1), a);
  EXPECT_EQ(t.size(), 2u);
}

TEST(RequestTableTest, CollectWaitsARequestListedTwiceOnceAndNamesAnUnknownOne) {
  RequestTable<TestOp> t;
  TestOp* a = t.Add();
  TestOp* b = t.Add();
  Request twice[] = {{b->id}, {a->id}, {b->id}};
  WaitSet<TestOp> w = t.Collect(twice, "tcp transport rank 0");
  EXPECT_TRUE(w.status.ok()) << w.status.ToString();
  ASSERT_EQ(w.ops.size(), 2u);
  EXPECT_EQ(w.ops[0], a);
  EXPECT_EQ(w.ops[1], b);

  Request unknown[] = {{a->id}, {99}};
  w = t.Collect(unknown, "tcp transport rank 0");
  EXPECT_EQ(w.status.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(w.status.message().find("request 99"), std::string::npos) << w.status.message();
  EXPECT_NE(w.status.message().find("tcp transport rank 0"), std::string::npos);
  ASSERT_EQ(w.ops.size(), 1u) << "the known ones still come back, for the caller to give up";
  EXPECT_EQ(w.ops[0], a);
}

TEST(RequestTableTest, CollectRejectsWhatTheBackendSaysIsNotWaitable) {
  RequestTable<TestOp> t;
  TestOp* a = t.Add();
  a->internal = true;
  Request r[] = {{a->id}};
  WaitSet<TestOp> w = t.Collect(r, "ofi", [](const TestOp& op) { return !op.internal; });
  EXPECT_EQ(w.status.code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(w.ops.empty());
}

TEST(RequestTableTest, ReceivedBytesLastUntilTheNextWait) {
  RequestTable<TestOp> t;
  t.SetReceived(5, 100);
  EXPECT_EQ(t.ReceivedBytes({5}), 100u);
  EXPECT_EQ(t.ReceivedBytes({6}), 0u);
  t.StartWait();
  EXPECT_EQ(t.ReceivedBytes({5}), 0u);
}

}  // namespace
}  // namespace railyard::net::internal
