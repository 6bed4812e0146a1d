#include "railyard/validate/report_prometheus.h"

#include <fmt/format.h>

#include <cmath>
#include <ctime>
#include <utility>
#include <vector>

#include "railyard/validate/report_json.h"

namespace railyard::validate {
namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

// One metric family: written whole, HELP and TYPE once.
class Family {
 public:
  Family(std::string name, std::string help) : name_(std::move(name)), help_(std::move(help)) {}

  void Add(const Labels& labels, double value) {
    std::string line = name_;
    if (!labels.empty()) {
      line += '{';
      for (size_t i = 0; i < labels.size(); ++i) {
        if (i > 0) line += ',';
        line += labels[i].first + "=\"" + PrometheusLabelValue(labels[i].second) + '"';
      }
      line += '}';
    }
    samples_ += line + ' ' + Number(value) + '\n';
  }

  void WriteTo(std::string& out) const {
    if (samples_.empty()) return;
    out += fmt::format("# HELP {} {}\n# TYPE {} gauge\n", name_, help_, name_);
    out += samples_;
  }

 private:
  static std::string Number(double v) {
    if (std::isnan(v)) return "NaN";
    if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
    return fmt::format("{}", v);  // shortest text that reads back exactly
  }

  std::string name_, help_, samples_;
};

double Status(const Outcome& o) { return o.ExitCode(); }

}  // namespace

std::string PrometheusLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::optional<double> ParseIsoTimestamp(std::string_view iso) {
  std::tm tm{};
  int consumed = 0;
  std::string s(iso);
  if (std::sscanf(s.c_str(), "%4d-%2d-%2dT%2d:%2d:%2d%n", &tm.tm_year, &tm.tm_mon, &tm.tm_mday,
                  &tm.tm_hour, &tm.tm_min, &tm.tm_sec, &consumed) != 6 ||
      consumed != 19) {
    return std::nullopt;
  }
  tm.tm_year -= 1900;
  tm.tm_mon -= 1;
  double seconds = static_cast<double>(timegm(&tm));
  std::string_view rest = iso.substr(19);
  if (!rest.empty() && rest[0] == '.') {
    size_t digits = 1;
    double scale = 0.1;
    while (digits < rest.size() && rest[digits] >= '0' && rest[digits] <= '9') {
      seconds += (rest[digits] - '0') * scale;
      scale /= 10;
      ++digits;
    }
    rest.remove_prefix(digits);
  }
  if (rest == "Z") return seconds;
  int hours = 0, minutes = 0;
  if (rest.size() == 6 && (rest[0] == '+' || rest[0] == '-') &&
      std::sscanf(std::string(rest.substr(1)).c_str(), "%2d:%2d", &hours, &minutes) == 2) {
    double offset = hours * 3600.0 + minutes * 60.0;
    return rest[0] == '+' ? seconds - offset : seconds + offset;
  }
  return std::nullopt;
}

std::string ReportToPrometheus(const RunReport& r) {
  Family info("railyard_validate_run_info", "The last validation run's plan (value 1).");
  info.Add({{"plan", r.plan}}, 1);
  Family status("railyard_validate_status",
                "Overall verdict of the last validation run: 0 ok, 1 warn, 2 fail, 3 unknown.");
  status.Add({}, Status(r.overall));
  Family when("railyard_validate_run_timestamp_seconds",
              "Unix time the last validation run started.");
  if (std::optional<double> t = ParseIsoTimestamp(r.started)) when.Add({}, *t);
  Family duration("railyard_validate_last_run_duration_seconds",
                  "Wall time of the last validation run.");
  duration.Add({}, r.total_s);

  Family host_status("railyard_validate_host_status",
                     "Worst verdict of a host's checks: 0 ok, 1 warn, 2 fail, 3 unknown.");
  Family check_status("railyard_validate_check_status",
                      "Verdict of one check on one host: 0 pass or skipped, 1 warn, 2 fail, "
                      "3 unknown.");
  for (const HostEntry& h : r.hosts) {
    host_status.Add({{"host", h.name}}, Status(h.overall));
    for (const CheckResult& c : h.checks) {
      check_status.Add({{"host", h.name}, {"check", c.id}}, Status(c.outcome));
    }
  }
  Family cluster_status("railyard_validate_cluster_check_status",
                        "Verdict of a cluster-wide check: 0 pass or skipped, 1 warn, 2 fail, "
                        "3 unknown.");
  for (const CheckResult& c : r.cluster_checks) {
    cluster_status.Add({{"check", c.id}}, Status(c.outcome));
  }
  Family finding("railyard_validate_finding_status",
                 "A bad host, link or uplink the fabric analysis named: 1 warn, 2 fail, "
                 "3 unknown.");
  for (const Finding& f : r.findings) {
    finding.Add({{"kind", std::string(FindingKindName(f.kind))}, {"subject", f.subject}},
                Status(f.outcome));
  }

  // First-pass figures only; a re-test of the same pair would repeat its label set.
  Family pair("railyard_validate_pair_bandwidth_bits_per_second",
              "Rate measured from src to dst in the fabric pair test.");
  Family pair_expected("railyard_validate_pair_expected_bits_per_second",
                       "Rate the topology leads one to expect from src to dst.");
  for (const PairFigure& p : r.pairs) {
    if (p.retest || !p.error.empty()) continue;
    Labels l = {{"src", ReportHostName(r, p.src)}, {"dst", ReportHostName(r, p.dst)}};
    pair.Add(l, p.measured_bits);
    if (p.expected_bits > 0) pair_expected.Add(l, p.expected_bits);
  }

  Family write("railyard_validate_storage_write_bytes_per_second",
               "IOR-easy write rate of a host's own files, with fsync.");
  Family read("railyard_validate_storage_read_bytes_per_second",
              "IOR-easy read rate of a neighbour's files.");
  Family meta("railyard_validate_storage_metadata_ops_per_second",
              "mdtest-easy create, stat and unlink rate of a host.");
  for (const StorageFigure& s : r.storage) {
    if (!s.error.empty()) continue;
    Labels l = {{"host", ReportHostName(r, s.host)}};
    write.Add(l, s.write_bytes_per_s);
    read.Add(l, s.read_bytes_per_s);
    meta.Add(l, s.metadata_ops_per_s);
  }
  Family aggregate("railyard_validate_storage_aggregate_bytes_per_second",
                   "Storage rate summed over all hosts, by operation.");
  Family aggregate_meta("railyard_validate_storage_aggregate_metadata_ops_per_second",
                        "mdtest-easy rate summed over all hosts.");
  if (!r.storage.empty()) {
    aggregate.Add({{"op", "write"}}, r.storage_write_bytes_per_s);
    aggregate.Add({{"op", "read"}}, r.storage_read_bytes_per_s);
    aggregate_meta.Add({}, r.storage_metadata_ops_per_s);
  }

  Family busbw("railyard_validate_allreduce_busbw_bytes_per_second",
               "Allreduce bus bandwidth by message size (nccl-tests' busbw).");
  for (const CollectiveFigure& c : r.collective) {
    busbw.Add({{"bytes", std::to_string(c.bytes)}}, c.busbw_bytes_per_s);
  }

  std::string out;
  for (const Family* f :
       {&info, &status, &when, &duration, &host_status, &check_status, &cluster_status, &finding,
        &pair, &pair_expected, &write, &read, &meta, &aggregate, &aggregate_meta, &busbw}) {
    f->WriteTo(out);
  }
  return out;
}

}  // namespace railyard::validate
