// The validation report as a Prometheus textfile, for node_exporter's textfile collector
// (write it to <dir>/railyard_validate.prom.tmp, then rename onto railyard_validate.prom, so
// the collector never reads half a file).
//
//   WriteFile(tmp, ReportToPrometheus(report, now));
//
// The exposition format, version 0.0.4: each family once, "# HELP" and "# TYPE" first, then
// `name{label="value",...} number`, no timestamps (the textfile collector rejects them).
// Statuses use the Nagios codes of verdict.h: 0 PASS or SKIPPED, 1 WARN, 2 FAIL, 3 UNKNOWN.
// The families are listed in docs/formats.md ("Validation report"). Rates are in bits or
// bytes per second, as Prometheus names units.
//
// Thread-safety: pure functions.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "railyard/validate/report.h"

namespace railyard::validate {

std::string ReportToPrometheus(const RunReport& report);

// A label value escaped for the exposition format: \ as \\, " as \", newline as \n.
std::string PrometheusLabelValue(std::string_view value);

// report.started ("2026-12-02T02:00:00Z", also with fractional seconds or an offset
// "+01:00") as Unix seconds; nullopt when it is not ISO 8601.
std::optional<double> ParseIsoTimestamp(std::string_view iso);

}  // namespace railyard::validate
