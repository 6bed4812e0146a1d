#include "railyard/net/internal/probe_set.h"

#include <fmt/format.h>

namespace railyard::net::internal {

ProbeSet::ProbeSet(std::span<const int> ranks, int self, int size, std::string_view self_activity) {
  results_.resize(ranks.size());
  pending_.assign(ranks.size(), false);
  for (size_t i = 0; i < ranks.size(); ++i) {
    ProbeResult& r = results_[i];
    r.rank = ranks[i];
    if (r.rank < 0 || r.rank >= size) {
      r.state = ProbeResult::State::kDead;
      r.detail = fmt::format("no rank {} in a job of {} ranks", r.rank, size);
    } else if (r.rank == self) {
      r.state = ProbeResult::State::kAlive;
      r.activity = std::string(self_activity);
    } else {
      pending_[i] = true;
      ++left_;
    }
  }
}

std::vector<size_t> ProbeSet::Pending() const {
  std::vector<size_t> out;
  for (size_t i = 0; i < pending_.size(); ++i) {
    if (pending_[i]) out.push_back(i);
  }
  return out;
}

void ProbeSet::Settle(size_t i, ProbeResult::State state, std::string text, bool is_activity) {
  if (!pending_[i]) return;
  pending_[i] = false;
  --left_;
  results_[i].state = state;
  (is_activity ? results_[i].activity : results_[i].detail) = std::move(text);
}

void ProbeSet::Alive(size_t i, std::string activity) {
  Settle(i, ProbeResult::State::kAlive, std::move(activity), true);
}
void ProbeSet::Dead(size_t i, std::string detail) {
  Settle(i, ProbeResult::State::kDead, std::move(detail), false);
}
void ProbeSet::Unresponsive(size_t i, std::string detail) {
  Settle(i, ProbeResult::State::kUnresponsive, std::move(detail), false);
}

std::vector<ProbeResult> ProbeSet::Finish(std::string_view detail) && {
  for (size_t i = 0; i < results_.size(); ++i) {
    if (pending_[i]) Unresponsive(i, std::string(detail));
  }
  return std::move(results_);
}

}  // namespace railyard::net::internal
