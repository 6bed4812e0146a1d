// VirtualCluster against a simulated `ip`: checks the command sequence, all-or-nothing `up`
// and prefix-based `down` without root. The real thing is tested in tests/vcluster_*.
#include "railyard/vcluster/vcluster.h"

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <set>

#include "railyard/base/files.h"
#include "railyard/base/temp_dir_testing.h"
#include "railyard/vcluster/bandwidth_matrix.h"

namespace railyard::vcluster {
namespace {

// Keeps the set of namespaces and links that the commands would have created.
class SimulatedIp final : public CommandRunner {
 public:
  Result<std::string> Run(const std::vector<std::string>& a) override {
    log.push_back(a);
    auto is = [&](std::initializer_list<const char*> p) {
      if (a.size() < p.size()) return false;
      size_t i = 0;
      for (const char* w : p) {
        if (a[i++] != w) return false;
      }
      return true;
    };
    // Link state polls (`ip [-n NS] -j -d link show dev DEV`): a link is up after
    // `down_polls` polls that see it as the kernel shows a link whose carrier change is not
    // applied yet.
    if (std::find(a.begin(), a.end(), "-j") != a.end()) {
      if (down_polls > 0) {
        --down_polls;
        return std::string(
            R"([{"operstate":"LOWERLAYERDOWN","qdisc":"noop","linkinfo":{"info_slave_data":)"
            R"({"state":"disabled"}}}])");
      }
      return std::string(R"([{"operstate":"UP","qdisc":"noqueue","linkinfo":{"info_slave_data":)"
                         R"({"state":"forwarding"}}}])");
    }
    if (is({"ip", "netns", "list"})) {
      std::string out;
      for (const auto& n : netns) out += n + " (id: 1)\n";
      return out;
    }
    if (is({"ip", "-o", "link", "show"})) {
      std::string out = "1: lo: <LOOPBACK,UP>\n";
      int i = 2;
      for (const auto& l : links) out += std::to_string(i++) + ": " + l + "@if9: <BROADCAST>\n";
      return out;
    }
    if (is({"ip", "netns", "add"})) {
      if (!netns.insert(a[3]).second) return Internal("netns {} exists", a[3]);
      return std::string();
    }
    if (is({"ip", "netns", "delete"})) {
      if (!netns.erase(a[3])) return NotFound("no netns {}", a[3]);
      return std::string();
    }
    if (is({"ip", "link", "add"})) {
      const std::string& name = a[3];
      if (links.count(name)) return Internal("link {} exists", name);
      links.insert(name);
      if (a[5] == "veth") {
        bool in_netns = std::find(a.begin(), a.end(), "netns") != a.end();
        if (!in_netns) {
          links.insert(a[8]);
          peer[a[8]] = name;
        }
        peer[name] = in_netns ? "" : a[8];
      }
      return std::string();
    }
    if (is({"ip", "link", "delete"})) {
      if (!links.erase(a[3])) return NotFound("Cannot find device \"{}\"", a[3]);
      if (auto p = peer.find(a[3]); p != peer.end() && !p->second.empty()) links.erase(p->second);
      return std::string();
    }
    return std::string();
  }

  int Count(std::string_view word) const {
    return static_cast<int>(std::count_if(log.begin(), log.end(), [&](const auto& argv) {
      return std::find(argv.begin(), argv.end(), word) != argv.end();
    }));
  }

  std::vector<std::vector<std::string>> log;
  int down_polls = 0;
  std::set<std::string> netns;
  std::set<std::string> links;
  std::map<std::string, std::string> peer;
};

class VirtualClusterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.empty());
    spec_.prefix = "ryt";
    spec_.hosts = 4;
    spec_.leaves = 2;
    spec_.leaf_rate_bits = 1'000'000'000;
    spec_.spine_rate_bits = 500'000'000;
  }

  base::ScopedTempDir tmp_{"vc-test"};
  const std::string dir_ = tmp_.path();
  ClusterSpec spec_;
  SimulatedIp ip_;
};

