// The validation report as JUnit XML, for CI systems (Jenkins, GitLab, GitHub test reporters)
// that show a run's checks as test cases.
//
//   WriteFile(path, ReportToJUnit(report));
//
// Mapping (docs/formats.md, "Validation report"): one <testsuite> per host, named after it,
// plus one named "cluster" for the cluster-wide checks and the fabric findings; one <testcase>
// per check (classname "railyard.validate.<suite>", name the check id, time its elapsed
// seconds). FAIL gives <failure message=reason>, UNKNOWN <error message=reason> (the check
// could not decide, as a test that could not run), SKIPPED <skipped message=reason>; PASS and
// WARN pass, WARN with "<system-out>WARN: reason</system-out>". The <testsuites> root carries
// the totals. Every text is XML-escaped; characters XML 1.0 cannot carry become '?'.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include "railyard/base/strings.h"
#include "railyard/validate/report.h"

namespace railyard::validate {

std::string ReportToJUnit(const RunReport& report);

// base::XmlEscape (strings.h), which the JUnit and HTML reports escape their text with.
using base::XmlEscape;

}  // namespace railyard::validate
