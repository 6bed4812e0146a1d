// RunReport: everything one validation run found, in the shape every output reads.
//
// The coordinator (coordinator.h) fills it; the renderers (report_json.h, report_junit.h,
// report_prometheus.h, report_html.h, report_table.h) only print it. Hosts are indexed as in
// `hosts`; pair figures and findings use the same indices (analysis.h).
//
// Verdicts roll up one way: each host's `overall` is the worst of its checks (node checks
// from its agent, then its share of the fabric, storage and clock checks); `overall` of the
// run is the worst of the hosts and of the cluster-wide checks. A host whose agent never
// reported carries UNKNOWN with the reason ("agent did not connect within 15s: ..."), never
// PASS.
//
// Thread-safety: a value.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "railyard/validate/analysis.h"
#include "railyard/validate/node_run.h"
#include "railyard/validate/schedule.h"
#include "railyard/validate/verdict.h"

namespace railyard::validate {

struct HostEntry {
  std::string name;
  std::string address;  // as the agent reported it; empty when it never connected
  std::string profile;
  // Node and GPU checks from its agent (sorted by id), then the per-host verdicts of the
  // fabric, storage and clock checks ("fabric.pair_bandwidth", "storage.throughput", ...).
  std::vector<CheckResult> checks;
  Outcome overall;
};

// One direction of one pair test (analysis.h Measurement, with its verdict).
struct PairFigure {
  int src = -1;
  int dst = -1;
  double measured_bits = 0;  // bits/s; 0 when the test could not run (see `error`)
  double expected_bits = 0;  // 0: not known
  bool slow = false;         // breached the analysis threshold
  bool retest = false;       // from the re-test pass against known-good hosts
  int round = -1;
  std::string error;  // why there is no figure ("agent of node3 did not answer within 5s")
};

// IOR-easy and mdtest-easy figures of one host (storage checks).
struct StorageFigure {
  int host = -1;
  double write_bytes_per_s = 0;   // its own files, with fsync
  double read_bytes_per_s = 0;    // a neighbour's files, so the page cache cannot answer
  int read_from = -1;             // the neighbour read
  double metadata_ops_per_s = 0;  // create + stat + unlink in the shared directory
  std::string error;
};

// One message size of the allreduce sweep (nccl-tests' algbw/busbw convention).
struct CollectiveFigure {
  uint64_t bytes = 0;
  double seconds = 0;  // per operation
  double algbw_bytes_per_s = 0;
  double busbw_bytes_per_s = 0;
};

struct RunReport {
  std::string plan;     // plan name
  std::string started;  // ISO 8601 UTC
  double total_s = 0;
  std::vector<HostEntry> hosts;

  // The fabric: the schedule that ran, every figure, the attribution after re-tests.
  ScheduleKind schedule = ScheduleKind::kAllPairs;
  int rounds = 0;  // measurement rounds, re-tests included
  std::vector<PairFigure> pairs;
  Stats fabric_stats;
  std::vector<Finding> findings;  // settled (Confirm): FAIL, WARN or UNKNOWN each

  std::vector<StorageFigure> storage;
  double storage_write_bytes_per_s = 0;  // aggregate over hosts
  double storage_read_bytes_per_s = 0;
  double storage_metadata_ops_per_s = 0;

  std::vector<CollectiveFigure> collective;

  // Verdicts of the cluster-wide checks: "fabric.pair_bandwidth", "collective.allreduce",
  // "collective.nccl_tests", ... (each with its reason), in id order.
  std::vector<CheckResult> cluster_checks;

  Outcome overall;
  int ExitCode() const { return overall.ExitCode(); }
};

// Sets every host's overall and the run's overall from the checks and findings (see above).
void RollUp(RunReport& report);

}  // namespace railyard::validate
