#include "railyard/vcluster/link_probe.h"

#include <gtest/gtest.h>

#include <future>

#include "railyard/base/strings.h"

namespace railyard::vcluster {
namespace {

using namespace std::chrono_literals;

TEST(LinkProbeTest, SenderMeasuresWhatTheSinkReceived) {
  std::promise<std::string> ready;
  SinkOptions o;
  o.address = "127.0.0.1";
  o.lifetime = 20s;
  o.max_connections = 1;  // the sink returns after one connection
  std::thread sink([&] {
    Status s = RunSink(o, [&](std::string where) { ready.set_value(where); });
    EXPECT_TRUE(s.ok()) << s.ToString();
  });
  std::string where = ready.get_future().get();
  std::string addr;
  uint16_t port = 0;
  ASSERT_TRUE(base::SplitHostPort(where, &addr, &port).ok());
  EXPECT_NE(port, 0);
  auto r = RunSend(addr, port, 50ms, base::Deadline::After(20s));
  sink.join();
  ASSERT_TRUE(r.ok()) << r.status().ToString();
  EXPECT_GT(r->bytes, 0u);
  EXPECT_GT(r->seconds, 0.0);
  EXPECT_GT(r->bits_per_second(), 0.0);
}

TEST(LinkProbeTest, NoSinkIsUnavailableAndNamesTheAddress) {
  // Port 1 on loopback: nothing listens there in a test environment.
  auto r = RunSend("127.0.0.1", 1, 10ms, base::Deadline::After(5s));
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnavailable);
  EXPECT_NE(r.status().message().find("127.0.0.1:1"), std::string::npos);
}

}  // namespace
}  // namespace railyard::vcluster
