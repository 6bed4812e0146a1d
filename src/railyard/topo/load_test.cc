#include "railyard/topo/load.h"

#include <grp.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>

#include "railyard/base/files.h"
#include "railyard/base/temp_dir_testing.h"
#include "railyard/topo/testdata_testing.h"

namespace railyard::topo {
namespace {

using testing::RepoFile;
using testing::TestData;

std::string Read(const std::string& path) {
  auto text = base::ReadFile(path);
  EXPECT_TRUE(text.ok()) << text.status().ToString();
  return text.ok() ? *text : "";
}

#define EXPECT_HAS(haystack, needle)                               \
  EXPECT_NE(std::string(haystack).find(needle), std::string::npos) \
      << (haystack) << "\nmissing: " << (needle)

std::string Write(const base::ScopedTempDir& dir, const std::string& name, std::string_view data) {
  std::string p = dir.Sub(name);
  EXPECT_TRUE(base::WriteFileAtomic(p, data).ok()) << p;
  return p;
}

const std::vector<std::pair<std::string, TopologyFormat>>& Samples() {
  static const auto* samples = new std::vector<std::pair<std::string, TopologyFormat>>{
      {RepoFile("examples/vcluster-topology.yaml"), TopologyFormat::kRailyardYaml},
      {RepoFile("examples/topology-2su-rail.yaml"), TopologyFormat::kRailyardYaml},
      {TestData("railyard_explicit.yaml"), TopologyFormat::kRailyardYaml},
      {TestData("slurm_tree.conf"), TopologyFormat::kSlurmConf},
      {TestData("slurm_block.conf"), TopologyFormat::kSlurmConf},
      {TestData("slurm_topology.yaml"), TopologyFormat::kSlurmYaml},
      {TestData("aws_page.json"), TopologyFormat::kAwsJson},
      {TestData("aws_pages.json"), TopologyFormat::kAwsJson},
  };
  return *samples;
}

TEST(LoadTest, DetectsEveryFormatByContent) {
  for (const auto& [path, format] : Samples()) {
    std::string text = Read(path);
    EXPECT_EQ(DetectTopologyFormat(text), format) << path;
    // The name does not matter: parse with a misleading one.
    auto c = ParseTopology(text, "topology.txt");
    ASSERT_TRUE(c.ok()) << path << ": " << c.status().ToString();
    EXPECT_FALSE(c->nodes.empty()) << path;
    auto loaded = LoadTopology(path);
    ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
    EXPECT_TRUE(*loaded == *c) << path;
  }
  EXPECT_EQ(TopologyFormatName(TopologyFormat::kSlurmConf), "Slurm topology.conf");
  EXPECT_EQ(TopologyFormatName(TopologyFormat::kAwsJson), "AWS instance topology JSON");
  EXPECT_EQ(DetectTopologyFormat("hello"), TopologyFormat::kUnknown);
}

TEST(LoadTest, ReadsRailyardTopologyWrittenAsJson) {
  auto c = ParseTopology(
      R"({"version": 1, "levels": ["leaf"], "switches": [{"name": "l0", "level": "leaf"}],
          "nodes": [{"name": "n0", "switch": "l0"}]})",
      "t.json");
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  EXPECT_EQ(c->nodes.size(), 1u);
}

TEST(LoadTest, UnreadableFilesNameThePath) {
  base::ScopedTempDir dir("topo-load");
  ASSERT_FALSE(dir.path().empty());
  std::string missing = dir.path() + "/no-such-topology.yaml";
  auto c = LoadTopology(missing);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kNotFound);
  EXPECT_HAS(c.status().message(), missing);

  auto d = LoadTopology(dir.path());
  ASSERT_FALSE(d.ok());
  EXPECT_HAS(d.status().message(), dir.path());
}

// What LoadTopology returned in a child process that gave up root first.
struct Unprivileged {
  std::string cannot_drop;  // why the child could not become `uid`; empty when it did
  StatusCode code = StatusCode::kOk;
  std::string message;
};

