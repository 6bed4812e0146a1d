#include "railyard/validate/report_json.h"

#include <string_view>

namespace railyard::validate {
namespace {

using nlohmann::json;

std::vector<int> NthOfKind(const RunReport& report, const std::vector<int>& tests, bool retest) {
  std::vector<int> index;  // report.pairs index of the k-th pair of this kind
  for (size_t i = 0; i < report.pairs.size(); ++i) {
    if (report.pairs[i].retest == retest) index.push_back(static_cast<int>(i));
  }
  std::vector<int> out;
  for (int t : tests) {
    if (t >= 0 && static_cast<size_t>(t) < index.size()) out.push_back(index[t]);
  }
  return out;
}

json CheckJson(const CheckResult& c) {
  return {{"id", c.id},
          {"verdict", VerdictName(c.outcome.verdict)},
          {"reason", c.outcome.reason},
          {"measured", c.outcome.measured},
          {"expected", c.outcome.expected},
          {"elapsed_ms", c.elapsed.count()}};
}

json Ratio(double measured, double expected) {
  return expected > 0 ? json(measured / expected) : json(nullptr);
}

json NameOrNull(const RunReport& r, int index) {
  return index >= 0 ? json(ReportHostName(r, index)) : json(nullptr);
}

json FabricJson(const RunReport& r) {
  json pairs = json::array();
  for (const PairFigure& p : r.pairs) {
    pairs.push_back({{"src", ReportHostName(r, p.src)},
                     {"dst", ReportHostName(r, p.dst)},
                     {"measured_bits", p.measured_bits},
                     {"expected_bits", p.expected_bits},
                     {"ratio", Ratio(p.measured_bits, p.expected_bits)},
                     {"slow", p.slow},
                     {"retest", p.retest},
                     {"round", p.round},
                     {"error", p.error}});
  }
  json findings = json::array();
  for (const Finding& f : r.findings) {
    json retest = json::array();
    for (const PairTest& t : f.retest) {
      retest.push_back({{"a", ReportHostName(r, t.a)}, {"b", ReportHostName(r, t.b)}});
    }
    const Evidence& e = f.evidence;
    findings.push_back({{"kind", FindingKindName(f.kind)},
                        {"subject", f.subject},
                        {"host", NameOrNull(r, f.host)},
                        {"peer", NameOrNull(r, f.peer)},
                        {"direction", f.direction},
                        {"verdict", VerdictName(f.outcome.verdict)},
                        {"reason", f.outcome.reason},
                        {"evidence",
                         {{"measured_bits", e.measured_bits},
                          {"expected_bits", e.expected_bits},
                          {"ratio", e.ratio},
                          {"slow", e.slow},
                          {"total", e.total},
                          {"tests", FindingPairIndices(r, f)},
                          {"retest_tests", FindingRetestPairIndices(r, f)}}},
                        {"retest", retest}});
  }
  return {{"schedule", ScheduleKindName(r.schedule)},
          {"rounds", r.rounds},
          {"stats",
           {{"count", r.fabric_stats.count},
            {"median", r.fabric_stats.median},
            {"mad", r.fabric_stats.mad},
            {"normalised", r.fabric_stats.normalised}}},
          {"pairs", pairs},
          {"findings", findings}};
}

json StorageJson(const RunReport& r) {
  json hosts = json::array();
  for (const StorageFigure& f : r.storage) {
    hosts.push_back({{"host", ReportHostName(r, f.host)},
                     {"write_bytes_per_s", f.write_bytes_per_s},
                     {"read_bytes_per_s", f.read_bytes_per_s},
                     {"read_from", NameOrNull(r, f.read_from)},
                     {"metadata_ops_per_s", f.metadata_ops_per_s},
                     {"error", f.error}});
  }
  return {{"write_bytes_per_s", r.storage_write_bytes_per_s},
          {"read_bytes_per_s", r.storage_read_bytes_per_s},
          {"metadata_ops_per_s", r.storage_metadata_ops_per_s},
          {"hosts", hosts}};
}

}  // namespace

std::string ReportHostName(const RunReport& report, int index) {
  if (index >= 0 && static_cast<size_t>(index) < report.hosts.size()) {
    return report.hosts[index].name;
  }
  return "host#" + std::to_string(index);
}

std::vector<int> FindingPairIndices(const RunReport& report, const Finding& finding) {
  return NthOfKind(report, finding.evidence.tests, false);
}

std::vector<int> FindingRetestPairIndices(const RunReport& report, const Finding& finding) {
  return NthOfKind(report, finding.evidence.retest_tests, true);
}

nlohmann::json ReportToJson(const RunReport& report) {
  json hosts = json::array();
  for (const HostEntry& h : report.hosts) {
    json checks = json::array();
    for (const CheckResult& c : h.checks) checks.push_back(CheckJson(c));
    hosts.push_back({{"name", h.name},
                     {"address", h.address},
                     {"profile", h.profile},
                     {"overall",
                      {{"verdict", VerdictName(h.overall.verdict)},
                       {"reason", h.overall.reason},
                       {"exit_code", h.overall.ExitCode()}}},
                     {"checks", checks}});
  }
  json collective = json::array();
  for (const CollectiveFigure& c : report.collective) {
    collective.push_back({{"bytes", c.bytes},
                          {"seconds", c.seconds},
                          {"algbw_bytes_per_s", c.algbw_bytes_per_s},
                          {"busbw_bytes_per_s", c.busbw_bytes_per_s}});
  }
  json cluster = json::array();
  for (const CheckResult& c : report.cluster_checks) cluster.push_back(CheckJson(c));
  return {{"report_version", kReportVersion},
          {"plan", report.plan},
          {"started", report.started},
          {"total_s", report.total_s},
          {"overall",
           {{"verdict", VerdictName(report.overall.verdict)},
            {"reason", report.overall.reason},
            {"exit_code", report.ExitCode()}}},
          {"hosts", hosts},
          {"fabric", FabricJson(report)},
          {"storage", StorageJson(report)},
          {"collective", collective},
          {"cluster_checks", cluster}};
}

}  // namespace railyard::validate
