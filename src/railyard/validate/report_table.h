// The validation report for a terminal: what `railyard validate` prints when it is done, and
// one line per progress event while it runs.
//
//   std::fputs(FormatReportTable(report, isatty(1)).c_str(), stdout);
//   options.progress = [&](const ProgressEvent& e) { progress.Update(e.done, e.total,
//                                                                    FormatProgressLine(e)); };
//
// The table: one row per host with the worst verdict of each check category that ran
// (node, gpu, fabric, storage, collective; "-" where none did), the overall verdict and, for
// a host that is not PASS, its worst check and reason; then the cluster-wide checks; then
// the findings with their evidence; then one summary line counting hosts, links and uplinks
// by verdict, worst first:
//
//   FAIL: 1 host, 1 link; UNKNOWN: 1 host; WARN: 1 host; PASS: 5 hosts (plan full, 8 hosts
//   in 21.5 s, exit code 2)
//
// With `color`, verdicts are coloured with ANSI SGR codes (columns stay aligned).
//
// Thread-safety: pure functions.
#pragma once

#include <string>

#include "railyard/validate/coordinator.h"
#include "railyard/validate/report.h"

namespace railyard::validate {

std::string FormatReportTable(const RunReport& report, bool color);

// The summary line alone (the table's last line, without newline).
std::string FormatReportSummary(const RunReport& report);

// "fabric 3/7: round 3/7", "node 5/8: node3: PASS", "hello: waiting for 8 agents": the
// phase, done/total when total > 0, the host when there is one, the text. No newline.
std::string FormatProgressLine(const ProgressEvent& event);

}  // namespace railyard::validate