// Runs LoadTopology(path) as uid/gid `id` in a forked child, so that permission bits apply
// even when the test runs as root (root reads any file). The answer comes back in a pipe as
// "<code>\n<message>", or "!<reason>" when the child could not drop its privileges.
Unprivileged LoadAs(uid_t id, const std::string& path) {
  int fds[2];
  EXPECT_EQ(::pipe(fds), 0);
  pid_t pid = ::fork();
  if (pid == 0) {
    ::close(fds[0]);
    std::string out;
    if (::setgroups(0, nullptr) != 0 || ::setresgid(id, id, id) != 0 ||
        ::setresuid(id, id, id) != 0) {
      out = std::string("!") + std::strerror(errno);
    } else {
      auto c = LoadTopology(path);
      out = std::to_string(static_cast<int>(c.status().code())) + "\n" + c.status().message();
    }
    size_t done = 0;
    while (done < out.size()) {
      ssize_t n = ::write(fds[1], out.data() + done, out.size() - done);
      if (n <= 0) break;
      done += static_cast<size_t>(n);
    }
    ::_exit(0);
  }
  ::close(fds[1]);
  std::string got;
  char buf[512];
  for (ssize_t n; (n = ::read(fds[0], buf, sizeof buf)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  ::close(fds[0]);
  int wstatus = 0;
  EXPECT_EQ(::waitpid(pid, &wstatus, 0), pid);
  Unprivileged u;
  if (got.starts_with("!")) {
    u.cannot_drop = got.substr(1);
    return u;
  }
  size_t nl = got.find('\n');
  EXPECT_NE(nl, std::string::npos) << "child answered '" << got << "'";
  if (nl == std::string::npos) return u;
  u.code = static_cast<StatusCode>(std::stoi(got.substr(0, nl)));
  u.message = got.substr(nl + 1);
  return u;
}

// A file the loading user may not read: PERMISSION_DENIED naming the file. Root ignores
// permission bits, so as root the load runs in a child that has become nobody (65534).
TEST(LoadTest, UnreadableFileIsPermissionDeniedNamingIt) {
  base::ScopedTempDir dir("topo-load");
  ASSERT_FALSE(dir.path().empty());
  std::string locked = Write(dir, "locked.yaml", "version: 1\n");
  ASSERT_EQ(::chmod(locked.c_str(), 0), 0);
  if (::geteuid() != 0) {
    auto p = LoadTopology(locked);
    ASSERT_FALSE(p.ok());
    EXPECT_EQ(p.status().code(), StatusCode::kPermissionDenied);
    EXPECT_HAS(p.status().message(), locked);
    return;
  }
  // The directory must be searchable by nobody, so that only the file's own bits refuse.
  ASSERT_EQ(::chmod(dir.path().c_str(), 0755), 0);
  constexpr uid_t kNobody = 65534;
  Unprivileged u = LoadAs(kNobody, locked);
  if (!u.cannot_drop.empty()) {
    GTEST_SKIP() << "running as root and cannot become uid " << kNobody
                 << " to make permission bits apply: " << u.cannot_drop;
  }
  EXPECT_EQ(u.code, StatusCode::kPermissionDenied) << u.message;
  EXPECT_HAS(u.message, locked);
}

TEST(LoadTest, RejectsGarbageEmptyAndUnknownFiles) {
  struct Case {
    std::string file;
    std::vector<std::string> needles;
  };
  for (const Case& k : std::vector<Case>{
           {"load_garbage.bin", {"load_garbage.bin:1: binary data", "Slurm topology.conf"}},
           {"load_empty.txt", {"load_empty.txt: the file is empty", "Railyard topology YAML"}},
           {"load_blank.txt", {"load_blank.txt: the file is empty (only blank lines"}},
           {"load_unknown.yaml",
            {"load_unknown.yaml:1: cannot tell what kind of topology", "keys hello, answer",
             "AWS DescribeInstanceTopology JSON"}},
       }) {
    auto c = LoadTopology(TestData(k.file));
    ASSERT_FALSE(c.ok()) << k.file;
    EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument);
    for (const std::string& needle : k.needles) EXPECT_HAS(c.status().message(), needle);
  }
  auto scalar = ParseTopology("\n\njust some words\n", "x");
  ASSERT_FALSE(scalar.ok());
  EXPECT_HAS(scalar.status().message(), "x:3: cannot tell");
  EXPECT_HAS(scalar.status().message(), "'just some words'");
  auto list = ParseTopology("- a\n- b\n", "x");
  ASSERT_FALSE(list.ok());
  EXPECT_HAS(list.status().message(), "a YAML list");
  auto bad_yaml = ParseTopology("a: [1, 2\nb: }\n", "x");
  ASSERT_FALSE(bad_yaml.ok());
  EXPECT_HAS(bad_yaml.status().message(), "x:");
  EXPECT_HAS(bad_yaml.status().message(), "not valid YAML");
  auto broken_aws = ParseTopology("{\"Instances\": [\n  {\"InstanceId\": \"i-1\",,\n]}", "x");
  ASSERT_FALSE(broken_aws.ok());
  EXPECT_HAS(broken_aws.status().message(), "x:2:");
}

TEST(LoadTest, BadInputsInEachFormatNameFileAndLine) {
  struct Case {
    std::string file;
    std::string needle;
  };
  for (const Case& k : std::vector<Case>{
           {"slurm_descending.conf",
            "slurm_descending.conf:3: Nodes=: hostlist 'node[5-2]': "
            "range 5-2 is descending"},
           {"slurm_cycle.conf", "slurm_cycle.conf:3: switches form a cycle"},
           {"slurm_node_two_leaves.conf",
            "slurm_node_two_leaves.conf:2: node 'n3' is under two "
            "leaves"},
           {"railyard_bad_level.yaml",
            "railyard_bad_level.yaml:5: switch 'leaf0' has level "
            "'rack', which is not one of the levels (spine, leaf)"},
           {"railyard_cycle.yaml", "railyard_cycle.yaml:4:"},
           {"railyard_two_leaves.yaml",
            "railyard_two_leaves.yaml:9: node 'n3' is under two "
            "leaves"},
           {"aws_two_parents.json", "aws_two_parents.json:3: network node 'nn-c'"},
       }) {
    auto c = LoadTopology(TestData(k.file));
    ASSERT_FALSE(c.ok()) << k.file;
    EXPECT_HAS(c.status().message(), k.needle);
  }
}

// No input may crash or hang a parser: mangle every sample (truncate, flip and insert bytes)
// and require an answer, either a cluster or an INVALID_ARGUMENT.
TEST(LoadTest, SurvivesMangledInput) {
  std::mt19937 rng(2024);
  for (const auto& [path, format] : Samples()) {
    std::string original = Read(path);
    for (int trial = 0; trial < 150; ++trial) {
      std::string text = original;
      int edits = 1 + static_cast<int>(rng() % 4);
      for (int e = 0; e < edits && !text.empty(); ++e) {
        size_t at = rng() % text.size();
        switch (rng() % 4) {
          case 0:
            text.resize(at);
            break;
          case 1:
            text[at] = static_cast<char>(rng() % 256);
            break;
          case 2:
            text.insert(at, 1, "[]{}:,-#\"'\n=0"[rng() % 13]);
            break;
          case 3:
            text.erase(at, 1 + rng() % 8);
            break;
        }
      }
      auto c = ParseTopology(text, "mangled");
      if (!c.ok()) {
        EXPECT_EQ(c.status().code(), StatusCode::kInvalidArgument) << c.status().ToString();
        EXPECT_HAS(c.status().message(), "mangled");
      }
    }
  }
}

}  // namespace
}  // namespace railyard::topo
