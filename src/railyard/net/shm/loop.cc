// What a waiting rank attends to besides its rings: whether it has work, the doorbell it
// sleeps on (shm_transport_impl.h), probes to answer, an abort from a peer, and peers that
// died; see shm_transport_impl.h.
#include <algorithm>
#include <cstring>

#include "railyard/base/logging.h"
#include "railyard/net/shm/shm_transport_impl.h"

namespace railyard::net::shm {
bool ShmTransport::HasWork() {
  SegmentHeader* h = own_.header();
  if (failure_.abort_requested() || h->abort_state.load(std::memory_order_acquire) != 0 ||
      h->probe_flag.load(std::memory_order_acquire) != 0) {
    return true;
  }
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    Peer& p = P(r);
    if (p.in.HasData() || (!p.sends.empty() && p.out.SpaceFreed())) return true;
  }
  return false;
}

void ShmTransport::AnswerProbes() {
  SegmentHeader* h = own_.header();
  if (h->probe_flag.load(std::memory_order_relaxed) == 0) return;
  h->probe_flag.exchange(0, std::memory_order_acq_rel);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    shm::ProbeSlot* slot = own_.probe_slot(r);
    uint64_t req = slot->request.load(std::memory_order_acquire);
    if (req == slot->answer.load(std::memory_order_relaxed)) continue;
    size_t n = std::min(activity_.size(), shm::kMaxActivityBytes);
    std::memcpy(slot->activity, activity_.data(), n);
    slot->activity_len = static_cast<uint32_t>(n);
    slot->answer.store(req, std::memory_order_release);
    shm::WakeIfSleeping(P(r).header);
  }
}

void ShmTransport::CheckRemoteAbort() {
  SegmentHeader* h = own_.header();
  if (failed() || h->abort_state.load(std::memory_order_acquire) != 2) return;
  int who = h->abort_rank;
  std::string reason(h->abort_reason, std::min<size_t>(h->abort_len, shm::kMaxAbortReasonBytes));
  std::string name = who >= 0 && who < size_ ? DescribePeer(infos_[static_cast<size_t>(who)])
                                             : fmt::format("rank {}", who);
  SetFatal(Aborted("{} aborted the job: {}", name, reason));
}

void ShmTransport::CheckLiveness() {
  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || P(r).pending == 0) continue;
    if (!P(r).watch.Exited()) continue;
    Progress();  // take what it published before it died
    if (P(r).pending == 0 || failed()) continue;
    const Op* pending = nullptr;
    ops_.ForEach([&](const Op& op) {
      if (op.peer == r && !op.complete && (pending == nullptr || op.id < pending->id)) {
        pending = &op;
      }
    });
    SetFatal(Unavailable(
        "{}: process exited while {} tag {} was pending ({} of {} bytes)", DescribePeer(P(r).info),
        pending != nullptr && pending->is_send ? "a send with" : "a receive of",
        Hex(pending != nullptr ? pending->tag : 0), pending != nullptr ? pending->done_bytes : 0,
        pending != nullptr ? pending->len : 0));
  }
}

}  // namespace railyard::net::shm
