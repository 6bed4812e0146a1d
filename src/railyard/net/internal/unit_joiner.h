// Internal to net/: for backends that are a ConsumingReceiver (tcp, shm), hands a stream of
// bytes to a consumer in whole units, keeping the head of a unit split between two reads
// until its rest arrives (transport.h, ConsumingReceiver, says what a consumer may expect).
//
// Thread-safety: one joiner per receive, used by the thread that drives that receive.
#pragma once

#include <cstddef>
#include <cstdint>

#include "railyard/net/transport.h"

namespace railyard::net {

class UnitJoiner {
 public:
  static constexpr size_t kMaxGranule = 16;
  // `data` holds the message's bytes from offset `at` on; granule <= kMaxGranule.
  void Feed(const ConsumingReceiver::Consumer& consume, size_t granule, uint64_t at,
            const char* data, size_t n);
  // At the end of the bytes (`end` = offset just past them): hands over a trailing part unit.
  void Flush(const ConsumingReceiver::Consumer& consume, uint64_t end);
  void Reset() { len_ = 0; }

 private:
  char head_[kMaxGranule];
  size_t len_ = 0;
};

}  // namespace railyard::net
