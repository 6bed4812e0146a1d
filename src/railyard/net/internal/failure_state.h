// The failed state every transport keeps (transport.h): the first error it returned from a
// wait, which every later call returns too, and the abort request that any thread may make.
//
//   if (Status st = failure_.status(); !st.ok()) return st;  // a failed transport
//   failure_.Fail(DeadlineExceeded(...));                    // the first error stays
//   if (failure_.RequestAbort(reason)) { tell the peers }    // once, from any thread
//
// Internal to net/. Thread-safety: every method may be called from any thread; status() costs
// one atomic load while nothing failed.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <string_view>

#include "railyard/base/status.h"

namespace railyard::net::internal {

class FailureState {
 public:
  // Ok until the first Fail, then that error.
  Status status() const;
  bool failed() const { return failed_.load(std::memory_order_acquire); }
  // Records `error` (not Ok) unless an error is already recorded.
  void Fail(Status error);

  // True for the first call only: that caller tells the peers. The reason is kept for
  // abort_reason(); later calls change nothing.
  bool RequestAbort(std::string_view reason);
  bool abort_requested() const { return abort_requested_.load(std::memory_order_acquire); }
  std::string abort_reason() const;

 private:
  mutable std::mutex mu_;
  std::atomic<bool> failed_{false};
  Status error_;  // guarded by mu_
  std::atomic<bool> abort_requested_{false};
  std::string abort_reason_;  // guarded by mu_
};

}  // namespace railyard::net::internal
