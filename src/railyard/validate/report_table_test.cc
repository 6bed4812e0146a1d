#include "railyard/validate/report_table.h"

#include <gtest/gtest.h>

#include <regex>
#include <sstream>

#include "railyard/validate/report_testing.h"

namespace railyard::validate {
namespace {

std::vector<std::string> Lines(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) out.push_back(line);
  return out;
}

std::string StripSgr(const std::string& text) {
  return std::regex_replace(text, std::regex("\x1b\\[[0-9;]*m"), "");
}

TEST(ReportTable, HostRowsWithCategoryVerdicts) {
  std::string table = FormatReportTable(SampleReport(), false);
  std::vector<std::string> lines = Lines(table);
  ASSERT_GE(lines.size(), 9u) << table;
  EXPECT_TRUE(std::regex_match(
      lines[0], std::regex("HOST +PROFILE +NODE +GPU +FABRIC +STORAGE +OVERALL +WORST CHECK")))
      << lines[0];
  const size_t overall = lines[0].find("OVERALL");
  const size_t fabric = lines[0].find("FABRIC");
  for (int i = 0; i < kSampleHosts; ++i) {
    const std::string& row = lines[1 + i];
    EXPECT_EQ(row.rfind(SampleHostName(i) + " ", 0), 0u) << row;
    // Every verdict sits under its heading.
    EXPECT_NE(row.find_first_not_of(' ', overall), std::string::npos);
    EXPECT_EQ(row[overall - 1], ' ') << row;
    EXPECT_NE(row[overall], ' ') << row;
    EXPECT_NE(row[fabric], ' ') << row;
  }
  EXPECT_TRUE(std::regex_match(lines[1], std::regex("node0 +cpu +PASS +SKIPPED +PASS +PASS +PASS")))
      << lines[1];
  EXPECT_EQ(lines[4].substr(overall, 4), "WARN");
  EXPECT_NE(lines[4].find(std::string("node.sysctl: ") + kSampleAwkwardReason), std::string::npos);
  EXPECT_EQ(lines[6].substr(fabric, 4), "FAIL");
  EXPECT_EQ(lines[6].substr(overall, 4), "FAIL");
  EXPECT_NE(lines[6].find("fabric.pair_bandwidth: link at 20% of expected"), std::string::npos);
  // node7 never connected: UNKNOWN everywhere it had checks, "-" for storage.
  EXPECT_TRUE(std::regex_search(
      lines[8], std::regex("^node7 +cpu +UNKNOWN +UNKNOWN +UNKNOWN +- +UNKNOWN +gpu.count: agent")))
      << lines[8];
}

TEST(ReportTable, ClusterChecksFindingsAndSummary) {
  std::string table = FormatReportTable(SampleReport(), false);
  EXPECT_TRUE(std::regex_search(table, std::regex("\nCLUSTER CHECK +VERDICT +REASON\n")));
  EXPECT_TRUE(std::regex_search(
      table, std::regex("\ncollective.nccl_tests +SKIPPED +nccl-tests not installed\n")));
  EXPECT_TRUE(std::regex_search(
      table, std::regex("\nFINDING +KIND +DIRECTION +VERDICT +EVIDENCE +REASON\n")));
  EXPECT_TRUE(std::regex_search(
      table, std::regex("\nnode5 +host +both +FAIL +40 Mbit/s of 200 Mbit/s \\(20%\\), 12 of 12 "
                        "tests slow +slow again on re-test")))
      << table;
  EXPECT_TRUE(std::regex_search(
      table, std::regex("\nnode2<->node6 +link +both +FAIL +40 Mbit/s of 200 Mbit/s \\(20%\\), 2 "
                        "of 2 tests slow")));
  std::vector<std::string> lines = Lines(table);
  EXPECT_EQ(lines.back(),
            "FAIL: 1 host, 1 link; UNKNOWN: 1 host; WARN: 1 host; PASS: 5 hosts (plan full, "
            "8 hosts in 21.5 s, exit code 2)");
  EXPECT_EQ(lines.back(), FormatReportSummary(SampleReport()));
  for (const std::string& line : lines) {
    EXPECT_TRUE(line.empty() || line.back() != ' ') << "trailing space: '" << line << "'";
  }
}

TEST(ReportTable, ColourKeepsTheLayout) {
  RunReport r = SampleReport();
  std::string plain = FormatReportTable(r, false);
  std::string colour = FormatReportTable(r, true);
  EXPECT_NE(colour, plain);
  EXPECT_NE(colour.find("\x1b[1;31mFAIL\x1b[0m"), std::string::npos);
  EXPECT_NE(colour.find("\x1b[32mPASS\x1b[0m"), std::string::npos);
  EXPECT_EQ(StripSgr(colour), plain);
  EXPECT_EQ(plain.find('\x1b'), std::string::npos);
}

TEST(ReportTable, CleanRunSummary) {
  RunReport r = SampleReport();
  r.findings.clear();
  r.hosts.resize(2);
  for (HostEntry& h : r.hosts) {
    for (CheckResult& c : h.checks) {
      if (c.outcome.verdict != Verdict::kSkipped) c.outcome = Outcome::Pass();
    }
  }
  r.cluster_checks.clear();
  RollUp(r);
  std::string table = FormatReportTable(r, false);
  EXPECT_NE(table.find("\nno host, link or uplink found slow\n"), std::string::npos);
  EXPECT_EQ(Lines(table).back(), "PASS: 2 hosts (plan full, 2 hosts in 21.5 s, exit code 0)");
}

TEST(ReportTable, ProgressLines) {
  EXPECT_EQ(FormatProgressLine({.phase = "fabric", .text = "round 3/7", .done = 2, .total = 7}),
            "fabric 2/7: round 3/7");
  EXPECT_EQ(
      FormatProgressLine({.phase = "node", .host = "node3", .text = "PASS", .done = 5, .total = 8}),
      "node 5/8: node3: PASS");
  EXPECT_EQ(FormatProgressLine({.phase = "hello", .text = "waiting for 8 agents"}),
            "hello: waiting for 8 agents");
  EXPECT_EQ(FormatProgressLine({.phase = "node",
                                .host = "node7",
                                .text = "UNKNOWN: did not answer within 5s",
                                .done = 8,
                                .total = 8}),
            "node 8/8: node7: UNKNOWN: did not answer within 5s");
}

}  // namespace
}  // namespace railyard::validate
