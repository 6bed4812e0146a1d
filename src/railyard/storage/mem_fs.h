// An in-memory Fs for tests, with a model of what a power cut keeps, and a wrapper that cuts
// the power at a chosen call.
//
// MemFs behaves like a local POSIX file system (same error codes: ENOENT, EEXIST, ENOTDIR,
// EISDIR, ENOTEMPTY through ErrnoStatus) whose writes sit in a volatile cache until made
// durable the way ext4 and XFS require:
//   - a file's data (and size) survives only as of its last WritableFile::Sync;
//   - a directory's entries (creates, renames, removals inside it) survive only as of its last
//     SyncDir: a file fsynced in a directory that was never fsynced after the file was created
//     is lost, and so is a new directory whose parent was not fsynced after the mkdir.
// PowerCut() throws away everything not durable: what is left is what a machine would find
// after losing power. Paths are absolute ("/a/b"); a relative path is taken from the root.
// Files report direct() false, as on tmpfs.
//
//   auto mem = NewMemFs();
//   PowerCutFs fs(mem.get());
//   fs.CutPowerAfter(fs.calls() + 17);   // the 18th call from now on fails, as do all later
//   Status st = writer->Save(...);       // through &fs: fails once the power is gone
//   fs.PowerCut();                       // drop what was not durable; the power is back
//   auto reader = LoadLatest("/ckpt", {.fs = &fs});
//
// Thread-safety: as Fs. Files opened before a PowerCut fail every later call (UNAVAILABLE),
// as handles of a process that did not survive it. A MemFs must outlive its files and
// wrappers.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "railyard/storage/fs.h"

namespace railyard::storage {

class MemFs final : public Fs {
 public:
  MemFs();
  ~MemFs() override;

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path,
                                                        const OpenOptions& options) override;
  Result<std::unique_ptr<ReadableFile>> NewReadableFile(const std::string& path,
                                                        const OpenOptions& options = {}) override;
  Status CreateDir(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status RemoveFile(const std::string& path) override;
  Status RemoveDir(const std::string& path) override;
  Result<std::vector<DirEntry>> ListDir(const std::string& dir) override;
  Result<FsStats> StatFs(const std::string& path) override;
  Status SyncDir(const std::string& dir) override;
  Result<uint64_t> FileSize(const std::string& path) override;
  bool Exists(const std::string& path) override;

  // Replaces the visible state with the durable one (see above); open files go dead.
  void PowerCut();

  struct Inode;
  struct State;

 private:
  std::shared_ptr<State> state_;
};

// A new, empty MemFs (just the root directory, durable).
std::unique_ptr<MemFs> NewMemFs();

// Forwards to a MemFs (not owned; must outlive it) and counts every call made through it, on
// the Fs and on the files it opened (reads, Close and the page-cache hints included). After
// CutPowerAfter(n), calls numbered above n do nothing and fail with UNAVAILABLE ("power cut"),
// as if the machine had stopped at that point; PowerCut() then drops what the base had not
// made durable and lets calls through again.
// Thread-safety: as Fs.
class PowerCutFs final : public Fs {
 public:
  explicit PowerCutFs(MemFs* base) : base_(base) {}

  // Calls so far (1-based numbering: the next call is calls() + 1).
  uint64_t calls() const;
  // Every call numbered above `n` fails. UINT64_MAX: never.
  void CutPowerAfter(uint64_t n);
  // True once a call was refused since the last PowerCut.
  bool power_lost() const;
  // "<call number> <operation> <path>", one per call so far, for test messages.
  std::vector<std::string> trace() const;
  // base->PowerCut(), then the power is back (no cut pending).
  void PowerCut();

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path,
                                                        const OpenOptions& options) override;
  Result<std::unique_ptr<ReadableFile>> NewReadableFile(const std::string& path,
                                                        const OpenOptions& options = {}) override;
  Status CreateDir(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status RemoveFile(const std::string& path) override;
  Status RemoveDir(const std::string& path) override;
  Result<std::vector<DirEntry>> ListDir(const std::string& dir) override;
  Result<FsStats> StatFs(const std::string& path) override;
  Status SyncDir(const std::string& dir) override;
  Result<uint64_t> FileSize(const std::string& path) override;
  bool Exists(const std::string& path) override;

  // Counts a call; UNAVAILABLE when the power is out. Used by the wrapped files.
  Status Call(std::string_view op, const std::string& path);

 private:
  MemFs* base_;
  mutable std::mutex mu_;
  uint64_t calls_ = 0;
  uint64_t cut_after_ = UINT64_MAX;
  bool lost_ = false;
  std::vector<std::string> trace_;
};

}  // namespace railyard::storage
