#include "railyard/validate/storage_probe.h"

#include <fcntl.h>

#include <cstring>
#include <vector>

#include "railyard/base/files.h"
#include "railyard/base/units.h"
#include "railyard/storage/aligned_buffer.h"
#include "railyard/storage/fs.h"
#include "railyard/storage/fs_util.h"

namespace railyard::validate {
namespace {

using storage::AlignedBuffer;
using storage::Fs;

constexpr std::string_view kFilePrefix = "ry-ior-";
constexpr std::string_view kFileSuffix = ".dat";
constexpr std::string_view kMetadataDir = "ry-mdtest";

Status CheckOptions(const StorageProbeOptions& o) {
  if (o.dir.empty()) return InvalidArgument("storage probe: no directory given");
  if (o.files < 1 || o.bytes_per_file == 0 || o.block_bytes == 0) {
    return InvalidArgument(
        "storage probe in '{}': files ({}), bytes per file ({}) and block size ({}) must be "
        "positive",
        o.dir, o.files, o.bytes_per_file, o.block_bytes);
  }
  return Status::Ok();
}

// What each block starts with: its file and offset, so a reader knows it read the right bytes.
uint64_t Stamp(int file, uint64_t offset) { return (static_cast<uint64_t>(file) << 48) ^ offset; }

// A block of bytes no file system compresses away (xorshift), the stamp written per block.
Result<AlignedBuffer> PatternBlock(uint64_t block_bytes) {
  AlignedBuffer buf;
  RY_RETURN_IF_ERROR(buf.Resize(storage::AlignUp(block_bytes, storage::kDirectIoAlignment)));
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (size_t i = 0; i + sizeof x <= buf.size(); i += sizeof x) {
    x ^= x << 13;
    x ^= x >> 7;
    x ^= x << 17;
    std::memcpy(buf.data() + i, &x, sizeof x);
  }
  return buf;
}

Status PastDeadline(std::string_view what, const std::string& path, uint64_t done, uint64_t total) {
  return DeadlineExceeded("{} '{}' passed its deadline after {} of {}", what, path,
                          base::FormatBytes(done), base::FormatBytes(total));
}

Status WriteOneFile(Fs& fs, const std::string& path, int index, const StorageProbeOptions& o,
                    AlignedBuffer& block) {
  RY_ASSIGN_OR_RETURN(auto file, fs.NewWritableFile(path, {.data_file = true}));
  for (uint64_t off = 0; off < o.bytes_per_file; off += o.block_bytes) {
    if (o.deadline.Expired()) return PastDeadline("writing", path, off, o.bytes_per_file);
    uint64_t stamp = Stamp(index, off);
    uint64_t n = std::min(o.block_bytes, o.bytes_per_file - off);
    std::memcpy(block.data(), &stamp, std::min<uint64_t>(sizeof stamp, n));
    RY_RETURN_IF_ERROR(file->PWrite(off, block.data(), n));
  }
  RY_RETURN_IF_ERROR(file->Sync());
  return file->Close();
}

// Drops `path` from this host's page cache: it was written (and fsynced, so its pages are
// clean) by another host that may share this kernel, as the virtual cluster's hosts do.
void DropFromPageCache(const std::string& path) {
  base::UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.valid()) ::posix_fadvise(fd.get(), 0, 0, POSIX_FADV_DONTNEED);
}

Status ReadOneFile(Fs& fs, const std::string& path, int index, const StorageProbeOptions& o,
                   AlignedBuffer& block, bool* direct) {
  Result<uint64_t> size = fs.FileSize(path);
  if (!size.ok() && size.status().code() == StatusCode::kNotFound) {
    return NotFound("the neighbour's file '{}' is missing (its write did not finish)", path);
  }
  RY_RETURN_IF_ERROR(size.status());
  if (*size < o.bytes_per_file) {
    return DataLoss("the neighbour's file '{}' holds {} bytes, expected {}", path, *size,
                    o.bytes_per_file);
  }
  DropFromPageCache(path);
  RY_ASSIGN_OR_RETURN(auto file, fs.NewReadableFile(path, {.direct = true, .sequential = true}));
  *direct = *direct && file->direct();
  for (uint64_t off = 0; off < o.bytes_per_file; off += o.block_bytes) {
    if (o.deadline.Expired()) return PastDeadline("reading", path, off, o.bytes_per_file);
    uint64_t n = std::min(o.block_bytes, o.bytes_per_file - off);
    RY_RETURN_IF_ERROR(file->PRead(off, block.data(), n));
    uint64_t want = Stamp(index, off), got = 0;
    std::memcpy(&got, block.data(), std::min<uint64_t>(sizeof got, n));
    if (n >= sizeof got && got != want) {
      return DataLoss(
          "'{}' at offset {} holds block stamp {:#x}, expected {:#x} (not this probe's file?)",
          path, off, got, want);
    }
  }
  return Status::Ok();
}

StorageRate Rate(uint64_t bytes, int files, base::Clock::time_point start) {
  StorageRate r{.bytes = bytes, .files = files, .seconds = base::SecondsSince(start)};
  r.bytes_per_s = r.seconds > 0 ? static_cast<double>(bytes) / r.seconds : 0;
  return r;
}

}  // namespace

std::string StorageProbeFileName(int index) {
  return fmt::format("{}{}{}", kFilePrefix, index, kFileSuffix);
}

