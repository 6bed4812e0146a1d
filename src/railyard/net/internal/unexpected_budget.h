// The bytes a transport holds for messages that arrived before their receive was posted.
// Bounded, so that a peer (buggy, or hostile but knowing the secret) cannot make a rank
// allocate whatever it announces: a message that would pass the bound fails its peer before
// anything is allocated. The collectives post receives ahead and send in pieces of at most a
// few MiB; only point-to-point messages of this size sent well ahead of their receive come
// near the default.
//
//   RY_RETURN_IF_ERROR(budget_.Hold(len, tag));   // RESOURCE_EXHAUSTED when full
//   ... budget_.Release(len) once the receive took the message ...
//
// Internal to net/. Thread-safety: none; the transport's progress thread owns it.
#pragma once

#include <cstdint>

#include "railyard/base/status.h"
#include "railyard/net/transport.h"

namespace railyard::net::internal {

class UnexpectedBudget {
 public:
  static constexpr uint64_t kDefaultBytes = uint64_t{1} << 30;

  explicit UnexpectedBudget(uint64_t limit = kDefaultBytes) : limit_(limit) {}

  // Holds `bytes` for a message of `tag`; RESOURCE_EXHAUSTED (for the caller to prefix with
  // the peer's name) when they do not fit beside what is held.
  Status Hold(uint64_t bytes, Tag tag) {
    if (bytes > limit_ - held_) {
      return ResourceExhausted(
          "sent a message of {} bytes with tag {:#x} before its receive was posted; messages "
          "waiting for their receive may hold {} bytes in all and hold {} now (post the "
          "receive before the peer sends, or send in pieces)",
          bytes, tag, limit_, held_);
    }
    held_ += bytes;
    return Status::Ok();
  }
  void Release(uint64_t bytes) { held_ -= bytes; }
  uint64_t held() const { return held_; }
  uint64_t limit() const { return limit_; }

 private:
  uint64_t limit_;
  uint64_t held_ = 0;
};

}  // namespace railyard::net::internal
