#include "railyard/net/select.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <array>

#include "railyard/net/store.h"

namespace railyard::net {
namespace {

bool Contains(const std::string& haystack, std::string_view needle) {
  return haystack.find(needle) != std::string::npos;
}

// select.h's list of RDMA providers: "auto" picks ofi only when one of these is present.
bool IsRdmaProviderName(std::string_view name) {
  constexpr std::array<std::string_view, 5> kRdma = {"verbs", "efa", "cxi", "psm3", "opx"};
  return std::any_of(kRdma.begin(), kRdma.end(),
                     [&](std::string_view p) { return name.substr(0, p.size()) == p; });
}

// What "auto" across hosts must give in this build on this machine.
std::string ExpectedAutoAcrossHosts() {
#ifdef RAILYARD_WITH_OFI
  auto providers = ListOfiProviders();
  if (!providers.ok()) return "tcp";  // libfabric absent: nothing to offer but tcp
  for (const auto& p : *providers) {
    if (IsRdmaProviderName(p)) return "ofi";
  }
#endif
  return "tcp";
}

TEST(TransportNamesTest, ListsBuiltBackends) {
  std::vector<std::string> names = TransportNames();
#ifdef RAILYARD_WITH_OFI
  EXPECT_EQ(names, (std::vector<std::string>{"ofi", "shm", "tcp"}));
#else
  EXPECT_EQ(names, (std::vector<std::string>{"shm", "tcp"}));
#endif
  // "auto" is a request, not a backend.
  EXPECT_EQ(std::count(names.begin(), names.end(), "auto"), 0);
}

TEST(ResolveTransportTest, AutoOnOneHostIsShm) {
  for (std::string_view requested : {"auto", ""}) {
    auto r = ResolveTransport(requested, /*all_ranks_on_one_host=*/true);
    ASSERT_TRUE(r.ok()) << requested << ": " << r.status().ToString();
    EXPECT_EQ(*r, "shm") << requested;
  }
}

TEST(ResolveTransportTest, AutoAcrossHostsIsOfiOnlyWithAnRdmaProvider) {
  std::string expected = ExpectedAutoAcrossHosts();
#ifdef RAILYARD_WITH_OFI
  auto providers = ListOfiProviders();
  std::string listed;
  if (providers.ok()) {
    for (const auto& p : *providers) listed += (listed.empty() ? "" : ", ") + p;
  } else {
    listed = providers.status().ToString();
  }
  RecordProperty("ofi_providers", listed);
  SCOPED_TRACE("libfabric providers here: " + listed);
  if (providers.ok()) {
    // Socket and shared-memory providers never count as RDMA.
    for (std::string_view p : {"tcp;ofi_rxm", "udp;ofi_rxd", "shm", "sockets", "net"}) {
      EXPECT_FALSE(IsRdmaProviderName(p)) << p;
    }
  }
#endif
  for (std::string_view requested : {"auto", ""}) {
    auto r = ResolveTransport(requested, /*all_ranks_on_one_host=*/false);
    ASSERT_TRUE(r.ok()) << requested << ": " << r.status().ToString();
    EXPECT_EQ(*r, expected) << requested;
    // Never shm when the ranks span hosts.
    EXPECT_NE(*r, "shm") << requested;
  }
}

TEST(ResolveTransportTest, ExplicitNamesResolveToThemselves) {
  for (const std::string& name : TransportNames()) {
    auto r = ResolveTransport(name, /*all_ranks_on_one_host=*/true);
    ASSERT_TRUE(r.ok()) << name << ": " << r.status().ToString();
    EXPECT_EQ(*r, name);
    if (name == "shm") continue;  // checked below: not across hosts
    r = ResolveTransport(name, /*all_ranks_on_one_host=*/false);
    ASSERT_TRUE(r.ok()) << name << ": " << r.status().ToString();
    EXPECT_EQ(*r, name);
  }
}

TEST(ResolveTransportTest, ShmAcrossHostsIsAFailedPreconditionSayingWhy) {
  auto r = ResolveTransport("shm", /*all_ranks_on_one_host=*/false);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().code(), StatusCode::kFailedPrecondition);
  std::string m = r.status().message();
  EXPECT_TRUE(Contains(m, "shm")) << m;
  EXPECT_TRUE(Contains(m, "one host")) << m;
  EXPECT_TRUE(Contains(m, "tcp")) << m;  // says what to use instead
}

TEST(ResolveTransportTest, UnknownNameIsInvalidListingTheAcceptedNames) {
  for (std::string_view bad : {"infiniband", "TCP", "tcp ", "Auto", "shm,tcp"}) {
    auto r = ResolveTransport(bad, /*all_ranks_on_one_host=*/true);
    ASSERT_FALSE(r.ok()) << bad;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << bad;
    std::string m = r.status().message();
    EXPECT_TRUE(Contains(m, "'" + std::string(bad) + "'")) << m;
    EXPECT_TRUE(Contains(m, "auto")) << m;
    for (const std::string& name : TransportNames()) EXPECT_TRUE(Contains(m, name)) << m;
  }
#ifndef RAILYARD_WITH_OFI
  auto ofi = ResolveTransport("ofi", false);
  EXPECT_EQ(ofi.status().code(), StatusCode::kInvalidArgument);
#endif
}

TEST(NewTransportTest, CreatesUnstartedBackendsByName) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  TransportOptions options;
  options.rank = 0;
  options.size = 2;
  options.store = store.get();
  options.key_prefix = "select-test";
  options.secret = "secret";
  for (std::string_view name : {"tcp", "shm"}) {
    auto t = NewTransport(name, options);
    ASSERT_TRUE(t.ok()) << name << ": " << t.status().ToString();
    EXPECT_EQ((*t)->name(), name);
    EXPECT_EQ((*t)->rank(), 0);
    EXPECT_EQ((*t)->size(), 2);
  }
}

