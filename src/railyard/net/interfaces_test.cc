#include "railyard/net/interfaces.h"

#include <gtest/gtest.h>

namespace railyard::net {
namespace {

std::vector<NetInterface> Synthetic() {
  return {
      {"lo", "127.0.0.1", true, true},     {"docker0", "172.17.0.1", false, true},
      {"eth0", "10.0.0.2", false, true},   {"eth1", "10.0.1.2", false, false},
      {"ib0", "192.168.0.2", false, true}, {"eth10", "10.0.10.2", false, true},
  };
}

std::vector<std::string> Names(const std::vector<NetInterface>& v) {
  std::vector<std::string> out;
  for (const auto& n : v) out.push_back(n.name);
  return out;
}

std::vector<std::string> Select(std::string_view spec) {
  auto parsed = ParseInterfaceSpec(spec);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  if (!parsed.ok()) return {};
  return Names(FilterInterfaces(Synthetic(), *parsed));
}

using V = std::vector<std::string>;

TEST(InterfaceSpecTest, ParsesModes) {
  auto p = ParseInterfaceSpec("^=eth0,ib");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->exclude);
  EXPECT_TRUE(p->exact);
  EXPECT_EQ(p->names, (V{"eth0", "ib"}));
  p = ParseInterfaceSpec("eth");
  ASSERT_TRUE(p.ok());
  EXPECT_FALSE(p->exclude);
  EXPECT_FALSE(p->exact);
  p = ParseInterfaceSpec("");
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(p->names.empty());
}

TEST(InterfaceSpecTest, MalformedSpecsAreInvalid) {
  for (std::string_view bad : {",", "eth0,", ",eth0", "eth0,,ib0", "^", "=", "^=", "=^eth", "eth 0",
                               "eth0/1", "averyveryverylongname", "^^eth"}) {
    auto p = ParseInterfaceSpec(bad);
    ASSERT_FALSE(p.ok()) << bad;
    EXPECT_EQ(p.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(p.status().message().find(std::string(bad)), std::string::npos)
        << p.status().message();
  }
}

TEST(FilterInterfacesTest, PrefixIncludeExcludeExact) {
  EXPECT_EQ(Select(""), (V{"lo", "docker0", "eth0", "eth1", "ib0", "eth10"}));
  EXPECT_EQ(Select("eth"), (V{"eth0", "eth1", "eth10"}));
  EXPECT_EQ(Select("eth1,ib"), (V{"eth1", "ib0", "eth10"}));  // prefix: eth1 matches eth10
  EXPECT_EQ(Select("=eth1,ib"), (V{"eth1"}));                 // exact: "ib" is not "ib0"
  EXPECT_EQ(Select("^docker,lo"), (V{"eth0", "eth1", "ib0", "eth10"}));
  EXPECT_EQ(Select("^=eth1"), (V{"lo", "docker0", "eth0", "ib0", "eth10"}));
  EXPECT_EQ(Select("^eth1"), (V{"lo", "docker0", "eth0", "ib0"}));
  EXPECT_EQ(Select("wlan"), V{});
}

TEST(ChooseInterfaceTest, DefaultPrefersRealUpInterface) {
  auto nic = ChooseInterfaceFrom(Synthetic(), "");
  ASSERT_TRUE(nic.ok()) << nic.status().ToString();
  EXPECT_EQ(nic->name, "eth0");  // lo, docker0 skipped; first real one in kernel order
  EXPECT_EQ(nic->ipv4, "10.0.0.2");
}

TEST(ChooseInterfaceTest, DefaultFallsBackToLoopbackNotBridge) {
  std::vector<NetInterface> all = {{"docker0", "172.17.0.1", false, true},
                                   {"lo", "127.0.0.1", true, true},
                                   {"eth0", "10.0.0.2", false, false}};
  auto nic = ChooseInterfaceFrom(all, "");
  ASSERT_TRUE(nic.ok());
  EXPECT_EQ(nic->name, "lo");
}

TEST(ChooseInterfaceTest, SpecSkipsDownAndPrefersNonLoopback) {
  auto nic = ChooseInterfaceFrom(Synthetic(), "eth1");  // eth1 is down, eth10 is up
  ASSERT_TRUE(nic.ok());
  EXPECT_EQ(nic->name, "eth10");
  nic = ChooseInterfaceFrom(Synthetic(), "^eth,ib");  // lo and docker0 remain
  ASSERT_TRUE(nic.ok());
  EXPECT_EQ(nic->name, "docker0");  // asked for explicitly: a bridge beats loopback
  nic = ChooseInterfaceFrom(Synthetic(), "=lo");
  ASSERT_TRUE(nic.ok());
  EXPECT_EQ(nic->name, "lo");
}

TEST(ChooseInterfaceTest, NothingMatchesListsInterfaces) {
  std::vector<NetInterface> all = {{"lo", "127.0.0.1", true, true},
                                   {"eth0", "10.0.0.2", false, true}};
  auto nic = ChooseInterfaceFrom(all, "eth9");
  ASSERT_FALSE(nic.ok());
  EXPECT_EQ(nic.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(nic.status().message(),
            "no network interface matches RAILYARD_SOCKET_IFNAME='eth9'; interfaces here: "
            "lo (127.0.0.1), eth0 (10.0.0.2)");
  nic = ChooseInterfaceFrom(Synthetic(), "=eth1");  // matches, but down
  ASSERT_FALSE(nic.ok());
  EXPECT_NE(nic.status().message().find("eth1 (10.0.1.2, down)"), std::string::npos)
      << nic.status().message();
  EXPECT_EQ(ChooseInterfaceFrom(all, "eth0,").status().code(), StatusCode::kInvalidArgument);
}

TEST(ChooseInterfaceTest, RealListHasLoopback) {
  auto all = ListInterfaces();
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  bool has_lo = false;
  for (const auto& nic : *all) {
    EXPECT_FALSE(nic.name.empty());
    EXPECT_FALSE(nic.ipv4.empty());
    if (nic.loopback) {
      has_lo = true;
      EXPECT_EQ(nic.ipv4.rfind("127.", 0), 0u) << nic.ipv4;
    }
  }
  EXPECT_TRUE(has_lo);
  auto chosen = ChooseInterface("");
  ASSERT_TRUE(chosen.ok()) << chosen.status().ToString();  // at worst, loopback
  EXPECT_TRUE(chosen->up);
}

}  // namespace
}  // namespace railyard::net
