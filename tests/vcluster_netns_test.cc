// The virtual cluster for real: network namespaces, bridges, tbf shaping, cut links. Needs
// root and network namespaces; elsewhere every test reports a skip with the reason.
// Each test owns a prefix and a state directory, and TearDown removes the cluster and checks
// that nothing with the prefix is left, also when the test failed half-way.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/syscall.h>

#include <cstring>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_harness.h"
#include "railyard/base/temp_dir_testing.h"

namespace railyard::testing {
namespace {

// Empty when namespaces work here, else why not.
std::string NetnsUnavailableReason() {
  if (::geteuid() != 0)
    return "needs root to create network namespaces (running as uid " +
           std::to_string(::geteuid()) + ")";
  auto r = base::RunCommand({.argv = {"ip", "netns", "add", "rynx-probe"}},
                            base::Deadline::After(std::chrono::seconds(10)));
  if (!r.ok()) return "cannot run ip: " + r.status().message();
  if (!r->Succeeded()) return "network namespaces unavailable: " + r->Describe();
  base::RunCommand({.argv = {"ip", "netns", "delete", "rynx-probe"}},
                   base::Deadline::After(std::chrono::seconds(10)))
      .status()
      .IgnoreError();
  return "";
}

// Names of namespaces and links starting with "<prefix>-".
std::vector<std::string> Leftovers(const std::string& prefix) {
  std::vector<std::string> found;
  for (auto argv : {std::vector<std::string>{"ip", "netns", "list"},
                    std::vector<std::string>{"ip", "-o", "link", "show"}}) {
    auto r = base::RunCommand({.argv = argv}, base::Deadline::After(std::chrono::seconds(10)));
    if (!r.ok()) continue;
    std::string_view text = r->stdout_text;
    size_t pos = 0;
    while (pos < text.size()) {
      size_t end = text.find('\n', pos);
      if (end == std::string_view::npos) end = text.size();
      std::string_view line = text.substr(pos, end - pos);
      pos = end + 1;
      if (argv[1] == "-o") {
        size_t c = line.find(": ");
        if (c == std::string_view::npos) continue;
        line = line.substr(c + 2);
      }
      if (line.substr(0, prefix.size() + 1) == prefix + "-") {
        found.emplace_back(line.substr(0, line.find_first_of(" @:")));
      }
    }
  }
  return found;
}

// Mount points at or below `dir`, from this process's mountinfo.
std::vector<std::string> MountsUnder(const std::string& dir) {
  std::vector<std::string> found;
  std::ifstream in("/proc/self/mountinfo");
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream fields(line);
    std::string f[5];
    for (auto& x : f) fields >> x;
    if (f[4] == dir || f[4].rfind(dir + "/", 0) == 0) found.push_back(f[4]);
  }
  return found;
}

class VclusterNetnsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    static const std::string reason = NetnsUnavailableReason();
    if (!reason.empty()) GTEST_SKIP() << reason;
    // A prefix per test, so ctest -j can run this file beside others.
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    prefix_ = "yn" + std::to_string(std::hash<std::string>{}(info->name()) % 1000);
    ASSERT_FALSE(dir_.empty());
    // A previous crashed run of this very test may have left its cluster.
    RunRailyard(Vc({"down"}));
  }
  void TearDown() override {
    if (prefix_.empty()) return;
    CliResult down = RunRailyard(Vc({"down"}));
    EXPECT_EQ(down.exit_code, 0) << down.err;
    EXPECT_EQ(Leftovers(prefix_), std::vector<std::string>{});
  }
  std::vector<std::string> Vc(std::vector<std::string> args) {
    // `fault` has subcommands: the flags belong to them.
    const size_t words = args[0] == "fault" ? 2 : 1;
    std::vector<std::string> v = {"vcluster"};
    v.insert(v.end(), args.begin(), args.begin() + words);
    v.insert(v.end(), {"--prefix", prefix_, "--state-dir", dir_});
    v.insert(v.end(), args.begin() + words, args.end());
    return v;
  }
  void Up(std::vector<std::string> extra) {
    std::vector<std::string> args = {"up", "--mode", "netns"};
    args.insert(args.end(), extra.begin(), extra.end());
    CliResult r = RunRailyard(Vc(args));
    ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  }
  // bits/s of each measured pair, keyed "src>dst".
  std::map<std::string, double> Matrix(const std::string& pairs, const std::string& per_pair) {
    std::vector<std::string> args = {"matrix", "--json", "--per-pair", per_pair};
    if (!pairs.empty()) args.insert(args.end(), {"--pairs", pairs});
    CliResult r = RunRailyard(Vc(args));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    std::map<std::string, double> out;
    if (r.exit_code != 0) return out;
    for (const auto& p : nlohmann::json::parse(r.out)) {
      out[p["src"].get<std::string>() + ">" + p["dst"].get<std::string>()] =
          p["bits_per_second"].get<double>();
    }
    return out;
  }

  // Exit code of a shell command run on `host`.
  int OnHost(const std::string& host, const std::string& script) {
    return RunRailyard(Vc({"exec", host, "--", "bash", "-c", script})).exit_code;
  }
  nlohmann::json StateJson() {
    CliResult r = RunRailyard(Vc({"status", "--json"}));
    EXPECT_EQ(r.exit_code, 0) << r.err;
    return r.exit_code == 0 ? nlohmann::json::parse(r.out) : nlohmann::json::object();
  }

  std::string prefix_;
  base::ScopedTempDir tmp_{"netns"};
  const std::string dir_ = tmp_.path();
};

