// A forwarding Fs that lets a test fail, block or end the process at a chosen file operation.
//
//   FaultInjectionFs faulty(DefaultFs());
//   faulty.FailNth(FsOp::kWrite, 3, ENOSPC);       // the third write from now: disk full
//   WriterOptions o;  o.fs = &faulty;              // the code under test sees the failure
//
// By default the hook sees the operations a fault is injected at: creates, writes, syncs,
// renames, removals, mkdirs and directory fsyncs, and also opens for reading and reads (so a
// test can fail a read with EIO, or with a DATA_LOSS standing for a short read). Allocate,
// the page-cache hints, Close, listings and stat calls go straight to the base. Constructed
// with `every_call`, the hook sees those too (PowerCutFs, power_cut_fs.h, counts every call
// that way); a refused Exists answers false.
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

enum class FsOp {
  kCreate,
  kWrite,
  kSync,
  kRename,
  kRemove,
  kMkdir,
  kSyncDir,
  kOpen,
  kRead,
  // Passed to the hook only with `every_call`:
  kAllocate,
  kWriteback,
  kDropCache,
  kClose,
  kSize,
  kList,
  kStatFs,
  kStat,
  kExists,
};
std::string_view FsOpName(FsOp op);

struct FsOpInfo {
  FsOp op;
  std::string path;  // for kRename, "<from> -> <to>"
  uint64_t seq = 0;  // 1-based count of intercepted operations through this wrapper
};

// Forwards to `base` (not owned; must outlive it and the files opened through it), calling
// the hook before every intercepted operation (see above). A non-OK status from the hook
// fails the operation without forwarding it. The hook may also block, or end the process,
// to simulate a crash at a chosen point.
class FaultInjectionFs : public Fs {
 public:
  using Hook = std::function<Status(const FsOpInfo&)>;
  explicit FaultInjectionFs(Fs* base, bool every_call = false)
      : base_(base), every_call_(every_call) {}

  void SetHook(Hook hook) { hook_ = std::move(hook); }
  // The nth (1-based, counted from this call) operation of kind `op` fails with
  // ErrnoStatus(err, ...) naming the operation and path; later ones succeed. Replaces the hook.
  void FailNth(FsOp op, uint64_t n, int err);
  // Intercepted operations seen so far (failed ones included).
  uint64_t op_count() const { return seq_.load(); }

  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path,
                                                        const OpenOptions& options) final;
  Result<std::unique_ptr<ReadableFile>> NewReadableFile(const std::string& path,
                                                        const OpenOptions& options = {}) final;
  Status CreateDir(const std::string& path) final;
  Status Rename(const std::string& from, const std::string& to) final;
  Status RemoveFile(const std::string& path) final;
  Status RemoveDir(const std::string& path) final;
  Result<std::vector<DirEntry>> ListDir(const std::string& dir) final;
  Result<FsStats> StatFs(const std::string& path) final;
  Status SyncDir(const std::string& dir) final;
  Result<uint64_t> FileSize(const std::string& path) final;
  bool Exists(const std::string& path) final;

  // Counts an operation and runs the hook (OK without either for an operation outside the
  // intercepted set). Used by the wrapped files.
  Status Intercept(FsOp op, const std::string& path);

 private:
  Fs* base_;
  const bool every_call_;
  Hook hook_;
  std::atomic<uint64_t> seq_{0};
};

}  // namespace railyard::storage
