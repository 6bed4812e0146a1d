#include "railyard/storage/data_pack.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <memory>
#include <system_error>
#include <utility>
#include <vector>

#include "railyard/base/checksum.h"
#include "railyard/base/clock.h"
#include "railyard/base/files.h"
#include "railyard/storage/fs_util.h"

namespace railyard::storage {
namespace {

namespace stdfs = std::filesystem;

constexpr uint64_t kProgressEvery = 4096;

std::string JoinPath(const std::string& dir, std::string_view name) {
  return fmt::format("{}/{}", dir, name);
}

// One shard being written: buffered appends into a temporary file, then fsync and rename to
// the final name. An unfinished shard's temporary file is removed on destruction.
class ShardWriter {
 public:
  explicit ShardWriter(Fs* fs) : fs_(fs) {}
  ShardWriter(const ShardWriter&) = delete;
  ShardWriter& operator=(const ShardWriter&) = delete;
  ~ShardWriter() {
    if (file_ != nullptr) {
      file_.reset();
      fs_->RemoveFile(tmp_).IgnoreError();  // best effort; a later pack removes what is left
    }
  }

  Status Open(const std::string& dir, uint64_t shard) {
    final_ = JoinPath(dir, DataShardFileName(shard));
    tmp_ = base::TempPathFor(final_);
    // data_file: a layout hook may stripe the shard (Lustre), as it does checkpoint shards.
    RY_ASSIGN_OR_RETURN(file_, fs_->NewWritableFile(tmp_, {.data_file = true}));
    bytes_ = 0;
    buffer_.clear();
    return Status::Ok();
  }

  Status Append(std::string_view data) {
    bytes_ += data.size();
    if (buffer_.size() + data.size() > kBufferBytes) RY_RETURN_IF_ERROR(Flush());
    if (data.size() >= kBufferBytes) return file_->Write(data);
    buffer_.append(data);
    return Status::Ok();
  }

  // Durable under the final name once the directory is fsynced (the packer does that once,
  // for all shards, before it writes the index).
  Status Finish() {
    RY_RETURN_IF_ERROR(Flush());
    RY_RETURN_IF_ERROR(file_->Sync());
    RY_RETURN_IF_ERROR(file_->Close());
    file_.reset();
    Status st = fs_->Rename(tmp_, final_);
    if (!st.ok()) fs_->RemoveFile(tmp_).IgnoreError();
    return st;
  }

  bool open() const { return file_ != nullptr; }
  uint64_t bytes() const { return bytes_; }

 private:
  static constexpr size_t kBufferBytes = 4 << 20;

  Status Flush() {
    if (buffer_.empty()) return Status::Ok();
    Status st = file_->Write(buffer_);
    buffer_.clear();
    return st;
  }

  Fs* fs_;
  std::unique_ptr<WritableFile> file_;
  std::string tmp_, final_, buffer_;
  uint64_t bytes_ = 0;
};

// Produces sample i: its bytes into *data, its name into *name (left empty for none).
using SampleSource = std::function<Status(uint64_t i, std::string* data, std::string* name)>;

// Removes "shard-<n>.bin" files with n >= first_unused: leftovers of an earlier, larger
// pack that no index will reference. Best effort: they are harmless, only wasted space.
void RemoveExtraShards(Fs& fs, const std::string& dir, uint64_t first_unused) {
  Result<std::vector<DirEntry>> entries = fs.ListDir(dir);
  if (!entries.ok()) return;
  for (const DirEntry& e : *entries) {
    const std::string& name = e.name;
    if (e.is_dir || name.size() < 11 || !name.starts_with("shard-") || !name.ends_with(".bin")) {
      continue;
    }
    std::string digits = name.substr(6, name.size() - 10);
    auto is_digit = [](char c) { return c >= '0' && c <= '9'; };
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), is_digit)) continue;
    if (digits.size() > 18 || std::stoull(digits) < first_unused) continue;
    fs.RemoveFile(JoinPath(dir, name)).IgnoreError();
  }
}

