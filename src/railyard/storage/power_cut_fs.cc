#include "railyard/storage/power_cut_fs.h"

#include <fmt/format.h>

namespace railyard::storage {

PowerCutFs::PowerCutFs(MemFs* base) : FaultInjectionFs(base, /*every_call=*/true), mem_(base) {
  SetHook([this](const FsOpInfo& info) { return Call(info); });
}

uint64_t PowerCutFs::calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_;
}

void PowerCutFs::CutPowerAfter(uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  cut_after_ = n;
}

bool PowerCutFs::power_lost() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lost_;
}

std::vector<std::string> PowerCutFs::trace() const {
  std::lock_guard<std::mutex> lock(mu_);
  return trace_;
}

void PowerCutFs::PowerCut() {
  std::lock_guard<std::mutex> lock(mu_);
  mem_->PowerCut();
  cut_after_ = UINT64_MAX;
  lost_ = false;
}

Status PowerCutFs::Call(const FsOpInfo& info) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t n = ++calls_;
  const std::string_view op = FsOpName(info.op);
  trace_.push_back(fmt::format("{} {} {}", n, op, info.path));
  if (n <= cut_after_) return Status::Ok();
  lost_ = true;
  return Unavailable("power cut: {} of '{}' (call {}) did not happen", op, info.path, n);
}

}  // namespace railyard::storage