TEST_F(VclusterNetnsTest, UpEightHostsThenDownLeavesNoTrace) {
  Up({"--hosts", "8", "--leaves", "2", "--leaf-rate", "10Gbit", "--spine-rate", "5Gbit"});
  std::vector<std::string> objects = Leftovers(prefix_);
  int netns = 0;
  for (const auto& o : objects) netns += o.find("-node") != std::string::npos;
  EXPECT_EQ(netns, 8);
  // 8 namespaces + spine bridge + 2 x (leaf bridge + 2 uplink ends) + 8 host ports
  EXPECT_EQ(objects.size(), 8u + 1 + 6 + 8);
  // No namespace has a default route or any route beyond its own subnet.
  auto routes = base::RunCommand({.argv = {"ip", "-n", prefix_ + "-node0", "route", "show"}},
                                 base::Deadline::After(std::chrono::seconds(10)));
  ASSERT_TRUE(routes.ok());
  EXPECT_EQ(routes->stdout_text.find("default"), std::string::npos) << routes->stdout_text;
  EXPECT_NE(routes->stdout_text.find("198.18.0.0/16"), std::string::npos);
  EXPECT_EQ(CountLines(routes->stdout_text), 1) << routes->stdout_text;

  CliResult down = RunRailyard(Vc({"down"}));
  ASSERT_EQ(down.exit_code, 0) << down.err;
  EXPECT_EQ(Leftovers(prefix_), std::vector<std::string>{});
}

TEST_F(VclusterNetnsTest, EveryHostReachesEveryOther) {
  Up({"--hosts", "4", "--leaves", "2"});
  auto m = Matrix("", "100ms");
  ASSERT_EQ(m.size(), 12u);
  for (const auto& [pair, bits] : m) EXPECT_GT(bits, 1e6) << pair;
}

TEST_F(VclusterNetnsTest, DegradedHostIsSlowerThanAHealthyOneInTheSameRun) {
  Up({"--hosts", "4", "--leaves", "2", "--leaf-rate", "1Gbit", "--spine-rate", "1Gbit"});
  CliResult d = RunRailyard(Vc({"degrade", "node1", "--rate", "100Mbit"}));
  ASSERT_EQ(d.exit_code, 0) << d.err;
  auto m = Matrix("node0:node1,node1:node0,node2:node3,node3:node2", "300ms");
  ASSERT_EQ(m.size(), 4u);
  // 100 Mbit/s against 1 Gbit/s: half is a wide margin for a loaded 2-core machine.
  EXPECT_LT(m["node0>node1"], 0.5 * m["node2>node3"]);
  EXPECT_LT(m["node1>node0"], 0.5 * m["node3>node2"]);

  // One path: only that pair slows down.
  ASSERT_EQ(RunRailyard(Vc({"restore"})).exit_code, 0);
  ASSERT_EQ(RunRailyard(Vc({"degrade", "node0", "node2", "--rate", "50Mbit"})).exit_code, 0);
  auto p = Matrix("node0:node2,node0:node3", "300ms");
  EXPECT_LT(p["node0>node2"], 0.5 * p["node0>node3"]);
}

