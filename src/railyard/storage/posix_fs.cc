// The POSIX backend: DefaultFs() and NewPosixFs().
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <mutex>
#include <utility>

#include "railyard/base/files.h"
#include "railyard/base/logging.h"
#include "railyard/storage/aligned_buffer.h"
#include "railyard/storage/fs.h"

namespace railyard::storage {
namespace {

const base::Logger kLog("ckpt");

// Bounce chunk for unaligned O_DIRECT reads: large enough to keep the device busy.
constexpr size_t kBounceBytes = 8 << 20;

bool IsAligned(uint64_t offset, const void* p, size_t n) {
  return offset % kDirectIoAlignment == 0 && n % kDirectIoAlignment == 0 &&
         reinterpret_cast<uintptr_t>(p) % kDirectIoAlignment == 0;
}

// sync_file_range is Linux-only and refused by some file systems (and on pipes); it is an
// optimisation, so "not supported" is not an error.
bool Unsupported(int err) {
  return err == ENOSYS || err == EINVAL || err == ESPIPE || err == EOPNOTSUPP;
}

// Turns O_DIRECT off on an open file for good, after the kernel refused a direct transfer
// (`what`: "read" or "write"). True when the file is buffered now.
bool ClearDirect(int fd, std::atomic<bool>& direct, std::mutex& mu, std::string_view what,
                 const std::string& path) {
  std::lock_guard<std::mutex> lock(mu);
  if (!direct.load()) return true;
  int flags = ::fcntl(fd, F_GETFL);
  if (flags < 0 || ::fcntl(fd, F_SETFL, flags & ~O_DIRECT) != 0) return false;
  direct.store(false);
  kLog.Info("O_DIRECT {} refused for '{}' (EINVAL); continuing with buffered I/O", what, path);
  return true;
}

// Moves n bytes with `io(at)` (one pread or pwrite of bytes [at, n), returning its result),
// retrying EINTR and, once, an EINVAL after `drop_direct` turned O_DIRECT off: some file
// systems accept O_DIRECT at open and refuse it per transfer. Stops early when io returns 0
// (the end of the file, for a read). Returns 0 or the errno; *done is how many bytes moved.
template <typename Io, typename DropDirectFn>
int Transfer(size_t n, const std::atomic<bool>& direct, Io io, DropDirectFn drop_direct,
             size_t* done) {
  *done = 0;
  bool retried_buffered = false;
  while (*done < n) {
    const ssize_t r = io(*done);
    if (r < 0) {
      const int err = errno;
      if (err == EINTR) continue;
      if (err == EINVAL && direct.load() && !retried_buffered) {
        retried_buffered = true;
        if (drop_direct()) continue;
      }
      return err;
    }
    if (r == 0) break;
    *done += static_cast<size_t>(r);
  }
  return 0;
}

class PosixWritableFile final : public WritableFile {
 public:
  PosixWritableFile(base::UniqueFd fd, std::string path, bool direct)
      : fd_(std::move(fd)), path_(std::move(path)), direct_(direct) {}

  const std::string& path() const override { return path_; }
  bool direct() const override { return direct_.load(); }

  Status Allocate(uint64_t length) override {
    if (length == 0) return Status::Ok();
    // fallocate(2), not posix_fallocate: where the file system cannot preallocate, glibc's
    // posix_fallocate would emulate it by writing every block, doubling the I/O.
    if (::fallocate(fd_.get(), 0, 0, static_cast<off_t>(length)) == 0) return Status::Ok();
    if (errno == EOPNOTSUPP || errno == EINVAL || errno == ENOSYS) return Status::Ok();
    return ErrnoStatus(errno, fmt::format("reserve {} bytes for '{}'", length, path_));
  }

