#include "railyard/validate/schedule.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <tuple>

#include "railyard/base/units.h"

namespace railyard::validate {
namespace {

// Round `r` of the circle-method tournament among `m` participants: pairs (x, y) with x, y < m;
// with odd m one participant sits out.
std::vector<std::pair<int, int>> TournamentRound(int m, int r) {
  std::vector<std::pair<int, int>> out;
  if (m < 2) return out;
  int n = m + (m % 2);  // with a phantom participant n-1 for odd m
  int ring = n - 1;
  r %= ring;
  auto add = [&](int x, int y) {
    if (x < m && y < m) out.emplace_back(x, y);
  };
  add(r, n - 1);
  for (int i = 1; i < n / 2; ++i) add((r + i) % ring, (r - i + ring) % ring);
  return out;
}

// Switch indices from the node's leaf up to its top switch.
std::vector<int> Ancestors(const topo::Cluster& c, int node) {
  std::vector<int> chain;
  for (int s = c.nodes[node].leaf; s >= 0; s = c.switches[s].parent) chain.push_back(s);
  return chain;
}

// Nodes in tree order: top switches in index order, children and nodes as listed.
std::vector<int> TreeOrder(const topo::Cluster& c) {
  std::vector<int> order;
  for (size_t s = 0; s < c.switches.size(); ++s) {
    if (c.switches[s].parent >= 0) continue;
    std::vector<int> under = c.NodesUnder(static_cast<int>(s));
    order.insert(order.end(), under.begin(), under.end());
  }
  return order;
}

class TopologyPlanner {
 public:
  explicit TopologyPlanner(const topo::Cluster& c) : c_(c), order_(TreeOrder(c)) {
    for (size_t s = 0; s < c.switches.size(); ++s) {
      if (c.switches[s].parent < 0) roots_.push_back(static_cast<int>(s));
    }
  }

  Schedule Plan() {
    Schedule sched{.kind = ScheduleKind::kTopology, .hosts = static_cast<int>(c_.nodes.size())};
    for (int level = c_.leaf_level(); level >= 0; --level) {
      std::vector<std::vector<std::vector<int>>> groups;  // per switch: its children's hosts
      for (size_t s = 0; s < c_.switches.size(); ++s) {
        if (c_.switches[s].level == level) groups.push_back(Children(static_cast<int>(s)));
      }
      for (int t = 0; t < 2; ++t) sched.rounds.push_back(MakeRound(groups, t));
    }
    if (roots_.size() > 1) {
      std::vector<std::vector<int>> tops;
      for (int r : roots_) tops.push_back(c_.NodesUnder(r));
      sched.rounds.push_back(MakeRound({tops}, 0));
    }
    std::erase_if(sched.rounds, [](const Round& r) { return r.pairs.empty(); });
    return sched;
  }

 private:
  // The host groups a switch's traffic is spread across: each host of a leaf on its own,
  // else the hosts under each child switch.
  std::vector<std::vector<int>> Children(int s) const {
    const topo::Switch& sw = c_.switches[s];
    std::vector<std::vector<int>> out;
    if (sw.level == c_.leaf_level()) {
      for (int n : sw.nodes) out.push_back({n});
    } else {
      for (int child : sw.children) out.push_back(c_.NodesUnder(child));
    }
    return out;
  }

  Round MakeRound(const std::vector<std::vector<std::vector<int>>>& per_switch, int t) const {
    Round round;
    std::vector<char> busy(c_.nodes.size(), 0);
    for (const auto& groups : per_switch) {
      for (auto [x, y] : TournamentRound(static_cast<int>(groups.size()), t)) {
        const std::vector<int>* ga = &groups[x];
        const std::vector<int>* gb = &groups[y];
        if (ga->size() > gb->size()) std::swap(ga, gb);
        for (size_t i = 0; i < ga->size(); ++i) {
          int a = (*ga)[i], b = (*gb)[(i + t) % gb->size()];
          round.pairs.push_back({.a = a, .b = b});
          busy[a] = busy[b] = 1;
        }
      }
    }
    // Hosts without a partner (odd leaves, uneven children) pair up in tree order, so that
    // they are tested too and stay as close to each other as the tree allows.
    int waiting = -1;
    for (int n : order_) {
      if (busy[n]) continue;
      if (waiting < 0) {
        waiting = n;
      } else {
        round.pairs.push_back({.a = waiting, .b = n});
        waiting = -1;
      }
    }
    return round;
  }

