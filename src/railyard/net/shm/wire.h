// What the shm backend writes into a peer's ring: each message is a MessageHeader record
// followed by its payload; records start on 64-byte boundaries (shm_ring.h). The segment's
// own layout (rings, probe slots, abort slot, window) is shm_ring.h's.
//
// Internal to net/shm. Thread-safety: constants and plain structs.
#pragma once

#include <cstdint>

#include "railyard/net/shm/shm_ring.h"

namespace railyard::net::shm {

inline constexpr uint64_t kHeaderMagic = 0x67736d7972ULL;  // "rymsg"

// Precedes every message in a ring.
struct alignas(64) MessageHeader {
  uint64_t magic;
  uint64_t tag;
  uint64_t len;
  uint64_t seq;  // per (sender, receiver) stream, for error messages and sanity
};
static_assert(sizeof(MessageHeader) == kRecordAlign);

}  // namespace railyard::net::shm
