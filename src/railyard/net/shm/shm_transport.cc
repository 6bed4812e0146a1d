// The shm Transport itself: post, match, wait, probe, abort. See shm_transport.h for the
// model and shm_transport_impl.h for where each job lives.
#include "railyard/net/shm/shm_transport.h"

#include <algorithm>
#include <cstring>

#include "railyard/base/logging.h"
#include "railyard/net/internal/pending.h"
#include "railyard/net/internal/probe_set.h"
#include "railyard/net/shm/shm_transport_impl.h"

namespace railyard::net::shm {
Status ShmTransport::Usable() {
  if (failed()) return failure_.status();  // the first error stays, even after a later Abort
  if (started_.load(std::memory_order_relaxed)) CheckRemoteAbort();
  return failure_.status();
}

Op* ShmTransport::NewOp(bool is_send, int peer, Tag tag, size_t len) {
  Op* op = ops_.Add();
  op->is_send = is_send;
  op->peer = peer;
  op->tag = tag;
  op->len = len;
  if (peer != rank_) ++P(peer).pending;
  return op;
}

void ShmTransport::Finish(Op* op, Status status) {
  if (op->complete) return;
  op->complete = true;
  op->status = std::move(status);
  if (op->peer != rank_) --P(op->peer).pending;
}

Result<Request> ShmTransport::PostSend(int peer, Tag tag, const void* data, size_t len) {
  RY_RETURN_IF_ERROR(Usable());
  if (peer < 0 || peer >= size_) {
    return InvalidArgument("{}: send to rank {} of a {}-rank job", Me(), peer, size_);
  }
  if (!started_.load()) return FailedPrecondition("shm transport of {} is not started", Me());
  if (peer != rank_ && !P(peer).send_broken.ok()) return P(peer).send_broken;
  Op* op = NewOp(true, peer, tag, len);
  op->src = static_cast<const char*>(data);
  if (peer == rank_) {  // to self: match or buffer now; the caller's buffer is free at once
    if (std::optional<Op*> recv = matcher_.TakeRecv(peer, tag)) {
      Deliver(*recv, op->src, len);
    } else {
      auto u = std::make_unique<Unexpected>();
      u->len = len;
      u->data = spare_.Take(len);
      if (len > 0) std::memcpy(u->data.data(), data, len);
      u->complete = true;
      matcher_.AddMessage(peer, tag, std::move(u));
    }
    Finish(op);
  } else {
    P(peer).sends.push_back(op);
  }
  return Request{op->id};
}

Result<Request> ShmTransport::PostRecv(int peer, Tag tag, void* data, size_t len) {
  return PostRecvImpl(peer, tag, data, len, 1, nullptr);
}

Result<Request> ShmTransport::PostRecvConsume(int peer, Tag tag, size_t len, size_t granule,
                                              Consumer consume) {
  if (granule == 0 || granule > UnitJoiner::kMaxGranule || !consume) {
    return InvalidArgument(
        "{}: consuming receive needs a consumer and a granule of 1 to {} "
        "bytes, got {}",
        Me(), UnitJoiner::kMaxGranule, granule);
  }
  return PostRecvImpl(peer, tag, nullptr, len, granule, std::move(consume));
}

Result<Request> ShmTransport::PostRecvImpl(int peer, Tag tag, void* data, size_t len,
                                           size_t granule, Consumer consume) {
  RY_RETURN_IF_ERROR(Usable());
  if (peer < 0 || peer >= size_) {
    return InvalidArgument("{}: receive from rank {} of a {}-rank job", Me(), peer, size_);
  }
  if (!started_.load()) return FailedPrecondition("shm transport of {} is not started", Me());
  Op* op = NewOp(false, peer, tag, len);
  op->dst = static_cast<char*>(data);
  op->granule = granule;
  op->consume = std::move(consume);
  if (std::optional<std::unique_ptr<Unexpected>> u = matcher_.TakeMessage(peer, tag)) {
    TakeUnexpected(op, std::move(*u));
  } else {
    matcher_.AddRecv(peer, tag, op);
  }
  return Request{op->id};
}

Status ShmTransport::WaitAll(std::span<const Request> requests, Deadline deadline) {
  ops_.StartWait();
  internal::WaitSet<Op> w = ops_.Collect(requests, Me());
  // Waited requests are consumed whatever the outcome (transport.h); any error but the
  // caller's own mistake fails the transport: part of an abandoned send may be in a peer's
  // ring, so the streams cannot be trusted again.
  auto consume = [&](Status st) {
    for (Op* op : w.ops) {
      if (!op->complete) Cancel(op);
      if (!op->is_send && op->status.ok()) ops_.SetReceived(op->id, op->done_bytes);
      ops_.Erase(op->id);
    }
    if (!st.ok() && st.code() != StatusCode::kInvalidArgument) {
      SetFatal(st);
      return failure_.status();
    }
    return st;
  };
  if (!w.status.ok()) return consume(w.status);
  base::Clock::time_point idle_since = base::Clock::now();
  for (;;) {
    if (Status st = Usable(); !st.ok()) return consume(st);
    bool moved = Progress();
    AnswerProbes();
    if (failed()) return consume(failure_.status());
    bool all = true;
    for (Op* op : w.ops) {
      if (op->complete && !op->status.ok()) return consume(op->status);
      all &= op->complete;
    }
    if (all) return consume(Status::Ok());
    base::Clock::time_point now = base::Clock::now();
    if (now >= next_liveness_check_) {
      next_liveness_check_ = now + kLivenessTick;
      CheckLiveness();
      if (failed()) return consume(failure_.status());
    }
    if (deadline.Expired()) {
      std::vector<internal::PendingRequest> left;
      for (Op* op : w.ops) {
        if (op->complete) continue;
        left.push_back({.peer = op->peer,
                        .is_send = op->is_send,
                        .tag = op->tag,
                        .done_bytes = op->done_bytes,
                        .bytes = op->len});
      }
      return consume(internal::DeadlinePassed(Me(), left, w.ops.size(), [this](int peer) {
        return DescribePeer(infos_[static_cast<size_t>(peer)]);
      }));
    }
    Backoff(moved, now, &idle_since, deadline, [this] { return HasWork(); });
  }
}

std::vector<ProbeResult> ShmTransport::Probe(std::span<const int> ranks, Deadline deadline) {
  internal::ProbeSet probes(ranks, rank_, size_, activity_);
  std::vector<uint64_t> seq(ranks.size(), 0);
  const bool started = started_.load(std::memory_order_acquire);
  for (size_t i : probes.Pending()) {
    const int r = probes.rank(i);
    if (!started) {
      probes.Unresponsive(i, "this rank's transport has not started");
      continue;
    }
    seq[i] = ++probe_seq_;
    P(r).segment.probe_slot(rank_)->request.store(seq[i], std::memory_order_release);
    P(r).header->probe_flag.store(1, std::memory_order_release);
    shm::WakeIfSleeping(P(r).header);
  }
  auto answered = [&](size_t i) {
    return seq[i] != 0 &&
           P(probes.rank(i)).segment.probe_slot(rank_)->answer.load(std::memory_order_acquire) ==
               seq[i];
  };
  auto any_answer = [&] {
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (probes.pending(i) && answered(i)) return true;
    }
    return false;
  };
  const auto start = base::Clock::now();
  base::Clock::time_point next_check = start;
  while (!probes.settled()) {
    AnswerProbes();
    const auto now = base::Clock::now();
    const bool check = now >= next_check || deadline.Expired();
    if (check) next_check = now + kLivenessTick;
    for (size_t i : probes.Pending()) {
      Peer& p = P(probes.rank(i));
      if (answered(i)) {
        const shm::ProbeSlot* slot = p.segment.probe_slot(rank_);
        probes.Alive(i, std::string(slot->activity,
                                    std::min<size_t>(slot->activity_len, shm::kMaxActivityBytes)));
      } else if (!check) {
        continue;
      } else if (ProcessState st = p.watch.State(); st == ProcessState::kExited) {
        probes.Dead(i, "process exited");
      } else if (st == ProcessState::kStopped) {
        probes.Unresponsive(i, "process is stopped (SIGSTOP)");
      } else if (deadline.Expired()) {
        probes.Unresponsive(
            i, fmt::format(
                   "no answer within {} ms: the process runs but is not inside a "
                   "communication call (busy or hung)",
                   std::chrono::duration_cast<std::chrono::milliseconds>(now - start).count()));
      }
    }
    if (!probes.settled()) {
      Sleep(deadline, [&] {
        return failure_.abort_requested() ||
               own_.header()->probe_flag.load(std::memory_order_acquire) != 0 || any_answer();
      });
    }
  }
  return std::move(probes).Finish();
}

