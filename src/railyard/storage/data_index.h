// The index of a packed dataset: which shard and offset hold each sample, and its checksum.
//
// A dataset directory holds `shard-00000.bin`, `shard-00001.bin`, ... (sample bytes back to
// back) and `index.bin` (binary table with a JSON header; the layout is in docs/formats.md,
// "Packed training data"). The packer (data_pack.h) writes the index last with
// WriteFileAtomic: it is the commit point, and a directory without one is not a dataset.
//
//   RY_ASSIGN_OR_RETURN(DatasetIndex index, DatasetIndex::Load("/data/packed"));
//   const DataSampleEntry& e = index.entry(i);   // shard e.shard, bytes [e.offset, +e.length)
//
// Thread-safety: a DatasetIndex is immutable after Load and may be shared between threads.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/storage/fs.h"

namespace railyard::storage {

inline constexpr int kDataFormatVersion = 1;
inline constexpr int64_t kDataRecordBytes = 32;
inline constexpr std::string_view kDataIndexFile = "index.bin";

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

class DatasetIndex {
 public:
  // Reads `<dir>/index.bin` through `fs` (not owned; null: DefaultFs()) and checks it
  // completely: magic, trailing checksum, header fields, every entry inside its shard. Does
  // not open the shards (DataReader does). Errors: NOT_FOUND when `dir` does not exist;
  // INVALID_ARGUMENT "'<dir>' is not a packed dataset" when it has no index, or a format
  // version this build does not know; DATA_LOSS naming the index and what is wrong when it is
  // corrupt or truncated; the Fs's error when the index cannot be read.
  static Result<DatasetIndex> Load(const std::string& dir, Fs* fs = nullptr);

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

}  // namespace railyard::storage
