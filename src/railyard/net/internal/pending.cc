#include "railyard/net/internal/pending.h"

#include <fmt/format.h>

#include <algorithm>
#include <vector>

namespace railyard::net::internal {

Status DeadlinePassed(std::string_view who, std::span<const PendingRequest> pending, size_t waited,
                      const std::function<std::string(int)>& describe_peer) {
  constexpr size_t kShown = 4;
  std::vector<int> ranks;
  for (const PendingRequest& p : pending) ranks.push_back(p.peer);
  std::sort(ranks.begin(), ranks.end());
  ranks.erase(std::unique(ranks.begin(), ranks.end()), ranks.end());
  std::string detail;
  for (size_t i = 0; i < pending.size() && i < kShown; ++i) {
    const PendingRequest& p = pending[i];
    detail += fmt::format("{}{} {} tag {:#x} ({} of {} bytes){}", i == 0 ? ": " : "; ",
                          p.is_send ? "send to" : "receive from", describe_peer(p.peer), p.tag,
                          p.done_bytes, p.bytes, p.note);
  }
  if (pending.size() > kShown) detail += fmt::format("; and {} more", pending.size() - kShown);
  return DeadlineExceeded(
      "{}: deadline passed with {} of {} requests pending, waiting on rank(s) {}{}", who,
      pending.size(), waited, DescribeRanks(ranks), detail);
}

}  // namespace railyard::net::internal
