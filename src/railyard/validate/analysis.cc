#include "railyard/validate/analysis.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "railyard/base/units.h"

namespace railyard::validate {
namespace {

constexpr int kOut = 1, kIn = 2;  // host directions; for uplinks: kOut = up, kIn = down

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + mid, v.end());
  double hi = v[mid];
  if (v.size() % 2 == 1) return hi;
  return (*std::max_element(v.begin(), v.begin() + mid) + hi) / 2;
}

bool Under(const FabricView& view, int host, int sw) {
  const std::vector<int>& a = view.above[host];
  return std::find(a.begin(), a.end(), sw) != a.end();
}

int LeafOf(const FabricView& view, int host) {
  return view.above[host].empty() ? -1 : view.above[host][0];
}

double Value(const Measurement& m, const Stats& st) {
  return st.normalised ? m.measured_bits / m.expected_bits : m.measured_bits;
}

// Whether `m` is slow; an error when the threshold needs a reference `m` lacks.
Result<bool> IsSlow(const Measurement& m, const Stats& st, const AnalysisOptions& o) {
  const Threshold& t = o.slow;
  switch (t.kind) {
    case Threshold::Kind::kAbsolute:
      return m.measured_bits < t.value;
    case Threshold::Kind::kOfExpected:
      if (m.expected_bits <= 0) {
        return FailedPrecondition(
            "threshold '{}': test '{}' has no expected rate (give link rates in the topology or "
            "use a median threshold)",
            t.text, m.test);
      }
      return m.measured_bits < t.value * m.expected_bits;
    case Threshold::Kind::kOfMedian:
      if (st.normalised && m.expected_bits <= 0) {
        return FailedPrecondition("test '{}' has no expected rate", m.test);
      }
      return Value(m, st) < t.value * st.median;
  }
  return Internal("unknown threshold kind");
}

std::string Percent(double ratio) { return fmt::format("{:.0f}%", ratio * 100); }

class Attributor {
 public:
  Attributor(const FabricView& view, std::span<const Measurement> ms, const AnalysisOptions& o)
      : view_(view), ms_(ms), o_(o), hosts_(static_cast<int>(view.hosts.size())) {}

  Result<Attribution> Run() {
    RY_RETURN_IF_ERROR(Validate());
    ComputeStats();
    out_.slow.assign(ms_.size(), 0);
    for (size_t i = 0; i < ms_.size(); ++i) {
      RY_ASSIGN_OR_RETURN(bool slow, IsSlow(ms_[i], out_.stats, o_));
      out_.slow[i] = slow;
    }
    FindHosts();
    FindUplinks();
    FindLinks();
    PlanRetests();
    for (Finding& f : out_.findings) {
      f.outcome = Outcome::Warn(Describe(f) + "; suspect until re-tested against known-good hosts");
      out_.retest.insert(out_.retest.end(), f.retest.begin(), f.retest.end());
    }
    return std::move(out_);
  }

  // The reason line of a finding (shared with Confirm).
  std::string Describe(const Finding& f) const {
    const Evidence& e = f.evidence;
    std::string what;
    switch (f.kind) {
      case FindingKind::kHost:
        what = fmt::format("every path slow ({})", f.direction);
        break;
      case FindingKind::kLink:
        what = fmt::format("link slow ({}), both hosts fine with others", f.direction);
        break;
      case FindingKind::kUplink:
        what = fmt::format("slow across the uplink ({}), fine inside", f.direction);
        break;
    }
    return fmt::format("{}: {}: {} against {} expected ({}), {} of {} tests slow", f.subject, what,
                       base::FormatRateBits(e.measured_bits), base::FormatRateBits(e.expected_bits),
                       Percent(e.ratio), e.slow, e.total);
  }

