// Fabric test schedules: which hosts measure each other, in which round.
//
// A round is a set of disjoint pairs; both hosts of a pair send to each other at once, so a
// pair yields two measurements (a->b and b->a) and every host takes part in at most one pair
// per round. Two schedules, chosen by size:
//
//   AllPairsSchedule(n)         every ordered pair exactly once: the round-robin tournament
//                               (circle method), n-1 rounds of n/2 pairs for even n; n rounds
//                               with one host sitting out each for odd n.
//   TopologySchedule(cluster)   for large clusters, from the switch tree: for each level from
//                               the leaves up, two rounds that pair hosts across different
//                               children of every switch (inside each leaf first, then leaf
//                               against leaf under each spine, ...), host i of one child with
//                               host i+t of the other, so every host's link runs both ways and
//                               every uplink carries all its hosts' traffic at once; one more
//                               round across the top switches when there are several. Hosts
//                               left without a partner in a round are paired in tree order.
//                               2 x levels (+1) rounds whatever the number of hosts: 7 for a
//                               3-level tree of 16,384 nodes under 4 top switches.
//
// SetExpectedRates fills each measurement's expectation from the topology: the slowest hop on
// its path, each link's rate shared among the flows of that round that cross it in the same
// direction. Host indices are indices into cluster.nodes (or the caller's host list for
// AllPairsSchedule without a topology).
//
// Thread-safety: values and pure functions.
#pragma once

#include <chrono>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/topo/model.h"

namespace railyard::validate {

struct PairTest {
  int a = -1;
  int b = -1;
  double expected_ab_bits = 0;  // 0: not known
  double expected_ba_bits = 0;
  friend bool operator==(const PairTest&, const PairTest&) = default;
};

struct Round {
  std::vector<PairTest> pairs;  // disjoint: no host twice
};

enum class ScheduleKind { kAllPairs, kTopology, kRetest };
std::string_view ScheduleKindName(ScheduleKind k);  // "all-pairs", "topology", "retest"

struct Schedule {
  ScheduleKind kind = ScheduleKind::kAllPairs;
  int hosts = 0;
  std::vector<Round> rounds;
  size_t PairCount() const;
};

// Every ordered pair of `hosts` hosts exactly once. No rounds for fewer than 2 hosts.
Schedule AllPairsSchedule(int hosts);

// The topology-covering schedule over cluster.nodes (see above).
Schedule TopologySchedule(const topo::Cluster& cluster);

// AllPairsSchedule when the cluster has at most `all_pairs_max` nodes, else TopologySchedule;
// expected rates set either way.
Schedule ChooseSchedule(const topo::Cluster& cluster, int all_pairs_max = 32);

// Sets every pair's expected rates from `cluster` (see above); a hop whose rate is unknown
// (0) is left out, and a path with no known hop expects 0. Precondition: host indices are
// valid indices into cluster.nodes.
void SetExpectedRates(const topo::Cluster& cluster, Schedule& schedule);

// `pairs` in as few rounds as a greedy first-fit finds, each round disjoint, order kept within
// a round: for re-tests, whose pairs share hosts.
std::vector<Round> PackRounds(std::span<const PairTest> pairs);

// What --dry-run prints: rounds, pairs, measurements and the time they would take.
struct DryRun {
  ScheduleKind kind = ScheduleKind::kAllPairs;
  int hosts = 0;
  int rounds = 0;
  size_t pairs = 0;
  size_t measurements = 0;  // 2 per pair
  double estimated_s = 0;   // rounds x per_round
};
DryRun DescribeDryRun(const Schedule& schedule, std::chrono::duration<double> per_round);

// The dry run as text: a summary line, then one line per round listing its pairs by name
// ("n1<->n2 200 Mbit/s"), at most `max_pairs_per_round` of them and "... N more".
// Precondition: names.size() >= schedule.hosts.
std::string FormatDryRun(const Schedule& schedule, std::span<const std::string> names,
                         std::chrono::duration<double> per_round, size_t max_pairs_per_round = 16);

}  // namespace railyard::validate