TEST_F(VirtualClusterTest, UpBuildsTheTreeAndDownRemovesEverything) {
  VirtualCluster vc(&ip_, dir_);
  auto st = vc.Up(spec_);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_EQ(ip_.netns.size(), 4u);
  // spine bridge + 2 x (leaf bridge + both ends of the uplink veth) + 4 host ports
  EXPECT_EQ(ip_.links.size(), 11u);
  EXPECT_TRUE(ip_.links.count("ryt-sp"));
  EXPECT_TRUE(ip_.links.count("ryt-l1u"));
  EXPECT_TRUE(ip_.links.count("ryt-h3"));
  EXPECT_GT(ip_.Count("tbf"), 0);
  EXPECT_GT(ip_.Count("htb"), 0);
  EXPECT_TRUE(base::PathExists(StateFilePath(dir_, "ryt")));
  EXPECT_TRUE(base::PathExists(st->topology_file));
  // No namespace ever gets a route: nothing in the sequence adds one.
  EXPECT_EQ(ip_.Count("route"), 0);

  auto down = vc.Down("ryt");
  ASSERT_TRUE(down.ok()) << down.status().ToString();
  EXPECT_TRUE(ip_.netns.empty());
  EXPECT_TRUE(ip_.links.empty());
  EXPECT_FALSE(base::PathExists(StateFilePath(dir_, "ryt")));
  EXPECT_FALSE(base::PathExists(st->topology_file));
  // Idempotent.
  auto again = vc.Down("ryt");
  ASSERT_TRUE(again.ok());
  EXPECT_TRUE(again->removed.empty());
}

TEST_F(VirtualClusterTest, UpWhileUpIsRefused) {
  VirtualCluster vc(&ip_, dir_);
  ASSERT_TRUE(vc.Up(spec_).ok());
  auto second = vc.Up(spec_);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kAlreadyExists);
  EXPECT_NE(second.status().message().find("already up"), std::string::npos);
  EXPECT_EQ(ip_.netns.size(), 4u);  // the running cluster is untouched
}

TEST_F(VirtualClusterTest, FailureAtAnyStepLeavesNothingBehind) {
  // Count the commands of a successful up, then fail each one in turn.
  std::vector<std::vector<std::string>> sequence;
  {
    SimulatedIp counting;
    VirtualCluster vc(&counting, dir_);
    ASSERT_TRUE(vc.Up(spec_).ok());
    sequence = counting.log;
    ASSERT_TRUE(vc.Down("ryt").ok());
  }
  const int total = static_cast<int>(sequence.size());
  ASSERT_GT(total, 40);
  for (int fail_at = 1; fail_at <= total; ++fail_at) {
    SimulatedIp sim;
    FailingRunner failing(&sim, fail_at);
    VirtualCluster vc(&failing, dir_);
    auto st = vc.Up(spec_);
    const auto& failed = sequence[fail_at - 1];
    if (st.ok()) {
      // Only best-effort removals ("qdisc del" of a qdisc that may not exist) may fail
      // without failing `up`.
      EXPECT_NE(std::find(failed.begin(), failed.end(), "del"), failed.end())
          << "step " << fail_at << " failed but up succeeded";
      ASSERT_TRUE(vc.Down("ryt").ok());
      continue;
    }
    EXPECT_NE(st.status().message().find("injected failure"), std::string::npos);
    EXPECT_TRUE(sim.netns.empty()) << "step " << fail_at << " left " << *sim.netns.begin();
    EXPECT_TRUE(sim.links.empty()) << "step " << fail_at << " left " << *sim.links.begin();
    EXPECT_FALSE(base::PathExists(StateFilePath(dir_, "ryt"))) << "step " << fail_at;
  }
}

TEST_F(VirtualClusterTest, LeftoversWithoutStateBlockUpUntilDown) {
  // What a crash (kill -9 during up) leaves: objects, no state file.
  ip_.netns.insert("ryt-node0");
  ip_.links.insert("ryt-l0");
  ip_.links.insert("other-keep");
  VirtualCluster vc(&ip_, dir_);
  auto st = vc.Up(spec_);
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(st.status().message().find("vcluster down --prefix ryt"), std::string::npos);
  auto down = vc.Down("ryt");
  ASSERT_TRUE(down.ok()) << down.status().ToString();
  EXPECT_EQ(down->removed.size(), 2u);
  EXPECT_EQ(ip_.links, std::set<std::string>{"other-keep"});  // not ours: kept
  EXPECT_TRUE(vc.Up(spec_).ok());
}

