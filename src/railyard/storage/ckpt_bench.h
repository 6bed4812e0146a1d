// `railyard bench ckpt`: K successive checkpoints of random tensors written by R rank
// processes, then read back, with write and read throughput and (with async saves) the
// training thread's stall.
//
// Each rank is a forked process with its own CheckpointWriter; the ranks agree through a
// FileAgreement in the checkpoint directory, as ranks on a shared file system would. The
// state is `tensors` F32 tensors of global shape [R, E], rank r owning row r, so the total is
// `total_bytes`. Between the write and the read phase the page cache of the whole machine is
// dropped when running as root and drop_caches is set (otherwise the read may measure
// memory, which the result notes); the CLI says so before it starts.
//
// Figures: a checkpoint's save time is the slowest rank's Save (or SaveAsync + Wait);
// save_ms is the median over the K steps and write_gbps = total_bytes / that median. The
// stall is SaveAsync's duration (= the save for synchronous saves). read_gbps = total bytes /
// the slowest rank's time to open the latest checkpoint and read (and verify the checksums
// of) its rows into memory allocated beforehand; the bench's own comparison of the data with
// what was saved is not timed.
//
// Thread-safety: call from a single-threaded process (it forks).
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"

namespace railyard::storage {

struct CkptBenchOptions {
  int ranks = 2;
  uint64_t total_bytes = uint64_t{1} << 30;
  std::string dir;  // a directory to create; must not exist or be empty
  int steps = 3;
  bool async_save = false;
  // With async_save: how SaveAsync captures the state (AsyncSaverOptions::snapshot).
  bool write_protect = true;
  // With async_save: right after each SaveAsync the rank rewrites its whole state (an
  // optimizer step), and what that pass takes beyond the same pass without a save in flight
  // counts as stall too: the cost of write-protection faults, which a plain stall hides.
  bool touch = false;
  bool direct_io = false;
  // As root: sync and write 3 to /proc/sys/vm/drop_caches before the read phase. This evicts
  // every process's cached files, not only the benchmark's.
  bool drop_caches = true;
  // The writer's queue: WriterOptions::io_threads, extent_bytes and preallocate.
  int io_threads = 4;
  uint64_t extent_bytes = 8 << 20;
  bool preallocate = true;
  // Place the state 16 bytes past a page boundary (as a large malloc'ed array is) instead of
  // page-aligned (as pinned host memory is): O_DIRECT saves then copy every extent through an
  // aligned bounce buffer.
  bool unaligned_state = false;
  int tensors = 8;
  // Pause between dropping the page cache and the read phase. In a VM that hands freed memory
  // back to the host after a few seconds, a read into memory freed a moment ago runs faster
  // than one into memory given back; a comparison (bench/compare_storage.sh) waits the same
  // on both sides so that both read into memory in the same state.
  base::Duration read_settle{0};
  base::Duration timeout = std::chrono::minutes(10);  // for the whole run
};

struct CkptBenchResult {
  double write_gbps = 0;
  double read_gbps = 0;
  double save_ms = 0;
  double stall_ms = 0;
  // Median of the slowest rank's commit part of a save (agreement, manifest, rename,
  // `latest`): what remains of save_ms after the shard writes.
  double commit_ms = 0;
  // Async only: "protect" when every rank's every save was write-protected, else "copy".
  std::string snapshot;
  // With touch: median state-rewrite pass right after SaveAsync, and with no save in flight.
  double touch_ms = 0;
  double touch_base_ms = 0;
  uint64_t bytes = 0;  // per checkpoint
  int ranks = 0;
  int steps = 0;
  std::vector<std::string> notes;
};

// INVALID_ARGUMENT for bad options; the first rank failure (naming the rank) otherwise.
// Removes what it wrote under `dir` before returning.
Result<CkptBenchResult> RunCkptBench(const CkptBenchOptions& options);

// {"write_gbps", "read_gbps", "save_ms", "stall_ms", "bytes", "ranks", "steps", "commit_ms",
//  "notes"}, plus "snapshot" for async runs and "touch_ms", "touch_base_ms" with touch.
nlohmann::json ToJson(const CkptBenchResult& result);

}  // namespace railyard::storage