  Status PWrite(uint64_t offset, const void* data, size_t n) override {
    const auto* p = static_cast<const uint8_t*>(data);
    size_t done = 0;
    const int err = Transfer(
        n, direct_,
        [&](size_t at) {
          return ::pwrite(fd_.get(), p + at, n - at, static_cast<off_t>(offset + at));
        },
        [&] { return DropDirect(); }, &done);
    if (err != 0) {
      return ErrnoStatus(
          err, fmt::format("write to '{}' at bytes [{}, {})", path_, offset + done, offset + n));
    }
    if (done < n) return Internal("write to '{}' at byte {} wrote nothing", path_, offset + done);
    return Status::Ok();
  }

  Status Write(std::string_view data) override {
    Status st = PWrite(append_offset_, data.data(), data.size());
    if (st.ok()) append_offset_ += data.size();
    return st;
  }

  Status Sync() override {
    if (::fsync(fd_.get()) != 0) return ErrnoStatus(errno, fmt::format("fsync of '{}'", path_));
    return Status::Ok();
  }

  Status StartWriteback(uint64_t offset, uint64_t n) override {
    if (n == 0 || direct_.load()) return Status::Ok();
    if (::sync_file_range(fd_.get(), static_cast<off_t>(offset), static_cast<off_t>(n),
                          SYNC_FILE_RANGE_WRITE) != 0 &&
        !Unsupported(errno)) {
      return ErrnoStatus(
          errno, fmt::format("writeback of '{}' bytes [{}, {})", path_, offset, offset + n));
    }
    return Status::Ok();
  }

  Status DropCache(uint64_t offset, uint64_t n) override {
    if (n == 0 || direct_.load()) return Status::Ok();
    constexpr unsigned kWaitAll =
        SYNC_FILE_RANGE_WAIT_BEFORE | SYNC_FILE_RANGE_WRITE | SYNC_FILE_RANGE_WAIT_AFTER;
    if (::sync_file_range(fd_.get(), static_cast<off_t>(offset), static_cast<off_t>(n), kWaitAll) !=
        0) {
      if (!Unsupported(errno)) {
        return ErrnoStatus(
            errno, fmt::format("writeback of '{}' bytes [{}, {})", path_, offset, offset + n));
      }
      return Status::Ok();  // without the wait, DONTNEED would skip the dirty pages anyway
    }
    // Advice only: a refusal leaves the pages cached, which costs memory, not correctness.
    ::posix_fadvise(fd_.get(), static_cast<off_t>(offset), static_cast<off_t>(n),
                    POSIX_FADV_DONTNEED);
    return Status::Ok();
  }

  Status Close() override {
    if (!fd_.valid()) return Status::Ok();
    // close() is where NFS and some parallel file systems report deferred write errors.
    if (::close(fd_.Release()) != 0) {
      return ErrnoStatus(errno, fmt::format("close of '{}'", path_));
    }
    return Status::Ok();
  }

 private:
  bool DropDirect() { return ClearDirect(fd_.get(), direct_, mu_, "write", path_); }

  base::UniqueFd fd_;
  std::string path_;
  std::atomic<bool> direct_;
  std::mutex mu_;
  uint64_t append_offset_ = 0;
};

class PosixReadableFile final : public ReadableFile {
 public:
  PosixReadableFile(base::UniqueFd fd, std::string path, bool direct)
      : fd_(std::move(fd)), path_(std::move(path)), direct_(direct) {}

  const std::string& path() const override { return path_; }
  bool direct() const override { return direct_.load(); }

  Result<uint64_t> Size() const override {
    struct stat st;
    if (::fstat(fd_.get(), &st) != 0) return ErrnoStatus(errno, fmt::format("stat '{}'", path_));
    return static_cast<uint64_t>(st.st_size);
  }