 private:
  Status Validate() const {
    for (size_t i = 0; i < ms_.size(); ++i) {
      const Measurement& m = ms_[i];
      if (m.src < 0 || m.src >= hosts_ || m.dst < 0 || m.dst >= hosts_ || m.src == m.dst) {
        return InvalidArgument("measurement {} ('{}'): hosts {}->{} not two of the {} hosts", i,
                               m.test, m.src, m.dst, hosts_);
      }
      if (!(m.measured_bits >= 0) || !(m.expected_bits >= 0)) {
        return InvalidArgument("measurement {} ('{}'): negative or NaN rate", i, m.test);
      }
    }
    return Status::Ok();
  }

  void ComputeStats() {
    Stats& st = out_.stats;
    st.count = ms_.size();
    st.normalised = !ms_.empty() && std::all_of(ms_.begin(), ms_.end(), [](const Measurement& m) {
      return m.expected_bits > 0;
    });
    std::vector<std::vector<double>> per_host(hosts_);
    std::vector<double> all;
    for (const Measurement& m : ms_) {
      double v = Value(m, st);
      per_host[m.src].push_back(v);
      per_host[m.dst].push_back(v);
      all.push_back(v);
    }
    std::vector<double> host_medians;
    for (auto& v : per_host) {
      if (!v.empty()) host_medians.push_back(Median(std::move(v)));
    }
    st.median = Median(std::move(host_medians));
    for (double& v : all) v = std::abs(v - st.median);
    st.mad = Median(std::move(all));
    // The expectation in bits/s of a measurement without one: the raw fleet median.
    raw_median_ = st.normalised ? 0 : st.median;
  }

  double Reference(const Measurement& m) const {
    return m.expected_bits > 0 ? m.expected_bits : raw_median_;
  }

  Evidence MakeEvidence(const std::vector<int>& slow, int total) const {
    Evidence e;
    std::vector<double> measured, expected;
    for (int i : slow) {
      measured.push_back(ms_[i].measured_bits);
      expected.push_back(Reference(ms_[i]));
    }
    e.measured_bits = Median(measured);
    e.expected_bits = Median(expected);
    e.ratio = e.expected_bits > 0 ? e.measured_bits / e.expected_bits : 0;
    e.slow = static_cast<int>(slow.size());
    e.total = total;
    e.tests = slow;
    return e;
  }

  static std::string DirectionName(int dirs, const char* first, const char* second) {
    return dirs == (kOut | kIn) ? "both" : dirs == kOut ? first : second;
  }

  void FindHosts() {
    bad_.assign(hosts_, 0);
    std::vector<std::vector<int>> out(hosts_), in(hosts_);
    for (size_t i = 0; i < ms_.size(); ++i) {
      out[ms_[i].src].push_back(static_cast<int>(i));
      in[ms_[i].dst].push_back(static_cast<int>(i));
    }
    for (int h = 0; h < hosts_; ++h) {
      std::vector<int> slow;
      int total = 0;
      for (auto [dir, list] : {std::pair{kOut, &out[h]}, std::pair{kIn, &in[h]}}) {
        int s = 0, inside = 0, inside_slow = 0;
        std::vector<int> partners;
        for (int i : *list) {
          int peer = dir == kOut ? ms_[i].dst : ms_[i].src;
          partners.push_back(peer);
          s += out_.slow[i];
          if (LeafOf(view_, peer) == LeafOf(view_, h)) {
            ++inside;
            inside_slow += out_.slow[i];
          }
        }
        std::sort(partners.begin(), partners.end());
        bool enough = std::unique(partners.begin(), partners.end()) - partners.begin() >= 2;
        if (enough && s >= o_.share * list->size() &&
            (inside == 0 || inside_slow >= o_.share * inside)) {
          bad_[h] |= dir;
          total += static_cast<int>(list->size());
          for (int i : *list) {
            if (out_.slow[i]) slow.push_back(i);
          }
        }
      }
      if (!bad_[h]) continue;
      Finding f{.kind = FindingKind::kHost, .host = h};
      f.direction = DirectionName(bad_[h], "out", "in");
      f.subject = view_.hosts[h];
      f.evidence = MakeEvidence(slow, total);
      out_.findings.push_back(std::move(f));
    }
    // A measurement a bad host accounts for.
    by_host_.assign(ms_.size(), 0);
    for (size_t i = 0; i < ms_.size(); ++i) {
      by_host_[i] = (bad_[ms_[i].src] & kOut) || (bad_[ms_[i].dst] & kIn);
    }
  }

