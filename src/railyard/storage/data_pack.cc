#include "railyard/storage/data_pack.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <system_error>
#include <utility>

#include "railyard/base/checksum.h"
#include "railyard/base/clock.h"
#include "railyard/base/config.h"
#include "railyard/base/files.h"
#include "railyard/storage/fs_util.h"

namespace railyard::storage {
namespace {

namespace fs = std::filesystem;
using base::UniqueFd;

// The index stores integers in host order; every platform Railyard targets is little-endian,
// and the format says little-endian, so a big-endian build must not silently write otherwise.
static_assert(std::endian::native == std::endian::little, "index.bin is little-endian");
static_assert(sizeof(DataSampleEntry) == kDataRecordBytes, "entry layout is the on-disk layout");

constexpr char kMagic[8] = {'R', 'Y', 'D', 'A', 'T', 'A', 'I', 'X'};
constexpr uint64_t kMaxSyntheticSamples = uint64_t{1} << 40;
constexpr uint64_t kMaxSyntheticBytes = uint64_t{1} << 30;
constexpr uint64_t kProgressEvery = 4096;

uint64_t Align8(uint64_t n) { return (n + 7) & ~uint64_t{7}; }

std::string JoinPath(const std::string& dir, std::string_view name) {
  return fmt::format("{}/{}", dir, name);
}

std::atomic<uint64_t> temp_counter{0};

// One shard being written: buffered appends into a temporary file, then fsync and rename to
// the final name. An unfinished shard's temporary file is removed on destruction.
class ShardWriter {
 public:
  ShardWriter() = default;
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;
  ~ShardWriter() {
    if (fd_.valid()) {
      fd_.Reset();
      ::unlink(tmp_.c_str());
    }
  }

  Status Open(const std::string& dir, uint64_t shard) {
    final_ = JoinPath(dir, DataShardFileName(shard));
    tmp_ = fmt::format("{}.tmp.{}.{}", final_, ::getpid(), temp_counter.fetch_add(1));
    fd_ = UniqueFd(::open(tmp_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (!fd_.valid()) return ErrnoStatus(errno, fmt::format("cannot create shard '{}'", tmp_));
    bytes_ = 0;
    buffer_.clear();
    return Status::Ok();
  }

  Status Append(std::string_view data) {
    bytes_ += data.size();
    if (buffer_.size() + data.size() > kBufferBytes) RY_RETURN_IF_ERROR(Flush());
    if (data.size() >= kBufferBytes) return base::WriteAll(fd_.get(), data, Where());
    buffer_.append(data);
    return Status::Ok();
  }

  Status Finish() {
    RY_RETURN_IF_ERROR(Flush());
    if (::fsync(fd_.get()) != 0) return ErrnoStatus(errno, fmt::format("fsync of {}", Where()));
    fd_.Reset();
    if (::rename(tmp_.c_str(), final_.c_str()) != 0) {
      Status st = ErrnoStatus(errno, fmt::format("rename '{}' -> '{}'", tmp_, final_));
      ::unlink(tmp_.c_str());
      return st;
    }
    return Status::Ok();
  }

  bool open() const { return fd_.valid(); }
  uint64_t bytes() const { return bytes_; }

 private:
  static constexpr size_t kBufferBytes = 4 << 20;

  std::string Where() const { return fmt::format("shard '{}'", tmp_); }
  Status Flush() {
    if (buffer_.empty()) return Status::Ok();
    Status st = base::WriteAll(fd_.get(), buffer_, Where());
    buffer_.clear();
    return st;
  }

  UniqueFd fd_;
  std::string tmp_, final_, buffer_;
  uint64_t bytes_ = 0;
};

// Produces sample i: its bytes into *data, its name into *name (left empty for none).
using SampleSource = std::function<Status(uint64_t i, std::string* data, std::string* name)>;

// Removes "shard-<n>.bin" files with n >= first_unused: leftovers of an earlier, larger
// pack that no index will reference.
void RemoveExtraShards(const std::string& dir, uint64_t first_unused) {
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    std::string name = e.path().filename().string();
    if (name.size() < 11 || name.rfind("shard-", 0) != 0 || !name.ends_with(".bin")) continue;
    std::string digits = name.substr(6, name.size() - 10);
    auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), is_digit)) continue;
    if (digits.size() > 18 || std::stoull(digits) < first_unused) continue;
    ::unlink(e.path().c_str());
  }
}

