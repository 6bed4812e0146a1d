// The DEADLINE_EXCEEDED every backend returns when a wait reaches its deadline, in one
// wording: which peers the pending requests wait on (transport.h requires them named), and
// for the first few what each is and how far it got.
//
//   std::vector<PendingRequest> left = ...;  // the wait's requests that did not complete
//   return Fail(DeadlinePassed(Me(), left, requests.size(), describe_peer));
//
// Internal to net/. Thread-safety: a pure function.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>

#include "railyard/base/status.h"
#include "railyard/net/transport.h"

namespace railyard::net::internal {

struct PendingRequest {
  int peer = -1;
  bool is_send = false;
  Tag tag = 0;
  uint64_t done_bytes = 0;  // moved so far, where the backend knows
  uint64_t bytes = 0;       // message length (send) or receive capacity
  std::string note;         // a backend's own remark, e.g. " (held: ...)"; may be empty
};

// "<who>: deadline passed with 2 of 3 requests pending, waiting on rank(s) 0,2: receive
// from rank 0 (node1 pid 7) tag 0x9 (0 of 8 bytes); ...", at most four described.
Status DeadlinePassed(std::string_view who, std::span<const PendingRequest> pending, size_t waited,
                      const std::function<std::string(int)>& describe_peer);

}  // namespace railyard::net::internal
