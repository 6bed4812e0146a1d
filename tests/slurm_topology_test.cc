// The Slurm tree export loaded into a real slurmctld (Debian 12: slurm-wlm 22.05.8, installed
// by scripts/bootstrap for `make test`): `railyard topo export --format slurm-conf` of
// examples/topology-2su-rail.yaml becomes topology.conf of a private controller (its own
// port, state directory, pid and log file, auth/none), which must start without "fatal" and
// answer `scontrol show topology` with every switch. Skips, naming the reason, where
// slurmctld or scontrol is not installed.
//
// Why: before 23.02.5, Slurm's hostlist parser (src/common/hostlist.c,
// _hostlist_create_bracketed at tag slurm-22-05-8-1) rejects text after the closing bracket,
// and topology/tree (src/plugins/topology/tree/topology_tree.c, _validate_switches) then stops
// with "fatal: Invalid switches: su[0-1]-spine". The second case shows that failure on the
// installed daemon, so the first one is known to be able to catch it.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <pwd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "cli_harness.h"
#include "railyard/base/files.h"
#include "railyard/base/subprocess.h"
#include "railyard/base/temp_dir_testing.h"

namespace railyard {
namespace {

using namespace std::chrono_literals;

constexpr const char* kSlurmctld = "/usr/sbin/slurmctld";
constexpr const char* kScontrol = "/usr/bin/scontrol";
const std::string kExample =
    std::string(RAILYARD_TESTDATA) + "/../../examples/topology-2su-rail.yaml";

// A TCP port on 127.0.0.1 free right now (slurm.conf needs a number, not port 0).
int FreePort() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return -1;
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = -1;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  ::close(fd);
  return port;
}

std::string ShortHostname() {
  char buf[256] = {};
  if (::gethostname(buf, sizeof(buf) - 1) != 0) return "localhost";
  std::string h = buf;
  return h.substr(0, h.find('.'));
}

std::string UserName() {
  const passwd* pw = ::getpwuid(::geteuid());
  return pw != nullptr ? pw->pw_name : "root";
}

// "slurm-wlm 22.05.8" -> {22, 5, 8}; empty when unreadable.
std::vector<int> SlurmVersion() {
  base::SpawnOptions o{.argv = {kSlurmctld, "-V"}};
  auto r = base::RunCommand(o, base::Deadline::After(30s));
  if (!r.ok()) return {};
  std::smatch m;
  std::string text = r->stdout_text + r->stderr_text;
  if (!std::regex_search(text, m, std::regex(R"((\d+)\.(\d+)\.(\d+))"))) return {};
  return {std::stoi(m[1]), std::stoi(m[2]), std::stoi(m[3])};
}

struct Controller {
  int exit_code = -1;    // -1: still running when the topology was read
  std::string topology;  // scontrol show topology, when it answered
  std::string log;       // slurmctld's output and log file
};

// Writes slurm.conf next to `topology_conf` (already in `dir`), runs slurmctld -D until
// scontrol answers or it exits or 60 s pass, and always kills it before returning.
Controller RunController(const base::ScopedTempDir& dir, const std::vector<std::string>& nodes) {
  Controller c;
  int port = FreePort();
  EXPECT_GT(port, 0);
  std::ostringstream conf;
  conf << "ClusterName=rytopo\n"
       << "SlurmctldHost=" << ShortHostname() << "(127.0.0.1)\n"
       << "SlurmctldPort=" << port << "\n"
       << "SlurmUser=" << UserName() << "\n"
       << "AuthType=auth/none\nCredType=cred/none\n"
       << "StateSaveLocation=" << dir.Sub("state") << "\n"
       << "SlurmdSpoolDir=" << dir.Sub("spool") << "\n"
       << "SlurmctldPidFile=" << dir.Sub("slurmctld.pid") << "\n"
       << "SlurmctldLogFile=" << dir.Sub("slurmctld.log") << "\n"
       << "SlurmctldDebug=info\nMailProg=/bin/true\n"
       << "TopologyPlugin=topology/tree\n"
       << "ProctrackType=proctrack/linuxproc\nSelectType=select/cons_tres\n";
  for (const std::string& n : nodes) {
    conf << "NodeName=" << n << " NodeAddr=127.0.0.1 CPUs=1 State=UNKNOWN\n";
  }
  conf << "PartitionName=all Nodes=ALL Default=YES\n";
  std::filesystem::create_directories(dir.Sub("state"));
  std::filesystem::create_directories(dir.Sub("spool"));
  EXPECT_TRUE(base::WriteFileAtomic(dir.Sub("slurm.conf"), conf.str()).ok());
  const std::vector<std::pair<std::string, std::string>> env = {
      {"SLURM_CONF", dir.Sub("slurm.conf")}};
  base::SpawnOptions daemon{.argv = {kSlurmctld, "-D", "-f", dir.Sub("slurm.conf")}, .env = env};
  auto child = base::Child::Spawn(daemon);
  if (!child.ok()) {
    ADD_FAILURE() << child.status().ToString();
    return c;
  }
  const auto deadline = base::Deadline::After(60s);
  while (!deadline.Expired()) {
    // Waiting on the daemon's exit paces the polling and notices a fatal stop at once.
    auto done = child->Wait(base::Deadline::After(250ms));
    if (done.ok()) {
      c.exit_code = done->signal ? 128 + done->signal : done->exit_code;
      c.log = done->stdout_text + done->stderr_text;
      break;
    }
    base::SpawnOptions ask{.argv = {kScontrol, "show", "topology"}, .env = env};
    auto r = base::RunCommand(ask, base::Deadline::After(15s));
    if (r.ok() && r->Succeeded() && r->stdout_text.find("SwitchName=") != std::string::npos) {
      c.topology = r->stdout_text;
      break;
    }
  }
  if (child->running()) {
    base::ExitInfo killed = child->KillAndReap();
    c.log = killed.stdout_text + killed.stderr_text;
  }
  auto file_log = base::ReadFile(dir.Sub("slurmctld.log"));
  if (file_log.ok()) c.log += *file_log;
  return c;
}

std::vector<std::string> ExampleNodes() {
  auto hosts =
      testing::RunRailyard({"topo", "export", "--topology", kExample, "--format", "hostfile"});
  EXPECT_EQ(hosts.exit_code, 0) << hosts.err;
  std::vector<std::string> nodes;
  std::istringstream in(hosts.out);
  for (std::string line; std::getline(in, line);) {
    if (!line.empty() && line[0] != '#') nodes.push_back(line.substr(0, line.find(' ')));
  }
  return nodes;
}

class SlurmTopologyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    if (::access(kSlurmctld, X_OK) != 0 || ::access(kScontrol, X_OK) != 0) {
      GTEST_SKIP() << kSlurmctld << " or " << kScontrol
                   << " not installed (Debian slurm-wlm; scripts/bootstrap installs it)";
    }
    ASSERT_FALSE(dir_.path().empty());
  }
  base::ScopedTempDir dir_{"slurmtopo"};
};