TEST_F(VirtualClusterTest, LinkChangesValidateHostsAndPersist) {
  VirtualCluster vc(&ip_, dir_);
  ASSERT_TRUE(vc.Up(spec_).ok());
  Status unknown = vc.DegradeHost("ryt", "node9", 1000);
  EXPECT_EQ(unknown.code(), StatusCode::kNotFound);
  EXPECT_NE(unknown.message().find("node0, node1, node2, node3"), std::string::npos);
  EXPECT_EQ(vc.DegradePath("ryt", "node1", "node1", 1000).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(vc.DegradeHost("ryt", "node1", 0).code(), StatusCode::kInvalidArgument);

  ASSERT_TRUE(vc.DegradeHost("ryt", "node1", 100'000'000).ok());
  ASSERT_TRUE(vc.DegradePath("ryt", "node3", "node0", 50'000'000).ok());
  ASSERT_TRUE(vc.Cut("ryt", "node2").ok());
  auto st = vc.Load("ryt");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->HostRate("node1"), 100'000'000u);
  ASSERT_EQ(st->paths.size(), 1u);
  EXPECT_EQ(st->paths[0].a, "node0");  // ordered
  EXPECT_EQ(st->cut.count("node2"), 1u);
  // The path class filters on the peer's address.
  bool filter = false;
  for (const auto& argv : ip_.log) {
    if (std::find(argv.begin(), argv.end(), "198.18.1.4/32") != argv.end()) filter = true;
  }
  EXPECT_TRUE(filter);

  ASSERT_TRUE(vc.Restore("ryt").ok());
  ASSERT_TRUE(vc.Heal("ryt", "node2").ok());
  st = vc.Load("ryt");
  EXPECT_TRUE(st->host_rates.empty());
  EXPECT_TRUE(st->paths.empty());
  EXPECT_TRUE(st->cut.empty());
}

// Heal returns only once both ends of the link report operstate UP, a real qdisc and a
// forwarding bridge port: it polls while the kernel has not applied the carrier change.
TEST_F(VirtualClusterTest, HealWaitsUntilBothLinkEndsPassTraffic) {
  VirtualCluster vc(&ip_, dir_);
  ASSERT_TRUE(vc.Up(spec_).ok());
  ASSERT_TRUE(vc.Cut("ryt", "node2").ok());
  ip_.log.clear();
  ip_.down_polls = 3;
  ASSERT_TRUE(vc.Heal("ryt", "node2").ok());
  EXPECT_EQ(ip_.down_polls, 0);
  int polls = 0;
  bool inside = false;
  for (const auto& argv : ip_.log) {
    if (std::find(argv.begin(), argv.end(), "-j") == argv.end()) continue;
    ++polls;
    if (std::find(argv.begin(), argv.end(), "ryt-node2") != argv.end()) inside = true;
  }
  EXPECT_GE(polls, 5);  // 3 that saw it down, then both ends up
  EXPECT_TRUE(inside);  // the namespace's own eth0 is polled too
  // Then the ARP entries the cut left are forgotten: all of node2's, and node2's elsewhere.
  int flushes = 0;
  for (const auto& argv : ip_.log) {
    if (std::find(argv.begin(), argv.end(), "flush") == argv.end()) continue;
    ++flushes;
    const bool own = argv[2] == "ryt-node2" && argv.back() == "all";
    EXPECT_TRUE(own || argv.back() == "198.18.1.3") << fmt::format("{}", fmt::join(argv, " "));
  }
  EXPECT_EQ(flushes, 4);
}

