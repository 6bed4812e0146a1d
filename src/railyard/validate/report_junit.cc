#include "railyard/validate/report_junit.h"

#include <fmt/format.h>

#include <vector>

#include "railyard/base/units.h"

namespace railyard::validate {
namespace {

struct Case {
  std::string name;
  Outcome outcome;
  double seconds = 0;
};

struct Suite {
  std::string name;
  std::vector<Case> cases;
};

std::string CaseXml(const std::string& suite, const Case& c) {
  std::string out =
      fmt::format(R"(    <testcase classname="railyard.validate.{}" name="{}" time="{:.3f}")",
                  XmlEscape(suite), XmlEscape(c.name), c.seconds);
  const std::string reason = XmlEscape(c.outcome.reason);
  std::string detail;
  if (!c.outcome.measured.empty() || !c.outcome.expected.empty()) {
    detail = XmlEscape(fmt::format("measured {}, expected {}",
                                   c.outcome.measured.empty() ? "-" : c.outcome.measured,
                                   c.outcome.expected.empty() ? "-" : c.outcome.expected));
  }
  switch (c.outcome.verdict) {
    case Verdict::kPass:
      return out + "/>\n";
    case Verdict::kWarn:
      return out + fmt::format(">\n      <system-out>WARN: {}{}</system-out>\n    </testcase>\n",
                               reason, detail.empty() ? "" : " (" + detail + ")");
    case Verdict::kFail:
      return out + fmt::format(
                       ">\n      <failure message=\"{}\" type=\"FAIL\">{}</failure>\n    "
                       "</testcase>\n",
                       reason, detail);
    case Verdict::kUnknown:
      return out + fmt::format(
                       ">\n      <error message=\"{}\" type=\"UNKNOWN\">{}</error>\n    "
                       "</testcase>\n",
                       reason, detail);
    case Verdict::kSkipped:
      return out + fmt::format(">\n      <skipped message=\"{}\"/>\n    </testcase>\n", reason);
  }
  return out + "/>\n";
}

int Count(const Suite& s, Verdict v) {
  int n = 0;
  for (const Case& c : s.cases) n += c.outcome.verdict == v;
  return n;
}

double Seconds(const Suite& s) {
  double t = 0;
  for (const Case& c : s.cases) t += c.seconds;
  return t;
}

}  // namespace

std::string ReportToJUnit(const RunReport& report) {
  std::vector<Suite> suites;
  for (const HostEntry& h : report.hosts) {
    Suite s{.name = h.name};
    for (const CheckResult& c : h.checks) {
      s.cases.push_back({c.id, c.outcome, c.elapsed.count() / 1000.0});
    }
    suites.push_back(std::move(s));
  }
  Suite cluster{.name = "cluster"};
  for (const CheckResult& c : report.cluster_checks) {
    cluster.cases.push_back({c.id, c.outcome, c.elapsed.count() / 1000.0});
  }
  // Findings as cases of their own, so a CI page names the bad host, link or uplink.
  for (const Finding& f : report.findings) {
    Outcome o = f.outcome;
    o.measured = base::FormatRateBits(f.evidence.measured_bits);
    o.expected = fmt::format("{} (ratio {:.2f}, {} of {} tests slow)",
                             base::FormatRateBits(f.evidence.expected_bits), f.evidence.ratio,
                             f.evidence.slow, f.evidence.total);
    cluster.cases.push_back(
        {fmt::format("finding {} {}", FindingKindName(f.kind), f.subject), o, 0});
  }
  suites.push_back(std::move(cluster));

  int tests = 0, failures = 0, errors = 0, skipped = 0;
  std::string body;
  for (const Suite& s : suites) {
    const int n = static_cast<int>(s.cases.size());
    const int f = Count(s, Verdict::kFail), e = Count(s, Verdict::kUnknown),
              k = Count(s, Verdict::kSkipped);
    tests += n;
    failures += f;
    errors += e;
    skipped += k;
    body += fmt::format(
        "  <testsuite name=\"{}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" skipped=\"{}\" "
        "time=\"{:.3f}\" timestamp=\"{}\">\n",
        XmlEscape(s.name), n, f, e, k, Seconds(s), XmlEscape(report.started));
    for (const Case& c : s.cases) body += CaseXml(s.name, c);
    body += "  </testsuite>\n";
  }
  return fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<testsuites name=\"railyard validate {}\" tests=\"{}\" failures=\"{}\" errors=\"{}\" "
      "skipped=\"{}\" time=\"{:.3f}\">\n{}</testsuites>\n",
      XmlEscape(report.plan), tests, failures, errors, skipped, report.total_s, body);
}

}  // namespace railyard::validate
