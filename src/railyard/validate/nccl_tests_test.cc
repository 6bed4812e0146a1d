// The nccl-tests adapter: its parser on output in nccl-tests 2.19.6's layout (the sample in
// comm/testdata, written from nccl-tests' source by write_nccl_tests_samples.py there, and
// the table `railyard bench comm` prints through comm::FormatCommBenchTable), and its runner
// on stand-in scripts (no GPU or nccl-tests here).
#include "railyard/validate/nccl_tests.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <filesystem>
#include <fstream>

#include "railyard/base/files.h"
#include "railyard/base/temp_dir_testing.h"
#include "railyard/comm/bench.h"

namespace railyard::validate {
namespace {

using namespace std::chrono_literals;

TEST(NcclTests, ParsesAllReducePerfOutput) {
  Result<std::string> text =
      base::ReadFile(RAILYARD_COMM_TESTDATA "/nccl_tests_all_reduce_perf_8gpu.txt");
  ASSERT_TRUE(text.ok()) << text.status().ToString();
  Result<NcclTestsRun> run = ParseNcclTestsOutput(*text);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  ASSERT_EQ(run->figures.size(), 9u);
  ASSERT_EQ(run->in_place.size(), 9u);
  EXPECT_EQ(run->figures[0].bytes, 8u);
  // "134217728 33554432 float sum -1 558.87 240.16 420.28 0 564.24 237.87 416.28 0"
  const CollectiveFigure& last = run->figures.back();
  EXPECT_EQ(last.bytes, 134217728u);
  EXPECT_DOUBLE_EQ(last.seconds, 558.87e-6);
  EXPECT_DOUBLE_EQ(last.algbw_bytes_per_s, 240.16e9);
  EXPECT_DOUBLE_EQ(last.busbw_bytes_per_s, 420.28e9);
  EXPECT_DOUBLE_EQ(run->in_place.back().busbw_bytes_per_s, 416.28e9);
  EXPECT_DOUBLE_EQ(run->avg_busbw_bytes_per_s, 98.8889e9);
  EXPECT_EQ(run->wrong, 0u);
  EXPECT_TRUE(run->out_of_bounds_ok);
}

TEST(NcclTests, ParsesRailyardBenchCommTable) {
  comm::CommBenchRow a{
      .size_bytes = 4096, .count = 1024, .nccl_count = 1024, .type = "f32", .redop = "sum"};
  a.out_of_place = {.time_us = 26.73, .algbw_gbps = 0.15, .busbw_gbps = 0.15};
  a.in_place = comm::CommBenchFigures{.time_us = 25.22, .algbw_gbps = 0.16, .busbw_gbps = 0.16};
  comm::CommBenchRow b = a;
  b.size_bytes = 1 << 20;
  b.count = b.nccl_count = 262144;
  b.out_of_place = {
      .time_us = 820.61, .algbw_gbps = 1.28, .busbw_gbps = 1.28, .wrong = 3, .ranks_wrong = 1};
  b.in_place.reset();  // printed as N/A
  std::string table = comm::FormatCommBenchTable({a, b}, "railyard bench comm");
  Result<NcclTestsRun> run = ParseNcclTestsOutput(table);
  ASSERT_TRUE(run.ok()) << run.status().ToString() << "\n" << table;
  ASSERT_EQ(run->figures.size(), 2u);
  EXPECT_EQ(run->in_place.size(), 1u);
  EXPECT_EQ(run->figures[1].bytes, 1u << 20);
  EXPECT_DOUBLE_EQ(run->figures[1].seconds, 820.61e-6);
  EXPECT_EQ(run->wrong, 3u);
  EXPECT_FALSE(run->out_of_bounds_ok);
}

TEST(NcclTests, SkipsNcclLogLinesBetweenRows) {
  Result<NcclTestsRun> run = ParseNcclTestsOutput(
      "gpu001:41200:41200 [0] NCCL INFO Bootstrap : Using eth0:10.0.0.1<0>\n"
      "        8             2     float     sum      -1    22.00    0.00    0.00     N/A    "
      "22.00    0.00    0.00     N/A\n");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->figures.size(), 1u);
  EXPECT_EQ(run->avg_busbw_bytes_per_s, 0);
}

TEST(NcclTests, MalformedRowsAreErrorsNamingTheLine) {
  struct Case {
    std::string text;
    std::string expect;
  } cases[] = {
      {"# header\n        8  2  float  sum  -1  22.00  0.00  0.00  0  22.00  0.00\n",
       "line 2: a row has 13 fields"},
      {"8 2 float sum -1 fast 0.00 0.00 0 22.00 0.00 0.00 0\n", "line 1: time 'fast'"},
      {"8 2 float sum -1 22.0 0.00 0.00 x 22.00 0.00 0.00 0\n", "#wrong 'x'"},
      {"8 2 float sum -1 N/A N/A N/A N/A 22.00 0.00 0.00 0\n", "out-of-place variant"},
      {"8.5 2 float sum -1 22.0 0.00 0.00 0 22.00 0.00 0.00 0\n", "whole numbers"},
      {"# Avg bus bandwidth : lots\n", "line 1: the average bus bandwidth"},
      {"# nothing but comments\n#\n", "no result row"},
  };
  for (const Case& c : cases) {
    Result<NcclTestsRun> run = ParseNcclTestsOutput(c.text);
    ASSERT_FALSE(run.ok()) << c.text;
    EXPECT_EQ(run.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(run.status().message().find(c.expect), std::string::npos) << run.status().ToString();
  }
}

class NcclTestsRunTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_FALSE(tmp_.path().empty()); }
  // An executable script standing in for all_reduce_perf.
  std::string Script(const std::string& name, const std::string& body) {
    std::string path = tmp_.Sub(name);
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    std::filesystem::permissions(path, std::filesystem::perms::owner_all);
    return path;
  }
  base::ScopedTempDir tmp_{"nccl-tests"};
};

