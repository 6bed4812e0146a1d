// `railyard bench comm`: nccl-tests' measurement of one collective over a range of sizes,
// run by every rank of a communicator, printed in nccl-tests' own layout.
//
// Conventions follow nccl-tests 2.19.6 (NVIDIA/nccl-tests a0b82b2, src/common.cu, src/util.cu
// and the per-collective src/*.cu): a row's size is the bytes of the larger of one rank's send
// and receive buffers (for allgather, reduce_scatter and alltoall the full, n-block buffer);
// for those three each rank's block is rounded down to whole 16-byte multiples, and the
// count column is one block (elements per rank; per peer for alltoall), else the elements of
// the buffer. algbw = size / t with GB = 1e9 bytes; busbw = algbw x factor (allreduce
// 2(n-1)/n; allgather, reduce_scatter, alltoall (n-1)/n; broadcast 1). The time of a
// variant is the slowest rank's mean over the timed iterations, after warm-up iterations.
//
// Variants, as nccl-tests runs them: out-of-place (send and receive buffers apart) and
// in-place (allreduce send == recv; allgather send = recv + rank*block; reduce_scatter
// recv = send + rank*block; broadcast one buffer). Railyard's Broadcast has one buffer, so its
// out-of-place variant is the root copying its send buffer into its receive buffer and then
// broadcasting that (the copy is timed). Alltoall has no in-place form in Railyard
// (Communicator refuses send == recv): its in-place figures are absent.
//
// Checking. Inputs are small integers (exact in every type and reduction order), so every
// result element has one right bit pattern. Every rank checks its result:
//   - an untimed iteration before the warm-up, in full;
//   - timed iterations at kCommBenchSamples positions plus the first and last element:
//     positions that change with the iteration. Before the call, result positions that are
//     not inputs are poisoned (every byte inverted), so a stale value from an earlier
//     iteration cannot pass for a fresh one. Out of place: every timed iteration but the last
//     is sampled (positions differ between ranks too), the last is checked in full (the
//     whole result is poisoned before the first timed iteration, so an element no timed
//     iteration wrote is caught). In place: every timed iteration is sampled, at the same
//     positions on every rank, whose inputs are written before the call; the rest of the
//     buffer holds zeros during the timed loop (a fixed point of every reduction, so values
//     neither grow nor overflow), and an untimed iteration after the loop is checked in full.
// The sampled check costs a few dozen element reads and writes per iteration (well under a
// microsecond, against 10 us or more for the smallest collective); the full ones are outside
// the timed span. `wrong` counts the failed comparisons over all ranks, `checked` all
// comparisons.
#pragma once

#include <functional>
#include <optional>
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
  // Called on every rank when the timed iterations of a size begin (once per size, before
  // the out-of-place ones; progress; tests use it to know the ranks are inside the loop).
  std::function<void(uint64_t size_bytes)> on_timing_start;
  // Test only: called on every rank after timed iteration `iteration` (0-based) of a size
  // returns, in each variant, before its result is checked, with that result; a test
  // corrupts it to show that the check catches a wrong timed result. Leave empty outside
  // tests.
  std::function<void(uint64_t size_bytes, int iteration, std::span<char> result)>
      after_timed_iteration_for_test;
};

// Random positions checked per sampled timed iteration (the first and last element come on
// top of these).
inline constexpr int kCommBenchSamples = 16;

// nccl-tests' name of `type`: float, double, half, bfloat16, int32, int64, uint8.
std::string_view NcclTestsTypeName(DataType type);

// One variant (out-of-place or in-place) of one size.
struct CommBenchFigures {
  double time_us = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  uint64_t wrong = 0;    // failed element comparisons, over all ranks (see Checking above)
  uint64_t checked = 0;  // element comparisons, over all ranks
  int ranks_wrong = 0;   // ranks that saw a wrong value (nccl-tests counts these as errors)
};

struct CommBenchRow {
  uint64_t size_bytes = 0;  // nccl-tests' size column
  uint64_t count = 0;       // elements of that buffer (JSON "count")
  uint64_t nccl_count = 0;  // nccl-tests' count column: one block for allgather,
                            // reduce_scatter and alltoall, else `count`
  std::string type;         // Railyard's name ("f32"); the table prints NcclTestsTypeName
  std::string redop;        // empty for operations without one
  int root = -1;            // broadcast's root; -1 for the others, as nccl-tests prints
  CommBenchFigures out_of_place;
  std::optional<CommBenchFigures> in_place;  // nullopt for alltoall (no in-place form)
};

// INVALID_ARGUMENT naming the size and the type when a size of `options` holds no element of
// its type, or (allgather, reduce_scatter, alltoall) less than 16 bytes and one element per
// rank (nccl-tests' block rounding would leave nothing): that size would measure nothing.
// Pure; RunCommBench checks it too, launchers call it first.
Status CheckCommBenchSizes(const CommBenchOptions& options, int ranks);

// Runs on every rank; every rank returns the same rows, one per size in options.sizes.
Result<std::vector<CommBenchRow>> RunCommBench(Communicator& comm, const CommBenchOptions& options);

// OK when no row has a wrong value; otherwise DATA_LOSS naming each such row (operation,
// size, type, variant, how many of how many checked elements differed), so `railyard bench
// comm` exits non-zero and a script knows which rows to drop.
Status CheckCommBenchRows(const std::vector<CommBenchRow>& rows, BenchOp op);

// nccl-tests' table as its perf binaries print it after the device lines (src/util.cu:
// writeResultHeader, writeBenchmarkLinePreamble, writeBenchmarkLineBody, writeResultFooter,
// without timestamps or per-iteration columns): "#", the three header lines, one line per
// row, "Out of bounds values" (ranks x variants that saw a wrong value) and "Avg bus
// bandwidth" (mean busbw over every measured variant), then Railyard's check totals as a '#'
// line, "#", and "Collective test concluded: `program`". A variant not measured prints N/A in
// its four columns, so every row keeps 13 fields.
std::string FormatCommBenchTable(const std::vector<CommBenchRow>& rows, std::string_view program);

// The JSON array: per row size_bytes, count, type (Railyard's name), time_us, algbw_gbps,
// busbw_gbps, wrong and checked of the out-of-place variant, and in_place: the same five for
// the in-place variant, or null.
std::string CommBenchJson(const std::vector<CommBenchRow>& rows);

}  // namespace railyard::comm
