#include "railyard/net/internal/failure_state.h"

namespace railyard::net::internal {

Status FailureState::status() const {
  if (!failed()) return Status::Ok();
  std::lock_guard lock(mu_);
  return error_;
}

void FailureState::Fail(Status error) {
  std::lock_guard lock(mu_);
  if (error_.ok() && !error.ok()) {
    error_ = std::move(error);
    failed_.store(true, std::memory_order_release);
  }
}

bool FailureState::RequestAbort(std::string_view reason) {
  std::lock_guard lock(mu_);
  if (abort_requested_.load(std::memory_order_relaxed)) return false;
  abort_reason_ = std::string(reason);
  abort_requested_.store(true, std::memory_order_release);
  return true;
}

std::string FailureState::abort_reason() const {
  std::lock_guard lock(mu_);
  return abort_reason_;
}

}  // namespace railyard::net::internal
