#include "railyard/storage/data_index.h"

#include <bit>
#include <cstring>
#include <nlohmann/json.hpp>
#include <utility>

#include "railyard/base/checksum.h"
#include "railyard/base/config.h"
#include "railyard/storage/fs_util.h"

namespace railyard::storage {
namespace {

// The index stores integers in host order; every platform Railyard targets is little-endian,
// and the format says little-endian, so a big-endian build must not silently write otherwise.
static_assert(std::endian::native == std::endian::little, "index.bin is little-endian");
static_assert(sizeof(DataSampleEntry) == kDataRecordBytes, "entry layout is the on-disk layout");

constexpr char kMagic[8] = {'R', 'Y', 'D', 'A', 'T', 'A', 'I', 'X'};

uint64_t Align8(uint64_t n) { return (n + 7) & ~uint64_t{7}; }

}  // namespace

std::string DataShardFileName(uint64_t shard) { return fmt::format("shard-{:05d}.bin", shard); }

DatasetIndex::DatasetIndex(std::vector<DataShardInfo> shards, std::vector<DataSampleEntry> entries,
                           std::string names_blob, std::string source)
    : shards_(std::move(shards)),
      entries_(std::move(entries)),
      names_(std::move(names_blob)),
      source_(std::move(source)) {
  for (const auto& e : entries_) total_bytes_ += e.length;
  BuildNameOffsets();
}

void DatasetIndex::BuildNameOffsets() {
  name_offsets_.clear();
  if (names_.empty()) return;
  name_offsets_.reserve(entries_.size());
  uint64_t at = 0;
  for (const auto& e : entries_) {
    name_offsets_.push_back(at);
    at += e.name_length;
  }
}

std::string_view DatasetIndex::name(uint64_t i) const {
  if (name_offsets_.empty()) return {};
  return std::string_view(names_).substr(name_offsets_[i], entries_[i].name_length);
}

std::string DatasetIndex::Serialize() const {
  nlohmann::json shards = nlohmann::json::array();
  for (const auto& s : shards_) {
    shards.push_back({{"file", s.file}, {"bytes", s.bytes}, {"samples", s.samples}});
  }
  const nlohmann::json header = {{"format", "railyard-packed-data"},
                                 {"version", kDataFormatVersion},
                                 {"samples", entries_.size()},
                                 {"bytes", total_bytes_},
                                 {"record_bytes", kDataRecordBytes},
                                 {"names_bytes", names_.size()},
                                 {"source", source_},
                                 {"shards", shards}};
  const std::string text = header.dump();
  std::string out;
  out.reserve(Align8(16 + text.size()) + entries_.size() * kDataRecordBytes +
              Align8(names_.size()) + 8);
  out.append(kMagic, sizeof(kMagic));
  const uint64_t header_len = text.size();
  out.append(reinterpret_cast<const char*>(&header_len), 8);
  out.append(text);
  out.resize(Align8(out.size()), '\0');
  out.append(reinterpret_cast<const char*>(entries_.data()), entries_.size() * kDataRecordBytes);
  out.append(names_);
  out.resize(Align8(out.size()), '\0');
  const uint64_t sum = base::Xxh3(out);
  out.append(reinterpret_cast<const char*>(&sum), 8);
  return out;
}

Result<DatasetIndex> DatasetIndex::Load(const std::string& dir, Fs* fs) {
  if (fs == nullptr) fs = DefaultFs();
  if (!fs->Exists(dir)) return NotFound("dataset directory '{}' does not exist", dir);
  if (!fs->ListDir(dir).ok()) {
    return InvalidArgument("'{}' is not a packed dataset: not a directory", dir);
  }
  const std::string path = fmt::format("{}/{}", dir, kDataIndexFile);
  Result<std::string> read = ReadWholeFile(*fs, path);
  if (read.status().code() == StatusCode::kNotFound) {
    return InvalidArgument(
        "'{}' is not a packed dataset: it has no {} (an interrupted pack "
        "leaves shards without an index; pack again)",
        dir, kDataIndexFile);
  }
  RY_RETURN_IF_ERROR(read.status());
  const std::string& bytes = *read;
  if (bytes.size() < 24 || std::memcmp(bytes.data(), kMagic, 8) != 0) {
    return DataLoss("index '{}' is not a railyard data index ({} bytes, no 'RYDATAIX' magic)", path,
                    bytes.size());
  }
  uint64_t trailer = 0, header_len = 0;
  std::memcpy(&trailer, bytes.data() + bytes.size() - 8, 8);
  const uint64_t sum = base::Xxh3(bytes.data(), bytes.size() - 8);
  if (sum != trailer) {
    return DataLoss("index '{}' is corrupt: checksum {} but its trailer says {}", path,
                    base::ChecksumHex(sum), base::ChecksumHex(trailer));
  }
  std::memcpy(&header_len, bytes.data() + 8, 8);
  if (header_len > bytes.size() - 24) {
    return DataLoss("index '{}': header length {} exceeds the file ({} bytes)", path, header_len,
                    bytes.size());
  }
  RY_ASSIGN_OR_RETURN(nlohmann::json header,
                      base::ParseJson(std::string_view(bytes).substr(16, header_len), path));
  base::FieldContext ctx(path);
  if (!header.is_object()) return ctx.Error("the header is not a JSON object");
  RY_ASSIGN_OR_RETURN(std::string format, base::RequireString(header, "format", ctx));
  if (format != "railyard-packed-data") {
    return ctx.Child("format").Error(
        fmt::format("expected 'railyard-packed-data', got '{}'", format));
  }
  RY_ASSIGN_OR_RETURN(int64_t version, base::RequireInt(header, "version", ctx));
  if (version < 1 || version > kDataFormatVersion) {
    return InvalidArgument("'{}': format version {} is not one this railyard understands (1-{})",
                           path, version, kDataFormatVersion);
  }
  RY_ASSIGN_OR_RETURN(uint64_t samples, base::RequireUint64(header, "samples", ctx));
  RY_ASSIGN_OR_RETURN(uint64_t total_bytes, base::RequireUint64(header, "bytes", ctx));
  RY_ASSIGN_OR_RETURN(uint64_t record_bytes, base::RequireUint64(header, "record_bytes", ctx));
  RY_ASSIGN_OR_RETURN(uint64_t names_bytes, base::RequireUint64(header, "names_bytes", ctx));
  RY_ASSIGN_OR_RETURN(std::string source, base::OptionalString(header, "source", "", ctx));
  RY_ASSIGN_OR_RETURN(const nlohmann::json* shard_list, base::RequireArray(header, "shards", ctx));
  if (record_bytes != kDataRecordBytes) {
    return ctx.Child("record_bytes").Error(fmt::format("expected {}", kDataRecordBytes));
  }
  if (samples == 0) return ctx.Child("samples").Error("a dataset needs at least one sample");
  // Bound the counts by the file size before multiplying, so nothing overflows.
  const uint64_t table_at = Align8(16 + header_len);
  if (samples > bytes.size() / kDataRecordBytes || names_bytes > bytes.size() ||
      table_at + samples * kDataRecordBytes + Align8(names_bytes) + 8 != bytes.size()) {
    return DataLoss("index '{}': {} bytes do not hold {} samples and {} name bytes", path,
                    bytes.size(), samples, names_bytes);
  }

  DatasetIndex index;
  index.dir_ = dir;
  index.source_ = std::move(source);
  index.id_ = trailer;
  for (size_t s = 0; s < shard_list->size(); ++s) {
    const nlohmann::json& js = (*shard_list)[s];
    base::FieldContext sctx = ctx.Child("shards").Index(s);
    if (!js.is_object()) return sctx.Error("expected an object");
    DataShardInfo info;
    RY_ASSIGN_OR_RETURN(info.file, base::RequireString(js, "file", sctx));
    RY_ASSIGN_OR_RETURN(info.bytes, base::RequireUint64(js, "bytes", sctx));
    RY_ASSIGN_OR_RETURN(info.samples, base::RequireUint64(js, "samples", sctx));
    // Fixed names keep a crafted index from pointing outside the dataset directory.
    if (info.file != DataShardFileName(s)) {
      return sctx.Child("file").Error(
          fmt::format("expected '{}', got '{}'", DataShardFileName(s), info.file));
    }
    index.shards_.push_back(std::move(info));
  }
  index.entries_.resize(samples);
  std::memcpy(index.entries_.data(), bytes.data() + table_at, samples * kDataRecordBytes);
  index.names_ = bytes.substr(table_at + samples * kDataRecordBytes, names_bytes);

  std::vector<uint64_t> per_shard(index.shards_.size(), 0);
  uint64_t name_sum = 0;
  for (uint64_t i = 0; i < samples; ++i) {
    const DataSampleEntry& e = index.entries_[i];
    if (e.shard >= index.shards_.size()) {
      return DataLoss("index '{}': sample {} names shard {} of {}", path, i, e.shard,
                      index.shards_.size());
    }
    const uint64_t shard_bytes = index.shards_[e.shard].bytes;
    if (e.offset > shard_bytes || e.length > shard_bytes - e.offset) {
      return DataLoss("index '{}': sample {} at offset {} length {} lies outside {} ({} bytes)",
                      path, i, e.offset, e.length, index.shards_[e.shard].file, shard_bytes);
    }
    per_shard[e.shard] += 1;
    name_sum += e.name_length;
    index.total_bytes_ += e.length;
  }
  if (name_sum != names_bytes) {
    return DataLoss("index '{}': sample names take {} bytes, header says {}", path, name_sum,
                    names_bytes);
  }
  if (index.total_bytes_ != total_bytes) {
    return DataLoss("index '{}': samples hold {} bytes, header says {}", path, index.total_bytes_,
                    total_bytes);
  }
  for (size_t s = 0; s < per_shard.size(); ++s) {
    if (per_shard[s] != index.shards_[s].samples) {
      return DataLoss("index '{}': {} holds {} samples, header says {}", path,
                      index.shards_[s].file, per_shard[s], index.shards_[s].samples);
    }
  }
  index.BuildNameOffsets();
  return index;
}

}  // namespace railyard::storage
