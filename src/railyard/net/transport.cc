#include "railyard/net/transport.h"

#include <fmt/format.h>

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

}  // namespace railyard::net