  void FindUplinks() {
    by_uplink_.assign(ms_.size(), 0);
    // Switches from the leaves up: by their position in any host's chain.
    std::vector<int> depth(view_.switches.size(), -1);
    for (const auto& chain : view_.above) {
      for (size_t k = 0; k < chain.size(); ++k) depth[chain[k]] = static_cast<int>(k);
    }
    std::vector<int> order;
    for (size_t s = 0; s < depth.size(); ++s) {
      if (depth[s] >= 0 && view_.has_uplink[s]) order.push_back(static_cast<int>(s));
    }
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return depth[a] < depth[b]; });
    std::vector<std::vector<int>> flagged_crossing;  // per uplink finding, for alternatives
    std::vector<size_t> flagged_finding;
    std::vector<char> in(hosts_);
    for (int s : order) {
      int good_inside = 0;
      for (int h = 0; h < hosts_; ++h) {
        in[h] = Under(view_, h, s);
        good_inside += in[h] && !bad_[h];
      }
      if (good_inside < 2) continue;  // a lone host's link and its uplink look the same
      std::vector<int> crossing, dir_list[3];
      int inside = 0, inside_slow = 0;
      for (size_t i = 0; i < ms_.size(); ++i) {
        const Measurement& m = ms_[i];
        if (bad_[m.src] || bad_[m.dst]) continue;
        if (in[m.src] && in[m.dst]) {
          ++inside;
          inside_slow += out_.slow[i];
        } else if (in[m.src] != in[m.dst]) {
          crossing.push_back(static_cast<int>(i));
          if (!by_uplink_[i]) dir_list[in[m.src] ? kOut : kIn].push_back(static_cast<int>(i));
        }
      }
      // Every tested path that crosses this uplink also crosses one already blamed.
      auto same = std::find(flagged_crossing.begin(), flagged_crossing.end(), crossing);
      if (same != flagged_crossing.end()) {
        Finding& f = out_.findings[flagged_finding[same - flagged_crossing.begin()]];
        f.alternatives.push_back(s);
        f.subject += fmt::format(" or of {}", view_.switches[s]);
        continue;
      }
      if (inside > 0 && inside_slow >= o_.share * inside) continue;
      int dirs = 0, total = 0;
      std::vector<int> slow;
      for (int dir : {kOut, kIn}) {
        const std::vector<int>& list = dir_list[dir];
        int s_count = 0;
        for (int i : list) s_count += out_.slow[i];
        if (list.size() < 2 || s_count < o_.share * list.size()) continue;
        dirs |= dir;
        total += static_cast<int>(list.size());
        for (int i : list) {
          if (out_.slow[i]) slow.push_back(i);
          by_uplink_[i] = 1;
        }
      }
      if (!dirs) continue;
      Finding f{.kind = FindingKind::kUplink, .switch_index = s};
      f.direction = DirectionName(dirs, "up", "down");
      f.subject = fmt::format("uplink of {}", view_.switches[s]);
      f.evidence = MakeEvidence(slow, total);
      flagged_crossing.push_back(std::move(crossing));
      flagged_finding.push_back(out_.findings.size());
      out_.findings.push_back(std::move(f));
    }
  }

  void FindLinks() {
    std::map<std::pair<int, int>, std::vector<int>> slow_pairs, all_pairs;
    for (size_t i = 0; i < ms_.size(); ++i) {
      auto key = std::minmax(ms_[i].src, ms_[i].dst);
      all_pairs[key].push_back(static_cast<int>(i));
      if (out_.slow[i] && !by_host_[i] && !by_uplink_[i]) {
        slow_pairs[key].push_back(static_cast<int>(i));
      }
    }
    for (const auto& [key, slow] : slow_pairs) {
      auto [a, b] = key;
      Finding f{.kind = FindingKind::kLink, .host = a, .peer = b};
      bool ab = false, ba = false;
      for (int i : slow) (ms_[i].src == a ? ab : ba) = true;
      f.direction = ab && ba ? "both"
                    : ab     ? fmt::format("{}->{}", view_.hosts[a], view_.hosts[b])
                             : fmt::format("{}->{}", view_.hosts[b], view_.hosts[a]);
      f.subject = fmt::format("{}<->{}", view_.hosts[a], view_.hosts[b]);
      f.evidence = MakeEvidence(slow, static_cast<int>(all_pairs[key].size()));
      out_.findings.push_back(std::move(f));
    }
  }

  // Known-good hosts: tested, and no finding names them or an uplink above them. Re-test
  // partners come from them in turn.
  void PlanRetests() {
    std::vector<char> named(hosts_, 0), tested(hosts_, 0);
    for (const Measurement& m : ms_) tested[m.src] = tested[m.dst] = 1;
    for (const Finding& f : out_.findings) {
      if (f.host >= 0) named[f.host] = 1;
      if (f.peer >= 0) named[f.peer] = 1;
      if (f.kind != FindingKind::kUplink) continue;
      for (int h = 0; h < hosts_; ++h) {
        named[h] |= Under(view_, h, f.switch_index);
        for (int s : f.alternatives) named[h] |= Under(view_, h, s);
      }
    }
    for (int h = 0; h < hosts_; ++h) {
      if (tested[h] && !named[h]) out_.good_hosts.push_back(h);
    }
    size_t next = 0;
    // The next good host satisfying `fits`, or -1.
    auto pick = [&](auto fits) {
      const std::vector<int>& g = out_.good_hosts;
      for (size_t k = 0; k < g.size(); ++k) {
        int h = g[(next + k) % g.size()];
        if (fits(h)) {
          next = (next + k + 1) % g.size();
          return h;
        }
      }
      return -1;
    };
    auto add = [](Finding& f, int a, int b) {
      if (a >= 0 && b >= 0 && a != b) f.retest.push_back({.a = a, .b = b});
    };
    for (Finding& f : out_.findings) {
      switch (f.kind) {
        case FindingKind::kHost: {
          int h = f.host;
          int near = pick([&](int g) { return LeafOf(view_, g) == LeafOf(view_, h); });
          add(f, h, near);
          while (static_cast<int>(f.retest.size()) < o_.retest_partners) {
            int g = pick([&](int g) {
              return g != near && std::none_of(f.retest.begin(), f.retest.end(),
                                               [&](const PairTest& p) { return p.b == g; });
            });
            if (g < 0) break;
            add(f, h, g);
          }
          break;
        }
        case FindingKind::kLink: {
          add(f, f.host, f.peer);
          add(f, f.host, pick([&](int g) { return g != f.peer; }));
          add(f, f.peer, pick([&](int g) { return g != f.host; }));
          break;
        }
        case FindingKind::kUplink: {
          std::vector<int> inside;
          for (int h = 0; h < hosts_; ++h) {
            if (!bad_[h] && Under(view_, h, f.switch_index)) inside.push_back(h);
          }
          for (int k = 0; k < o_.retest_partners && k < static_cast<int>(inside.size()); ++k) {
            add(f, inside[k], pick([&](int g) { return !Under(view_, g, f.switch_index); }));
          }
          break;
        }
      }
    }
  }

  const FabricView& view_;
  std::span<const Measurement> ms_;
  const AnalysisOptions& o_;
  int hosts_;
  double raw_median_ = 0;
  Attribution out_;
  std::vector<int> bad_;         // per host: kOut | kIn
  std::vector<char> by_host_;    // per measurement: a bad host accounts for it
  std::vector<char> by_uplink_;  // per measurement: a bad uplink accounts for it
};

}  // namespace

