#include "railyard/net/peer_directory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <thread>

namespace railyard::net {
namespace {

base::Deadline Soon() { return base::Deadline::After(std::chrono::seconds(10)); }

TEST(PeerDirectory, RanksExchangeHostPidAddressAndKernelBootId) {
  auto store = NewInMemoryStore();
  Result<std::vector<PeerInfo>> got[2] = {Internal("not run"), Internal("not run")};
  std::thread other([&] {
    PeerInfo self;
    self.address = "10.0.0.2:4000";
    got[1] = ExchangePeerInfo(*store, "job", 1, 2, self, "node2", Soon());
  });
  PeerInfo self;
  self.address = "10.0.0.1:4000";
  got[0] = ExchangePeerInfo(*store, "job", 0, 2, self, "", Soon());
  other.join();
  for (auto& g : got) {
    ASSERT_TRUE(g.ok()) << g.status().ToString();
    ASSERT_EQ(g->size(), 2u);
    EXPECT_EQ((*g)[0].host, LocalHostName());
    EXPECT_EQ((*g)[1].host, "node2");
    EXPECT_EQ((*g)[0].address, "10.0.0.1:4000");
    EXPECT_EQ((*g)[1].address, "10.0.0.2:4000");
    EXPECT_EQ((*g)[1].rank, 1);
    EXPECT_EQ((*g)[0].pid, static_cast<int>(getpid()));
    // Threads of one process share a kernel, whatever host name they report.
    EXPECT_FALSE((*g)[0].boot_id.empty());
    EXPECT_EQ((*g)[0].boot_id, (*g)[1].boot_id);
    EXPECT_EQ((*g)[0].boot_id, LocalBootId());
  }
}

TEST(PeerDirectory, ARecordWithoutBootIdLeavesItUnknown) {
  auto store = NewInMemoryStore();
  ASSERT_TRUE(store->Set("job/peer/1", R"({"host":"old","pid":7,"address":"a:1"})", Soon()).ok());
  auto got = ExchangePeerInfo(*store, "job", 0, 2, PeerInfo{}, "", Soon());
  ASSERT_TRUE(got.ok()) << got.status().ToString();
  EXPECT_EQ((*got)[1].host, "old");
  EXPECT_EQ((*got)[1].boot_id, "");
}

TEST(PeerDirectory, AMalformedRecordIsDataLossNamingTheKey) {
  auto store = NewInMemoryStore();
  ASSERT_TRUE(store->Set("job/peer/1", R"({"host":"x","pid":"seven"})", Soon()).ok());
  auto got = ExchangePeerInfo(*store, "job", 0, 2, PeerInfo{}, "", Soon());
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kDataLoss);
  EXPECT_NE(got.status().message().find("job/peer/1"), std::string::npos)
      << got.status().ToString();
}

TEST(PeerDirectory, ARankThatNeverPublishesIsNamedAtTheDeadline) {
  auto store = NewInMemoryStore();
  auto got = ExchangePeerInfo(*store, "job", 0, 3, PeerInfo{}, "",
                              base::Deadline::After(std::chrono::milliseconds(200)));
  ASSERT_FALSE(got.ok());
  EXPECT_EQ(got.status().code(), StatusCode::kDeadlineExceeded) << got.status().ToString();
  EXPECT_NE(got.status().message().find("never published"), std::string::npos)
      << got.status().ToString();
}

}  // namespace
}  // namespace railyard::net
