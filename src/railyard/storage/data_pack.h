// Packed training data: many small samples stored as a few large shard files plus an index.
//
// Millions of ranks-times-files opens choke a parallel file system's metadata server; a
// packed dataset turns them into reads at offsets of a few large files. A dataset directory
// holds `shard-00000.bin`, `shard-00001.bin`, ... (sample bytes back to back) and `index.bin`
// (binary table with a JSON header; the layout is in docs/formats.md, "Packed training
// data"). The index is written last with WriteFileAtomic and is the commit point: a
// directory without an index is not a dataset, whatever shards it holds.
//
//   PackOptions opts;  opts.shard_bytes = 256ull << 20;
//   RY_ASSIGN_OR_RETURN(PackStats st, PackDirectory("/data/raw", "/data/packed", opts));
//   RY_ASSIGN_OR_RETURN(DatasetIndex index, DatasetIndex::Load("/data/packed"));
//
// Samples keep the order they were packed in (directory input: files sorted by relative
// path, bytewise), so sample i is the i-th file. Synthetic sets (SyntheticSpec) derive each
// sample's size and bytes from (seed, index), so tests and benchmarks can check every byte.
//
// Thread-safety: free functions are safe to call concurrently on different output
// directories; one packer per output directory. A DatasetIndex is immutable after Load and
// may be shared between threads.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"

namespace railyard::storage {

inline constexpr int kDataFormatVersion = 1;
inline constexpr int64_t kDataRecordBytes = 32;
inline constexpr std::string_view kDataIndexFile = "index.bin";

// SplitMix64's output function: a bijective, well-mixing 64-bit hash. The synthetic data and
// the reader's shuffle both derive their randomness from it, so they need no library PRNG
// whose sequence could change between standard library versions.
uint64_t Mix64(uint64_t x);

// "shard-00042.bin" (at least five digits).
std::string DataShardFileName(uint64_t shard);

struct DataShardInfo {
  std::string file;  // name inside the dataset directory
  uint64_t bytes = 0;
  uint64_t samples = 0;
};

// One sample's place in the shards. 32 bytes on disk, the same layout in memory.
struct DataSampleEntry {
  uint64_t offset = 0;  // byte offset in the shard
  uint64_t length = 0;  // bytes
  uint64_t xxh3 = 0;    // XXH3-64 of the sample's bytes
  uint32_t shard = 0;
  uint32_t name_length = 0;  // bytes of this sample's name in the names blob (0: no name)
};

// Parameters of a generated data set: sample i has a size drawn uniformly from
// [min_bytes, max_bytes] and bytes from a PRNG stream, both seeded by (seed, i).
struct SyntheticSpec {
  uint64_t samples = 0;
  uint64_t min_bytes = 1024;
  uint64_t max_bytes = 4096;
  uint64_t seed = 0;
};

// INVALID_ARGUMENT when samples is 0 or above 2^40, min > max, or max above 1 GiB.
Status ValidateSyntheticSpec(const SyntheticSpec& spec);
uint64_t SyntheticSampleSize(const SyntheticSpec& spec, uint64_t index);
// Replaces *out with sample `index`'s bytes. Precondition: ValidateSyntheticSpec is OK.
void FillSyntheticSample(const SyntheticSpec& spec, uint64_t index, std::string* out);
// Relative path of sample `index` as WriteSyntheticFiles names it, e.g. "000012/000012345.bin":
// sorted paths give index order, and no directory holds more than 1000 files.
std::string SyntheticSampleName(uint64_t index);
// Writes every sample as its own file under `dir` (created), named SyntheticSampleName:
// the "many small files" form that PackDirectory turns back into sample order.
Status WriteSyntheticFiles(const SyntheticSpec& spec, const std::string& dir);

// The index of a packed dataset, loaded and validated.
class DatasetIndex {
 public:
  // Reads `<dir>/index.bin` and checks it completely: magic, trailing checksum, header
  // fields, every entry inside its shard. Does not open the shards (DataReader does).
  // Errors: NOT_FOUND when `dir` does not exist; INVALID_ARGUMENT "'<dir>' is not a packed
  // dataset" when it has no index, or a format version this build does not know; DATA_LOSS
  // naming the index and what is wrong when it is corrupt or truncated.
  static Result<DatasetIndex> Load(const std::string& dir);

  // Builds an index in memory (used by the packer). Preconditions: entries reference shards
  // in `shards`; names_blob is the concatenation of the entries' names in order.
  DatasetIndex(std::vector<DataShardInfo> shards, std::vector<DataSampleEntry> entries,
               std::string names_blob, std::string source);

  // The bytes of index.bin, with the trailing checksum.
  std::string Serialize() const;

  const std::string& dir() const { return dir_; }
  uint64_t num_samples() const { return entries_.size(); }
  uint64_t total_bytes() const { return total_bytes_; }
  const std::vector<DataShardInfo>& shards() const { return shards_; }
  const DataSampleEntry& entry(uint64_t i) const { return entries_[i]; }
  // Original relative path for directory input; empty for synthetic samples.
  std::string_view name(uint64_t i) const;
  // "dir" or "synthetic".
  const std::string& source() const { return source_; }
  // The index file's trailing checksum (XXH3 of everything before it): identifies the
  // dataset, so a position saved by a reader is only restored into the same dataset. Set by
  // Load; 0 for an index built in memory (Serialize's trailer holds it).
  uint64_t id() const { return id_; }

 private:
  DatasetIndex() = default;
  void BuildNameOffsets();

  std::string dir_;
  std::vector<DataShardInfo> shards_;
  std::vector<DataSampleEntry> entries_;
  std::string names_;
  std::vector<uint64_t> name_offsets_;  // start of name i in names_; empty when no names
  std::string source_;
  uint64_t total_bytes_ = 0;
  uint64_t id_ = 0;
};

struct PackOptions {
  // A shard is closed when the next sample would take it past this size (a sample larger
  // than this gets a shard of its own).
  uint64_t shard_bytes = 256ull << 20;
  // Replace a dataset already in the output directory. The old index is removed first, so
  // a crash in between leaves no dataset rather than a mix.
  bool overwrite = false;
  // Called after every 4096 samples and at the end with (samples done, total). Optional.
  std::function<void(uint64_t, uint64_t)> progress;
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
