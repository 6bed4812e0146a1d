// The `railyard vcluster` command line in loopback mode (no root needed): bad input gets one
// clear line and exit 2 and changes nothing; a loopback cluster can run commands on its
// hosts and measure bandwidth between them.
#include <nlohmann/json.hpp>

#include "cli_harness.h"
#include "railyard/base/temp_dir_testing.h"

namespace railyard::testing {
namespace {

class VclusterCliTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(dir_.empty()); }
  void TearDown() override { RunRailyard(Vc({"down"})); }
  // vcluster SUB --prefix rylo --state-dir DIR ARGS...
  std::vector<std::string> Vc(std::vector<std::string> args) {
    // `fault` has subcommands: the flags belong to them.
    const size_t words = args[0] == "fault" ? 2 : 1;
    std::vector<std::string> v = {"vcluster"};
    v.insert(v.end(), args.begin(), args.begin() + words);
    v.insert(v.end(), {"--prefix", "rylo", "--state-dir", dir_});
    v.insert(v.end(), args.begin() + words, args.end());
    return v;
  }
  void ExpectOneLineError(const CliResult& r, const std::string& needle) {
    EXPECT_EQ(r.exit_code, 2) << r.out << r.err;
    EXPECT_EQ(r.err.rfind("railyard: error: ", 0), 0u) << r.err;
    EXPECT_NE(r.err.find(needle), std::string::npos) << r.err;
    EXPECT_LE(CountLines(r.err), 2) << r.err;  // the error, at most a usage hint
    EXPECT_FALSE(std::filesystem::exists(dir_ + "/vcluster-rylo.json"));
  }
  base::ScopedTempDir tmp_{"cli"};
  const std::string dir_ = tmp_.path();
};

TEST_F(VclusterCliTest, BadUpArgumentsAreRejectedBeforeAnythingIsBuilt) {
  ExpectOneLineError(RunRailyard(Vc({"up", "--hosts", "0"})), "--hosts 0");
  ExpectOneLineError(RunRailyard(Vc({"up", "--hosts", "2", "--leaves", "3"})), "--leaves 3");
  ExpectOneLineError(RunRailyard(Vc({"up", "--leaf-rate", "10gbits"})), "10gbits");
  ExpectOneLineError(RunRailyard(Vc({"up", "--spine-rate", "fast"})), "--spine-rate");
  ExpectOneLineError(RunRailyard(Vc({"up", "--mode", "vm"})), "--mode 'vm'");
  ExpectOneLineError(RunRailyard({"vcluster", "up", "--prefix", "Bad-Prefix", "--state-dir", dir_}),
                     "--prefix");
  ExpectOneLineError(RunRailyard(Vc({"up", "--hosts", "many"})), "--hosts");
}

TEST_F(VclusterCliTest, LoopbackClusterRunsCommandsOnItsHosts) {
  CliResult up = RunRailyard(Vc({"up", "--mode", "loopback", "--hosts", "3", "--leaves", "2"}));
  ASSERT_EQ(up.exit_code, 0) << up.out << up.err;
  EXPECT_NE(up.out.find("node2"), std::string::npos);
  EXPECT_NE(up.out.find("leaf1"), std::string::npos);

  // exec passes the command's exit code and the host's identity through.
  CliResult ex = RunRailyard(
      Vc({"exec", "node2", "--", "sh", "-c", "echo $RAILYARD_VHOST $RAILYARD_VHOST_ADDR; exit 7"}));
  EXPECT_EQ(ex.exit_code, 7) << ex.err;
  EXPECT_EQ(ex.out.rfind("node2 127.", 0), 0u) << ex.out;

  // Up while up: refused, and the running cluster is untouched.
  CliResult again = RunRailyard(Vc({"up", "--mode", "loopback"}));
  EXPECT_EQ(again.exit_code, 2);
  EXPECT_NE(again.err.find("already up"), std::string::npos) << again.err;
  CliResult status = RunRailyard(Vc({"status", "--json"}));
  ASSERT_EQ(status.exit_code, 0) << status.err;
  auto j = nlohmann::json::parse(status.out);
  EXPECT_EQ(j["hosts"], 3);
  EXPECT_EQ(j["mode"], "loopback");
  EXPECT_EQ(j["control_address"], "127.0.0.1");
  EXPECT_EQ(j["shared_dir"], dir_ + "/rylo-shared");
  EXPECT_TRUE(std::filesystem::is_directory(dir_ + "/rylo-shared/node2"));

  // Hiding a provider needs no namespace: every command on that host sees it excluded.
  ASSERT_EQ(RunRailyard(Vc({"fault", "hide-provider", "node1", "tcp"})).exit_code, 0);
  CliResult env = RunRailyard(Vc({"exec", "node1", "--", "env"}));
  EXPECT_NE(env.out.find("FI_PROVIDER=^tcp\n"), std::string::npos) << env.out;
  EXPECT_NE(env.out.find("RAILYARD_VHOST_SCRATCH=" + dir_ + "/rylo-shared/node1\n"),
            std::string::npos)
      << env.out;
  EXPECT_NE(RunRailyard(Vc({"status"})).out.find("NO-tcp"), std::string::npos);
  CliResult bad_name = RunRailyard(Vc({"fault", "hide-provider", "node1", "tcp;ofi_rxm"}));
  EXPECT_EQ(bad_name.exit_code, 2);
  EXPECT_NE(bad_name.err.find("provider 'tcp;ofi_rxm'"), std::string::npos) << bad_name.err;
  ASSERT_EQ(RunRailyard(Vc({"restore"})).exit_code, 0);
  EXPECT_EQ(RunRailyard(Vc({"exec", "node1", "--", "env"})).out.find("FI_PROVIDER"),
            std::string::npos);

  // Unknown host: one line naming it and the hosts that exist.
  CliResult bad = RunRailyard(Vc({"exec", "node9", "--", "true"}));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("unknown host 'node9'"), std::string::npos) << bad.err;
  EXPECT_NE(bad.err.find("node0, node1, node2"), std::string::npos) << bad.err;

  // Shaping needs namespaces: a clear refusal, not a silent no-op.
  CliResult degrade = RunRailyard(Vc({"degrade", "node1", "--rate", "10Mbit"}));
  EXPECT_EQ(degrade.exit_code, 1);
  EXPECT_NE(degrade.err.find("loopback mode"), std::string::npos) << degrade.err;
  CliResult uplink = RunRailyard(Vc({"degrade", "--uplink", "leaf0", "--rate", "10Mbit"}));
  EXPECT_EQ(uplink.exit_code, 1);
  EXPECT_NE(uplink.err.find("loopback mode"), std::string::npos) << uplink.err;
  CliResult neither = RunRailyard(Vc({"degrade", "--rate", "10Mbit"}));
  EXPECT_EQ(neither.exit_code, 2);
  EXPECT_NE(neither.err.find("--uplink LEAF"), std::string::npos) << neither.err;

  CliResult list = RunRailyard({"vcluster", "list", "--state-dir", dir_});
  EXPECT_NE(list.out.find("rylo"), std::string::npos) << list.out;

  CliResult down = RunRailyard(Vc({"down"}));
  EXPECT_EQ(down.exit_code, 0) << down.err;
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/vcluster-rylo.json"));
  CliResult down2 = RunRailyard(Vc({"down"}));
  EXPECT_EQ(down2.exit_code, 0) << down2.err;
  EXPECT_NE(down2.out.find("nothing to remove"), std::string::npos);
}

