#include "railyard/net/tcp/congestion.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include "railyard/base/files.h"

namespace railyard::net {
namespace {

sockaddr_in Addr(const char* ip) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  EXPECT_EQ(inet_pton(AF_INET, ip, &a.sin_addr), 1) << ip;
  return a;
}

std::string AlgorithmOf(int fd) {
  char name[16] = {};  // TCP_CA_NAME_MAX
  socklen_t len = sizeof name;
  EXPECT_EQ(getsockopt(fd, IPPROTO_TCP, TCP_CONGESTION, name, &len), 0);
  return std::string(name, strnlen(name, len));
}

base::UniqueFd TcpSocket() {
  base::UniqueFd fd(socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  EXPECT_TRUE(fd.valid());
  return fd;
}

TEST(CongestionControl, ParsesModesAndNames) {
  for (const char* ok : {"auto", "system", "cubic", "reno", "bbr", "dctcp", "my_cc2"}) {
    auto cc = CongestionControl::Parse(ok);
    ASSERT_TRUE(cc.ok()) << ok << ": " << cc.status().message();
    EXPECT_EQ(cc->text(), ok);
  }
}

TEST(CongestionControl, RejectsWhatCannotBeAName) {
  for (const char* bad : {"", "cu bic", "../cubic", "cubic\n", "a_name_of_sixteen"}) {
    auto cc = CongestionControl::Parse(bad);
    ASSERT_FALSE(cc.ok()) << "'" << bad << "'";
    EXPECT_EQ(cc.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(cc.status().message().find("expected auto, system or an algorithm"),
              std::string::npos)
        << cc.status().message();
  }
}

TEST(CongestionControl, CheckAcceptsRenoAndNamesTheAvailableOnesForAnUnknownAlgorithm) {
  // reno is built into every kernel and always permitted.
  EXPECT_TRUE(CongestionControl::Parse("reno")->Check().ok());
  EXPECT_TRUE(CongestionControl::Parse("auto")->Check().ok());
  EXPECT_TRUE(CongestionControl::Parse("system")->Check().ok());
  Status st = CongestionControl::Parse("nosuchcc")->Check();
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), StatusCode::kNotFound) << st.message();
  EXPECT_NE(st.message().find("'nosuchcc' is not available"), std::string::npos) << st.message();
  EXPECT_NE(st.message().find("reno"), std::string::npos) << st.message();  // the available list
}

TEST(CongestionControl, AutoAvoidsTheSystemDefaultOnlyInsideTheKernel) {
  auto cc = *CongestionControl::Parse("auto");
  auto local = TcpSocket();
  std::string set = cc.Apply(local.get(), /*same_kernel=*/true);
  EXPECT_TRUE(set == "cubic" || set == "reno") << set;
  EXPECT_EQ(AlgorithmOf(local.get()), set);

  auto remote = TcpSocket();
  const std::string system_default = AlgorithmOf(remote.get());
  EXPECT_EQ(cc.Apply(remote.get(), /*same_kernel=*/false), "");
  EXPECT_EQ(AlgorithmOf(remote.get()), system_default);
}

TEST(CongestionControl, SystemKeepsTheDefaultAndANameAppliesEverywhere) {
  auto fd = TcpSocket();
  const std::string system_default = AlgorithmOf(fd.get());
  EXPECT_EQ(CongestionControl::Parse("system")->Apply(fd.get(), /*same_kernel=*/true), "");
  EXPECT_EQ(AlgorithmOf(fd.get()), system_default);

  auto remote = TcpSocket();
  EXPECT_EQ(CongestionControl::Parse("reno")->Apply(remote.get(), /*same_kernel=*/false), "reno");
  EXPECT_EQ(AlgorithmOf(remote.get()), "reno");
}

TEST(SameHost, LoopbackAndOwnAddressOnly) {
  EXPECT_TRUE(SameHost(Addr("10.0.0.1"), Addr("127.0.0.1")));
  EXPECT_TRUE(SameHost(Addr("10.0.0.1"), Addr("127.255.1.2")));
  EXPECT_TRUE(SameHost(Addr("192.168.7.3"), Addr("192.168.7.3")));
  EXPECT_FALSE(SameHost(Addr("192.168.7.3"), Addr("192.168.7.4")));
  EXPECT_FALSE(SameHost(Addr("127.0.0.1"), Addr("128.0.0.1")));
}

}  // namespace
}  // namespace railyard::net
