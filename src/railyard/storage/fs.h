// The storage backend: the file operations checkpoints and data shards are built from.
//
// In the spirit of LevelDB's Env, everything storage/ does to a file system goes through an
// `Fs`, so that tests can put a forwarding wrapper in between that fails the Nth operation
// (FaultInjectionFs, fault_injection_fs.h) or stand an in-memory file system in
// (NewMemFs, mem_fs.h), and so that parallel-file-system specifics (Lustre striping) plug in
// as a `LayoutHook` without the checkpoint code knowing about them. Helpers over any Fs
// (MakeDirs, WriteFileAtomic, ...) are in fs_util.h; aligned memory for O_DIRECT in
// aligned_buffer.h.
//
//   Fs* fs = DefaultFs();                                   // plain POSIX, no layout hook
//   auto fs = NewPosixFs(std::make_shared<LustreLayoutHook>(StripeOptions{}));
//   RY_ASSIGN_OR_RETURN(auto file, fs->NewWritableFile(path, {.direct = true}));
//   RY_RETURN_IF_ERROR(file->PWrite(0, buf, n));
//   RY_RETURN_IF_ERROR(file->Sync());
//
// Buffered writers of large files can keep the page cache small and the final fsync short
// with StartWriteback (sync_file_range) and DropCache (write back, then POSIX_FADV_DONTNEED)
// behind the write position; neither makes data durable, only Sync does.
//
// Errors are Status values whose message names the path and, for data transfers, the byte
// range: ENOSPC/EDQUOT come back as RESOURCE_EXHAUSTED, EACCES/EPERM as PERMISSION_DENIED,
// ENOENT as NOT_FOUND, a read past the end of a file as DATA_LOSS.
//
// Thread-safety: Fs methods may be called concurrently. A WritableFile's PWrite may be called
// concurrently for disjoint ranges; Write, Sync and Close from one thread at a time, after the
// PWrites finished. A ReadableFile's PRead may be called concurrently.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"

namespace railyard::storage {

struct OpenOptions {
  // Ask for O_DIRECT. When the file system refuses it (tmpfs answers EINVAL), the file is
  // opened buffered instead and direct() says so; this is not an error.
  bool direct = false;
  // A large data file (a checkpoint shard): the Fs's LayoutHook, if any, may set its layout
  // (Lustre striping) before it is created. Small files (manifests, markers) leave it false.
  bool data_file = false;
  // Reading only: the file will be read front to back (POSIX_FADV_SEQUENTIAL, a larger
  // readahead window), as fio hints by default too.
  bool sequential = false;
  int mode = 0644;
};

// A file opened for writing; created, or truncated when it exists. Closing happens on
// destruction if Close was not called (errors then are lost, so call Close).
class WritableFile {
 public:
  virtual ~WritableFile() = default;
  virtual const std::string& path() const = 0;
  // Writes all n bytes at `offset`. With direct(), offset, n and data must be aligned to
  // kDirectIoAlignment (aligned_buffer.h). If the kernel refuses a direct write with EINVAL, the
  // file falls back to buffered I/O for good (direct() turns false) and the write is retried.
  virtual Status PWrite(uint64_t offset, const void* data, size_t n) = 0;
  // Reserves `length` bytes for the file up front (fallocate), so that extents written in
  // parallel land contiguously on disk and a full disk fails before any data is written.
  // OK where the file system cannot preallocate.
  virtual Status Allocate(uint64_t length) = 0;
  // Appends at the end of what Write has written so far (starts at 0).
  virtual Status Write(std::string_view data) = 0;
  // Starts writeback of the bytes [offset, offset + n) written so far and returns without
  // waiting (sync_file_range SYNC_FILE_RANGE_WRITE), so that the final Sync finds little
  // left to do. Not a durability point. OK without effect for direct() files and where the
  // file system has no sync_file_range.
  virtual Status StartWriteback(uint64_t offset, uint64_t n) = 0;
  // Waits until [offset, offset + n) is written back and then drops it from the page cache
  // (POSIX_FADV_DONTNEED), so that a large write does not fill memory with pages nobody will
  // read soon. Not a durability point. Errors: the writeback's (EIO) naming path and range.
  virtual Status DropCache(uint64_t offset, uint64_t n) = 0;
  virtual Status Sync() = 0;
  virtual Status Close() = 0;
  virtual bool direct() const = 0;
};

// A file opened for reading.
class ReadableFile {
 public:
  virtual ~ReadableFile() = default;
  virtual const std::string& path() const = 0;
  virtual Result<uint64_t> Size() const = 0;
  // Reads exactly n bytes at `offset`; DATA_LOSS naming the path and range when the file ends
  // before offset + n. With direct(), any offset, length and buffer are accepted: requests
  // that are aligned to kDirectIoAlignment go straight to the caller's memory, others through
  // a per-thread aligned bounce buffer (a copy), so align hot reads.
  virtual Status PRead(uint64_t offset, void* out, size_t n) const = 0;
  // O_DIRECT is in effect (asked for and accepted by the file system).
  virtual bool direct() const = 0;
};

struct DirEntry {
  std::string name;
  bool is_dir = false;  // false for symlinks, even to directories
};

struct FsStats {
  uint64_t type = 0;  // statfs f_type (e.g. 0x0BD00BD0 Lustre, 0x01021994 tmpfs)
  uint64_t block_size = 0;
  uint64_t total_bytes = 0;
  uint64_t free_bytes = 0;  // available to unprivileged users
};

// Sets the layout of a data file before it is created; see LustreLayoutHook. A failing hook
// does not fail the write: the file is created with the file system's default layout and a
// warning is logged, because striping is a tuning, not a correctness, matter.
class LayoutHook {
 public:
  virtual ~LayoutHook() = default;
  // Called before `path` (not existing yet) is opened for writing. May create it empty.
  virtual Status PrepareFile(const std::string& path, int mode) = 0;
};

class Fs {
 public:
  virtual ~Fs() = default;

  virtual Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path,
                                                                const OpenOptions& options) = 0;
  // options.direct and options.sequential apply.
  virtual Result<std::unique_ptr<ReadableFile>> NewReadableFile(
      const std::string& path, const OpenOptions& options = {}) = 0;
  // Creates one directory level (mode 0755); OK when a directory is already there.
  virtual Status CreateDir(const std::string& path) = 0;
  // rename(2): atomic replacement, also of an empty directory.
  virtual Status Rename(const std::string& from, const std::string& to) = 0;
  virtual Status RemoveFile(const std::string& path) = 0;
  // Removes an empty directory.
  virtual Status RemoveDir(const std::string& path) = 0;
  // Entries except "." and "..", in no particular order.
  virtual Result<std::vector<DirEntry>> ListDir(const std::string& dir) = 0;
  virtual Result<FsStats> StatFs(const std::string& path) = 0;
  // fsync of a directory, so creates and renames inside it survive a crash.
  virtual Status SyncDir(const std::string& dir) = 0;
  // NOT_FOUND when absent.
  virtual Result<uint64_t> FileSize(const std::string& path) = 0;
  virtual bool Exists(const std::string& path) = 0;
};

// The process-wide plain POSIX backend (no layout hook). Never null; not owned.
Fs* DefaultFs();

// A POSIX backend that calls `hook` (may be null) before creating data files.
std::unique_ptr<Fs> NewPosixFs(std::shared_ptr<LayoutHook> hook);

}  // namespace railyard::storage
