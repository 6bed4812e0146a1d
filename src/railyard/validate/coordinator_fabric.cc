// The fabric phase of RunValidation (coordinator.h): reachability and latency between schedule
// partners, then the pair bandwidth rounds, the analysis, the re-tests and the settled
// findings.
//
// The phase works on the live hosts only, numbered 0..n-1 in report order ("local" indices);
// with a topology it builds the cluster restricted to them, so that the schedule, the expected
// rates and the analysis's view all share those numbers. Figures and findings in the report
// are translated back to report indices.
#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include "railyard/base/units.h"
#include "railyard/validate/coordinator_internal.h"

namespace railyard::validate::internal {
namespace {

using std::chrono::milliseconds;

// `c` with only the nodes named, in that order, and every switch (indices kept). Nullopt when
// a host is not in it.
std::optional<topo::Cluster> Restrict(const topo::Cluster& c,
                                      const std::vector<std::string>& hosts) {
  topo::ClusterBuilder b("validation hosts");
  b.SetName(c.name);
  b.SetLevels(c.levels);
  for (const topo::Switch& s : c.switches) {
    b.AddSwitch(s.name, c.levels[s.level], s.parent >= 0 ? c.switches[s.parent].name : "",
                s.uplink_rate_bits);
  }
  for (const std::string& h : hosts) {
    int n = c.FindNode(h);
    if (n < 0 || c.nodes[n].leaf < 0) return std::nullopt;
    b.AddNode(c.nodes[n], c.switches[c.nodes[n].leaf].name);
  }
  Result<topo::Cluster> r = std::move(b).Finish();
  if (!r.ok()) return std::nullopt;
  return std::move(*r);
}

}  // namespace

Fabric Setup(const Run& run, std::vector<int> live, int all_pairs_max) {
  Fabric f{.live = std::move(live)};
  std::vector<std::string> names;
  for (int i : f.live) names.push_back(run.hosts[i].name);
  if (run.options.cluster != nullptr) f.cluster = Restrict(*run.options.cluster, names);
  if (f.cluster) {
    f.view = FabricView::FromCluster(*f.cluster);
    f.schedule = ChooseSchedule(*f.cluster, all_pairs_max);
  } else {
    f.view = FabricView::Flat(names);
    f.schedule = AllPairsSchedule(static_cast<int>(names.size()));
  }
  f.partners.resize(f.live.size());
  for (const Round& r : f.schedule.rounds) {
    for (const PairTest& p : r.pairs) {
      f.partners[p.a].insert(p.b);
      f.partners[p.b].insert(p.a);
    }
  }
  return f;
}

int64_t ParamInt(const PlannedCheck& pc, const std::string& name, int64_t fallback) {
  auto it = pc.settings.params.find(name);
  if (it == pc.settings.params.end()) return fallback;
  try {
    return std::stoll(it->second);
  } catch (...) {
    return fallback;
  }
}

namespace {

std::string PairName(const Run& run, int a, int b) {
  return fmt::format("{}<->{}", run.hosts[a].name, run.hosts[b].name);
}

// ---- reachability ----

// Runs fabric.reachability; returns the local hosts to leave out of later fabric tests.
std::set<int> Reachability(Run& run, const Fabric& f, const PlannedCheck& pc) {
  std::vector<Exchange> xs;
  for (size_t i = 0; i < f.live.size(); ++i) {
    Task t{.kind = TaskKind::kReach};
    for (int p : f.partners[i]) t.peers.push_back(run.PeerOf(f.live[p]));
    xs.push_back({.host = f.live[i], .task = std::move(t)});
  }
  run.Progress("fabric", "", "reachability", 0, static_cast<int>(xs.size()));
  run.Send(xs, pc.timeout + kTaskMargin, "fabric");
  // failed[{a, b}] (local, a < b): why the pair could not connect, either way.
  std::map<std::pair<int, int>, std::string> failed;
  std::vector<int> total(f.live.size(), 0), bad(f.live.size(), 0);
  for (size_t i = 0; i < xs.size(); ++i) {
    if (!xs[i].result) continue;
    std::vector<int> peers(f.partners[i].begin(), f.partners[i].end());
    for (size_t k = 0; k < peers.size() && k < xs[i].result->peers.size(); ++k) {
      const PeerResult& pr = xs[i].result->peers[k];
      auto key = std::minmax(static_cast<int>(i), peers[k]);
      if (!pr.ok && !failed.contains(key)) failed[key] = pr.error;
    }
  }
  for (size_t i = 0; i < f.live.size(); ++i) {
    for (int p : f.partners[i]) {
      ++total[i];
      bad[i] += failed.contains(std::minmax(static_cast<int>(i), p));
    }
  }
  std::set<int> out;
  const std::string id = pc.check->info().id;
  for (size_t i = 0; i < f.live.size(); ++i) {
    const int host = f.live[i];
    if (!run.hosts[host].live) continue;
    if (total[i] >= 2 && 4 * bad[i] >= 3 * total[i]) {
      out.insert(static_cast<int>(i));
      run.AddCheck(
          host, id,
          Outcome::Fail(fmt::format("no connection with {} of its {} partners", bad[i], total[i])));
    } else if (bad[i] > 0) {
      run.AddCheck(host, id,
                   Outcome::Pass(fmt::format("reached {} of {} partners; the others are link "
                                             "findings",
                                             total[i] - bad[i], total[i])));
    } else {
      run.AddCheck(host, id,
                   Outcome::Pass(fmt::format("reached all {} partners both ways", total[i])));
    }
  }
  // A failed pair whose ends both reach most partners is the link's fault.
  for (const auto& [key, why] : failed) {
    if (out.contains(key.first) || out.contains(key.second)) continue;
    Finding link{.kind = FindingKind::kLink,
                 .host = f.live[key.first],
                 .peer = f.live[key.second],
                 .direction = "both",
                 .subject = PairName(run, f.live[key.first], f.live[key.second])};
    link.outcome = Outcome::Fail("no connection: " + why);
    run.report.findings.push_back(std::move(link));
  }
  return out;
}

// ---- latency ----

void Latency(Run& run, const Fabric& f, const std::set<int>& out, const PlannedCheck& pc) {
  std::vector<Exchange> xs;
  std::vector<std::vector<int>> asked(f.live.size());
  for (size_t i = 0; i < f.live.size(); ++i) {
    if (out.contains(static_cast<int>(i))) continue;
    Task t{.kind = TaskKind::kLatency, .samples = static_cast<int>(ParamInt(pc, "samples", 5))};
    for (int p : f.partners[i]) {
      if (out.contains(p)) continue;
      t.peers.push_back(run.PeerOf(f.live[p]));
      asked[i].push_back(p);
    }
    xs.push_back({.host = f.live[i], .task = std::move(t)});
  }
  run.Progress("fabric", "", "latency", 0, static_cast<int>(xs.size()));
  run.Send(xs, pc.timeout + kTaskMargin, "fabric");
  std::vector<std::vector<double>> rtts(f.live.size());
  for (const Exchange& x : xs) {
    if (!x.result) continue;
    const int i =
        static_cast<int>(std::find(f.live.begin(), f.live.end(), x.host) - f.live.begin());
    for (size_t k = 0; k < x.result->peers.size() && k < asked[i].size(); ++k) {
      if (!x.result->peers[k].ok) continue;
      rtts[i].push_back(x.result->peers[k].seconds);
      rtts[asked[i][k]].push_back(x.result->peers[k].seconds);
    }
  }
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[v.size() / 2];
  };
  std::vector<double> host_medians;
  for (const auto& v : rtts) {
    if (!v.empty()) host_medians.push_back(median(v));
  }
  const double fleet = median(host_medians);
  const CheckInfo& info = pc.check->info();
  for (size_t i = 0; i < f.live.size(); ++i) {
    const int host = f.live[i];
    if (!run.hosts[host].live || out.contains(static_cast<int>(i))) continue;
    if (rtts[i].empty()) {
      run.AddCheck(host, info.id, Outcome::Unknown("no round trip with any partner succeeded"));
      continue;
    }
    double m = median(rtts[i]);
    run.AddCheck(host, info.id,
                 Judge(info, pc.settings, m,
                       fmt::format("median round trip {} over {} tests",
                                   FormatValue(m, Unit::kDuration), rtts[i].size()),
                       {.median = fleet}));
  }
}

}  // namespace