Result<StorageRate> WriteOwnFiles(const StorageProbeOptions& o) {
  RY_RETURN_IF_ERROR(CheckOptions(o));
  Fs& fs = *storage::DefaultFs();
  RY_ASSIGN_OR_RETURN(AlignedBuffer block, PatternBlock(o.block_bytes));
  RY_RETURN_IF_ERROR(storage::MakeDirs(fs, o.dir));
  auto start = base::Clock::now();
  for (int i = 0; i < o.files; ++i) {
    std::string path = o.dir + "/" + StorageProbeFileName(i);
    Status s = WriteOneFile(fs, path, i, o, block);
    if (!s.ok()) {
      // A partial file would make the neighbour's read fail DATA_LOSS, blaming the reader;
      // gone, the read says NOT_FOUND and the caller blames this writer.
      fs.RemoveFile(path).IgnoreError();
      return s;
    }
  }
  return Rate(o.bytes_per_file * static_cast<uint64_t>(o.files), o.files, start);
}

Result<StorageRate> ReadNeighbourFiles(const std::string& neighbour_dir,
                                       const StorageProbeOptions& o) {
  RY_RETURN_IF_ERROR(CheckOptions(o));
  Fs& fs = *storage::DefaultFs();
  AlignedBuffer block;
  RY_RETURN_IF_ERROR(block.Resize(storage::AlignUp(o.block_bytes, storage::kDirectIoAlignment)));
  bool direct = true;
  auto start = base::Clock::now();
  for (int i = 0; i < o.files; ++i) {
    RY_RETURN_IF_ERROR(
        ReadOneFile(fs, neighbour_dir + "/" + StorageProbeFileName(i), i, o, block, &direct));
  }
  StorageRate r = Rate(o.bytes_per_file * static_cast<uint64_t>(o.files), o.files, start);
  r.direct = direct;
  if (!direct) {
    r.note = fmt::format(
        "O_DIRECT refused in '{}'; read buffered after dropping the files from the page "
        "cache (POSIX_FADV_DONTNEED)",
        neighbour_dir);
  }
  return r;
}

Result<MetadataRate> MetadataProbe(const std::string& dir, int items, base::Deadline deadline) {
  if (dir.empty() || items < 1) {
    return InvalidArgument("metadata probe in '{}': needs a directory and items >= 1 (got {})", dir,
                           items);
  }
  Fs& fs = *storage::DefaultFs();
  const std::string md = dir + "/" + std::string(kMetadataDir);
  RY_RETURN_IF_ERROR(storage::MakeDirs(fs, md));
  auto item = [&](int i) { return fmt::format("{}/f{}", md, i); };
  enum Phase { kCreate, kStat, kUnlink };
  constexpr const char* kPhaseName[] = {"create", "stat", "unlink"};
  auto one = [&](Phase p, int i) -> Status {
    switch (p) {
      case kCreate: {
        RY_ASSIGN_OR_RETURN(auto f, fs.NewWritableFile(item(i), {}));
        return f->Close();
      }
      case kStat:
        return fs.FileSize(item(i)).status();
      case kUnlink:
        return fs.RemoveFile(item(i));
    }
    return Status::Ok();
  };
  double seconds[3] = {0, 0, 0};
  for (Phase p : {kCreate, kStat, kUnlink}) {
    auto start = base::Clock::now();
    for (int i = 0; i < items; ++i) {
      Status s = deadline.Expired() ? DeadlineExceeded(
                                          "metadata probe in '{}' passed its deadline in {} "
                                          "after {} of {} files",
                                          md, kPhaseName[p], i, items)
                                    : one(p, i);
      if (!s.ok()) {
        storage::RemoveTree(fs, md).IgnoreError();
        return s;
      }
    }
    seconds[p] = base::SecondsSince(start);
  }
  RY_RETURN_IF_ERROR(fs.RemoveDir(md));
  auto rate = [&](double ops, double s) { return s > 0 ? ops / s : 0; };
  MetadataRate r{.items = items, .seconds = seconds[0] + seconds[1] + seconds[2]};
  r.create_ops_per_s = rate(items, seconds[kCreate]);
  r.stat_ops_per_s = rate(items, seconds[kStat]);
  r.unlink_ops_per_s = rate(items, seconds[kUnlink]);
  r.total_ops_per_s = rate(3.0 * items, r.seconds);
  return r;
}

Status RemoveProbeFiles(const std::string& dir) {
  Fs& fs = *storage::DefaultFs();
  Result<std::vector<storage::DirEntry>> entries = fs.ListDir(dir);
  if (!entries.ok() && entries.status().code() == StatusCode::kNotFound) return Status::Ok();
  RY_RETURN_IF_ERROR(entries.status());
  size_t left = entries->size();
  for (const storage::DirEntry& e : *entries) {
    std::string path = dir + "/" + e.name;
    if (e.is_dir && e.name == kMetadataDir) {
      RY_RETURN_IF_ERROR(storage::RemoveTree(fs, path));
      --left;
    } else if (!e.is_dir && e.name.starts_with(kFilePrefix) && e.name.ends_with(kFileSuffix)) {
      RY_RETURN_IF_ERROR(fs.RemoveFile(path));
      --left;
    }
  }
  return left == 0 ? fs.RemoveDir(dir) : Status::Ok();
}

}  // namespace railyard::validate