TEST_F(SlurmTopologyTest, SlurmctldLoadsTheTreeExport) {
  auto conf = testing::RunRailyard({"topo", "export", "--topology", kExample, "--format",
                                    "slurm-conf", "--out", dir_.Sub("topology.conf")});
  ASSERT_EQ(conf.exit_code, 0) << conf.err;
  std::vector<std::string> nodes = ExampleNodes();
  ASSERT_EQ(nodes.size(), 32u);
  Controller c = RunController(dir_, nodes);
  EXPECT_EQ(c.log.find("fatal"), std::string::npos) << c.log;
  EXPECT_EQ(c.exit_code, -1) << "slurmctld exited:\n" << c.log;
  ASSERT_FALSE(c.topology.empty()) << "scontrol show topology never answered:\n" << c.log;
  for (const char* sw :
       {"block0", "su0-spine", "su1-spine", "su0-rg0", "su0-rg3", "su1-rg0", "su1-rg3"}) {
    EXPECT_NE(c.topology.find(std::string("SwitchName=") + sw + " "), std::string::npos)
        << sw << "\n"
        << c.topology;
  }
  EXPECT_NE(c.topology.find("SwitchName=block0 Level=2"), std::string::npos) << c.topology;
  EXPECT_NE(c.topology.find("Nodes=gpu[001-032]"), std::string::npos) << c.topology;
  EXPECT_NE(c.topology.find("SwitchName=su1-rg3 Level=0"), std::string::npos) << c.topology;
}

TEST_F(SlurmTopologyTest, SlurmctldBefore23025RejectsTextAfterBrackets) {
  std::vector<int> v = SlurmVersion();
  ASSERT_EQ(v.size(), 3u) << "cannot read slurmctld -V";
  if (v >= std::vector<int>{23, 2, 5}) {
    GTEST_SKIP() << "slurmctld " << v[0] << "." << v[1] << "." << v[2]
                 << " reads su[0-1]-spine; the rejection exists only before 23.02.5";
  }
  auto conf =
      testing::RunRailyard({"topo", "export", "--topology", kExample, "--format", "slurm-conf"});
  ASSERT_EQ(conf.exit_code, 0) << conf.err;
  std::string text = conf.out;
  const std::string comma = "Switches=su0-spine,su1-spine";
  size_t at = text.find(comma);
  ASSERT_NE(at, std::string::npos) << text;
  text.replace(at, comma.size(), "Switches=su[0-1]-spine");
  ASSERT_TRUE(base::WriteFileAtomic(dir_.Sub("topology.conf"), text).ok());
  Controller c = RunController(dir_, ExampleNodes());
  EXPECT_NE(c.exit_code, -1) << "slurmctld accepted the bracket form";
  EXPECT_NE(c.log.find("fatal: Invalid switches: su[0-1]-spine"), std::string::npos) << c.log;
}

}  // namespace
}  // namespace railyard
