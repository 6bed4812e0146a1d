// The validation report as one self-contained HTML page: no script, no external URL (styles
// and the heatmap are inline), so it opens anywhere, offline, and can be mailed or archived.
//
//   WriteFile("validate.html", ReportToHtml(report));
//
// The page: the overall verdict and its reason; the findings with their evidence (measured,
// expected, ratio, slow/total, and the tests and re-tests by pair); one row per host (address,
// profile, overall, worst check); an inline SVG heatmap of the pair matrix; every host's
// checks (in <details>); the cluster checks; storage and collective figures.
//
// The heatmap has a row per sender and a column per receiver over all hosts. Each of the
// N*(N-1) off-diagonal cells is an SVG <rect class="cell ..."> with a <title> (the browser's
// tooltip): measured cells ("cell measured", the first-pass figure) read "node2 -> node6:
// 40 Mbit/s of 200 Mbit/s (20%)", against the expected rate, or against the fleet median when
// none is known, with any re-test figure appended; cells never measured ("cell none") or
// without a figure ("cell error") say so. Colour: red for slow (below the analysis
// threshold) and under 50%, orange for slow, amber for under 90%, green otherwise.
//
// All text is escaped (XmlEscape). Thread-safety: pure functions.
#pragma once

#include <string>

#include "railyard/validate/report.h"

namespace railyard::validate {

std::string ReportToHtml(const RunReport& report);

// The heatmap alone (an <svg> element), as ReportToHtml embeds it.
std::string PairHeatmapSvg(const RunReport& report);

}  // namespace railyard::validate
