// File helpers: an owning file descriptor, whole-file reads, and atomic replacement.
//
// Atomic replacement is the commit primitive everything durable in Railyard rests on: the
// data goes to a temporary file in the same directory, is fsync'ed, renamed over the target,
// and the directory is fsync'ed, so a crash at any point leaves either the old file or the
// new one, never a mix. Temporary files are named "<target>.tmp.<pid>.<n>" so leftovers of a
// crash can be recognised (IsStaleTempFileName).
//
// The protocol is written once, in ReplaceFileAtomic, over a set of steps. Two callers supply
// them: WriteFileAtomic below with POSIX calls (for modules under storage/: configuration,
// topology and state files), and storage::WriteFileAtomic with a storage::Fs (for everything
// storage/ writes, so that faults can be injected and an in-memory Fs can stand in). base/
// cannot see storage::Fs (it lies above base), hence the steps rather than an Fs here.
//
// Thread-safety: free functions are safe to call concurrently on different paths.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"

namespace railyard::base {

// Move-only owner of a file descriptor; closes it on destruction.
class UniqueFd {
 public:
  UniqueFd() = default;
  explicit UniqueFd(int fd) : fd_(fd) {}
  UniqueFd(UniqueFd&& other) noexcept : fd_(std::exchange(other.fd_, -1)) {}
  UniqueFd& operator=(UniqueFd&& other) noexcept {
    if (this != &other) Reset(std::exchange(other.fd_, -1));
    return *this;
  }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  ~UniqueFd() { Reset(); }

  int get() const { return fd_; }
  bool valid() const { return fd_ >= 0; }
  int Release() { return std::exchange(fd_, -1); }
  void Reset(int fd = -1);

 private:
  int fd_ = -1;
};

// Reads a whole file. NOT_FOUND when it does not exist; the message names the path.
Result<std::string> ReadFile(const std::string& path);

// The last `max_bytes` of a file (all of it when shorter). Errors as ReadFile.
Result<std::string> ReadFileTail(const std::string& path, size_t max_bytes);

// Appends `data` to `path` (created 0644 when missing) in one write: O_APPEND keeps lines
// from several writers whole. Errors name the path.
Status AppendToFile(const std::string& path, std::string_view data);

// A one-value file (/proc, /sys) without leading and trailing whitespace; nullopt when it
// cannot be read (missing, or sysfs answering EINVAL, e.g. the speed of a link that is down).
std::optional<std::string> ReadTrimmedFile(const std::string& path);

// Waits until fd is ready for `events` (POLLIN, POLLOUT; poll.h) or reports an error or hang-up
// (the next read or write then says which), retrying EINTR. DEADLINE_EXCEEDED "<what>: no
// progress before the deadline" when the deadline passes first; the errno status of poll
// otherwise.
Status WaitFd(int fd, short events, Deadline deadline, std::string_view what);

// Writes all of `data` to fd, retrying short writes and EINTR.
Status WriteAll(int fd, std::string_view data, std::string_view what);

// The file-system operations ReplaceFileAtomic is made of.
struct AtomicReplaceSteps {
  // Creates the new file `tmp`, writes all of the data, fsyncs and closes it.
  std::function<Status(const std::string& tmp)> write_synced;
  std::function<Status(const std::string& from, const std::string& to)> rename;
  std::function<Status(const std::string& dir)> sync_dir;
  // Best effort, after a failed write or rename: removes `tmp` if it is there.
  std::function<void(const std::string& tmp)> remove;
};

// Replaces `path` through `steps` (see the header comment): writes "<path>.tmp.<pid>.<n>",
// renames it over `path`, fsyncs ParentDir(path). Returns the first failing step's status;
// the temporary file is removed when the write or the rename fails.
Status ReplaceFileAtomic(const std::string& path, const AtomicReplaceSteps& steps);

// Replaces `path` with `data` atomically and durably through POSIX calls.
// `mode` applies to the new file. Errors name the path and the failing step.
Status WriteFileAtomic(const std::string& path, std::string_view data, int mode = 0644);

// A name for a temporary file that will be renamed to `path`: "<path>.tmp.<pid>.<n>", unique
// within this process, recognised by IsStaleTempFileName once the process is gone.
std::string TempPathFor(const std::string& path);

// True for "<target>.tmp.<pid>.<n>" (TempPathFor's names) when process <pid>
// is no longer running: what a crash left behind, safe to remove.
bool IsStaleTempFileName(std::string_view name);

// "a/b/c" -> "a/b"; "c" -> "."; "/c" -> "/".
std::string ParentDir(const std::string& path);

// fsync of a directory, so a rename or create inside it survives a crash.
Status FsyncDirectory(const std::string& dir);

// Creates `dir` and its parents (mode 0755); OK when it exists.
Status MakeDirs(const std::string& dir);

// An exclusive advisory lock (flock) on a lock file, released on destruction. Serialises
// commands that change the same on-disk state from different processes.
class FileLock {
 public:
  // Creates the file if needed and waits for the lock until `deadline`; DEADLINE_EXCEEDED
  // names the file (another command holds it).
  static Result<FileLock> Acquire(const std::string& path, Deadline deadline);
  FileLock(FileLock&&) = default;
  FileLock& operator=(FileLock&&) = default;

 private:
  explicit FileLock(UniqueFd fd) : fd_(std::move(fd)) {}
  UniqueFd fd_;  // closing the descriptor releases the lock
};

// True when the path exists (any file type).
bool PathExists(const std::string& path);

}  // namespace railyard::base