  Status PRead(uint64_t offset, void* out, size_t n) const override {
    auto* p = static_cast<uint8_t*>(out);
    if (!direct_.load() || IsAligned(offset, out, n)) {
      size_t got = 0;
      RY_RETURN_IF_ERROR(ReadUpTo(offset, p, n, &got));
      if (got < n) return Truncated(offset, n, offset + got);
      return Status::Ok();
    }
    // O_DIRECT needs aligned offsets, lengths and memory: read the aligned blocks around each
    // chunk into this thread's bounce buffer and copy the wanted bytes out.
    thread_local AlignedBuffer bounce;
    RY_RETURN_IF_ERROR(bounce.Resize(kBounceBytes));
    uint64_t at = offset;
    const uint64_t end = offset + n;
    while (at < end) {
      const uint64_t block = AlignDown(at, kDirectIoAlignment);
      const uint64_t want_end = std::min<uint64_t>(end, block + kBounceBytes);
      const uint64_t len = AlignUp(want_end - block, kDirectIoAlignment);
      size_t got = 0;
      // A short read at the end of the file is fine if it covers the wanted bytes.
      RY_RETURN_IF_ERROR(ReadUpTo(block, bounce.data(), len, &got));
      if (block + got < want_end) return Truncated(offset, n, block + got);
      std::memcpy(p + (at - offset), bounce.data() + (at - block), want_end - at);
      at = want_end;
    }
    return Status::Ok();
  }

 private:
  // Reads up to n bytes at `offset` into `out`, stopping early only at the end of the file.
  Status ReadUpTo(uint64_t offset, uint8_t* out, size_t n, size_t* got) const {
    const int err = Transfer(
        n, direct_,
        [&](size_t at) {
          return ::pread(fd_.get(), out + at, n - at, static_cast<off_t>(offset + at));
        },
        [&] { return DropDirect(); }, got);
    if (err != 0) {
      return ErrnoStatus(
          err, fmt::format("read of '{}' at bytes [{}, {})", path_, offset + *got, offset + n));
    }
    return Status::Ok();
  }

  Status Truncated(uint64_t offset, size_t n, uint64_t eof) const {
    return DataLoss("'{}' ends at byte {}, expected bytes [{}, {}) (truncated file)", path_, eof,
                    offset, offset + n);
  }

  bool DropDirect() const { return ClearDirect(fd_.get(), direct_, mu_, "read", path_); }

  base::UniqueFd fd_;
  std::string path_;
  mutable std::atomic<bool> direct_;
  mutable std::mutex mu_;
};

class PosixFs final : public Fs {
 public:
  explicit PosixFs(std::shared_ptr<LayoutHook> hook) : hook_(std::move(hook)) {}

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path,
                                                        const OpenOptions& options) override {
    if (options.data_file && hook_) {
      Status st = hook_->PrepareFile(path, options.mode);
      if (!st.ok()) {
        kLog.Warn("cannot set the layout of '{}', using the file system default: {}", path,
                  st.ToString());
      }
    }
    int flags = O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC;
    bool direct = options.direct;
    int fd = ::open(path.c_str(), flags | (direct ? O_DIRECT : 0), options.mode);
    if (fd < 0 && direct && errno == EINVAL) {
      // tmpfs and some FUSE file systems have no O_DIRECT: not an error, just slower.
      kLog.Info("O_DIRECT refused for '{}' (EINVAL); using buffered I/O", path);
      direct = false;
      fd = ::open(path.c_str(), flags, options.mode);
    }
    if (fd < 0) return ErrnoStatus(errno, fmt::format("cannot create '{}'", path));
    return std::unique_ptr<WritableFile>(
        std::make_unique<PosixWritableFile>(base::UniqueFd(fd), path, direct));
  }

  Result<std::unique_ptr<ReadableFile>> NewReadableFile(const std::string& path,
                                                        const OpenOptions& options) override {
    const int flags = O_RDONLY | O_CLOEXEC;
    bool direct = options.direct;
    int fd = ::open(path.c_str(), flags | (direct ? O_DIRECT : 0));
    if (fd < 0 && direct && errno == EINVAL) {
      kLog.Info("O_DIRECT refused for '{}' (EINVAL); reading it buffered", path);
      direct = false;
      fd = ::open(path.c_str(), flags);
    }
    if (fd < 0) return ErrnoStatus(errno, fmt::format("cannot open '{}'", path));
    // Advice only; O_DIRECT reads bypass readahead anyway.
    if (options.sequential && !direct) ::posix_fadvise(fd, 0, 0, POSIX_FADV_SEQUENTIAL);
    return std::unique_ptr<ReadableFile>(
        std::make_unique<PosixReadableFile>(base::UniqueFd(fd), path, direct));
  }

