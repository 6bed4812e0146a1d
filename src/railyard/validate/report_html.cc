#include "railyard/validate/report_html.h"

#include <fmt/format.h>

#include <map>
#include <utility>
#include <vector>

#include "railyard/base/units.h"
#include "railyard/validate/report_json.h"
#include "railyard/validate/report_junit.h"

namespace railyard::validate {
namespace {

std::string E(std::string_view text) { return XmlEscape(text); }

std::string Badge(Verdict v) {
  return fmt::format(R"(<span class="v {0}">{0}</span>)", VerdictName(v));
}

std::string Percent(double ratio) { return fmt::format("{:.0f}%", ratio * 100); }

constexpr std::string_view kStyle = R"(
body { font-family: sans-serif; margin: 1.5em; color: #222; }
table { border-collapse: collapse; margin: 0.5em 0 1.5em; }
th, td { border: 1px solid #ccc; padding: 0.25em 0.6em; text-align: left; vertical-align: top; }
th { background: #f2f2f2; }
td.num { text-align: right; font-variant-numeric: tabular-nums; }
.v { font-weight: bold; padding: 0 0.3em; border-radius: 3px; color: #fff; }
.v.PASS { background: #1a7f37; } .v.WARN { background: #b7791f; }
.v.FAIL { background: #c62828; } .v.UNKNOWN { background: #6a1b9a; }
.v.SKIPPED { background: #777; }
.tests { font-size: 0.85em; color: #444; }
svg text { font-family: sans-serif; }
)";

// First-pass and re-test figures of each ordered pair.
struct PairCell {
  const PairFigure* first = nullptr;
  std::vector<const PairFigure*> retests;
};

std::map<std::pair<int, int>, PairCell> Cells(const RunReport& r) {
  std::map<std::pair<int, int>, PairCell> cells;
  for (const PairFigure& p : r.pairs) {
    PairCell& c = cells[{p.src, p.dst}];
    if (p.retest) {
      c.retests.push_back(&p);
    } else if (c.first == nullptr) {
      c.first = &p;
    }
  }
  return cells;
}

// measured/expected, or measured/median when nothing is expected (0 when neither is known),
// and the text after "a -> b: ".
std::pair<double, std::string> Describe(const RunReport& r, const PairFigure& p) {
  if (!p.error.empty()) return {0, "no figure: " + p.error};
  std::string rate = base::FormatRateBits(p.measured_bits);
  if (p.expected_bits > 0) {
    double ratio = p.measured_bits / p.expected_bits;
    return {ratio, fmt::format("{} of {} ({})", rate, base::FormatRateBits(p.expected_bits),
                               Percent(ratio))};
  }
  if (!r.fabric_stats.normalised && r.fabric_stats.median > 0) {
    double ratio = p.measured_bits / r.fabric_stats.median;
    return {ratio, fmt::format("{}, {} of the fleet median {}", rate, Percent(ratio),
                               base::FormatRateBits(r.fabric_stats.median))};
  }
  return {0, rate};
}

std::string CellColour(const PairFigure& p, double ratio) {
  if (p.slow) return ratio > 0 && ratio >= 0.5 ? "#ef6c00" : "#c62828";
  if (ratio > 0 && ratio < 0.9) return "#f9c74f";
  return "#43a047";
}

std::string PairName(const RunReport& r, const PairFigure& p) {
  return fmt::format("{} -> {}", ReportHostName(r, p.src), ReportHostName(r, p.dst));
}

std::string OverallSection(const RunReport& r) {
  return fmt::format(
      "<h1>Railyard validation {}</h1>\n<p id=\"overall\">Plan <b>{}</b>, started {}, {} hosts, "
      "{:.1f} s, exit code {}.<br>{}</p>\n",
      Badge(r.overall.verdict), E(r.plan), E(r.started), r.hosts.size(), r.total_s, r.ExitCode(),
      E(r.overall.reason));
}

std::string FindingsSection(const RunReport& r) {
  std::string out = "<h2>Findings</h2>\n";
  if (r.findings.empty()) return out + "<p>No host, link or uplink was found slow.</p>\n";
  out +=
      "<table id=\"findings\">\n<tr><th>subject</th><th>kind</th><th>direction</th>"
      "<th>verdict</th><th>measured</th><th>expected</th><th>ratio</th><th>slow tests</th>"
      "<th>reason</th></tr>\n";
  for (const Finding& f : r.findings) {
    const Evidence& e = f.evidence;
    out += fmt::format(
        "<tr class=\"finding\"><td><b>{}</b></td><td>{}</td><td>{}</td><td>{}</td>"
        "<td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>"
        "<td class=\"num\">{} of {}</td><td>{}</td></tr>\n",
        E(f.subject), FindingKindName(f.kind), E(f.direction), Badge(f.outcome.verdict),
        base::FormatRateBits(e.measured_bits), base::FormatRateBits(e.expected_bits),
        fmt::format("{:.2f}", e.ratio), e.slow, e.total, E(f.outcome.reason));
    auto list = [&](const std::vector<int>& indices) {
      std::string s;
      for (int i : indices) {
        const PairFigure& p = r.pairs[i];
        if (!s.empty()) s += ", ";
        s += E(fmt::format("{} {} (round {})", PairName(r, p), Describe(r, p).second, p.round));
      }
      return s.empty() ? std::string("none") : s;
    };
    out +=
        fmt::format("<tr class=\"tests\"><td colspan=\"9\">tests: {}<br>re-tests: {}</td></tr>\n",
                    list(FindingPairIndices(r, f)), list(FindingRetestPairIndices(r, f)));
  }
  return out + "</table>\n";
}

std::string HostsSection(const RunReport& r) {
  std::string out =
      "<h2>Hosts</h2>\n<table id=\"hosts\">\n<tr><th>host</th><th>address</th><th>profile</th>"
      "<th>overall</th><th>worst check</th></tr>\n";
  for (const HostEntry& h : r.hosts) {
    std::string worst;
    if (h.overall.verdict != Verdict::kPass && h.overall.verdict != Verdict::kSkipped) {
      for (const CheckResult& c : h.checks) {
        if (c.outcome.verdict != h.overall.verdict) continue;
        worst = fmt::format("{}: {}", E(c.id), E(c.outcome.reason));
        break;
      }
    }
    out += fmt::format(
        "<tr class=\"host\"><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>\n",
        E(h.name), E(h.address.empty() ? "-" : h.address), E(h.profile), Badge(h.overall.verdict),
        worst);
  }
  return out + "</table>\n";
}

std::string CheckRows(const std::vector<CheckResult>& checks) {
  std::string out =
      "<table>\n<tr><th>check</th><th>verdict</th><th>measured</th><th>expected</th>"
      "<th>reason</th><th>time</th></tr>\n";
  for (const CheckResult& c : checks) {
    out += fmt::format(
        "<tr><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"num\">{} "
        "ms</td></tr>\n",
        E(c.id), Badge(c.outcome.verdict), E(c.outcome.measured), E(c.outcome.expected),
        E(c.outcome.reason), c.elapsed.count());
  }
  return out + "</table>\n";
}

std::string ChecksSection(const RunReport& r) {
  std::string out = "<h2>Checks</h2>\n";
  for (const HostEntry& h : r.hosts) {
    out += fmt::format("<details><summary>{} {}</summary>\n{}</details>\n", E(h.name),
                       Badge(h.overall.verdict), CheckRows(h.checks));
  }
  out += "<h3>Cluster checks</h3>\n";
  return out + (r.cluster_checks.empty() ? "<p>None ran.</p>\n" : CheckRows(r.cluster_checks));
}

std::string FabricSection(const RunReport& r) {
  std::string out = "<h2>Fabric</h2>\n";
  if (r.pairs.empty()) return out + "<p>No pair was measured.</p>\n";
  const Stats& s = r.fabric_stats;
  std::string median = s.normalised ? fmt::format("{} of expected", Percent(s.median))
                                    : base::FormatRateBits(s.median);
  std::string mad = s.normalised ? Percent(s.mad) : base::FormatRateBits(s.mad);
  out += fmt::format(
      "<p>Schedule {}, {} rounds, {} measurements; fleet median {}, MAD {}. Rows send, "
      "columns receive; hover a cell for its figures.</p>\n",
      ScheduleKindName(r.schedule), r.rounds, r.pairs.size(), median, mad);
  return out + PairHeatmapSvg(r) +
         "\n<p class=\"legend\">Cells: % of the expected rate (of the fleet median where none is "
         "known). <span style=\"background:#c62828\">&nbsp;&nbsp;</span> slow, under 50% "
         "<span style=\"background:#ef6c00\">&nbsp;&nbsp;</span> slow "
         "<span style=\"background:#f9c74f\">&nbsp;&nbsp;</span> under 90% "
         "<span style=\"background:#43a047\">&nbsp;&nbsp;</span> fine "
         "<span style=\"background:#bbb\">&nbsp;&nbsp;</span> no figure "
         "<span style=\"border:1px solid #ccc\">&nbsp;&nbsp;</span> not measured</p>\n";
}

std::string StorageSection(const RunReport& r) {
  std::string out = "<h2>Storage</h2>\n";
  if (r.storage.empty()) return out + "<p>No storage figures.</p>\n";
  out +=
      "<table id=\"storage\">\n<tr><th>host</th><th>write</th><th>read</th><th>read from</th>"
      "<th>metadata</th><th>error</th></tr>\n";
  for (const StorageFigure& f : r.storage) {
    bool ok = f.error.empty();
    out += fmt::format(
        "<tr><td>{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td><td>{}</td>"
        "<td class=\"num\">{}</td><td>{}</td></tr>\n",
        E(ReportHostName(r, f.host)), ok ? base::FormatByteRate(f.write_bytes_per_s) : "-",
        ok ? base::FormatByteRate(f.read_bytes_per_s) : "-",
        f.read_from >= 0 ? E(ReportHostName(r, f.read_from)) : "-",
        ok ? fmt::format("{:.0f} ops/s", f.metadata_ops_per_s) : "-", E(f.error));
  }
  out += fmt::format(
      "<tr><th>all hosts</th><td class=\"num\">{}</td><td class=\"num\">{}</td><td></td>"
      "<td class=\"num\">{:.0f} ops/s</td><td></td></tr>\n",
      base::FormatByteRate(r.storage_write_bytes_per_s),
      base::FormatByteRate(r.storage_read_bytes_per_s), r.storage_metadata_ops_per_s);
  return out + "</table>\n";
}

std::string CollectiveSection(const RunReport& r) {
  std::string out = "<h2>Collective</h2>\n";
  if (r.collective.empty()) return out + "<p>No allreduce figures.</p>\n";
  out +=
      "<table id=\"collective\">\n<tr><th>size</th><th>time</th><th>algbw</th><th>busbw</th>"
      "</tr>\n";
  for (const CollectiveFigure& c : r.collective) {
    out += fmt::format(
        "<tr><td class=\"num\">{}</td><td class=\"num\">{:.3f} ms</td><td class=\"num\">{}</td>"
        "<td class=\"num\">{}</td></tr>\n",
        base::FormatBytes(c.bytes), c.seconds * 1e3, base::FormatByteRate(c.algbw_bytes_per_s),
        base::FormatByteRate(c.busbw_bytes_per_s));
  }
  return out + "</table>\n";
}

}  // namespace

std::string PairHeatmapSvg(const RunReport& r) {
  const int n = static_cast<int>(r.hosts.size());
  constexpr int kCell = 26, kLeft = 110, kTop = 110;
  const int width = kLeft + n * kCell + 10, height = kTop + n * kCell + 10;
  std::string out = fmt::format(
      "<svg id=\"heatmap\" width=\"{0}\" height=\"{1}\" "
      "viewBox=\"0 0 {0} {1}\" role=\"img\" aria-label=\"pair bandwidth matrix\">\n",
      width, height);
  for (int i = 0; i < n; ++i) {
    const std::string name = E(r.hosts[i].name);
    out += fmt::format(
        "<text x=\"{}\" y=\"{}\" text-anchor=\"end\" font-size=\"12\">{}</text>\n"
        "<text x=\"{}\" y=\"{}\" font-size=\"12\" transform=\"rotate(-60 {} {})\">{}</text>\n",
        kLeft - 6, kTop + i * kCell + kCell / 2 + 4, name, kLeft + i * kCell + kCell / 2, kTop - 6,
        kLeft + i * kCell + kCell / 2, kTop - 6, name);
  }
  const auto cells = Cells(r);
  for (int src = 0; src < n; ++src) {
    for (int dst = 0; dst < n; ++dst) {
      const int x = kLeft + dst * kCell, y = kTop + src * kCell;
      if (src == dst) {
        out += fmt::format(
            "<rect class=\"diag\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"#eee\"/>\n",
            x, y, kCell - 1, kCell - 1);
        continue;
      }
      const std::string pair = r.hosts[src].name + " -> " + r.hosts[dst].name;
      auto it = cells.find({src, dst});
      const PairFigure* first = it == cells.end() ? nullptr : it->second.first;
      std::string cls = "cell none", fill = "#fff", title = pair + ": not measured", label;
      if (first != nullptr) {
        auto [ratio, text] = Describe(r, *first);
        title = pair + ": " + text;
        if (first->error.empty()) {
          cls = first->slow ? "cell measured slow" : "cell measured";
          fill = CellColour(*first, ratio);
          if (ratio > 0) label = fmt::format("{:.0f}", ratio * 100);
        } else {
          cls = "cell error";
          fill = "#bbb";
        }
      }
      if (it != cells.end()) {
        for (const PairFigure* t : it->second.retests) {
          title += "; re-test: " + Describe(r, *t).second;
        }
      }
      out += fmt::format(
          "<rect class=\"{}\" x=\"{}\" y=\"{}\" width=\"{}\" height=\"{}\" fill=\"{}\" "
          "stroke=\"#ccc\"><title>{}</title></rect>\n",
          cls, x, y, kCell - 1, kCell - 1, fill, E(title));
      if (!label.empty()) {
        out += fmt::format(
            "<text x=\"{}\" y=\"{}\" text-anchor=\"middle\" font-size=\"9\" fill=\"{}\" "
            "pointer-events=\"none\">{}</text>\n",
            x + kCell / 2, y + kCell / 2 + 3, first->slow ? "#fff" : "#000", label);
      }
    }
  }
  out += "</svg>";
  return out;
}

std::string ReportToHtml(const RunReport& r) {
  return fmt::format(
      "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
      "<title>Railyard validation {}: {}</title>\n<style>{}</style>\n</head>\n<body>\n{}{}{}{}{}"
      "{}{}</body>\n</html>\n",
      E(r.plan), VerdictName(r.overall.verdict), kStyle, OverallSection(r), FindingsSection(r),
      HostsSection(r), FabricSection(r), ChecksSection(r), StorageSection(r), CollectiveSection(r));
}

}  // namespace railyard::validate
