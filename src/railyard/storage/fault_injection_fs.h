// A forwarding Fs that lets a test fail, block or end the process at a chosen file operation.
//
//   FaultInjectionFs faulty(DefaultFs());
//   faulty.FailNth(FsOp::kWrite, 3, ENOSPC);       // the third write from now: disk full
//   WriterOptions o;  o.fs = &faulty;              // the code under test sees the failure
//
// Every operation passes the hook first: creates, writes, syncs, renames, removals, mkdirs
// and directory fsyncs, and also opens for reading and reads (so a test can fail a read with
// EIO, or a DATA_LOSS standing for a short read). Allocate, the page-cache hints, Close,
// listings and stat calls are forwarded without it.
//
// Thread-safety: as Fs; the hook is called from whichever thread runs the operation, so it
// must be thread-safe. Set hooks before sharing the object.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/storage/fs.h"

namespace railyard::storage {

enum class FsOp { kCreate, kWrite, kSync, kRename, kRemove, kMkdir, kSyncDir, kOpen, kRead };
std::string_view FsOpName(FsOp op);

struct FsOpInfo {
  FsOp op;
  std::string path;
  uint64_t seq = 0;  // 1-based count of intercepted operations through this wrapper
};

// Forwards to `base` (not owned; must outlive it), calling the hook before every intercepted
// operation (see above). A non-OK status from the hook fails the operation without
// forwarding it. The hook may also block, or end the process, to simulate a crash at a
// chosen point.
class FaultInjectionFs final : public Fs {
 public:
  using Hook = std::function<Status(const FsOpInfo&)>;
  explicit FaultInjectionFs(Fs* base) : base_(base) {}

  void SetHook(Hook hook) { hook_ = std::move(hook); }
  // The nth (1-based, counted from this call) operation of kind `op` fails with
  // ErrnoStatus(err, ...) naming the operation and path; later ones succeed. Replaces the hook.
  void FailNth(FsOp op, uint64_t n, int err);
  // Intercepted operations seen so far (failed ones included).
  uint64_t op_count() const { return seq_.load(); }

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path,
                                                        const OpenOptions& options) override;
  Result<std::unique_ptr<ReadableFile>> NewReadableFile(const std::string& path,
                                                        const OpenOptions& options = {}) override;
  Status CreateDir(const std::string& path) override;
  Status Rename(const std::string& from, const std::string& to) override;
  Status RemoveFile(const std::string& path) override;
  Status RemoveDir(const std::string& path) override;
  Result<std::vector<DirEntry>> ListDir(const std::string& dir) override {
    return base_->ListDir(dir);
  }
  Result<FsStats> StatFs(const std::string& path) override { return base_->StatFs(path); }
  Status SyncDir(const std::string& dir) override;
  Result<uint64_t> FileSize(const std::string& path) override { return base_->FileSize(path); }
  bool Exists(const std::string& path) override { return base_->Exists(path); }

  // Counts an operation and runs the hook. Used by the wrapped files.
  Status Intercept(FsOp op, const std::string& path);

 private:
  Fs* base_;
  Hook hook_;
  std::atomic<uint64_t> seq_{0};
};

}  // namespace railyard::storage