std::string_view FindingKindName(FindingKind k) {
  switch (k) {
    case FindingKind::kHost:
      return "host";
    case FindingKind::kLink:
      return "link";
    case FindingKind::kUplink:
      return "uplink";
  }
  return "?";
}

FabricView FabricView::FromCluster(const topo::Cluster& cluster) {
  FabricView v;
  for (const topo::Node& n : cluster.nodes) {
    v.hosts.push_back(n.name);
    std::vector<int> chain;
    for (int s = n.leaf; s >= 0; s = cluster.switches[s].parent) chain.push_back(s);
    v.above.push_back(std::move(chain));
  }
  for (const topo::Switch& s : cluster.switches) {
    v.switches.push_back(s.name);
    v.has_uplink.push_back(s.parent >= 0);
  }
  return v;
}

FabricView FabricView::Flat(std::vector<std::string> hosts) {
  FabricView v;
  v.above.resize(hosts.size());
  v.hosts = std::move(hosts);
  return v;
}

Result<Attribution> Attribute(const FabricView& view, std::span<const Measurement> measurements,
                              const AnalysisOptions& options) {
  return Attributor(view, measurements, options).Run();
}

Attribution Confirm(Attribution first, const FabricView& view, std::span<const Measurement> retests,
                    const AnalysisOptions& options) {
  auto crosses = [&](const Finding& f, int src, int dst) {
    std::vector<int> sws = f.alternatives;
    sws.push_back(f.switch_index);
    for (int s : sws) {
      bool a = Under(view, src, s), b = Under(view, dst, s);
      if (a != b && (f.direction == "both" || (a ? "up" : "down") == f.direction)) return true;
    }
    return false;
  };
  for (Finding& f : first.findings) {
    std::vector<int> relevant;
    int slow = 0;
    for (size_t i = 0; i < retests.size(); ++i) {
      const Measurement& m = retests[i];
      if (m.src < 0 || m.dst < 0 || m.src >= static_cast<int>(view.hosts.size()) ||
          m.dst >= static_cast<int>(view.hosts.size())) {
        continue;
      }
      bool bears = false;
      switch (f.kind) {
        case FindingKind::kHost:
          bears =
              (m.src == f.host && f.direction != "in") || (m.dst == f.host && f.direction != "out");
          break;
        case FindingKind::kLink: {
          bool ab = m.src == f.host && m.dst == f.peer, ba = m.src == f.peer && m.dst == f.host;
          std::string name_ab = fmt::format("{}->{}", view.hosts[f.host], view.hosts[f.peer]);
          bears = (ab && (f.direction == "both" || f.direction == name_ab)) ||
                  (ba && (f.direction == "both" || f.direction != name_ab));
          break;
        }
        case FindingKind::kUplink:
          bears = crosses(f, m.src, m.dst);
          break;
      }
      Result<bool> s = bears ? IsSlow(m, first.stats, options) : Result<bool>(false);
      if (!bears || !s.ok()) continue;
      relevant.push_back(static_cast<int>(i));
      slow += *s;
    }
    f.evidence.retest_tests = relevant;
    std::string base = f.outcome.reason.substr(0, f.outcome.reason.find("; suspect"));
    if (relevant.empty()) {
      f.outcome = Outcome::Unknown(base + "; its re-test did not run");
    } else if (2 * slow >= static_cast<int>(relevant.size())) {
      f.outcome = Outcome::Fail(fmt::format("{}; re-test against known-good hosts: {} of {} slow",
                                            base, slow, relevant.size()));
    } else {
      // One slow measurement that known-good partners do not reproduce is noise (a busy CPU,
      // a retransmit), not a fault: flagging it would make a clean cluster fail to come out
      // clean. It stays in the report as a PASS finding, with its evidence, for the record.
      f.outcome = Outcome::Pass(
          fmt::format("{}; transient: not reproduced on re-test against known-good hosts ({} "
                      "of {} slow)",
                      base, slow, relevant.size()));
    }
  }
  return first;
}

}  // namespace railyard::validate
