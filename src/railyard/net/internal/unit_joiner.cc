#include "railyard/net/internal/unit_joiner.h"

#include <algorithm>
#include <cstring>

namespace railyard::net {

void UnitJoiner::Feed(const ConsumingReceiver::Consumer& consume, size_t granule, uint64_t at,
                      const char* data, size_t n) {
  if (len_ > 0) {  // complete the split unit first
    const size_t take = std::min(granule - len_, n);
    std::memcpy(head_ + len_, data, take);
    len_ += take;
    data += take;
    n -= take;
    at += take;
    if (len_ < granule) return;
    consume(at - granule, head_, granule);
    len_ = 0;
  }
  const size_t whole = n / granule * granule;
  if (whole > 0) consume(at, data, whole);
  len_ = n - whole;
  if (len_ > 0) std::memcpy(head_, data + whole, len_);
}

void UnitJoiner::Flush(const ConsumingReceiver::Consumer& consume, uint64_t end) {
  if (len_ == 0) return;
  consume(end - len_, head_, len_);
  len_ = 0;
}

}  // namespace railyard::net
