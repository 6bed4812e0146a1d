#include "railyard/validate/report_prometheus.h"

#include <gtest/gtest.h>

#include <map>
#include <regex>
#include <set>
#include <sstream>

#include "railyard/validate/report_testing.h"

namespace railyard::validate {
namespace {

struct Sample {
  std::string name;
  std::map<std::string, std::string> labels;
  std::string value;
};

// Reads the text exposition format strictly: every family opens with HELP then TYPE, once;
// its samples follow before the next family; label values are escaped; no timestamps.
// Failures are reported through gtest.
void ParseInto(const std::string& text, std::vector<Sample>& samples) {
  static const std::regex kName("[a-zA-Z_:][a-zA-Z0-9_:]*");
  static const std::regex kLabelName("[a-zA-Z_][a-zA-Z0-9_]*");
  static const std::regex kValue(R"([-+]?([0-9]*\.?[0-9]+([eE][-+]?[0-9]+)?|Inf)|NaN)");
  std::set<std::string> families;
  std::string family, pending_help;
  std::istringstream in(text);
  std::string line;
  EXPECT_EQ(text.back(), '\n');
  while (std::getline(in, line)) {
    SCOPED_TRACE(line);
    if (line.rfind("# HELP ", 0) == 0) {
      std::string rest = line.substr(7);
      pending_help = rest.substr(0, rest.find(' '));
      EXPECT_TRUE(std::regex_match(pending_help, kName));
      EXPECT_TRUE(families.insert(pending_help).second) << "family twice: " << pending_help;
      EXPECT_GT(rest.size(), pending_help.size() + 1) << "empty help";
      continue;
    }
    if (line.rfind("# TYPE ", 0) == 0) {
      EXPECT_EQ(line, "# TYPE " + pending_help + " gauge");
      family = pending_help;
      pending_help.clear();
      continue;
    }
    ASSERT_FALSE(line.empty() || line[0] == '#') << "unexpected line";
    Sample s;
    size_t pos = 0;
    while (pos < line.size() && line[pos] != '{' && line[pos] != ' ') ++pos;
    s.name = line.substr(0, pos);
    EXPECT_TRUE(std::regex_match(s.name, kName));
    EXPECT_EQ(s.name, family) << "sample outside its family";
    if (line[pos] == '{') {
      ++pos;
      while (line[pos] != '}') {
        size_t eq = line.find("=\"", pos);
        ASSERT_NE(eq, std::string::npos);
        std::string label = line.substr(pos, eq - pos);
        EXPECT_TRUE(std::regex_match(label, kLabelName)) << label;
        pos = eq + 2;
        std::string value;
        while (pos < line.size() && line[pos] != '"') {
          if (line[pos] == '\\') {
            ++pos;
            ASSERT_LT(pos, line.size());
            char e = line[pos];
            ASSERT_TRUE(e == '\\' || e == '"' || e == 'n') << "bad escape \\" << e;
            value += e == 'n' ? '\n' : e;
          } else {
            value += line[pos];
          }
          ++pos;
        }
        ASSERT_LT(pos, line.size()) << "unterminated label value";
        ++pos;
        EXPECT_TRUE(s.labels.emplace(label, value).second) << "label twice: " << label;
        if (line[pos] == ',') ++pos;
      }
      ++pos;
    }
    ASSERT_EQ(line[pos], ' ');
    s.value = line.substr(pos + 1);
    EXPECT_TRUE(std::regex_match(s.value, kValue)) << "value (a timestamp?): " << s.value;
    samples.push_back(std::move(s));
  }
  // No two samples share a name and label set.
  std::set<std::string> seen;
  for (const Sample& s : samples) {
    std::string key = s.name;
    for (const auto& [k, v] : s.labels) key += "|" + k + "=" + v;
    EXPECT_TRUE(seen.insert(key).second) << "duplicate series " << key;
  }
}

std::vector<Sample> ParseExposition(const std::string& text) {
  std::vector<Sample> samples;
  ParseInto(text, samples);
  return samples;
}

std::string ValueOf(const std::vector<Sample>& samples, const std::string& name,
                    const std::map<std::string, std::string>& labels = {}) {
  for (const Sample& s : samples) {
    if (s.name == name && s.labels == labels) return s.value;
  }
  return "(absent)";
}

size_t CountOf(const std::vector<Sample>& samples, const std::string& name) {
  size_t n = 0;
  for (const Sample& s : samples) n += s.name == name;
  return n;
}

TEST(ReportPrometheus, ValidExpositionWithEveryFamily) {
  RunReport r = SampleReport();
  std::vector<Sample> m = ParseExposition(ReportToPrometheus(r));
  EXPECT_EQ(ValueOf(m, "railyard_validate_status"), "2");
  EXPECT_EQ(ValueOf(m, "railyard_validate_run_info", {{"plan", "full"}}), "1");
  // 2026-12-02T02:00:00Z
  EXPECT_EQ(ValueOf(m, "railyard_validate_run_timestamp_seconds"), "1796176800");
  EXPECT_EQ(ValueOf(m, "railyard_validate_last_run_duration_seconds"), "21.5");
}

TEST(ReportPrometheus, HostAndCheckStatusesAreNagiosCodes) {
  RunReport r = SampleReport();
  std::vector<Sample> m = ParseExposition(ReportToPrometheus(r));
  EXPECT_EQ(CountOf(m, "railyard_validate_host_status"), 8u);
  EXPECT_EQ(ValueOf(m, "railyard_validate_host_status", {{"host", "node0"}}), "0");
  EXPECT_EQ(ValueOf(m, "railyard_validate_host_status", {{"host", "node3"}}), "1");
  EXPECT_EQ(ValueOf(m, "railyard_validate_host_status", {{"host", "node5"}}), "2");
  EXPECT_EQ(ValueOf(m, "railyard_validate_host_status", {{"host", "node7"}}), "3");
  const std::string check = "railyard_validate_check_status";
  EXPECT_EQ(ValueOf(m, check, {{"host", "node0"}, {"check", "gpu.count"}}), "0");  // skipped
  EXPECT_EQ(ValueOf(m, check, {{"host", "node3"}, {"check", "node.sysctl"}}), "1");
  EXPECT_EQ(ValueOf(m, check, {{"host", "node5"}, {"check", "fabric.pair_bandwidth"}}), "2");
  EXPECT_EQ(ValueOf(m, check, {{"host", "node7"}, {"check", "node.cpus"}}), "3");
  size_t checks = 0;
  for (const HostEntry& h : r.hosts) checks += h.checks.size();
  EXPECT_EQ(CountOf(m, check), checks);
  EXPECT_EQ(
      ValueOf(m, "railyard_validate_cluster_check_status", {{"check", "collective.nccl_tests"}}),
      "0");
  EXPECT_EQ(ValueOf(m, "railyard_validate_finding_status",
                    {{"kind", "link"}, {"subject", "node2<->node6"}}),
            "2");
}

TEST(ReportPrometheus, PairAndStorageFigures) {
  RunReport r = SampleReport();
  std::vector<Sample> m = ParseExposition(ReportToPrometheus(r));
  // First-pass pairs only: 7 live hosts, both directions.
  EXPECT_EQ(CountOf(m, "railyard_validate_pair_bandwidth_bits_per_second"), 42u);
  EXPECT_EQ(ValueOf(m, "railyard_validate_pair_bandwidth_bits_per_second",
                    {{"src", "node2"}, {"dst", "node6"}}),
            "40000000");
  EXPECT_EQ(ValueOf(m, "railyard_validate_pair_bandwidth_bits_per_second",
                    {{"src", "node0"}, {"dst", "node1"}}),
            std::to_string(static_cast<int>(SampleHealthyBits(0, 1))));
  EXPECT_EQ(ValueOf(m, "railyard_validate_pair_expected_bits_per_second",
                    {{"src", "node0"}, {"dst", "node1"}}),
            "200000000");
  // node7's storage failed: no figure for it.
  EXPECT_EQ(CountOf(m, "railyard_validate_storage_write_bytes_per_second"), 7u);
  EXPECT_EQ(ValueOf(m, "railyard_validate_storage_write_bytes_per_second", {{"host", "node2"}}),
            "92000000");
  EXPECT_EQ(ValueOf(m, "railyard_validate_storage_metadata_ops_per_second", {{"host", "node2"}}),
            "1520");
  EXPECT_EQ(ValueOf(m, "railyard_validate_storage_aggregate_bytes_per_second", {{"op", "read"}}),
            "791000000");
  EXPECT_EQ(
      ValueOf(m, "railyard_validate_allreduce_busbw_bytes_per_second", {{"bytes", "67108864"}}),
      "20000000");
}

TEST(ReportPrometheus, EscapesLabelValues) {
  EXPECT_EQ(PrometheusLabelValue("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
  RunReport r = SampleReport();
  r.hosts[0].name = "we\"ird\\host\nname";
  std::vector<Sample> m = ParseExposition(ReportToPrometheus(r));
  EXPECT_EQ(ValueOf(m, "railyard_validate_host_status", {{"host", "we\"ird\\host\nname"}}), "0");
}

TEST(ReportPrometheus, EmptyReportStillValid) {
  RunReport r;
  r.overall = Outcome::Unknown("no hosts");
  std::vector<Sample> m = ParseExposition(ReportToPrometheus(r));
  EXPECT_EQ(ValueOf(m, "railyard_validate_status"), "3");
  EXPECT_EQ(CountOf(m, "railyard_validate_run_timestamp_seconds"), 0u);  // no start time
  EXPECT_EQ(CountOf(m, "railyard_validate_host_status"), 0u);
}

TEST(ReportPrometheus, ParsesIsoTimestamps) {
  EXPECT_EQ(ParseIsoTimestamp("1970-01-01T00:00:00Z"), 0.0);
  EXPECT_EQ(ParseIsoTimestamp("1970-01-01T01:00:00.5+01:00"), 0.5);
  EXPECT_EQ(ParseIsoTimestamp("1970-01-01T00:00:00-00:30"), 1800.0);
  EXPECT_EQ(ParseIsoTimestamp("yesterday"), std::nullopt);
  EXPECT_EQ(ParseIsoTimestamp("1970-01-01T00:00:00"), std::nullopt);  // no zone
}

}  // namespace
}  // namespace railyard::validate
