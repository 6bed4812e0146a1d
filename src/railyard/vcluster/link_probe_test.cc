#include "railyard/vcluster/link_probe.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <future>

#include "railyard/base/files.h"
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

TEST(LinkProbeTest, SinkEndsWhenItsStopFlagIsSetWithAConnectionOpen) {
  std::atomic<bool> stop{false};
  std::promise<std::string> ready;
  SinkOptions o;
  o.address = "127.0.0.1";
  o.lifetime = 120s;  // far longer than the wait below: only the flag can end it in time
  o.stop = &stop;
  auto sink = std::async(std::launch::async, [&] {
    return RunSink(o, [&](std::string where) { ready.set_value(where); });
  });
  // Sets the flag however the test leaves, so a failed assertion does not wait out the lifetime.
  struct StopOnExit {
    std::atomic<bool>& flag;
    ~StopOnExit() { flag = true; }
  } stop_on_exit{stop};
  std::string where = ready.get_future().get();
  std::string addr;
  uint16_t port = 0;
  ASSERT_TRUE(base::SplitHostPort(where, &addr, &port).ok());
  // A peer that connects and sends nothing: the sink (or the connection it serves) waits on it.
  base::UniqueFd idle(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  ASSERT_TRUE(idle.valid());
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(port);
  ASSERT_EQ(::inet_pton(AF_INET, addr.c_str(), &sa.sin_addr), 1);
  ASSERT_EQ(::connect(idle.get(), reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0)
      << std::strerror(errno);

  stop = true;
  ASSERT_EQ(sink.wait_for(60s), std::future_status::ready) << "the sink ignored its stop flag";
  Status s = sink.get();
  EXPECT_TRUE(s.ok()) << s.ToString();
}

}  // namespace
}  // namespace railyard::vcluster
