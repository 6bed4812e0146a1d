#include "railyard/net/internal/sockaddr.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>

namespace railyard::net::internal {
namespace {

TEST(SockaddrTest, TextRoundTrips) {
  Result<sockaddr_in> a = ParseIpv4HostPort("10.1.2.3:5000");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(ntohs(a->sin_port), 5000);
  EXPECT_EQ(SockaddrText(*a), "10.1.2.3:5000");
}

TEST(SockaddrTest, ParseRejectsNamesAndBadPortsQuotingTheText) {
  for (std::string_view bad : {"localhost:80", "10.1.2.3", "10.1.2.3:0", "10.1.2.3:65536",
                               "10.1.2.3:80x", ":80", "10.1.2:80"}) {
    Result<sockaddr_in> a = ParseIpv4HostPort(bad);
    ASSERT_FALSE(a.ok()) << bad;
    EXPECT_EQ(a.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(a.status().message().find(std::string(bad)), std::string::npos)
        << a.status().message();
  }
}

TEST(SockaddrTest, ResolveTakesNumbersWithoutLookupAndLooksUpLocalhost) {
  Result<sockaddr_in> a = ResolveHostPort("127.0.0.1:9");
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(SockaddrText(*a), "127.0.0.1:9");
  // /etc/hosts names localhost on every Linux system the tests run on.
  Result<sockaddr_in> l = ResolveHostPort("localhost:9");
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(ntohs(l->sin_port), 9);
  EXPECT_EQ(ResolveHostPort("localhost:0").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace railyard::net::internal