TEST_F(VclusterCliTest, LoopbackMatrixMeasuresEveryPair) {
  ASSERT_EQ(
      RunRailyard(Vc({"up", "--mode", "loopback", "--hosts", "3", "--leaves", "1"})).exit_code, 0);
  CliResult m = RunRailyard(Vc({"matrix", "--per-pair", "50ms", "--port", "15201", "--json"}));
  ASSERT_EQ(m.exit_code, 0) << m.err;
  auto j = nlohmann::json::parse(m.out);
  ASSERT_EQ(j.size(), 6u);  // 3 x 2 ordered pairs
  for (const auto& p : j) EXPECT_GT(p["bits_per_second"].get<double>(), 0.0) << p.dump();
  CliResult bad = RunRailyard(Vc({"matrix", "--pairs", "node0:node7"}));
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("node0:node7"), std::string::npos) << bad.err;
}

TEST_F(VclusterCliTest, CommandsOnAClusterThatIsNotUpSayHowToStartOne) {
  CliResult r = RunRailyard(Vc({"exec", "node0", "--", "true"}));
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("no virtual cluster with prefix 'rylo' is up"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("railyard vcluster up"), std::string::npos) << r.err;
}

TEST(CliHelpTest, EveryCommandHasHelpWithAnExample) {
  for (std::vector<std::string> cmd : {std::vector<std::string>{"--help"},
                                       {"vcluster", "--help"},
                                       {"vcluster", "up", "--help"},
                                       {"vcluster", "exec", "--help"},
                                       {"vcluster", "degrade", "--help"},
                                       {"vcluster", "restore", "--help"},
                                       {"vcluster", "fault", "--help"},
                                       {"vcluster", "fault", "scratch-readonly", "--help"},
                                       {"vcluster", "fault", "scratch-full", "--help"},
                                       {"vcluster", "fault", "hide-provider", "--help"},
                                       {"vcluster", "fault", "clear", "--help"},
                                       {"vcluster", "matrix", "--help"},
                                       {"probe", "--help"},
                                       {"demo", "--help"}}) {
    CliResult r = RunRailyard(cmd);
    EXPECT_EQ(r.exit_code, 0) << cmd[0];
    EXPECT_NE(r.out.find("Example"), std::string::npos)
        << "no example in help of " << cmd[0] << " " << (cmd.size() > 1 ? cmd[1] : "");
  }
  // The faults are taught where users look for them.
  EXPECT_NE(RunRailyard({"vcluster", "--help"}).out.find("degrade --uplink leaf0"),
            std::string::npos);
  EXPECT_NE(RunRailyard({"vcluster", "--help"}).out.find("fault hide-provider node3 tcp"),
            std::string::npos);
  EXPECT_NE(RunRailyard({"vcluster", "degrade", "--help"}).out.find("--uplink leaf0"),
            std::string::npos);
  CliResult unknown = RunRailyard({"vcluster", "explode"});
  EXPECT_EQ(unknown.exit_code, 2);
  EXPECT_NE(unknown.err.find("railyard: error:"), std::string::npos);
}

}  // namespace
}  // namespace railyard::testing