TEST_F(VclusterNetnsTest, CrossLeafTrafficIsCappedByTheSpine) {
  Up({"--hosts", "4", "--leaves", "2", "--leaf-rate", "1Gbit", "--spine-rate", "200Mbit"});
  auto m = Matrix("node0:node1,node0:node2", "300ms");
  EXPECT_LT(m["node0>node2"], 0.5 * m["node0>node1"]);
}

TEST_F(VclusterNetnsTest, CutHostIsUnreachableUntilHealed) {
  Up({"--hosts", "3", "--leaves", "1"});
  ASSERT_EQ(RunRailyard(Vc({"cut", "node2"})).exit_code, 0);
  CliResult status = RunRailyard(Vc({"status"}));
  EXPECT_NE(status.out.find("CUT"), std::string::npos) << status.out;
  CliResult cut =
      RunRailyard(Vc({"matrix", "--json", "--per-pair", "100ms", "--pairs", "node0:node2"}));
  EXPECT_NE(cut.exit_code, 0);
  EXPECT_NE(cut.err.find("node2"), std::string::npos) << cut.err;
  ASSERT_EQ(RunRailyard(Vc({"heal", "node2"})).exit_code, 0);
  auto m = Matrix("node0:node2", "100ms");
  EXPECT_GT(m["node0>node2"], 1e6);
}

TEST_F(VclusterNetnsTest, FailedUpRemovesWhatItBuilt) {
  // Fail the 20th ip/tc command (in the middle of the first leaf's hosts).
  CliResult r = RunRailyard(
      Vc({"up", "--mode", "netns", "--hosts", "4", "--leaves", "2", "--fail-at-for-test", "20"}));
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("everything it created was removed"), std::string::npos) << r.err;
  EXPECT_EQ(Leftovers(prefix_), std::vector<std::string>{});
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/vcluster-" + prefix_ + ".json"));
}

TEST_F(VclusterNetnsTest, DownCleansUpAfterACrashThatLostTheStateFile) {
  Up({"--hosts", "2", "--leaves", "1"});
  std::filesystem::remove(dir_ + "/vcluster-" + prefix_ + ".json");
  CliResult again = RunRailyard(Vc({"up", "--mode", "netns", "--hosts", "2", "--leaves", "1"}));
  EXPECT_NE(again.exit_code, 0);
  EXPECT_NE(again.err.find("leftover"), std::string::npos) << again.err;
  CliResult down = RunRailyard(Vc({"down"}));
  ASSERT_EQ(down.exit_code, 0) << down.err;
  EXPECT_EQ(Leftovers(prefix_), std::vector<std::string>{});
}

TEST_F(VclusterNetnsTest, ExecRunsInsideTheHostsNamespace) {
  Up({"--hosts", "2", "--leaves", "1"});
  CliResult r = RunRailyard(Vc({"exec", "node1", "--", "ip", "-o", "-4", "addr", "show", "eth0"}));
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("198.18.0.2/16"), std::string::npos) << r.out;
}

