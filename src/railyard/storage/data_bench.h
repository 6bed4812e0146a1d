// The training-data benchmark behind `railyard bench data`: packed shards versus the small
// files they came from, read by the same number of concurrent readers in the same order.
//
// RunDataBench writes a synthetic set as one file per sample under <dir>/ry-bench-small
// (SyntheticSampleName paths, ~1000 files per directory), packs that directory into
// <dir>/ry-bench-packed, and then times two phases, each reading every sample of epoch 0
// exactly once with `readers` threads:
//   packed: reader r is a DataReader of rank r in a world of `readers` (its own prefetch
//           threads, checksums verified), consuming batches until it has its share;
//   small:  reader r opens, reads and closes the original file of each of the same samples
//           in the same order (global positions r, r + R, ... of the same seeded shuffle),
//           and verifies the same checksum, so both sides do the same work per byte.
// The speedup is packed samples/s over small-file samples/s.
//
// Page cache: when running as root (and drop_caches is set), the benchmark syncs and writes
// 3 to /proc/sys/vm/drop_caches before each phase, so both read from storage. Otherwise
// both phases read warm caches (the data was just written) and the result says so; a warm
// cache understates the gap on a real parallel file system, where every small-file open is
// a metadata round trip.
//
//   DataBenchOptions o;  o.dir = "/lustre/scratch/me";  o.samples = 100000;  o.readers = 8;
//   RY_ASSIGN_OR_RETURN(DataBenchResult r, RunDataBench(o));
//   fmt::print("{}\n", ToJson(r).dump());
//
// Thread-safety: RunDataBench may run concurrently with itself on different directories.
#pragma once

#include <cstdint>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "railyard/base/status.h"

namespace railyard::storage {

struct DataBenchOptions {
  std::string dir;  // scratch directory (created); the two data sets go below it
  uint64_t samples = 100000;
  uint64_t min_bytes = 1024;
  uint64_t max_bytes = 4096;
  uint64_t seed = 1;
  int readers = 4;             // concurrent readers in both phases
  size_t batch = 64;           // DataReader batch
  size_t prefetch = 4;         // DataReader prefetch depth (batches)
  int threads_per_reader = 1;  // DataReader prefetch threads per reader
  uint64_t shard_bytes = 256ull << 20;
  bool drop_caches = true;  // when root: drop the page cache before each phase
  bool keep = false;        // keep the generated data sets afterwards
  // Optional: called with a short line as each stage starts ("writing 100000 small files").
  std::function<void(std::string_view)> progress;
};

struct DataBenchPhase {
  uint64_t samples = 0;
  uint64_t bytes = 0;
  double seconds = 0;
  double samples_per_s = 0;
  double bytes_per_s = 0;
};

struct DataBenchResult {
  uint64_t samples = 0;
  uint64_t bytes = 0;  // payload bytes of one epoch
  uint64_t shards = 0;
  int readers = 0;
  double write_small_seconds = 0;  // writing the small files
  double pack_seconds = 0;         // packing them
  DataBenchPhase packed;
  DataBenchPhase small;
  double speedup = 0;  // packed.samples_per_s / small.samples_per_s
  bool caches_dropped = false;
  std::string cache_note;  // why the caches were (not) dropped
};

// Runs the benchmark described above. Errors: INVALID_ARGUMENT for bad options (naming the
// field); the pack's and readers' errors (a DATA_LOSS here means the storage corrupts data).
// The generated data is removed afterwards unless options.keep, also on error.
Result<DataBenchResult> RunDataBench(const DataBenchOptions& options);

// {"samples", "bytes", "shards", "readers", "write_small_s", "pack_s",
//  "packed": {"samples", "bytes", "seconds", "samples_per_s", "mb_per_s"}, "small": {same},
//  "speedup", "caches": "dropped" | "warm", "cache_note"}. MB are 10^6 bytes.
nlohmann::json ToJson(const DataBenchResult& result);

}  // namespace railyard::storage
