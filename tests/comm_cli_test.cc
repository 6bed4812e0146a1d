// `railyard bench comm` from the command line: a real multi-process run with checked JSON, a
// table that awk reads as it reads nccl-tests output, a wrong timed result that fails the run
// naming its row, and one clear line with exit code 2 for each kind of bad input.
#include <gtest/gtest.h>
#include <signal.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "cli_harness.h"
#include "railyard/net/select.h"

namespace railyard::testing {
namespace {

TEST(BenchCommCli, JsonRowsFromThreeRankProcesses) {
  for (const char* transport : {"tcp", "shm"}) {
    auto r = RunRailyard({"bench", "comm", "--ranks", "3", "--transport", transport, "--sizes",
                          "4KiB:16KiB", "--iters", "3", "--warmup", "1", "--json"});
    ASSERT_EQ(r.exit_code, 0) << transport << ": " << r.err;
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_TRUE(j.is_array()) << r.out;
    ASSERT_EQ(j.size(), 3u) << r.out;  // 4, 8 and 16 KiB
    for (const auto& row : j) {
      for (const char* key :
           {"size_bytes", "count", "type", "time_us", "algbw_gbps", "busbw_gbps", "wrong"}) {
        EXPECT_TRUE(row.contains(key)) << key << " in " << row.dump();
      }
      EXPECT_EQ(row["wrong"], 0) << row.dump();
      ASSERT_TRUE(row["in_place"].is_object()) << row.dump();
      EXPECT_EQ(row["in_place"]["wrong"], 0) << row.dump();
      EXPECT_GT(row["in_place"]["checked"], 0) << row.dump();
      EXPECT_EQ(row["count"].get<uint64_t>() * 4, row["size_bytes"].get<uint64_t>());
      // busbw = algbw * 2(n-1)/n for allreduce.
      EXPECT_NEAR(row["busbw_gbps"].get<double>(), row["algbw_gbps"].get<double>() * 4.0 / 3.0,
                  1e-9 + row["busbw_gbps"].get<double>() * 1e-9);
    }
    EXPECT_EQ(j[0]["size_bytes"], 4096);
  }
}

// Rank 1 inverts its result of timed iteration 2 (of 5) in the 8 KiB row, through the
// test-only fault RAILYARD_BENCH_CORRUPT_FOR_TEST: neither the untimed check nor the final
// full one can see it, the sampled check does. Every row is still printed, only that row
// counts wrong values (all 18 sampled positions, in each variant), and the command exits 1
// naming it; the table's "Out of bounds values" counts rank 1 once per variant, as
// nccl-tests counts ranks whose check failed.
TEST(BenchCommCli, WrongTimedResultFailsTheRunAndNamesTheRow) {
  for (bool json : {true, false}) {
    std::vector<std::string> args = {"bench",       "comm", "--ranks",  "2",
                                     "--transport", "tcp",  "--sizes",  "4KiB,8KiB,16KiB",
                                     "--iters",     "5",    "--warmup", "1"};
    if (json) args.push_back("--json");
    auto r = RunRailyard(args, {{"RAILYARD_BENCH_CORRUPT_FOR_TEST", "1:8192:2"}});
    EXPECT_EQ(r.exit_code, 1) << r.err;
    EXPECT_NE(r.err.find("wrong values in 1 of 3 rows: allreduce 8192 B (f32 sum) out-of-place: "
                         "18 of"),
              std::string::npos)
        << r.err;
    EXPECT_EQ(r.err.find("4096 B"), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find("16384 B"), std::string::npos) << r.err;
    if (json) {
      auto j = nlohmann::json::parse(r.out, nullptr, false);
      ASSERT_TRUE(j.is_array() && j.size() == 3) << r.out;
      EXPECT_EQ(j[0]["wrong"], 0) << r.out;
      EXPECT_EQ(j[1]["wrong"], 18) << r.out;
      EXPECT_EQ(j[2]["wrong"], 0) << r.out;
      // Both ranks: the untimed and the last iteration in full, 4 sampled ones at 18 each.
      EXPECT_EQ(j[1]["checked"], 2 * (2 * 2048 + 4 * 18)) << r.out;
      // In place: untimed iterations before and after in full, all 5 timed ones sampled.
      EXPECT_EQ(j[1]["in_place"]["wrong"], 18) << r.out;
      EXPECT_EQ(j[1]["in_place"]["checked"], 2 * (2 * 2048 + 5 * 18)) << r.out;
      EXPECT_EQ(j[0]["in_place"]["wrong"], 0) << r.out;
    } else {
      EXPECT_NE(r.out.find("Out of bounds values : 2 FAILED"), std::string::npos) << r.out;
    }
  }
  // Without the fault the same run passes.
  auto r = RunRailyard({"bench", "comm", "--ranks", "2", "--transport", "tcp", "--sizes",
                        "4KiB,8KiB,16KiB", "--iters", "5", "--warmup", "1", "--json"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(BenchCommCli, HierarchicalAllreduceAcrossPretendHosts) {
  // Ranks 0-1 and 2-3 report different hosts: shm inside each, tcp between the leaders.
  auto r = RunRailyard({"bench", "comm", "--ranks", "4", "--local-hosts", "2", "--transport", "tcp",
                        "--algorithm", "hier", "--sizes", "4KiB:2MiB", "--iters", "2", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_array() && j.size() == 10) << r.out;
  for (const auto& row : j) EXPECT_EQ(row["wrong"], 0) << row.dump();
}

// 64 rank processes on this machine connect (through the store, no connect storm) and
// compute a correct allreduce, over every transport built in (ofi takes about 10 s).
TEST(BenchCommCli, SixtyFourRanksConnect) {
  for (const std::string& transport : net::TransportNames()) {
    auto r = RunRailyard({"bench", "comm", "--ranks", "64", "--transport", transport, "--sizes",
                          "4KiB", "--iters", "2", "--warmup", "1", "--json"});
    ASSERT_EQ(r.exit_code, 0) << transport << ": " << r.err;
    auto j = nlohmann::json::parse(r.out, nullptr, false);
    ASSERT_TRUE(j.is_array() && j.size() == 1) << transport << ": " << r.out;
    EXPECT_EQ(j[0]["wrong"], 0) << transport << ": " << r.out;
    EXPECT_EQ(j[0]["size_bytes"], 4096) << transport << ": " << r.out;
    // busbw = algbw * 2(n-1)/n: the factor shows all 64 ranks took part.
    EXPECT_NEAR(j[0]["busbw_gbps"].get<double>() / j[0]["algbw_gbps"].get<double>(), 2.0 * 63 / 64,
                1e-9)
        << transport << ": " << r.out;
  }
}

// The pid of the launcher's child that runs `rank` (from its environment), or -1.
pid_t RankPid(pid_t launcher, int rank) {
  std::ifstream children(fmt::format("/proc/{}/task/{}/children", launcher, launcher));
  const std::string want = fmt::format("RAILYARD_RANK={}", rank);
  for (pid_t p; children >> p;) {
    std::ifstream env(fmt::format("/proc/{}/environ", p));
    for (std::string var; std::getline(env, var, '\0');) {
      if (var == want) return p;
    }
  }
  return -1;
}

// A stopped rank cannot answer or exit: the others report it within their deadline, and the
// launcher then kills it and exits by itself, naming it, instead of waiting for it forever.
TEST(BenchCommCli, LauncherKillsAStoppedRankAfterTheOthersFailed) {
  base::SpawnOptions o;
  o.argv = {RAILYARD_BINARY, "bench",  "comm",    "--ranks", "3",         "--transport", "tcp",
            "--sizes",       "256KiB", "--iters", "100000",  "--timeout", "1s"};
  auto launcher = base::Child::Spawn(o);
  ASSERT_TRUE(launcher.ok()) << launcher.status().ToString();
  auto deadline = base::Deadline::After(std::chrono::seconds(60));
  for (;;) {
    auto line = launcher->ReadLine(deadline);
    ASSERT_TRUE(line.ok()) << "ranks never started timing: " << line.status().ToString();
    if (line->rfind("# timing", 0) == 0) break;
  }
  pid_t victim = RankPid(launcher->pid(), 1);
  ASSERT_GT(victim, 0);
  ASSERT_EQ(::kill(victim, SIGSTOP), 0);
  // Bounded only so that a broken build cannot hang the suite; the launcher needs about 6 s.
  auto e = launcher->Wait(base::Deadline::After(std::chrono::seconds(60)));
  if (!e.ok()) ::kill(victim, SIGKILL);
  ASSERT_TRUE(e.ok()) << "the launcher did not exit: " << e.status().ToString();
  EXPECT_EQ(e->exit_code, 1) << e->stderr_text;
  EXPECT_NE(e->stderr_text.find(fmt::format("rank 1 (pid {}) was killed by signal 9", victim)),
            std::string::npos)
      << e->stderr_text;
  EXPECT_NE(e->stderr_text.find("killed by the launcher"), std::string::npos) << e->stderr_text;
  // The survivors' own errors name the stopped rank.
  EXPECT_NE(e->stderr_text.find("rank 1 ("), std::string::npos) << e->stderr_text;
  EXPECT_NE(e->stderr_text.find("is unresponsive"), std::string::npos) << e->stderr_text;
}

// Runs awk `program` over `text` (through a temporary file) and returns its output.
std::string Awk(const std::string& program, const std::string& text) {
  base::ScopedTempDir dir_tmp("awk");
  const std::string& dir = dir_tmp.path();
  std::string path = dir + "/table.txt";
  std::ofstream(path) << text;
  auto r = base::RunCommand({.argv = {"awk", program, path}},
                            base::Deadline::After(std::chrono::seconds(30)));
  EXPECT_TRUE(r.ok() && r->exit_code == 0) << program;
  return r.ok() ? r->stdout_text : "";
}

// The scripts people run over nccl-tests output pick the data lines with $1 ~ /^[0-9]+$/ and
// read columns by position ($8 out-of-place busbw, $12 in place). They read Railyard's table
// the same way as testdata/nccl_tests_all_gather_perf_8gpu.txt (written in nccl-tests 2.19.6's
// layout, src/railyard/comm/bench_test.cc checks it line for line): 13 fields, allgather's
// size the whole gathered buffer and its count one rank's block, type float, redop none,
// root -1, busbw a decimal figure (its value depends on the machine's load: a loaded host prints
// 0.00 for 8 KiB, as nccl-tests does) and #wrong 0 in both variants.
TEST(BenchCommCli, AwkReadsTheTableLikeNcclTestsOutput) {
  const std::string sample_path = std::filesystem::path(__FILE__).parent_path().parent_path() /
                                  "src/railyard/comm/testdata/nccl_tests_all_gather_perf_8gpu.txt";
  std::ifstream in(sample_path);
  ASSERT_TRUE(in.good()) << sample_path;
  std::stringstream sample;
  sample << in.rdbuf();
  const std::string kColumns = R"($1 ~ /^[0-9]+$/ { print NF, $1, $2, $3, $4, $5,)"
                               R"( ($8 ~ /^[0-9]+\.[0-9][0-9]$/), $9,)"
                               R"( ($12 ~ /^[0-9]+\.[0-9][0-9]$/), $13 })";
  std::string from_sample = Awk(kColumns, sample.str());
  EXPECT_NE(from_sample.find("13 16384 512 float none -1 1 0 1 0\n"), std::string::npos)
      << from_sample;

  auto r = RunRailyard({"bench", "comm", "--ranks", "2", "--transport", "tcp", "--op", "allgather",
                        "--sizes", "8KiB,64KiB", "--iters", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(Awk(kColumns, r.out),
            "13 8192 1024 float none -1 1 0 1 0\n"
            "13 65536 8192 float none -1 1 0 1 0\n")
      << r.out;
  EXPECT_NE(r.out.find("# Out of bounds values : 0 OK\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("# Avg bus bandwidth    : "), std::string::npos) << r.out;
  // Every other line is a comment.
  EXPECT_EQ(Awk(R"($1 !~ /^[0-9]+$/ && $1 !~ /^#/ { print })", r.out), "") << r.out;
}

void ExpectBadInput(std::vector<std::string> args, const std::string& mention,
                    std::vector<std::pair<std::string, std::string>> env = {}) {
  std::vector<std::string> full = {"bench", "comm"};
  full.insert(full.end(), args.begin(), args.end());
  auto r = RunRailyard(full, env);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find(mention), std::string::npos) << r.err;
  EXPECT_EQ(std::count(r.err.begin(), r.err.end(), '\n'), 1) << "one line: " << r.err;
}

TEST(BenchCommCli, BadInputIsOneClearLine) {
  ExpectBadInput({"--ranks", "0"}, "--ranks 0");
  ExpectBadInput({"--transport", "carrier-pigeon"}, "carrier-pigeon");
  ExpectBadInput({"--sizes", "64MiB:4KiB"}, "--sizes");
  ExpectBadInput({"--sizes", "lots"}, "lots");
  ExpectBadInput({"--op", "allscatter"}, "allscatter");
  ExpectBadInput({"--transport", "tcp"}, "no-such-if0",
                 {{"RAILYARD_SOCKET_IFNAME", "=no-such-if0"}});
  ExpectBadInput({"--transport", "ofi"}, "verbs;ofi_rxm",
                 {{"RAILYARD_OFI_PROVIDER", "verbs;ofi_rxm"}});
  ExpectBadInput({"--ranks", "abc"}, "--ranks abc");
}

// Checked by the launcher before any rank starts (each case would otherwise start ranks).
const std::vector<std::string> kQuick = {"--ranks", "2", "--sizes", "4KiB", "--iters", "2"};

std::vector<std::string> Quick(std::vector<std::string> more) {
  std::vector<std::string> args = kQuick;
  args.insert(args.end(), more.begin(), more.end());
  return args;
}

TEST(BenchCommCli, TransportFromEnvironmentIsChecked) {
  ExpectBadInput(Quick({}), "RAILYARD_TRANSPORT", {{"RAILYARD_TRANSPORT", "bogus"}});
  // The flag wins over the variable.
  auto r = RunRailyard({"bench", "comm", "--ranks", "2", "--sizes", "4KiB", "--iters", "2",
                        "--transport", "tcp", "--json"},
                       {{"RAILYARD_TRANSPORT", "bogus"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(BenchCommCli, BadCommEnvironmentIsOneClearLine) {
  for (const char* var : {"RAILYARD_COMM_ALGO", "RAILYARD_COMM_TIMEOUT", "RAILYARD_COMM_CHECK"}) {
    ExpectBadInput(Quick({}), var, {{var, "bogus"}});
  }
}

// Tuning is flags, checked before any rank starts, and reaches every rank.
TEST(BenchCommCli, TuningFlagsAreCheckedAndReachTheRanks) {
  ExpectBadInput(Quick({"--piece", "1KiB"}), "--piece 1KiB");
  ExpectBadInput(Quick({"--piece", "lots"}), "--piece lots");
  ExpectBadInput(Quick({"--tcp-streams", "0"}), "--tcp-streams 0");
  ExpectBadInput(Quick({"--tcp-buffer", "big"}), "--tcp-buffer big");
  auto r = RunRailyard({"bench", "comm", "--ranks", "3", "--sizes", "1MiB", "--iters", "2",
                        "--transport", "tcp", "--json", "--piece", "64KiB", "--tcp-streams", "3",
                        "--tcp-buffer", "0", "--no-reduce-on-receive"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  // The variables that used to set these are not read any more.
  r = RunRailyard({"bench", "comm", "--ranks", "2", "--sizes", "4KiB", "--iters", "2",
                   "--transport", "tcp", "--json"},
                  {{"RAILYARD_COMM_PIECE", "bogus"}, {"RAILYARD_TCP_STREAMS", "bogus"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(BenchCommCli, TcpCongestionControlIsCheckedBeforeAnyRankStarts) {
  ExpectBadInput(Quick({}), "RAILYARD_TCP_CC", {{"RAILYARD_TCP_CC", "bad!"}});
  ExpectBadInput(Quick({}), "'nosuchcc' is not available", {{"RAILYARD_TCP_CC", "nosuchcc"}});
  // reno exists in every kernel and is open to every process.
  auto r = RunRailyard({"bench", "comm", "--ranks", "2", "--sizes", "64KiB", "--iters", "2",
                        "--transport", "tcp", "--json"},
                       {{"RAILYARD_TCP_CC", "reno"}});
  EXPECT_EQ(r.exit_code, 0) << r.err;
}

TEST(BenchCommCli, MalformedTestOnlyFaultIsBadInput) {
  for (const char* bad : {"x", "1:8192", "1:8192:2:3", "-1:8192:2", "1::2"}) {
    ExpectBadInput(Quick({}), "RAILYARD_BENCH_CORRUPT_FOR_TEST",
                   {{"RAILYARD_BENCH_CORRUPT_FOR_TEST", bad}});
  }
}

TEST(BenchCommCli, ShmAcrossPretendHostsIsBadInput) {
  ExpectBadInput(Quick({"--transport", "shm", "--local-hosts", "2"}), "--local-hosts 2");
  ExpectBadInput(Quick({"--local-hosts", "2"}), "RAILYARD_TRANSPORT shm",
                 {{"RAILYARD_TRANSPORT", "shm"}});
}

TEST(BenchCommCli, SizeBelowOneElementIsRejected) {
  ExpectBadInput({"--ranks", "2", "--sizes", "3B", "--type", "f64"}, "f64 element");
  ExpectBadInput({"--ranks", "2", "--sizes", "4KiB,3B", "--type", "f64"}, "3 bytes");
  ExpectBadInput({"--ranks", "2", "--sizes", "4B", "--op", "allgather"}, "per rank");
}

TEST(BenchCommCli, BadVclusterNameNamesTheFlag) {
  ExpectBadInput(Quick({"--vcluster", "Bad_Name"}), "--vcluster 'Bad_Name'");
  auto r = RunRailyard({"bench", "comm", "--vcluster", "Bad_Name"});
  EXPECT_EQ(r.err.find("--prefix"), std::string::npos) << r.err;
}

TEST(BenchCommCli, AlgorithmMustFitTheOperation) {
  ExpectBadInput(Quick({"--op", "allgather", "--algorithm", "rd"}), "allgather");
  ExpectBadInput(Quick({"--op", "alltoall", "--algorithm", "ring"}), "pairwise");
  ExpectBadInput(Quick({"--op", "broadcast", "--algorithm", "window"}), "tree");
}

TEST(BenchCommCli, CommaListOfSizesGivesRowsForExactlyThose) {
  auto r = RunRailyard({"bench", "comm", "--ranks", "2", "--transport", "tcp", "--sizes",
                        "4KiB,1KiB,12KiB", "--iters", "2", "--warmup", "1", "--json"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto j = nlohmann::json::parse(r.out, nullptr, false);
  ASSERT_TRUE(j.is_array()) << r.out;
  std::vector<uint64_t> sizes;
  for (const auto& row : j) {
    sizes.push_back(row["size_bytes"].get<uint64_t>());
    EXPECT_EQ(row["wrong"], 0) << row.dump();
  }
  EXPECT_EQ(sizes, (std::vector<uint64_t>{4096, 1024, 12288})) << r.out;
}

}  // namespace
}  // namespace railyard::testing
