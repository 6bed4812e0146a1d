// `railyard bench comm`: nccl-tests-style measurement of one collective over a range of
// sizes, run by every rank of a communicator.
//
// Conventions follow nccl-tests (doc/PERFORMANCE.md): size S is the bytes of one rank's
// buffer (for allgather and reduce_scatter the full, n-block buffer; for alltoall the send
// buffer); algbw = S / t with GB = 1e9 bytes; busbw = algbw x factor (allreduce 2(n-1)/n;
// allgather, reduce_scatter, alltoall (n-1)/n; broadcast 1). The time of a size is the
// slowest rank's mean over the timed iterations, after warm-up iterations. #wrong counts
// the elements, over all ranks, that differ from the expected result of one extra
// iteration on known data.
#pragma once

#include <functional>
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

// "4KiB:64MiB" (sizes doubling from the first to the last) or a single size "1MiB".
struct SizeRange {
  uint64_t min_bytes = 0;
  uint64_t max_bytes = 0;
};
Result<SizeRange> ParseSizeRange(std::string_view text);

struct CommBenchOptions {
  BenchOp op = BenchOp::kAllreduce;
  DataType type = DataType::kF32;
  ReduceOp redop = ReduceOp::kSum;
  SizeRange sizes{4 << 10, 64 << 20};
  int iters = 20;
  int warmup = 5;
  Algorithm algorithm = Algorithm::kAuto;
  // Called on every rank when the timed iterations of a size begin (progress; tests use it
  // to know the ranks are inside the loop).
  std::function<void(uint64_t size_bytes)> on_timing_start;
};

struct CommBenchRow {
  uint64_t size_bytes = 0;
  uint64_t count = 0;
  std::string type;
  std::string redop;  // empty for operations without one
  double time_us = 0;
  double algbw_gbps = 0;
  double busbw_gbps = 0;
  uint64_t wrong = 0;
};

// Runs on every rank; every rank returns the same rows.
Result<std::vector<CommBenchRow>> RunCommBench(Communicator& comm, const CommBenchOptions& options);

// The nccl-tests-like table (header, one line per row, footer) and the JSON array.
std::string FormatCommBenchTable(const std::vector<CommBenchRow>& rows, const std::string& title);
std::string CommBenchJson(const std::vector<CommBenchRow>& rows);

}  // namespace railyard::comm