TEST_F(NcclTestsRunTest, AbsentBinaryIsNotFoundWithTheSkipReason) {
  const char* old = ::getenv("PATH");
  std::string saved = old ? old : "";
  ::setenv("PATH", tmp_.path().c_str(), 1);  // an empty directory: nothing to find
  Result<NcclTestsRun> run = RunNcclTests({.deadline = base::Deadline::After(5s)});
  ::setenv("PATH", saved.c_str(), 1);
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), StatusCode::kNotFound);
  EXPECT_EQ(run.status().message(), kNcclTestsNotInstalled);

  Result<std::string> found = FindAllReducePerf(tmp_.Sub("all_reduce_perf"));
  ASSERT_FALSE(found.ok());
  EXPECT_EQ(found.status().code(), StatusCode::kNotFound);
  EXPECT_NE(found.status().message().find(tmp_.Sub("all_reduce_perf")), std::string::npos);
}

TEST_F(NcclTestsRunTest, RunsTheBinaryAndParsesItsTable) {
  std::string bin = Script("all_reduce_perf", "echo \"args: $*\" >&2\ncat '" RAILYARD_COMM_TESTDATA
                                              "/nccl_tests_all_reduce_perf_8gpu.txt'");
  Result<NcclTestsRun> run = RunNcclTests({.binary = bin,
                                           .args = {"-b", "8", "-e", "128M"},
                                           .gpus = 8,
                                           .deadline = base::Deadline::After(30s)});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->figures.size(), 9u);
  EXPECT_NE(run->command.find("-e 128M -g 8"), std::string::npos) << run->command;
  // -g given in args stays as given.
  run = RunNcclTests(
      {.binary = bin, .args = {"-g", "4"}, .gpus = 8, .deadline = base::Deadline::After(30s)});
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->command.find("-g 8"), std::string::npos) << run->command;
}

TEST_F(NcclTestsRunTest, FailingOrHungBinaryIsAnErrorNamingIt) {
  std::string failing = Script("fails", "echo 'NCCL WARN no GPU found' >&2\nexit 3");
  Result<NcclTestsRun> run =
      RunNcclTests({.binary = failing, .deadline = base::Deadline::After(30s)});
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), StatusCode::kInternal);
  EXPECT_NE(run.status().message().find("no GPU found"), std::string::npos)
      << run.status().ToString();

  std::string hung = Script("hangs", "exec sleep 60");
  run = RunNcclTests({.binary = hung, .deadline = base::Deadline::After(300ms)});
  ASSERT_FALSE(run.ok());
  EXPECT_EQ(run.status().code(), StatusCode::kDeadlineExceeded) << run.status().ToString();
  EXPECT_NE(run.status().message().find("hangs"), std::string::npos) << run.status().ToString();
}

}  // namespace
}  // namespace railyard::validate