TEST(NewTransportTest, UnresolvedOrUnknownNameIsInvalid) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  TransportOptions options;
  options.store = store.get();
  // "auto" must go through ResolveTransport first.
  for (std::string_view bad : {"auto", "", "bogus"}) {
    auto t = NewTransport(bad, options);
    ASSERT_FALSE(t.ok()) << bad;
    EXPECT_EQ(t.status().code(), StatusCode::kInvalidArgument) << bad;
    EXPECT_TRUE(Contains(t.status().message(), "'" + std::string(bad) + "'"))
        << t.status().message();
  }
#ifndef RAILYARD_WITH_OFI
  EXPECT_EQ(NewTransport("ofi", options).status().code(), StatusCode::kInvalidArgument);
#endif
}

TEST(TransportRegistryTest, RejectsDuplicatesAndReservedNamesAndListsSorted) {
  TransportRegistry registry;
  ASSERT_TRUE(RegisterBuiltinTransports(registry).ok());
  EXPECT_EQ(registry.Names(), TransportNames());
  auto factory = [](const TransportOptions& o, const BackendOptions& b) {
    return NewTcpTransport(o, b.tcp);
  };
  EXPECT_EQ(registry.Register("tcp", factory).code(), StatusCode::kAlreadyExists);
  EXPECT_EQ(registry.Register("auto", factory).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(registry.Register("", factory).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(registry.Register("aaa", factory).ok());
  EXPECT_EQ(registry.Names().front(), "aaa");
}

// Each backend gets its own member of BackendOptions: a bad tcp option fails tcp only, and
// shm's options reach shm.
TEST(NewTransportTest, BackendOptionsReachTheirBackend) {
  std::unique_ptr<Store> store = NewInMemoryStore();
  TransportOptions options;
  options.size = 2;
  options.store = store.get();
  options.key_prefix = "select-test";
  options.secret = "secret";
  options.socket_ifname = "=lo";
  BackendOptions bad;
  bad.tcp.streams_per_peer = 0;
  bad.shm.ring_bytes = 4097;  // not a multiple of the ring alignment
  auto tcp = NewTransport("tcp", options, bad);
  EXPECT_EQ(tcp.status().code(), StatusCode::kInvalidArgument) << tcp.status().ToString();
  auto shm = NewTransport("shm", options, bad);
  EXPECT_EQ(shm.status().code(), StatusCode::kInvalidArgument) << shm.status().ToString();
  EXPECT_TRUE(Contains(shm.status().message(), "4097")) << shm.status().message();
  BackendOptions good;
  EXPECT_TRUE(NewTransport("tcp", options, good).ok());
  EXPECT_TRUE(NewTransport("shm", options, good).ok());
}

}  // namespace
}  // namespace railyard::net