  const topo::Cluster& c_;
  std::vector<int> order_;
  std::vector<int> roots_;
};

}  // namespace

std::string_view ScheduleKindName(ScheduleKind k) {
  switch (k) {
    case ScheduleKind::kAllPairs:
      return "all-pairs";
    case ScheduleKind::kTopology:
      return "topology";
    case ScheduleKind::kRetest:
      return "retest";
  }
  return "?";
}

size_t Schedule::PairCount() const {
  size_t n = 0;
  for (const Round& r : rounds) n += r.pairs.size();
  return n;
}

Schedule AllPairsSchedule(int hosts) {
  Schedule sched{.kind = ScheduleKind::kAllPairs, .hosts = hosts};
  if (hosts < 2) return sched;
  int rounds = hosts % 2 == 0 ? hosts - 1 : hosts;
  for (int r = 0; r < rounds; ++r) {
    Round round;
    for (auto [a, b] : TournamentRound(hosts, r)) round.pairs.push_back({.a = a, .b = b});
    sched.rounds.push_back(std::move(round));
  }
  return sched;
}

Schedule TopologySchedule(const topo::Cluster& cluster) {
  Schedule s = TopologyPlanner(cluster).Plan();
  SetExpectedRates(cluster, s);
  return s;
}

Schedule ChooseSchedule(const topo::Cluster& cluster, int all_pairs_max) {
  if (static_cast<int>(cluster.nodes.size()) > all_pairs_max) return TopologySchedule(cluster);
  Schedule s = AllPairsSchedule(static_cast<int>(cluster.nodes.size()));
  SetExpectedRates(cluster, s);
  return s;
}

void SetExpectedRates(const topo::Cluster& cluster, Schedule& schedule) {
  const size_t nodes = cluster.nodes.size(), switches = cluster.switches.size();
  std::vector<std::vector<int>> up(nodes);
  for (size_t n = 0; n < nodes; ++n) up[n] = Ancestors(cluster, static_cast<int>(n));
  // Directed links: a host's transmit and receive side, a switch's uplink up and down.
  enum Dir { kUp = 0, kDown = 1 };
  struct Hop {
    bool is_switch;
    int index;
    Dir dir;
  };
  auto path = [&](int src, int dst, std::vector<Hop>& hops) {
    hops.clear();
    const std::vector<int>&sa = up[src], &sb = up[dst];
    // Chains end at their top switch; strip the common top part (the LCA and above).
    size_t ia = sa.size(), ib = sb.size();
    while (ia > 0 && ib > 0 && sa[ia - 1] == sb[ib - 1]) --ia, --ib;
    hops.push_back({false, src, kUp});
    for (size_t i = 0; i < ia; ++i) hops.push_back({true, sa[i], kUp});
    for (size_t i = 0; i < ib; ++i) hops.push_back({true, sb[i], kDown});
    hops.push_back({false, dst, kDown});
  };
  auto rate = [&](const Hop& h) -> double {
    return h.is_switch ? cluster.switches[h.index].uplink_rate_bits
                       : cluster.nodes[h.index].link_rate_bits;
  };
  std::vector<int> host_flows(2 * nodes), switch_flows(2 * switches);
  auto flows = [&](const Hop& h) -> int& {
    return h.is_switch ? switch_flows[2 * h.index + h.dir] : host_flows[2 * h.index + h.dir];
  };
  std::vector<Hop> hops;
  for (Round& round : schedule.rounds) {
    std::fill(host_flows.begin(), host_flows.end(), 0);
    std::fill(switch_flows.begin(), switch_flows.end(), 0);
    for (const PairTest& p : round.pairs) {
      for (auto [s, d] : {std::pair{p.a, p.b}, std::pair{p.b, p.a}}) {
        path(s, d, hops);
        for (const Hop& h : hops) ++flows(h);
      }
    }
    for (PairTest& p : round.pairs) {
      for (auto [s, d, out] :
           {std::tuple{p.a, p.b, &p.expected_ab_bits}, std::tuple{p.b, p.a, &p.expected_ba_bits}}) {
        path(s, d, hops);
        double best = std::numeric_limits<double>::infinity();
        for (const Hop& h : hops) {
          if (rate(h) > 0) best = std::min(best, rate(h) / flows(h));
        }
        *out = std::isinf(best) ? 0 : best;
      }
    }
  }
}

std::vector<Round> PackRounds(std::span<const PairTest> pairs) {
  std::vector<Round> rounds;
  std::vector<std::vector<char>> used;
  for (const PairTest& p : pairs) {
    size_t r = 0;
    int top = std::max(p.a, p.b);
    for (; r < rounds.size(); ++r) {
      if (static_cast<int>(used[r].size()) <= top) used[r].resize(top + 1, 0);
      if (!used[r][p.a] && !used[r][p.b]) break;
    }
    if (r == rounds.size()) {
      rounds.emplace_back();
      used.emplace_back(top + 1, 0);
    }
    rounds[r].pairs.push_back(p);
    used[r][p.a] = used[r][p.b] = 1;
  }
  return rounds;
}

DryRun DescribeDryRun(const Schedule& schedule, std::chrono::duration<double> per_round) {
  DryRun d{.kind = schedule.kind,
           .hosts = schedule.hosts,
           .rounds = static_cast<int>(schedule.rounds.size()),
           .pairs = schedule.PairCount()};
  d.measurements = 2 * d.pairs;
  d.estimated_s = d.rounds * per_round.count();
  return d;
}

std::string FormatDryRun(const Schedule& schedule, std::span<const std::string> names,
                         std::chrono::duration<double> per_round, size_t max_pairs_per_round) {
  DryRun d = DescribeDryRun(schedule, per_round);
  std::string out = fmt::format(
      "schedule {}: {} hosts, {} rounds, {} pairs ({} measurements), about {:.0f} s at {:g} s "
      "per round\n",
      ScheduleKindName(d.kind), d.hosts, d.rounds, d.pairs, d.measurements, d.estimated_s,
      per_round.count());
  auto rate = [](double bits) { return bits > 0 ? base::FormatRateBits(bits) : "?"; };
  for (size_t r = 0; r < schedule.rounds.size(); ++r) {
    const std::vector<PairTest>& pairs = schedule.rounds[r].pairs;
    out += fmt::format("round {}: {} pairs:", r + 1, pairs.size());
    for (size_t i = 0; i < pairs.size() && i < max_pairs_per_round; ++i) {
      const PairTest& p = pairs[i];
      std::string expected = rate(p.expected_ab_bits);
      if (p.expected_ba_bits != p.expected_ab_bits) expected += "/" + rate(p.expected_ba_bits);
      out += fmt::format(" {}<->{} {}{}", names[p.a], names[p.b], expected,
                         i + 1 < pairs.size() ? "," : "");
    }
    if (pairs.size() > max_pairs_per_round) {
      out += fmt::format(" ... {} more", pairs.size() - max_pairs_per_round);
    }
    out += "\n";
  }
  return out;
}

}  // namespace railyard::validate
