// Packed training data: many small samples stored as a few large shard files plus an index.
//
// Millions of ranks-times-files opens choke a parallel file system's metadata server; a
// packed dataset turns them into reads at offsets of a few large files. The packer writes
// the shards (each to a temporary name, fsynced, renamed), fsyncs the directory, and writes
// the index (data_index.h) last with WriteFileAtomic: the index is the commit point, so a
// crash or a full disk at any moment leaves no dataset rather than a broken one.
//
//   PackOptions opts;  opts.shard_bytes = 256ull << 20;
//   RY_ASSIGN_OR_RETURN(PackStats st, PackDirectory("/data/raw", "/data/packed", opts));
//   RY_ASSIGN_OR_RETURN(DatasetIndex index, DatasetIndex::Load("/data/packed"));
//
// Samples keep the order they were packed in (directory input: files sorted by relative
// path, bytewise), so sample i is the i-th file. Synthetic sets (synthetic_data.h) derive
// each sample's size and bytes from (seed, index).
//
// The dataset is written through PackOptions::fs (a storage::Fs), so tests can fail any of
// its writes or pack into an in-memory Fs; the source directory of PackDirectory is read
// from the host file system.
//
// Thread-safety: safe to call concurrently on different output directories; one packer per
// output directory.
#pragma once

#include <cstdint>
#include <functional>
#include <string>

#include "railyard/base/status.h"
#include "railyard/storage/data_index.h"
#include "railyard/storage/fs.h"
#include "railyard/storage/synthetic_data.h"

namespace railyard::storage {

struct PackOptions {
  // A shard is closed when the next sample would take it past this size (a sample larger
  // than this gets a shard of its own).
  uint64_t shard_bytes = 256ull << 20;
  // Replace a dataset already in the output directory. The old index is removed first, so
  // a crash in between leaves no dataset rather than a mix.
  bool overwrite = false;
  // Called after every 4096 samples and at the end with (samples done, total). Optional.
  std::function<void(uint64_t, uint64_t)> progress;
  // Where the dataset is written. Not owned; null: DefaultFs().
  Fs* fs = nullptr;
};

struct PackStats {
  uint64_t samples = 0;
  uint64_t bytes = 0;
  uint64_t shards = 0;
  double seconds = 0;
  uint64_t dataset_id = 0;
};

// Packs every regular file under `src_dir` (recursively, symlinked directories not followed)
// into `out_dir` (created). Errors: NOT_FOUND for a missing src_dir; INVALID_ARGUMENT when it
// holds no files or out_dir lies inside it; ALREADY_EXISTS when out_dir holds a dataset and
// !overwrite; the OS error naming the file otherwise. Nothing is committed on error.
Result<PackStats> PackDirectory(const std::string& src_dir, const std::string& out_dir,
                                const PackOptions& options);

// Packs the generated set `spec` into `out_dir`; errors as PackDirectory and
// ValidateSyntheticSpec.
Result<PackStats> PackSynthetic(const SyntheticSpec& spec, const std::string& out_dir,
                                const PackOptions& options);

}  // namespace railyard::storage
