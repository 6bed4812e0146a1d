// `railyard serve --extender` as a user starts it: the real binary, its flags and what it
// prints. Every wait has a deadline; the server is stopped with SIGTERM as an operator would.
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <fstream>

#include "railyard/base/subprocess.h"
#include "railyard/base/temp_dir_testing.h"

namespace railyard::http {
namespace {

using namespace std::chrono_literals;

class ServeCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_FALSE(dir_.path().empty());
    topology_ = dir_.Sub("topology.conf");
    std::ofstream(topology_) << "SwitchName=leaf0 Nodes=n[1-2]\n";
  }
  base::ExitInfo Run(std::vector<std::string> args) {
    args.insert(args.begin(), {RAILYARD_BINARY, "serve", "--extender", "--topology", topology_});
    auto r = base::RunCommand({.argv = args}, base::Deadline::After(60s));
    EXPECT_TRUE(r.ok()) << r.status().ToString();
    return r.ok() ? *r : base::ExitInfo{};
  }
  // Starts the server and returns the port from the line it prints.
  int Start(std::vector<std::string> args, std::string* line) {
    args.insert(args.begin(), {RAILYARD_BINARY, "serve", "--extender", "--topology", topology_});
    auto child = base::Child::Spawn({.argv = args});
    EXPECT_TRUE(child.ok()) << child.status().ToString();
    if (!child.ok()) return -1;
    child_.emplace(std::move(*child));
    auto l = child_->ReadLine(base::Deadline::After(60s));
    EXPECT_TRUE(l.ok()) << l.status().ToString();
    if (!l.ok()) return -1;
    *line = *l;
    const std::string at = "listening on 127.0.0.1:";
    size_t pos = line->find(at);
    EXPECT_NE(pos, std::string::npos) << *line;
    return pos == std::string::npos ? -1 : std::stoi(line->substr(pos + at.size()));
  }
  void TearDown() override {
    if (!child_ || !child_->running()) return;
    child_->SignalGroup(SIGTERM);
    auto done = child_->Wait(base::Deadline::After(30s));
    ASSERT_TRUE(done.ok()) << done.status().ToString();
    EXPECT_TRUE(done->Succeeded()) << done->Describe();
  }

  base::ScopedTempDir dir_{"serve-cli"};
  std::string topology_;
  std::optional<base::Child> child_;
};

TEST_F(ServeCliTest, ListenAddressesWithJunkOrWithoutAHostAreRefused) {
  struct Case {
    const char* listen;
    const char* says;
  };
  for (Case c :
       {Case{"127.0.0.1:18996junk", "port '18996junk' is not a number"},
        Case{":18996", "expected ADDRESS:PORT"}, Case{"127.0.0.1", "expected ADDRESS:PORT"},
        Case{"127.0.0.1:65536", "not a number from 0 to 65535"},
        Case{"127.0.0.1:-1", "not a number"}, Case{"127.0.0.1: 80", "not a number"}}) {
    base::ExitInfo r = Run({"--listen", c.listen});
    EXPECT_EQ(r.exit_code, 2) << c.listen << ": " << r.stderr_text;
    EXPECT_NE(r.stderr_text.find("--listen"), std::string::npos) << r.stderr_text;
    EXPECT_NE(r.stderr_text.find(c.says), std::string::npos) << c.listen << ": " << r.stderr_text;
    EXPECT_NE(r.stderr_text.find("e.g. 127.0.0.1:8888"), std::string::npos) << r.stderr_text;
  }
}

TEST_F(ServeCliTest, PrintsTheAddressItBoundAndServes) {
  std::string line;
  const int port = Start({"--listen", "127.0.0.1:0"}, &line);
  ASSERT_GT(port, 0) << line;
  EXPECT_NE(line.find("/bound and /unbound from this host only"), std::string::npos) << line;
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(10, 0);
  auto h = client.Get("/healthz");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->body, "ok\n");
  auto b = client.Post("/bound", R"({"group":"g","node":"n1"})", "application/json");
  ASSERT_TRUE(b);
  EXPECT_EQ(b->status, 200) << b->body;
}

TEST_F(ServeCliTest, TokenFileGuardsBindingUpdates) {
  const std::string empty = dir_.Sub("empty-token");
  std::ofstream(empty) << "\n";
  base::ExitInfo r = Run({"--listen", "127.0.0.1:0", "--token-file", empty});
  EXPECT_EQ(r.exit_code, 2) << r.stderr_text;
  EXPECT_NE(r.stderr_text.find("--token-file " + empty + ": the file is empty"), std::string::npos)
      << r.stderr_text;

  const std::string token = dir_.Sub("token");
  std::ofstream(token) << "abc123\n";
  std::string line;
  const int port = Start({"--listen", "127.0.0.1:0", "--token-file", token}, &line);
  ASSERT_GT(port, 0) << line;
  EXPECT_NE(line.find("need the bearer token of --token-file"), std::string::npos) << line;
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(10, 0);
  const std::string body = R"({"group":"g","node":"n1"})";
  auto refused = client.Post("/bound", body, "application/json");
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 401);
  auto accepted =
      client.Post("/bound", {{"Authorization", "Bearer abc123"}}, body, "application/json");
  ASSERT_TRUE(accepted);
  EXPECT_EQ(accepted->status, 200) << accepted->body;
}

}  // namespace
}  // namespace railyard::http
