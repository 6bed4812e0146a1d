// `railyard bench comm`: nccl-tests-style measurement of one collective over a range of
// sizes, run by every rank of a communicator.
//
// Conventions follow nccl-tests (doc/PERFORMANCE.md): size S is the bytes of one rank's
// buffer (for allgather and reduce_scatter the full, n-block buffer; for alltoall the send
// buffer); algbw = S / t with GB = 1e9 bytes; busbw = algbw x factor (allreduce 2(n-1)/n;
// allgather, reduce_scatter, alltoall (n-1)/n; broadcast 1). The time of a size is the
// slowest rank's mean over the timed iterations, after warm-up iterations.
//
// Checking. Inputs are small integers (exact in every type and reduction order), so every
// result element has one right bit pattern. Every rank checks its result:
//   - an untimed iteration before the warm-up, in full;
//   - each timed iteration but the last at kCommBenchSamples positions: the first and last
//     element and pseudo-random ones that change with the iteration and the rank. Before
//     the call those positions are poisoned (every byte inverted), so a stale value from an
//     earlier iteration cannot pass for a fresh one;
//   - the last timed iteration in full: the whole result is poisoned before the first timed
//     iteration, so an element no timed iteration wrote is caught too.
// The sampled check costs a few dozen element reads and writes per iteration (well under a
// microsecond, against 10 us or more for the smallest collective); the full ones are outside
// the timed span. A row's `wrong` counts the failed comparisons over all ranks, `checked`
// all comparisons. The broadcast root's buffer is its input and is never poisoned.
#pragma once

#include <functional>
#include <span>
#include <string>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/comm/communicator.h"
#include "railyard/comm/types.h"

namespace railyard::comm {

enum class BenchOp { kAllreduce, kAllgather, kReduceScatter, kBroadcast, kAlltoall };
std::string_view BenchOpName(BenchOp op);
Result<BenchOp> ParseBenchOp(std::string_view text);
double BusBandwidthFactor(BenchOp op, int ranks);

// The sizes of one rank's buffer, in bytes, in the order they run: "4KiB:64MiB" (doubling
// from MIN while at most MAX), a comma list "4KiB,1MiB,64MiB" (those sizes, in that order),
// or one size "1MiB". Every size is 1 byte to 16GiB. INVALID_ARGUMENT quotes `text` and
// says which forms are accepted.
Result<std::vector<uint64_t>> ParseSizes(std::string_view text);

struct CommBenchOptions {
  BenchOp op = BenchOp::kAllreduce;
  DataType type = DataType::kF32;
  ReduceOp redop = ReduceOp::kSum;
  std::vector<uint64_t> sizes{1 << 20};  // bytes of one rank's buffer, e.g. from ParseSizes
  int iters = 20;
  int warmup = 5;
  Algorithm algorithm = Algorithm::kAuto;
  // Called on every rank when the timed iterations of a size begin (progress; tests use it
  // to know the ranks are inside the loop).
  std::function<void(uint64_t size_bytes)> on_timing_start;
  // Test only: called on every rank after timed iteration `iteration` (0-based) of a size
  // returns, before its result is checked, with that result; a test corrupts it to show
  // that the check catches a wrong timed result. Leave empty outside tests.
  std::function<void(uint64_t size_bytes, int iteration, std::span<char> result)>
      after_timed_iteration_for_test;
};

// Random positions checked per sampled timed iteration (the first and last element come on
// top of these).
inline constexpr int kCommBenchSamples = 16;

struct CommBenchRow {
  uint64_t size_bytes = 0;
  uint64_t count = 0;
  std::string type;
  std::string redop;  // empty for operations without one
  double time_us = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  uint64_t wrong = 0;    // failed element comparisons, over all ranks (see Checking above)
  uint64_t checked = 0;  // element comparisons, over all ranks
};

// INVALID_ARGUMENT naming the size and the type when a size of `options` holds no element of
// its type, or (allgather, reduce_scatter, alltoall) fewer elements than `ranks`: that
// size would measure nothing. Pure; RunCommBench checks it too, launchers call it first.
Status CheckCommBenchSizes(const CommBenchOptions& options, int ranks);

// Runs on every rank; every rank returns the same rows, one per size in options.sizes.
Result<std::vector<CommBenchRow>> RunCommBench(Communicator& comm, const CommBenchOptions& options);

// OK when no row has a wrong value; otherwise DATA_LOSS naming each such row (operation,
// size, type, how many of how many checked elements differed), so `railyard bench comm`
// exits non-zero and a script knows which rows to drop.
Status CheckCommBenchRows(const std::vector<CommBenchRow>& rows, BenchOp op);

// The nccl-tests-like table (header, one line per row, footer) and the JSON array.
std::string FormatCommBenchTable(const std::vector<CommBenchRow>& rows, const std::string& title);
std::string CommBenchJson(const std::vector<CommBenchRow>& rows);

}  // namespace railyard::comm