  Status CreateDir(const std::string& path) override {
    if (::mkdir(path.c_str(), 0755) == 0) return Status::Ok();
    int err = errno;
    struct stat st;
    if (err == EEXIST && ::stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) {
      return Status::Ok();
    }
    return ErrnoStatus(err, fmt::format("cannot create directory '{}'", path));
  }

  Status Rename(const std::string& from, const std::string& to) override {
    if (::rename(from.c_str(), to.c_str()) != 0) {
      return ErrnoStatus(errno, fmt::format("rename '{}' -> '{}'", from, to));
    }
    return Status::Ok();
  }

  Status RemoveFile(const std::string& path) override {
    if (::unlink(path.c_str()) != 0) return ErrnoStatus(errno, fmt::format("remove '{}'", path));
    return Status::Ok();
  }

  Status RemoveDir(const std::string& path) override {
    if (::rmdir(path.c_str()) != 0) {
      return ErrnoStatus(errno, fmt::format("remove directory '{}'", path));
    }
    return Status::Ok();
  }

  Result<std::vector<DirEntry>> ListDir(const std::string& dir) override {
    DIR* d = ::opendir(dir.c_str());
    if (d == nullptr) return ErrnoStatus(errno, fmt::format("cannot list directory '{}'", dir));
    std::vector<DirEntry> out;
    errno = 0;
    while (dirent* e = ::readdir(d)) {
      std::string name = e->d_name;
      if (name == "." || name == "..") continue;
      bool is_dir = e->d_type == DT_DIR;
      if (e->d_type == DT_UNKNOWN) {  // some file systems (XFS without ftype, NFS) omit it
        struct stat st;
        is_dir = ::lstat((dir + "/" + name).c_str(), &st) == 0 && S_ISDIR(st.st_mode);
      }
      out.push_back({std::move(name), is_dir});
    }
    int err = errno;
    ::closedir(d);
    if (err != 0) return ErrnoStatus(err, fmt::format("cannot list directory '{}'", dir));
    return out;
  }

  Result<FsStats> StatFs(const std::string& path) override {
    struct statfs s;
    if (::statfs(path.c_str(), &s) != 0) {
      return ErrnoStatus(errno, fmt::format("statfs '{}'", path));
    }
    FsStats out;
    out.type = static_cast<uint64_t>(s.f_type);
    out.block_size = static_cast<uint64_t>(s.f_bsize);
    out.total_bytes = static_cast<uint64_t>(s.f_blocks) * out.block_size;
    out.free_bytes = static_cast<uint64_t>(s.f_bavail) * out.block_size;
    return out;
  }

  Status SyncDir(const std::string& dir) override { return base::FsyncDirectory(dir); }

  Result<uint64_t> FileSize(const std::string& path) override {
    struct stat st;
    if (::stat(path.c_str(), &st) != 0) return ErrnoStatus(errno, fmt::format("stat '{}'", path));
    return static_cast<uint64_t>(st.st_size);
  }

  bool Exists(const std::string& path) override { return base::PathExists(path); }

 private:
  std::shared_ptr<LayoutHook> hook_;
};

}  // namespace

Fs* DefaultFs() {
  static Fs* fs = new PosixFs(nullptr);  // never destroyed: usable from static destructors
  return fs;
}

std::unique_ptr<Fs> NewPosixFs(std::shared_ptr<LayoutHook> hook) {
  return std::make_unique<PosixFs>(std::move(hook));
}

}  // namespace railyard::storage
