// fabric.pair_bandwidth for RunValidation (coordinator.h): the schedule's rounds, both
// directions of every pair of a round at once, then Attribute, the re-test rounds against
// known-good hosts, Confirm, and the verdicts: a host finding is that host's FAIL or WARN;
// link and uplink findings are the run's, not their hosts'.
//
// Report indices: PairFigure src/dst and findings' hosts are report indices; a finding's
// evidence.tests index report.pairs (the first pass comes first), its retest_tests the re-test
// figures in order (report_testing.h's convention).
#include <fmt/format.h>

#include <tuple>

#include "railyard/base/units.h"
#include "railyard/validate/coordinator_internal.h"

namespace railyard::validate::internal {
namespace {

using std::chrono::milliseconds;

struct Pairs {
  Run& run;
  const Fabric& f;
  const PlannedCheck& pc;
  milliseconds duration{1'000};
  AnalysisOptions analysis;
  std::vector<Measurement> first, retests;
  std::vector<int> first_figure;  // first[m] -> report.pairs index
  int rounds = 0;

  // Runs one round; `retest` marks its figures.
  void RunRound(const Round& round, bool retest, const std::string& label) {
    struct Direction {
      int src, dst;  // local
      double expected;
      int exchange = -1;
    };
    std::vector<Direction> dirs;
    std::vector<Exchange> xs;
    for (const PairTest& t : round.pairs) {
      for (auto [s, d, e] :
           {std::tuple{t.a, t.b, t.expected_ab_bits}, std::tuple{t.b, t.a, t.expected_ba_bits}}) {
        Direction dir{s, d, e};
        if (run.hosts[f.live[s]].live && run.hosts[f.live[d]].live) {
          dir.exchange = static_cast<int>(xs.size());
          xs.push_back({.host = f.live[s],
                        .task = {.kind = TaskKind::kSend,
                                 .peers = {run.PeerOf(f.live[d])},
                                 .duration_ms = duration.count()}});
        }
        dirs.push_back(dir);
      }
    }
    run.Send(xs, duration + pc.timeout, "fabric");
    for (const Direction& d : dirs) {
      const int src = f.live[d.src], dst = f.live[d.dst];
      PairFigure fig{
          .src = src, .dst = dst, .expected_bits = d.expected, .retest = retest, .round = rounds};
      const Exchange* x = d.exchange >= 0 ? &xs[d.exchange] : nullptr;
      if (x == nullptr) {
        int gone = run.hosts[src].live ? dst : src;
        fig.error =
            fmt::format("left out: {}: {}", run.hosts[gone].name, run.hosts[gone].dead_reason);
      } else if (!x->result) {
        fig.error = fmt::format("{}: {}", run.hosts[src].name, run.hosts[src].dead_reason);
      } else if (!x->result->ok) {
        fig.error = x->result->error;
      } else {
        fig.measured_bits = x->result->bits_per_s;
        Measurement m{.src = d.src,
                      .dst = d.dst,
                      .measured_bits = fig.measured_bits,
                      .expected_bits = d.expected,
                      .test = label};
        if (!retest) first_figure.push_back(static_cast<int>(run.report.pairs.size()));
        (retest ? retests : first).push_back(std::move(m));
      }
      run.report.pairs.push_back(std::move(fig));
    }
    ++rounds;
  }

  void RunSchedule(const std::vector<Round>& rs, bool retest) {
    for (size_t r = 0; r < rs.size(); ++r) {
      std::string label =
          fmt::format("{} {}round {}", pc.check->info().id, retest ? "re-test " : "", r + 1);
      run.Progress("fabric", "",
                   fmt::format("{}round {}/{}", retest ? "re-test " : "", r + 1, rs.size()),
                   static_cast<int>(r), static_cast<int>(rs.size()));
      RunRound(rs[r], retest, label);
    }
  }
};

// analysis.cc's IsSlow, for marking the re-test figures.
bool Slow(const Measurement& m, const Stats& st, const Threshold& t) {
  switch (t.kind) {
    case Threshold::Kind::kAbsolute:
      return m.measured_bits < t.value;
    case Threshold::Kind::kOfExpected:
      return m.expected_bits > 0 && m.measured_bits < t.value * m.expected_bits;
    case Threshold::Kind::kOfMedian: {
      if (st.normalised && m.expected_bits <= 0) return false;
      double v = st.normalised ? m.measured_bits / m.expected_bits : m.measured_bits;
      return v < t.value * st.median;
    }
  }
  return false;
}

// The finding in report indices.
Finding ToReport(Finding fd, const Pairs& p) {
  auto host = [&](int local) { return local >= 0 ? p.f.live[local] : local; };
  fd.host = host(fd.host);
  fd.peer = host(fd.peer);
  for (int& t : fd.evidence.tests) t = p.first_figure[t];
  for (PairTest& t : fd.retest) {
    t.a = host(t.a);
    t.b = host(t.b);
  }
  fd.outcome = std::move(fd.outcome)
                   .With(base::FormatRateBits(fd.evidence.measured_bits),
                         base::FormatRateBits(fd.evidence.expected_bits));
  return fd;
}

void HostVerdicts(Pairs& p, const std::vector<Finding>& findings) {
  Run& run = p.run;
  const std::string id = p.pc.check->info().id;
  for (size_t i = 0; i < p.f.live.size(); ++i) {
    const int host = p.f.live[i];
    if (!run.hosts[host].live) continue;  // UNKNOWN with its reason (coordinator.cc FillUnrun)
    std::vector<Outcome> own;
    std::vector<std::string> others;
    for (const Finding& fd : findings) {
      if (fd.kind == FindingKind::kHost && fd.host == host) {
        own.push_back(fd.outcome);
      } else if (fd.kind == FindingKind::kLink && (fd.host == host || fd.peer == host)) {
        others.push_back(fd.subject);
      }
    }
    if (!own.empty()) {
      run.AddCheck(host, id, Worst(own));
      continue;
    }
    int ok = 0, errors = 0;
    std::string first_error;
    for (const PairFigure& fig : run.report.pairs) {
      if (fig.retest || (fig.src != host && fig.dst != host)) continue;
      if (fig.error.empty()) {
        ++ok;
      } else if (errors++ == 0) {
        first_error = fig.error;
      }
    }
    if (ok == 0) {
      run.AddCheck(host, id, Outcome::Unknown("no test of it could run: " + first_error));
      continue;
    }
    std::string reason = fmt::format("{} tests", ok);
    if (errors > 0) reason += fmt::format(", {} could not run", errors);
    if (!others.empty()) {
      reason +=
          fmt::format("; its slow paths are the run's link findings ({})", fmt::join(others, ", "));
    } else {
      reason += ", none blamed on it";
    }
    run.AddCheck(host, id, Outcome::Pass(reason));
  }
}

Outcome ClusterVerdict(const Pairs& p, const std::vector<Finding>& findings, const Stats& st) {
  if (findings.empty()) {
    std::string median = st.normalised ? fmt::format("{:.0f}% of expected", st.median * 100)
                                       : base::FormatRateBits(st.median);
    return Outcome::Pass(fmt::format("{} measurements in {} rounds ({}), median {}, no finding",
                                     p.first.size() + p.retests.size(), p.rounds,
                                     ScheduleKindName(p.f.schedule.kind), median));
  }
  std::vector<Outcome> outcomes;
  std::vector<std::string> names;
  for (const Finding& fd : findings) {
    outcomes.push_back(fd.outcome);
    names.push_back(fmt::format("{} ({})", fd.subject, FindingKindName(fd.kind)));
  }
  Outcome o = Worst(outcomes);
  o.reason = fmt::format("{} finding{}: {}", findings.size(), findings.size() > 1 ? "s" : "",
                         fmt::join(names, ", "));
  return o;
}

}  // namespace

void PairBandwidth(Run& run, const Fabric& f, const PlannedCheck& pc) {
  Pairs p{.run = run, .f = f, .pc = pc};
  if (auto it = pc.settings.params.find("duration"); it != pc.settings.params.end()) {
    if (Result<std::chrono::nanoseconds> d = base::ParseDuration(it->second); d.ok()) {
      p.duration = std::chrono::duration_cast<milliseconds>(*d);
    }
  }
  if (pc.settings.fail) {
    p.analysis.slow = *pc.settings.fail;
  } else if (pc.settings.warn) {
    p.analysis.slow = *pc.settings.warn;
  }
  const std::string id = pc.check->info().id;
  const auto started = base::Clock::now();
  run.report.schedule = f.schedule.kind;
  p.RunSchedule(f.schedule.rounds, false);
  Result<Attribution> first = Attribute(f.view, p.first, p.analysis);
  if (!first.ok()) {
    run.report.cluster_checks.push_back(
        {id, Outcome::Unknown("analysis failed: " + first.status().message())});
    return;
  }
  for (size_t m = 0; m < p.first.size(); ++m) {
    run.report.pairs[p.first_figure[m]].slow = first->slow[m];
  }
  if (!first->retest.empty()) {
    Schedule retest{.kind = ScheduleKind::kRetest,
                    .hosts = static_cast<int>(f.live.size()),
                    .rounds = PackRounds(first->retest)};
    if (f.cluster) SetExpectedRates(*f.cluster, retest);
    p.RunSchedule(retest.rounds, true);
  }
  Attribution settled = Confirm(*std::move(first), f.view, p.retests, p.analysis);
  // Re-test figures are slow against the first pass's reference. retest_tests index
  // Confirm's input (figures with a value); the report counts every re-test figure.
  std::vector<int> retest_ordinal;
  int ordinal = 0;
  for (PairFigure& fig : run.report.pairs) {
    if (!fig.retest) continue;
    if (fig.error.empty() && retest_ordinal.size() < p.retests.size()) {
      fig.slow = Slow(p.retests[retest_ordinal.size()], settled.stats, p.analysis.slow);
      retest_ordinal.push_back(ordinal);
    }
    ++ordinal;
  }
  std::vector<Finding> findings;
  for (Finding& fd : settled.findings) {
    for (int& t : fd.evidence.retest_tests) t = retest_ordinal[t];
    findings.push_back(ToReport(std::move(fd), p));
  }
  run.report.rounds = p.rounds;
  run.report.fabric_stats = settled.stats;
  HostVerdicts(p, findings);
  auto elapsed = std::chrono::duration_cast<milliseconds>(base::Clock::now() - started);
  run.report.cluster_checks.push_back({id, ClusterVerdict(p, findings, settled.stats), elapsed});
  for (Finding& fd : findings) run.report.findings.push_back(std::move(fd));
}

}  // namespace railyard::validate::internal
