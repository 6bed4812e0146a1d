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
// and the page-cache hints included): it is a FaultInjectionFs over every call whose hook is
// the power switch (so do not replace the hook). After CutPowerAfter(n), calls numbered
// above n do nothing and fail with UNAVAILABLE ("power cut"), as if the machine had stopped
// at that point; PowerCut() then drops what the MemFs had not made durable and lets calls
// through again.
//
// Thread-safety: as Fs.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "railyard/storage/fault_injection_fs.h"
#include "railyard/storage/mem_fs.h"

namespace railyard::storage {

class PowerCutFs final : public FaultInjectionFs {
 public:
  // `base` is not owned and must outlive this wrapper and the files opened through it.
  explicit PowerCutFs(MemFs* base);

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

 private:
  // The hook: records the call; UNAVAILABLE when the power is out.
  Status Call(const FsOpInfo& info);

  MemFs* mem_;
  mutable std::mutex mu_;
  uint64_t calls_ = 0;
  uint64_t cut_after_ = UINT64_MAX;
  bool lost_ = false;
  std::vector<std::string> trace_;
};

}  // namespace railyard::storage