void RunFabricPhase(Run& run) {
  const PlannedCheck* reach = run.Planned("fabric.reachability");
  const PlannedCheck* latency = run.Planned("fabric.latency");
  const PlannedCheck* pairs = run.Planned("fabric.pair_bandwidth");
  if (reach == nullptr && latency == nullptr && pairs == nullptr) return;
  std::vector<int> live = run.LiveHosts();
  const int all_pairs_max =
      pairs != nullptr ? static_cast<int>(ParamInt(*pairs, "all_pairs_max", 32)) : 32;
  if (live.size() < 2) {
    for (int host : live) {
      for (const PlannedCheck* pc : {reach, latency, pairs}) {
        if (pc == nullptr) continue;
        run.AddCheck(host, pc->check->info().id, Outcome::Skipped("needs at least two live hosts"));
      }
    }
    return;
  }
  Fabric f = Setup(run, live, all_pairs_max);
  std::set<int> out;
  if (reach != nullptr) out = Reachability(run, f, *reach);
  if (latency != nullptr) Latency(run, f, out, *latency);
  if (pairs == nullptr) return;
  // Hosts left out by reachability, or dead since, are not measured; the rest get a schedule
  // of their own.
  std::vector<int> measured;
  for (size_t i = 0; i < f.live.size(); ++i) {
    const int host = f.live[i];
    if (out.contains(static_cast<int>(i))) {
      run.AddCheck(host, pairs->check->info().id,
                   Outcome::Unknown("not measured: it could not connect with its partners "
                                    "(fabric.reachability)"));
    } else if (run.hosts[host].live) {
      measured.push_back(host);
    }
  }
  if (measured.size() < 2) return;
  PairBandwidth(run, measured.size() == f.live.size() ? f : Setup(run, measured, all_pairs_max),
                *pairs);
}

}  // namespace railyard::validate::internal