Result<PackStats> PackSamples(uint64_t count, const SampleSource& source, std::string source_text,
                              const std::string& out_dir, const PackOptions& options) {
  if (options.shard_bytes == 0) return InvalidArgument("shard size must be greater than 0");
  const auto start = base::Clock::now();
  RY_RETURN_IF_ERROR(base::MakeDirs(out_dir));
  RemoveStaleTempFiles(*DefaultFs(), out_dir).status().IgnoreError();  // best effort
  const std::string index_path = JoinPath(out_dir, kDataIndexFile);
  if (base::PathExists(index_path)) {
    if (!options.overwrite) {
      return AlreadyExists(
          "'{}' already holds a packed dataset; remove it or choose another "
          "directory",
          out_dir);
    }
    // Uncommit first: from here on the directory is not a dataset until the new index lands.
    if (::unlink(index_path.c_str()) != 0) {
      return ErrnoStatus(errno, fmt::format("cannot remove old index '{}'", index_path));
    }
    RY_RETURN_IF_ERROR(base::FsyncDirectory(out_dir));
  }

  std::vector<DataShardInfo> shards;
  std::vector<DataSampleEntry> entries;
  entries.reserve(count);
  std::string names, data, name;
  ShardWriter writer;
  uint64_t total = 0;
  for (uint64_t i = 0; i < count; ++i) {
    data.clear();
    name.clear();
    RY_RETURN_IF_ERROR(source(i, &data, &name));
    if (name.size() > UINT32_MAX) return InvalidArgument("sample {}: name too long", i);
    if (writer.open() && writer.bytes() > 0 && writer.bytes() + data.size() > options.shard_bytes) {
      RY_RETURN_IF_ERROR(writer.Finish());
    }
    if (!writer.open()) {
      RY_RETURN_IF_ERROR(writer.Open(out_dir, shards.size()));
      shards.push_back({DataShardFileName(shards.size()), 0, 0});
    }
    DataSampleEntry e;
    e.offset = writer.bytes();
    e.length = data.size();
    e.xxh3 = base::Xxh3(data);
    e.shard = static_cast<uint32_t>(shards.size() - 1);
    e.name_length = static_cast<uint32_t>(name.size());
    RY_RETURN_IF_ERROR(writer.Append(data));
    shards.back().bytes += data.size();
    shards.back().samples += 1;
    total += data.size();
    entries.push_back(e);
    names.append(name);
    if (options.progress && (i + 1) % kProgressEvery == 0) options.progress(i + 1, count);
  }
  if (writer.open()) RY_RETURN_IF_ERROR(writer.Finish());
  RemoveExtraShards(out_dir, shards.size());
  // The shards' renames must be durable before the index that names them.
  RY_RETURN_IF_ERROR(base::FsyncDirectory(out_dir));

  PackStats stats;
  stats.samples = count;
  stats.bytes = total;
  stats.shards = shards.size();
  DatasetIndex index(std::move(shards), std::move(entries), std::move(names),
                     std::move(source_text));
  std::string bytes = index.Serialize();
  RY_RETURN_IF_ERROR(base::WriteFileAtomic(index_path, bytes));
  std::memcpy(&stats.dataset_id, bytes.data() + bytes.size() - 8, 8);
  if (options.progress) options.progress(count, count);
  stats.seconds = base::SecondsSince(start);
  return stats;
}

// Reads a whole regular file into *out, reusing its capacity.
Status ReadWholeFile(const std::string& path, std::string* out) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (!fd.valid()) return ErrnoStatus(errno, fmt::format("cannot open '{}'", path));
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, fmt::format("stat of '{}'", path));
  out->resize(static_cast<size_t>(st.st_size));
  size_t got = 0;
  for (;;) {
    if (got == out->size()) out->resize(std::max<size_t>(4096, out->size() * 2));
    ssize_t n = ::read(fd.get(), out->data() + got, out->size() - got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, fmt::format("read of '{}'", path));
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  out->resize(got);
  return Status::Ok();
}

bool IsInside(const fs::path& inner, const fs::path& outer) {
  auto o = outer.begin(), i = inner.begin();
  for (; o != outer.end(); ++o, ++i) {
    if (i == inner.end() || *i != *o) return false;
  }
  return true;
}

}  // namespace

uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

std::string DataShardFileName(uint64_t shard) { return fmt::format("shard-{:05d}.bin", shard); }

// ---- synthetic samples ----

Status ValidateSyntheticSpec(const SyntheticSpec& spec) {
  if (spec.samples == 0 || spec.samples > kMaxSyntheticSamples) {
    return InvalidArgument("synthetic samples must be in 1..2^40, got {}", spec.samples);
  }
  if (spec.min_bytes > spec.max_bytes) {
    return InvalidArgument("synthetic min size {} is larger than max size {}", spec.min_bytes,
                           spec.max_bytes);
  }
  if (spec.max_bytes > kMaxSyntheticBytes) {
    return InvalidArgument("synthetic max size {} is above the 1 GiB limit", spec.max_bytes);
  }
  return Status::Ok();
}

