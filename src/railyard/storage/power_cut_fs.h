// A wrapper over the in-memory Fs that cuts the power at a chosen call, for crash tests.
//
//   std::unique_ptr<MemFs> mem = NewMemFs();
//   PowerCutFs fs(mem.get());
//   fs.CutPowerAfter(fs.calls() + 17);   // the 18th call from now on fails, as do all later
//   Status st = writer->Save(...);       // through &fs: fails once the power is gone
//   fs.PowerCut();                       // drop what was not durable; the power is back
//   auto reader = LoadLatest("/ckpt", {.fs = &fs});
//
// Every call made through it is counted, on the Fs and on the files it opened (reads, Close
// and the page-cache hints included). After CutPowerAfter(n), calls numbered above n do
// nothing and fail with UNAVAILABLE ("power cut"), as if the machine had stopped at that
// point; PowerCut() then drops what the MemFs had not made durable and lets calls through
// again.
//
// Thread-safety: as Fs.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/storage/mem_fs.h"

namespace railyard::storage {

class PowerCutFs final : public Fs {
 public:
  // `base` is not owned and must outlive this wrapper and the files opened through it.
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