// An uplink is shaped on both ends of its veth; faults persist in the state, show in the
// hosts' execution environment, and `restore` clears them all.
TEST_F(VirtualClusterTest, UplinkAndHostFaultsPersistAndRestoreClearsThem) {
  VirtualCluster vc(&ip_, dir_);
  auto up = vc.Up(spec_);
  ASSERT_TRUE(up.ok()) << up.status().ToString();
  EXPECT_EQ(up->control_address, kControlAddress);
  EXPECT_EQ(up->shared_dir, dir_ + "/ryt-shared");
  EXPECT_TRUE(std::filesystem::is_directory(dir_ + "/ryt-shared/node3"));
  Status unknown = vc.DegradeUplink("ryt", "leaf7", 1000);
  EXPECT_EQ(unknown.code(), StatusCode::kNotFound);
  EXPECT_NE(unknown.message().find("leaf0, leaf1"), std::string::npos) << unknown.ToString();
  ip_.log.clear();
  ASSERT_TRUE(vc.DegradeUplink("ryt", "leaf0", 40'000'000).ok());
  std::set<std::string> shaped;
  for (const auto& argv : ip_.log) {
    if (argv[0] == "tc" && std::find(argv.begin(), argv.end(), "40000000bit") != argv.end()) {
      shaped.insert(argv[std::find(argv.begin(), argv.end(), "dev") - argv.begin() + 1]);
    }
  }
  EXPECT_EQ(shaped, (std::set<std::string>{"ryt-l0u", "ryt-s0d"}));
  EXPECT_EQ(vc.HideProvider("ryt", "node1", "tcp;x").code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(vc.HideProvider("ryt", "node1", "tcp").ok());
  ASSERT_TRUE(vc.HideProvider("ryt", "node1", "udp").ok());
  auto st = vc.Load("ryt");
  ASSERT_TRUE(st.ok());
  EXPECT_EQ(st->UplinkRate("leaf0"), 40'000'000u);
  auto env = [&](const ClusterState& s, int host) {
    std::map<std::string, std::string> m;
    for (const auto& [k, v] : ExecutionFor(s, s.plan.hosts[host]).env) m[k] = v;
    return m;
  };
  EXPECT_EQ(env(*st, 1)["FI_PROVIDER"], "^tcp,udp");
  EXPECT_EQ(env(*st, 0).count("FI_PROVIDER"), 0u);
  EXPECT_EQ(env(*st, 0)["RAILYARD_VHOST_SCRATCH"], dir_ + "/ryt-shared/node0");
  ASSERT_TRUE(vc.Restore("ryt").ok());
  st = vc.Load("ryt");
  EXPECT_TRUE(st->uplink_rates.empty());
  EXPECT_TRUE(st->hidden_providers.empty());
  ASSERT_TRUE(vc.Down("ryt").ok());
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/ryt-shared"));
}

TEST_F(VirtualClusterTest, LoopbackModeRunsNoCommandsAndCannotShape) {
  spec_.mode = Mode::kLoopback;
  VirtualCluster vc(&ip_, dir_);
  auto st = vc.Up(spec_);
  ASSERT_TRUE(st.ok()) << st.status().ToString();
  EXPECT_TRUE(ip_.log.empty());
  EXPECT_EQ(st->plan.hosts[0].address.rfind("127.", 0), 0u);
  EXPECT_EQ(vc.DegradeHost("ryt", "node1", 1000).code(), StatusCode::kUnimplemented);
  EXPECT_EQ(vc.Cut("ryt", "node1").code(), StatusCode::kUnimplemented);
  ASSERT_TRUE(vc.Down("ryt").ok());
  EXPECT_TRUE(ip_.log.empty());
  EXPECT_FALSE(base::PathExists(StateFilePath(dir_, "ryt")));
}

TEST_F(VirtualClusterTest, ListAndLoadErrors) {
  VirtualCluster vc(&ip_, dir_);
  auto none = vc.Load("ryt");
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no virtual cluster with prefix 'ryt' is up"),
            std::string::npos);
  ASSERT_TRUE(vc.Up(spec_).ok());
  spec_.prefix = "ryu";
  ASSERT_TRUE(vc.Up(spec_).ok());
  auto all = vc.List();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].spec().prefix, "ryt");
  EXPECT_EQ((*all)[1].spec().prefix, "ryu");
}

}  // namespace
}  // namespace railyard::vcluster
