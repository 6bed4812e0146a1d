// Analysis of a pair-bandwidth matrix: robust statistics, and which host, link or uplink is to
// blame for what is slow.
//
// Input: one Measurement per direction of each pair tested (schedule.h), with the rate the
// topology leads one to expect where it is known, and a FabricView saying which switches sit
// above each host. Attribute() then:
//
//   1. normalises each value (measured / expected when every measurement has an expectation,
//      else the raw rate), takes the fleet median as the median of the per-host medians (so a
//      bad uplink that slows half of all tests does not drag it down) and the MAD;
//   2. marks a measurement slow when it breaches the threshold (default 80% of the median; a
//      fault on most of every host's paths, as one uplink of two leaves, moves the median
//      itself, and only an "of expected" threshold shows it);
//   3. a host is bad in a direction (out, in) when at least `share` of its tests in that
//      direction with at least two partners are slow, and so are its tests inside its own
//      leaf: its link is the common factor;
//   4. a switch's uplink is bad (from the leaves up) when at least `share` of the tests that
//      cross it in a direction, not explained by a bad host or a lower bad uplink, are slow
//      while the tests between its own hosts are fine; two uplinks that every tested path
//      crosses together (two leaves alone under a spine) are named as one finding;
//   5. every remaining slow test is a bad link between its two hosts.
//
// Each finding carries its evidence (median measured and expected rate, ratio, slow/total,
// the tests) and re-test pairs against known-good hosts (named by no finding). A finding
// is a WARN suspect until Confirm() sees the re-tests: FAIL when they are slow again, PASS
// ("transient: not reproduced") when they are not, UNKNOWN when they did not run. Nothing is
// FAIL on one measurement pass, and one slow pass that re-tests clear is not flagged at all.
//
// Thread-safety: pure functions.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/topo/model.h"
#include "railyard/validate/schedule.h"
#include "railyard/validate/threshold.h"
#include "railyard/validate/verdict.h"

namespace railyard::validate {

struct Measurement {
  int src = -1;
  int dst = -1;
  double measured_bits = 0;  // achieved rate, bits/s
  double expected_bits = 0;  // from the topology (SetExpectedRates); 0: not known
  std::string test;          // what produced it: "fabric.pair_bandwidth round 3"
};

// The hosts and the switches above each, leaf first. A flat view (no topology) has no
// switches: no uplink can be blamed and every partner counts as inside the host's leaf.
struct FabricView {
  std::vector<std::string> hosts;
  std::vector<std::vector<int>> above;  // per host: switch indices, leaf first, top last
  std::vector<std::string> switches;    // names by index
  std::vector<char> has_uplink;         // per switch: it has a parent

  static FabricView FromCluster(const topo::Cluster& cluster);  // hosts = cluster.nodes
  static FabricView Flat(std::vector<std::string> hosts);
};

struct AnalysisOptions {
  // A measurement breaching this bound is slow: "80% of median", "90% of expected" or an
  // absolute rate.
  Threshold slow{.kind = Threshold::Kind::kOfMedian, .value = 0.8, .text = "80% of median"};
  // The part of a host's or an uplink's tests that must be slow to blame it.
  double share = 0.75;
  // Known-good partners per suspect host or uplink in its re-test.
  int retest_partners = 2;
};

// Of the normalised values (see above).
struct Stats {
  size_t count = 0;
  double median = 0;        // the fleet median used as the reference
  double mad = 0;           // median absolute deviation from it
  bool normalised = false;  // values are fractions of the expected rate
};

enum class FindingKind { kHost, kLink, kUplink };
std::string_view FindingKindName(FindingKind k);  // "host", "link", "uplink"

struct Evidence {
  double measured_bits = 0;  // median of the slow tests
  double expected_bits = 0;  // median of their expectation (the fleet median where unknown)
  double ratio = 0;          // measured / expected
  int slow = 0;              // slow tests of `total` that bear on the finding
  int total = 0;
  std::vector<int> tests;         // indices of the slow measurements in Attribute's input
  std::vector<int> retest_tests;  // indices into Confirm's input that bear on it
};

struct Finding {
  FindingKind kind = FindingKind::kHost;
  int host = -1;                  // kHost; kLink: one end
  int peer = -1;                  // kLink: the other end
  int switch_index = -1;          // kUplink
  std::vector<int> alternatives;  // kUplink: switches no test could tell from switch_index
  std::string direction;          // host: "out", "in", "both"; uplink: "up", "down", "both";
                                  // link: "a->b", "b->a" as names, or "both"
  std::string subject;            // "n5", "n2<->n9", "uplink of leaf1"
  Evidence evidence;
  Outcome outcome;               // WARN (suspect) until Confirm
  std::vector<PairTest> retest;  // pairs to run again, against known-good hosts
};

struct Attribution {
  Stats stats;
  std::vector<char> slow;  // per input measurement
  std::vector<int> good_hosts;
  std::vector<Finding> findings;
  std::vector<PairTest> retest;  // every finding's re-test pairs; PackRounds() them to run
};

// Errors: INVALID_ARGUMENT for a measurement whose hosts are not in `view` or whose rate is
// negative; FAILED_PRECONDITION for an "of expected" threshold when a measurement has no
// expectation. No measurements give no findings.
Result<Attribution> Attribute(const FabricView& view, std::span<const Measurement> measurements,
                              const AnalysisOptions& options = {});

// Settles `first`'s findings with the re-test measurements (any order, any extra pairs).
Attribution Confirm(Attribution first, const FabricView& view, std::span<const Measurement> retests,
                    const AnalysisOptions& options = {});

}  // namespace railyard::validate