// A coordinator in the root namespace listens on the control address; every host reaches
// it, and still has no default route and no link but its own eth0 (and lo).
TEST_F(VclusterNetnsTest, HostsReachAListenerOnTheControlAddress) {
  // Clusters share their hosts' addresses, so only one can have the control address; ctest
  // runs the netns tests one at a time (RESOURCE_LOCK netns), a hand-run one may meet another.
  auto taken = base::RunCommand({.argv = {"ip", "-o", "addr", "show", "to", "198.18.0.0/16"}},
                                base::Deadline::After(std::chrono::seconds(10)));
  ASSERT_TRUE(taken.ok());
  if (!taken->stdout_text.empty()) {
    GTEST_SKIP() << "another virtual cluster holds the control address: " << taken->stdout_text;
  }
  Up({"--hosts", "2", "--leaves", "1"});
  nlohmann::json st = StateJson();
  ASSERT_EQ(st.value("control_address", ""), "198.18.255.254") << st.dump();
  base::UniqueFd listener(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_in a{};
  a.sin_family = AF_INET;
  inet_pton(AF_INET, "198.18.255.254", &a.sin_addr);
  ASSERT_EQ(::bind(listener.get(), reinterpret_cast<sockaddr*>(&a), sizeof a), 0)
      << std::strerror(errno);
  ASSERT_EQ(::listen(listener.get(), 4), 0);
  socklen_t len = sizeof a;
  ::getsockname(listener.get(), reinterpret_cast<sockaddr*>(&a), &len);
  const std::string port = std::to_string(ntohs(a.sin_port));
  for (const std::string host : {"node0", "node1"}) {
    EXPECT_EQ(OnHost(host, "exec 3<>/dev/tcp/198.18.255.254/" + port), 0) << host;
    pollfd pf{listener.get(), POLLIN, 0};
    ASSERT_EQ(::poll(&pf, 1, 10'000), 1) << host << "'s connection never arrived";
    base::UniqueFd conn(::accept4(listener.get(), nullptr, nullptr, SOCK_CLOEXEC));
    EXPECT_TRUE(conn.valid());
    auto routes = base::RunCommand({.argv = {"ip", "-n", prefix_ + "-" + host, "route", "show"}},
                                   base::Deadline::After(std::chrono::seconds(10)));
    ASSERT_TRUE(routes.ok());
    EXPECT_EQ(routes->stdout_text.find("default"), std::string::npos) << routes->stdout_text;
    EXPECT_EQ(CountLines(routes->stdout_text), 1) << routes->stdout_text;
    auto links = base::RunCommand({.argv = {"ip", "-n", prefix_ + "-" + host, "-o", "link"}},
                                  base::Deadline::After(std::chrono::seconds(10)));
    ASSERT_TRUE(links.ok());
    EXPECT_EQ(CountLines(links->stdout_text), 2) << links->stdout_text;  // lo and eth0
  }
  listener.Reset();
  ASSERT_EQ(RunRailyard(Vc({"down"})).exit_code, 0);
  auto addr = base::RunCommand({.argv = {"ip", "-o", "addr", "show", "to", "198.18.255.254/32"}},
                               base::Deadline::After(std::chrono::seconds(10)));
  ASSERT_TRUE(addr.ok());
  EXPECT_EQ(addr->stdout_text, "") << "down left the control address";
}

TEST_F(VclusterNetnsTest, SlowUplinkSlowsOnlyTrafficThatCrossesIt) {
  Up({"--hosts", "4", "--leaves", "2", "--leaf-rate", "1Gbit", "--spine-rate", "1Gbit"});
  CliResult bad = RunRailyard(Vc({"degrade", "--uplink", "leaf9", "--rate", "40Mbit"}));
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.err.find("leaf0, leaf1"), std::string::npos) << bad.err;
  CliResult d = RunRailyard(Vc({"degrade", "--uplink", "leaf0", "--rate", "50Mbit"}));
  ASSERT_EQ(d.exit_code, 0) << d.err;
  EXPECT_EQ(StateJson()["uplink_rates"].value("leaf0", 0ull), 50'000'000ull);
  auto m = Matrix("node0:node1,node0:node2,node2:node0,node2:node3", "300ms");
  ASSERT_EQ(m.size(), 4u);
  // 50 Mbit/s against 1 Gbit/s: half is a wide margin on a loaded machine. Both directions.
  EXPECT_LT(m["node0>node2"], 0.5 * m["node0>node1"]);
  EXPECT_LT(m["node2>node0"], 0.5 * m["node2>node3"]);
  ASSERT_EQ(RunRailyard(Vc({"restore"})).exit_code, 0);
  EXPECT_TRUE(StateJson()["uplink_rates"].empty());
  auto after = Matrix("node0:node2,node0:node1", "300ms");
  EXPECT_GT(after["node0>node2"], 0.5 * after["node0>node1"]);
}

// Scratch faults fail writes on that host only; restore and clear unmount; down unmounts
// too, also after a crash that lost the state file.
TEST_F(VclusterNetnsTest, ScratchFaultsFailWritesOnThatHostOnly) {
  Up({"--hosts", "3", "--leaves", "1"});
  const std::string shared = StateJson().value("shared_dir", "");
  ASSERT_EQ(shared, dir_ + "/" + prefix_ + "-shared");
  CliResult status = RunRailyard(Vc({"status"}));
  EXPECT_NE(status.out.find("shared dir: " + shared), std::string::npos) << status.out;
  const std::string write = "echo x > \"$RAILYARD_VHOST_SCRATCH/f\"";
  for (const std::string host : {"node0", "node1", "node2"}) EXPECT_EQ(OnHost(host, write), 0);
  ASSERT_EQ(RunRailyard(Vc({"fault", "scratch-readonly", "node1"})).exit_code, 0);
  ASSERT_EQ(RunRailyard(Vc({"fault", "scratch-full", "node2"})).exit_code, 0);
  EXPECT_EQ(OnHost("node0", write), 0);
  EXPECT_NE(OnHost("node1", write), 0);
  EXPECT_EQ(OnHost("node1", "cat \"$RAILYARD_VHOST_SCRATCH/f\""), 0) << "files stay readable";
  EXPECT_NE(OnHost("node2", write), 0);
  status = RunRailyard(Vc({"status"}));
  EXPECT_NE(status.out.find("SCRATCH-READONLY"), std::string::npos) << status.out;
  EXPECT_NE(status.out.find("SCRATCH-FULL"), std::string::npos) << status.out;
  EXPECT_EQ(MountsUnder(shared).size(), 2u);

  ASSERT_EQ(RunRailyard(Vc({"fault", "clear", "node1"})).exit_code, 0);
  EXPECT_EQ(OnHost("node1", write), 0);
  ASSERT_EQ(RunRailyard(Vc({"restore"})).exit_code, 0);
  EXPECT_EQ(OnHost("node2", write), 0);
  EXPECT_EQ(MountsUnder(shared), std::vector<std::string>{});

  ASSERT_EQ(RunRailyard(Vc({"fault", "scratch-full", "node2"})).exit_code, 0);
  ASSERT_EQ(RunRailyard(Vc({"fault", "scratch-readonly", "node0"})).exit_code, 0);
  std::filesystem::remove(dir_ + "/vcluster-" + prefix_ + ".json");  // as if it crashed
  CliResult down = RunRailyard(Vc({"down"}));
  ASSERT_EQ(down.exit_code, 0) << down.err;
  EXPECT_EQ(MountsUnder(shared), std::vector<std::string>{});
  EXPECT_FALSE(std::filesystem::exists(shared));
}

// A hidden provider is gone from every command run on that host, and only there.
TEST_F(VclusterNetnsTest, HiddenProviderIsGoneOnThatHostOnly) {
  Up({"--hosts", "2", "--leaves", "1"});
  ASSERT_EQ(RunRailyard(Vc({"fault", "hide-provider", "node1", "tcp"})).exit_code, 0);
  EXPECT_NE(RunRailyard(Vc({"exec", "node1", "--", "env"})).out.find("FI_PROVIDER=^tcp\n"),
            std::string::npos);
  EXPECT_EQ(RunRailyard(Vc({"exec", "node0", "--", "env"})).out.find("FI_PROVIDER"),
            std::string::npos);
  // What the node check sees: the providers fi_getinfo lists on each host.
  auto providers = [&](const std::string& host) -> std::string {
    CliResult r =
        RunRailyard(Vc({"exec", host, "--", RAILYARD_BINARY, "validate", "node", "--json"}));
    nlohmann::json j = nlohmann::json::parse(r.out, nullptr, false);
    std::string found = "(no node.fabric_providers in: " + r.out.substr(0, 200) + ")";
    std::function<void(const nlohmann::json&)> walk = [&](const nlohmann::json& o) {
      if (o.is_object() && o.value("id", "") == "node.fabric_providers") {
        found = o.value("verdict", "") + ": " + o.value("measured", "");
      }
      if (o.is_object() || o.is_array()) {
        for (const auto& v : o) walk(v);
      }
    };
    walk(j);
    return found;
  };
  std::string on0 = providers("node0");
  if (on0.find("tcp") == std::string::npos) {
    GTEST_SKIP() << "libfabric lists no tcp provider here: " << on0;
  }
  std::string on1 = providers("node1");
  EXPECT_EQ(on1.find("tcp"), std::string::npos) << on1;
  EXPECT_NE(on1.find("PASS"), std::string::npos) << on1;  // it still ran, with the others
  ASSERT_EQ(RunRailyard(Vc({"restore"})).exit_code, 0);
  EXPECT_NE(providers("node1").find("tcp"), std::string::npos);
}

}  // namespace
}  // namespace railyard::testing
