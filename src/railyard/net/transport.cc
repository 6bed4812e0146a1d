#include "railyard/net/transport.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

namespace railyard::net {

std::string DescribePeer(const PeerInfo& peer) {
  if (peer.host.empty()) return fmt::format("rank {}", JobRank(peer));
  return fmt::format("rank {} ({} pid {})", JobRank(peer), peer.host, peer.pid);
}

std::string DescribeRanks(std::span<const int> ranks) {
  std::string out;
  for (size_t i = 0; i < ranks.size(); ++i) {
    if (i == 8 && ranks.size() > 9) {
      out += fmt::format(" and {} more", ranks.size() - i);
      break;
    }
    out += fmt::format("{}{}", i == 0 ? "" : ",", ranks[i]);
  }
  return out;
}

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
