// The nccl-tests adapter: runs NVIDIA's all_reduce_perf where it is installed and reads its
// result table into CollectiveFigures, for the collective.nccl_tests check.
//
// GPU collectives belong to NCCL (../DESIGN.md); Railyard does not reimplement them but drives
// nccl-tests and reads what it prints. The table layout is nccl-tests 2.19.6's (src/util.cu;
// comm/bench.h prints the same for `railyard bench comm`): lines starting with '#' are
// comments, every other non-empty line is a row of 13 fields
//   size count type redop root | time algbw busbw #wrong (out of place) | the same in place
// with time in microseconds and bandwidths in GB/s (1e9 bytes); a variant not measured prints
// N/A. "# Out of bounds values : N OK|FAILED" and "# Avg bus bandwidth : X" close it.
//
//   RY_ASSIGN_OR_RETURN(NcclTestsRun run, RunNcclTests({.deadline = Deadline::After(60s)}));
//
// When all_reduce_perf is not installed, RunNcclTests returns NOT_FOUND with the message
// kNcclTestsNotInstalled (or naming the explicit path that is not there): the check reports
// SKIPPED with it, never FAIL.
//
// Thread-safety: free functions.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"
#include "railyard/validate/report.h"

namespace railyard::validate {

inline constexpr std::string_view kNcclTestsNotInstalled =
    "nccl-tests not installed (all_reduce_perf not on PATH)";

struct NcclTestsOptions {
  // The all_reduce_perf binary; empty: looked up on PATH.
  std::string binary;
  // Put before the binary, for multi-host runs ({"mpirun", "-np", "16", "--host", ...} or
  // {"srun", "-N", "2"}); empty: the binary runs alone (the GPUs of this host).
  std::vector<std::string> launcher;
  // The binary's arguments; default: 8 B to 128 MiB doubling, every GPU of the host, with
  // result checking (nccl-tests' -c 1).
  std::vector<std::string> args = {"-b", "8", "-e", "128M", "-f", "2", "-c", "1"};
  // GPUs per process (nccl-tests' -g), appended to args when above 0 and args hold no -g:
  // the profile's GPU count for a run over one host's GPUs. nccl-tests' own default is 1,
  // which alone moves nothing between GPUs.
  int gpus = 0;
  base::Deadline deadline = base::Deadline::Never();
};

struct NcclTestsRun {
  std::string command;                     // as run, for reports
  std::vector<CollectiveFigure> figures;   // out-of-place, one per row, in printed order
  std::vector<CollectiveFigure> in_place;  // in-place, where measured (may be empty)
  uint64_t wrong = 0;                      // #wrong summed over rows and variants
  double avg_busbw_bytes_per_s = 0;        // "# Avg bus bandwidth", 0 when absent
  bool out_of_bounds_ok = true;            // "# Out of bounds values : N OK"
};

// The path of all_reduce_perf: `explicit_path` when given and executable, else PATH's.
// NOT_FOUND with kNcclTestsNotInstalled, or naming the explicit path, otherwise.
Result<std::string> FindAllReducePerf(std::string_view explicit_path = {});

// Parses an nccl-tests perf binary's output (see the header comment). INVALID_ARGUMENT naming
// the line number and quoting the line for a row that is not 13 fields or holds a figure
// that is not a number, and when no row is present at all.
Result<NcclTestsRun> ParseNcclTestsOutput(std::string_view text);

// Finds the binary, runs it (with options.launcher) until options.deadline and parses its
// output. NOT_FOUND as FindAllReducePerf; DEADLINE_EXCEEDED naming the command when it runs
// past the deadline (it is killed); INTERNAL with the command's exit and last stderr line
// when it exits non-zero; parse errors as ParseNcclTestsOutput.
Result<NcclTestsRun> RunNcclTests(const NcclTestsOptions& options);

}  // namespace railyard::validate