uint64_t SyntheticSampleSize(const SyntheticSpec& spec, uint64_t index) {
  const uint64_t span = spec.max_bytes - spec.min_bytes + 1;  // modulo bias < 2^-33: harmless
  return spec.min_bytes + Mix64(spec.seed ^ Mix64(index)) % span;
}

void FillSyntheticSample(const SyntheticSpec& spec, uint64_t index, std::string* out) {
  const uint64_t size = SyntheticSampleSize(spec, index);
  out->resize(size);
  // A counter-mode stream: word w is Mix64(key + w), so any sample is generated on its own.
  const uint64_t key = Mix64(Mix64(spec.seed + 0x5851f42d4c957f2dull) ^ index);
  char* p = out->data();
  uint64_t w = 0;
  for (uint64_t at = 0; at < size; at += 8, ++w) {
    const uint64_t word = Mix64(key + w);
    std::memcpy(p + at, &word, std::min<uint64_t>(8, size - at));
  }
}

std::string SyntheticSampleName(uint64_t index) {
  return fmt::format("{:06d}/{:09d}.bin", index / 1000, index);
}

Status WriteSyntheticFiles(const SyntheticSpec& spec, const std::string& dir) {
  RY_RETURN_IF_ERROR(ValidateSyntheticSpec(spec));
  std::string data;
  for (uint64_t i = 0; i < spec.samples; ++i) {
    const std::string path = JoinPath(dir, SyntheticSampleName(i));
    if (i % 1000 == 0) RY_RETURN_IF_ERROR(base::MakeDirs(fs::path(path).parent_path()));
    FillSyntheticSample(spec, i, &data);
    // No fsync: these are benchmark and test inputs, cheap to regenerate.
    UniqueFd fd(::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644));
    if (!fd.valid()) return ErrnoStatus(errno, fmt::format("cannot create '{}'", path));
    RY_RETURN_IF_ERROR(base::WriteAll(fd.get(), data, path));
  }
  return Status::Ok();
}

// ---- the index ----

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

Result<DatasetIndex> DatasetIndex::Load(const std::string& dir) {
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) {
    if (!fs::exists(dir, ec)) return NotFound("dataset directory '{}' does not exist", dir);
    return InvalidArgument("'{}' is not a packed dataset: not a directory", dir);
  }
  const std::string path = JoinPath(dir, kDataIndexFile);
  Result<std::string> read = base::ReadFile(path);
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

// ---- packing ----

Result<PackStats> PackDirectory(const std::string& src_dir, const std::string& out_dir,
                                const PackOptions& options) {
  std::error_code ec;
  if (!fs::is_directory(src_dir, ec)) {
    if (!fs::exists(src_dir, ec)) return NotFound("source directory '{}' does not exist", src_dir);
    return InvalidArgument("source '{}' is not a directory", src_dir);
  }
  const fs::path src_abs = fs::weakly_canonical(src_dir, ec);
  const fs::path out_abs = fs::weakly_canonical(out_dir, ec);
  if (!ec && IsInside(out_abs, src_abs)) {
    return InvalidArgument(
        "output '{}' lies inside the source '{}'; choose a directory outside "
        "it",
        out_dir, src_dir);
  }
  std::vector<std::string> files;
  fs::recursive_directory_iterator it(src_dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec)) continue;  // directories, devices, dangling links
    files.push_back(fs::relative(it->path(), src_dir, type_ec).generic_string());
  }
  if (ec) return ErrnoStatus(ec.value(), fmt::format("cannot list '{}'", src_dir));
  if (files.empty()) return InvalidArgument("source '{}' holds no files to pack", src_dir);
  std::sort(files.begin(), files.end());  // bytewise: pack order independent of readdir order

  SampleSource source = [&](uint64_t i, std::string* data, std::string* name) {
    *name = files[i];
    return ReadWholeFile(JoinPath(src_dir, files[i]), data);
  };
  return PackSamples(files.size(), source, "dir", out_dir, options);
}

Result<PackStats> PackSynthetic(const SyntheticSpec& spec, const std::string& out_dir,
                                const PackOptions& options) {
  RY_RETURN_IF_ERROR(ValidateSyntheticSpec(spec));
  SampleSource source = [&](uint64_t i, std::string* data, std::string*) {
    FillSyntheticSample(spec, i, data);
    return Status::Ok();
  };
  std::string text = fmt::format("synthetic samples={} min_bytes={} max_bytes={} seed={}",
                                 spec.samples, spec.min_bytes, spec.max_bytes, spec.seed);
  return PackSamples(spec.samples, source, std::move(text), out_dir, options);
}

}  // namespace railyard::storage
