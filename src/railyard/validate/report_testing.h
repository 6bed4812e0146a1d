// A sample RunReport for the renderers' tests (report_*_test.cc and
// tests/validate_html_chromium_test.cc). Test-only.
//
//   RunReport r = SampleReport();   // plan "full", 8 hosts node0..node7
//
// What it holds, so that tests can assert on it:
//   - node0..node6 ran; node7's agent never connected: every check UNKNOWN.
//   - node5's link runs at 20%: a host finding, FAIL after re-test; its fabric check FAIL.
//   - the path node2<->node6 runs at 20%: a link finding, FAIL; both hosts PASS.
//   - node3 has a WARN (node.sysctl) whose reason holds every character markup escapes
//     (kSampleAwkwardReason); every host's gpu.count is SKIPPED.
//   - fabric: all pairs of the 7 live hosts (42 measurements in 7 rounds at 200 Mbit/s
//     expected, healthy ones 185-194 Mbit/s, slow ones 40 Mbit/s), then 10 re-test
//     measurements in 2 rounds; findings' evidence.tests index the first-pass pairs in order,
//     retest_tests the re-test pairs in order.
//   - storage figures for the 7 live hosts and an error for node7; an allreduce sweep of 4
//     sizes; cluster checks fabric.pair_bandwidth FAIL, collective.allreduce PASS,
//     collective.nccl_tests SKIPPED.
#pragma once

#include <string>
#include <vector>

#include "railyard/validate/report.h"

namespace railyard::validate {

inline constexpr int kSampleHosts = 8;
inline constexpr int kSampleLiveHosts = 7;
inline constexpr double kSampleExpectedBits = 200e6;
inline constexpr double kSampleSlowBits = 40e6;
inline constexpr const char* kSampleAwkwardReason =
    "net.core.rmem_max 208 KiB < 16 MiB & \"tcp_rmem\" 'low'";

// How often `what` occurs in `text` (overlapping occurrences count).
inline size_t CountOccurrences(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t pos = text.find(what); pos != std::string::npos; pos = text.find(what, pos + 1)) {
    ++n;
  }
  return n;
}

inline std::string SampleHostName(int i) { return "node" + std::to_string(i); }

// A healthy first-pass rate for src -> dst: 185 to 194 Mbit/s, fixed per pair.
inline double SampleHealthyBits(int src, int dst) {
  return 185e6 + ((src * 7 + dst * 3) % 10) * 1e6;
}

