#include "railyard/validate/report_table.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <array>
#include <cctype>
#include <optional>
#include <vector>

#include "railyard/base/units.h"

namespace railyard::validate {
namespace {

// A table cell: its text, and the verdict it shows when it is one (for colour).
struct Cell {
  std::string text;
  const Verdict* verdict = nullptr;
};

std::string_view Sgr(Verdict v) {
  switch (v) {
    case Verdict::kPass:
      return "\x1b[32m";
    case Verdict::kWarn:
      return "\x1b[33m";
    case Verdict::kFail:
      return "\x1b[1;31m";
    case Verdict::kUnknown:
      return "\x1b[35m";
    case Verdict::kSkipped:
      return "\x1b[2m";
  }
  return "";
}

// Rows of cells, columns padded to their widest text, two spaces apart; the last column is
// not padded.
std::string Render(const std::vector<std::vector<Cell>>& rows, bool color) {
  std::vector<size_t> width;
  for (const auto& row : rows) {
    if (width.size() < row.size()) width.resize(row.size());
    for (size_t i = 0; i < row.size(); ++i) width[i] = std::max(width[i], row[i].text.size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      const Cell& c = row[i];
      line += color && c.verdict ? fmt::format("{}{}\x1b[0m", Sgr(*c.verdict), c.text) : c.text;
      if (i + 1 < row.size()) line += std::string(width[i] - c.text.size() + 2, ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line + '\n';
  }
  return out;
}

constexpr std::array<std::string_view, 5> kCategories = {"node", "gpu", "fabric", "storage",
                                                         "collective"};
constexpr std::array<Verdict, 5> kVerdicts = {Verdict::kFail, Verdict::kUnknown, Verdict::kWarn,
                                              Verdict::kPass, Verdict::kSkipped};

std::string Category(const std::string& id) { return id.substr(0, id.find('.')); }

std::string Plural(int n, std::string_view noun) {
  return fmt::format("{} {}{}", n, noun, n == 1 ? "" : "s");
}

// The category columns that some host's check falls in, in kCategories order, then others.
std::vector<std::string> Columns(const RunReport& r) {
  std::vector<std::string> seen;
  for (const HostEntry& h : r.hosts) {
    for (const CheckResult& c : h.checks) {
      std::string cat = Category(c.id);
      if (std::find(seen.begin(), seen.end(), cat) == seen.end()) seen.push_back(cat);
    }
  }
  std::vector<std::string> cols;
  for (std::string_view k : kCategories) {
    if (std::find(seen.begin(), seen.end(), k) != seen.end()) cols.emplace_back(k);
  }
  std::sort(seen.begin(), seen.end());
  for (const std::string& s : seen) {
    if (std::find(cols.begin(), cols.end(), s) == cols.end()) cols.push_back(s);
  }
  return cols;
}

std::string HostTable(const RunReport& r, bool color) {
  const std::vector<std::string> cols = Columns(r);
  std::vector<std::vector<Cell>> rows;
  std::vector<Cell> head = {{"HOST"}, {"PROFILE"}};
  for (std::string c : cols) {
    std::transform(c.begin(), c.end(), c.begin(),
                   [](unsigned char ch) { return std::toupper(ch); });
    head.push_back({c});
  }
  head.push_back({"OVERALL"});
  head.push_back({"WORST CHECK"});
  rows.push_back(head);
  // Per host and column: the worst verdict, none when no check of it ran. Cells point here.
  std::vector<std::vector<std::optional<Verdict>>> verdicts(r.hosts.size());
  for (size_t i = 0; i < r.hosts.size(); ++i) {
    const HostEntry& h = r.hosts[i];
    for (const std::string& col : cols) {
      std::vector<Outcome> mine;
      for (const CheckResult& c : h.checks) {
        if (Category(c.id) == col) mine.push_back(c.outcome);
      }
      verdicts[i].push_back(mine.empty() ? std::nullopt
                                         : std::optional<Verdict>(Worst(mine).verdict));
    }
  }
  for (size_t i = 0; i < r.hosts.size(); ++i) {
    const HostEntry& h = r.hosts[i];
    std::vector<Cell> row = {{h.name}, {h.profile.empty() ? "-" : h.profile}};
    for (const std::optional<Verdict>& v : verdicts[i]) {
      row.push_back(v ? Cell{std::string(VerdictName(*v)), &*v} : Cell{"-"});
    }
    row.push_back({std::string(VerdictName(h.overall.verdict)), &h.overall.verdict});
    std::string worst;
    if (h.overall.verdict != Verdict::kPass && h.overall.verdict != Verdict::kSkipped) {
      for (const CheckResult& c : h.checks) {
        if (c.outcome.verdict == h.overall.verdict) {
          worst = c.id + ": " + c.outcome.reason;
          break;
        }
      }
    }
    row.push_back({worst});
    rows.push_back(std::move(row));
  }
  return Render(rows, color);
}

std::string ClusterTable(const RunReport& r, bool color) {
  if (r.cluster_checks.empty()) return "";
  std::vector<std::vector<Cell>> rows = {{{"CLUSTER CHECK"}, {"VERDICT"}, {"REASON"}}};
  for (const CheckResult& c : r.cluster_checks) {
    rows.push_back({{c.id},
                    {std::string(VerdictName(c.outcome.verdict)), &c.outcome.verdict},
                    {c.outcome.reason}});
  }
  return "\n" + Render(rows, color);
}

std::string FindingsTable(const RunReport& r, bool color) {
  if (r.findings.empty()) return "\nno host, link or uplink found slow\n";
  const bool all_transient =
      std::all_of(r.findings.begin(), r.findings.end(),
                  [](const Finding& f) { return f.outcome.verdict == Verdict::kPass; });
  // Suspects that re-tests cleared are listed for the record, under a line that says so.
  std::string lead = all_transient
                         ? "\nno host, link or uplink found slow (transient suspects, cleared "
                           "by re-test:)\n"
                         : "\n";
  std::vector<std::vector<Cell>> rows = {
      {{"FINDING"}, {"KIND"}, {"DIRECTION"}, {"VERDICT"}, {"EVIDENCE"}, {"REASON"}}};
  for (const Finding& f : r.findings) {
    const Evidence& e = f.evidence;
    rows.push_back(
        {{f.subject},
         {std::string(FindingKindName(f.kind))},
         {f.direction},
         {std::string(VerdictName(f.outcome.verdict)), &f.outcome.verdict},
         {fmt::format("{} of {} ({:.0f}%), {} of {} tests slow",
                      base::FormatRateBits(e.measured_bits), base::FormatRateBits(e.expected_bits),
                      e.ratio * 100, e.slow, e.total)},
         {f.outcome.reason}});
  }
  return lead + Render(rows, color);
}

}  // namespace

std::string FormatReportSummary(const RunReport& r) {
  std::vector<std::string> parts;
  for (Verdict v : kVerdicts) {
    int hosts = 0, links = 0, uplinks = 0;
    for (const HostEntry& h : r.hosts) hosts += h.overall.verdict == v;
    for (const Finding& f : r.findings) {
      if (f.outcome.verdict != v) continue;
      links += f.kind == FindingKind::kLink;
      uplinks += f.kind == FindingKind::kUplink;
    }
    std::vector<std::string> items;
    if (hosts > 0) items.push_back(Plural(hosts, "host"));
    if (links > 0) items.push_back(Plural(links, "link"));
    if (uplinks > 0) items.push_back(Plural(uplinks, "uplink"));
    if (!items.empty())
      parts.push_back(fmt::format("{}: {}", VerdictName(v), fmt::join(items, ", ")));
  }
  if (parts.empty()) parts.push_back(std::string(VerdictName(r.overall.verdict)));
  return fmt::format("{} (plan {}, {} in {:.1f} s, exit code {})", fmt::join(parts, "; "), r.plan,
                     Plural(static_cast<int>(r.hosts.size()), "host"), r.total_s, r.ExitCode());
}

std::string FormatReportTable(const RunReport& r, bool color) {
  std::string summary = FormatReportSummary(r);
  if (color) {
    const std::string_view name = VerdictName(r.overall.verdict);
    if (summary.rfind(name, 0) == 0) {
      summary =
          fmt::format("{}{}\x1b[0m{}", Sgr(r.overall.verdict), name, summary.substr(name.size()));
    }
  }
  return HostTable(r, color) + ClusterTable(r, color) + FindingsTable(r, color) + "\n" + summary +
         "\n";
}

std::string FormatProgressLine(const ProgressEvent& e) {
  std::string line = e.phase;
  if (e.total > 0) line += fmt::format(" {}/{}", e.done, e.total);
  if (!e.host.empty()) line += ": " + e.host;
  if (!e.text.empty()) line += ": " + e.text;
  return line;
}

}  // namespace railyard::validate
