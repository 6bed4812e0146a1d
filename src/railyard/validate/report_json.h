// The validation report as JSON (report_version 1; schema in docs/formats.md, "Validation
// report"): what `railyard validate --json` prints and what tools read back.
//
//   nlohmann::json j = ReportToJson(report);
//   std::cout << j.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
//
// (a reason may quote a tool's output, which need not be UTF-8: dump with `replace`.)
// Hosts are named, never indexed: pairs and findings carry host names. Rates are bits/s
// (fabric) or bytes/s (storage, collective) as plain numbers, never rounded. Also the small
// lookups the other renderers share (host names, a finding's pairs).
//
// Thread-safety: pure functions.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "railyard/validate/report.h"

namespace railyard::validate {

inline constexpr int kReportVersion = 1;

nlohmann::json ReportToJson(const RunReport& report);

// The name of host `index`, or "host#<index>" when it is out of range (a renderer never
// fails on a report it did not build).
std::string ReportHostName(const RunReport& report, int index);

// Indices into report.pairs of a finding's tests: evidence.tests counts the first-pass pairs
// (retest == false) in report order, evidence.retest_tests the re-test pairs in report order.
// Indices past the end are left out.
std::vector<int> FindingPairIndices(const RunReport& report, const Finding& finding);
std::vector<int> FindingRetestPairIndices(const RunReport& report, const Finding& finding);

}  // namespace railyard::validate