Result<PackStats> PackSamples(uint64_t count, const SampleSource& source, std::string source_text,
                              const std::string& out_dir, const PackOptions& options) {
  if (options.shard_bytes == 0) return InvalidArgument("shard size must be greater than 0");
  Fs& fs = options.fs != nullptr ? *options.fs : *DefaultFs();
  const auto start = base::Clock::now();
  RY_RETURN_IF_ERROR(MakeDirs(fs, out_dir));
  RemoveStaleTempFiles(fs, out_dir).status().IgnoreError();  // best effort
  const std::string index_path = JoinPath(out_dir, kDataIndexFile);
  if (fs.Exists(index_path)) {
    if (!options.overwrite) {
      return AlreadyExists(
          "'{}' already holds a packed dataset; remove it or choose another directory", out_dir);
    }
    // Uncommit first: from here on the directory is not a dataset until the new index lands.
    RY_RETURN_IF_ERROR(fs.RemoveFile(index_path).WithContext("removing the old index"));
    RY_RETURN_IF_ERROR(fs.SyncDir(out_dir));
  }

  std::vector<DataShardInfo> shards;
  std::vector<DataSampleEntry> entries;
  entries.reserve(count);
  std::string names, data, name;
  ShardWriter writer(&fs);
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
  RemoveExtraShards(fs, out_dir, shards.size());
  // The shards' renames must be durable before the index that names them.
  RY_RETURN_IF_ERROR(fs.SyncDir(out_dir));

  PackStats stats;
  stats.samples = count;
  stats.bytes = total;
  stats.shards = shards.size();
  DatasetIndex index(std::move(shards), std::move(entries), std::move(names),
                     std::move(source_text));
  std::string bytes = index.Serialize();
  RY_RETURN_IF_ERROR(WriteFileAtomic(fs, index_path, bytes));
  std::memcpy(&stats.dataset_id, bytes.data() + bytes.size() - 8, 8);
  if (options.progress) options.progress(count, count);
  stats.seconds = base::SecondsSince(start);
  return stats;
}

bool IsInside(const stdfs::path& inner, const stdfs::path& outer) {
  auto o = outer.begin(), i = inner.begin();
  for (; o != outer.end(); ++o, ++i) {
    if (i == inner.end() || *i != *o) return false;
  }
  return true;
}

}  // namespace

Result<PackStats> PackDirectory(const std::string& src_dir, const std::string& out_dir,
                                const PackOptions& options) {
  // The source is the host's tree of small files; only the dataset goes through options.fs.
  std::error_code ec;
  if (!stdfs::is_directory(src_dir, ec)) {
    if (!stdfs::exists(src_dir, ec)) {
      return NotFound("source directory '{}' does not exist", src_dir);
    }
    return InvalidArgument("source '{}' is not a directory", src_dir);
  }
  const stdfs::path src_abs = stdfs::weakly_canonical(src_dir, ec);
  const stdfs::path out_abs = stdfs::weakly_canonical(out_dir, ec);
  if (!ec && IsInside(out_abs, src_abs)) {
    return InvalidArgument("output '{}' lies inside the source '{}'; choose a directory outside it",
                           out_dir, src_dir);
  }
  std::vector<std::string> files;
  stdfs::recursive_directory_iterator it(src_dir, ec), end;
  for (; !ec && it != end; it.increment(ec)) {
    std::error_code type_ec;
    if (!it->is_regular_file(type_ec)) continue;  // directories, devices, dangling links
    files.push_back(stdfs::relative(it->path(), src_dir, type_ec).generic_string());
  }
  if (ec) return ErrnoStatus(ec.value(), fmt::format("cannot list '{}'", src_dir));
  if (files.empty()) return InvalidArgument("source '{}' holds no files to pack", src_dir);
  std::sort(files.begin(), files.end());  // bytewise: pack order independent of readdir order

  SampleSource source = [&](uint64_t i, std::string* data, std::string* name) -> Status {
    *name = files[i];
    RY_ASSIGN_OR_RETURN(*data, ReadWholeFile(*DefaultFs(), JoinPath(src_dir, files[i])));
    return Status::Ok();
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