inline RunReport SampleReport() {
  RunReport r;
  r.plan = "full";
  r.started = "2026-12-02T02:00:00Z";
  r.total_s = 21.5;
  const std::string unknown = "agent did not connect within 15s: exited with 1: no route to host";
  const std::vector<std::string> node_checks = {"gpu.count", "node.cpus", "node.swap",
                                                "node.sysctl"};
  for (int i = 0; i < kSampleHosts; ++i) {
    HostEntry h;
    h.name = SampleHostName(i);
    h.profile = "cpu";
    if (i == 7) {
      for (const std::string& id : node_checks) {
        h.checks.push_back({id, Outcome::Unknown(unknown), std::chrono::milliseconds(15000)});
      }
      h.checks.push_back({"fabric.pair_bandwidth", Outcome::Unknown(unknown), {}});
      r.hosts.push_back(std::move(h));
      continue;
    }
    h.address = "198.18.0." + std::to_string(i + 1);
    h.checks.push_back({"gpu.count", Outcome::Skipped("no GPU expected on profile cpu"),
                        std::chrono::milliseconds(0)});
    h.checks.push_back(
        {"node.cpus", Outcome::Pass("2 CPUs online").With("2", ""), std::chrono::milliseconds(3)});
    h.checks.push_back({"node.swap", Outcome::Pass("no swap in use").With("0 B", "warn > 0 B"),
                        std::chrono::milliseconds(2)});
    h.checks.push_back({"node.sysctl",
                        i == 3 ? Outcome::Warn(kSampleAwkwardReason).With("208 KiB", "16 MiB")
                               : Outcome::Pass("socket buffers and NUMA settings fine"),
                        std::chrono::milliseconds(4)});
    h.checks.push_back(
        {"fabric.pair_bandwidth",
         i == 5 ? Outcome::Fail("link at 20% of expected both ways: 40 Mbit/s of 200 Mbit/s "
                                "(12 of 12 tests slow)")
                      .With("40 Mbit/s", "200 Mbit/s")
                : Outcome::Pass("every path at 93% of expected or better"),
         std::chrono::milliseconds(0)});
    h.checks.push_back({"storage.throughput", Outcome::Pass("write 95 MB/s, read 110 MB/s"),
                        std::chrono::milliseconds(2100)});
    r.hosts.push_back(std::move(h));
  }

  // Fabric: all pairs of the live hosts, then the re-tests.
  r.schedule = ScheduleKind::kAllPairs;
  Schedule s = AllPairsSchedule(kSampleLiveHosts);
  auto slow_pair = [](int a, int b) {
    return a == 5 || b == 5 || (a == 2 && b == 6) || (a == 6 && b == 2);
  };
  std::vector<int> host_tests, link_tests;
  int first = 0;
  for (size_t round = 0; round < s.rounds.size(); ++round) {
    for (const PairTest& p : s.rounds[round].pairs) {
      for (auto [a, b] : {std::pair{p.a, p.b}, std::pair{p.b, p.a}}) {
        bool slow = slow_pair(a, b);
        r.pairs.push_back({.src = a,
                           .dst = b,
                           .measured_bits = slow ? kSampleSlowBits : SampleHealthyBits(a, b),
                           .expected_bits = kSampleExpectedBits,
                           .slow = slow,
                           .round = static_cast<int>(round)});
        if (a == 5 || b == 5) host_tests.push_back(first);
        if (slow && a != 5 && b != 5) link_tests.push_back(first);
        ++first;
      }
    }
  }
  struct Retest {
    int a, b;
    double ab, ba;
    int round;
  };
  const std::vector<Retest> retests = {{5, 0, 41e6, 42e6, 7},
                                       {2, 6, 39e6, 40e6, 7},
                                       {4, 1, 188e6, 190e6, 7},
                                       {5, 4, 40e6, 41e6, 8},
                                       {3, 1, 187e6, 191e6, 8}};
  for (const Retest& t : retests) {
    for (auto [a, b, bits] : {std::tuple{t.a, t.b, t.ab}, std::tuple{t.b, t.a, t.ba}}) {
      r.pairs.push_back({.src = a,
                         .dst = b,
                         .measured_bits = bits,
                         .expected_bits = kSampleExpectedBits,
                         .slow = bits < 100e6,
                         .retest = true,
                         .round = t.round});
    }
  }
  r.rounds = 9;
  r.fabric_stats = {.count = 42, .median = 0.945, .mad = 0.015, .normalised = true};

  // Both findings at 20% of 200 Mbit/s, FAIL after their re-tests.
  auto finding = [](FindingKind kind, int host, int peer, std::string subject, int slow,
                    std::vector<int> tests, std::vector<int> retest_tests, std::string reason,
                    std::vector<PairTest> retest) {
    Finding f{.kind = kind, .host = host, .peer = peer, .direction = "both"};
    f.subject = std::move(subject);
    f.evidence = {.measured_bits = kSampleSlowBits,
                  .expected_bits = kSampleExpectedBits,
                  .ratio = 0.2,
                  .slow = slow,
                  .total = slow,
                  .tests = std::move(tests),
                  .retest_tests = std::move(retest_tests)};
    f.outcome = Outcome::Fail(std::move(reason));
    f.retest = std::move(retest);
    return f;
  };
  r.findings = {
      finding(FindingKind::kHost, 5, -1, "node5", 12, host_tests, {0, 1, 6, 7},
              "slow again on re-test against known-good hosts (4 of 4)",
              {{.a = 5, .b = 0}, {.a = 5, .b = 4}}),
      finding(FindingKind::kLink, 2, 6, "node2<->node6", 2, link_tests, {2, 3},
              "slow again on re-test (2 of 2); both ends fine with others", {{.a = 2, .b = 6}})};

  // Storage: IOR-easy and mdtest-easy per live host.
  for (int i = 0; i < kSampleHosts; ++i) {
    StorageFigure f{.host = i};
    if (i == 7) {
      f.error = "agent did not connect";
    } else {
      f.write_bytes_per_s = 90e6 + i * 1e6;
      f.read_bytes_per_s = 110e6 + i * 1e6;
      f.read_from = (i + 1) % kSampleLiveHosts;
      f.metadata_ops_per_s = 1500 + i * 10;
      r.storage_write_bytes_per_s += f.write_bytes_per_s;
      r.storage_read_bytes_per_s += f.read_bytes_per_s;
      r.storage_metadata_ops_per_s += f.metadata_ops_per_s;
    }
    r.storage.push_back(f);
  }

  for (uint64_t bytes : {1ull << 20, 4ull << 20, 16ull << 20, 64ull << 20}) {
    double busbw = 20e6;
    double seconds = 2.0 * (kSampleLiveHosts - 1) / kSampleLiveHosts * bytes / busbw;
    r.collective.push_back({.bytes = bytes,
                            .seconds = seconds,
                            .algbw_bytes_per_s = bytes / seconds,
                            .busbw_bytes_per_s = busbw});
  }

  r.cluster_checks = {
      {"collective.allreduce", Outcome::Pass("busbw 20 MB/s at 64 MiB").With("20 MB/s", ""),
       std::chrono::milliseconds(6200)},
      {"collective.nccl_tests", Outcome::Skipped("nccl-tests not installed"), {}},
      {"fabric.pair_bandwidth", Outcome::Fail("2 findings: node5 (host), node2<->node6 (link)"),
       std::chrono::milliseconds(11800)},
  };
  RollUp(r);
  return r;
}

}  // namespace railyard::validate