void ShmTransport::Abort(std::string_view reason, Deadline deadline) {
  (void)deadline;  // every step is a bounded store into shared memory
  if (!failure_.RequestAbort(reason)) return;
  SetFatal(Aborted("{} aborted the job: {}", Me(), reason));
  // Before Start has mapped the peers' segments Start signals it.
  if (started_.load(std::memory_order_acquire)) SignalAbort(std::string(reason));
}

void ShmTransport::SignalAbort(const std::string& text) {
  for (int r = 0; r < size_; ++r) {
    SegmentHeader* h = r == rank_ ? own_.header() : P(r).header;
    if (r != rank_) {
      uint32_t expected = 0;
      if (h->abort_state.compare_exchange_strong(expected, 1, std::memory_order_acquire)) {
        size_t n = std::min(text.size(), shm::kMaxAbortReasonBytes);
        std::memcpy(h->abort_reason, text.data(), n);
        h->abort_len = static_cast<uint32_t>(n);
        h->abort_rank = rank_;
        h->abort_state.store(2, std::memory_order_release);
      }
    }
    // Unconditional: our own WaitAll may sleep in another thread.
    h->doorbell.fetch_add(1, std::memory_order_release);
    shm::FutexWakeAll(&h->doorbell);
  }
}

}  // namespace railyard::net::shm
