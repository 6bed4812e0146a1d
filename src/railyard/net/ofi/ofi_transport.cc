// The ofi Transport itself: post, wait, probe, abort. See ofi_transport.h for the model and
// ofi_transport_impl.h for where each job lives.
#include "railyard/net/ofi/ofi_transport.h"

#include <algorithm>

#include "railyard/base/logging.h"
#include "railyard/net/internal/pending.h"
#include "railyard/net/internal/probe_set.h"
#include "railyard/net/ofi/ofi_transport_impl.h"

namespace railyard::net::ofi {
Result<Request> OfiTransport::Submit(Op* op) {
  op->user = true;
  PeerState& p = peers_[op->peer];
  if (!p.failure.ok()) {  // completes at once with the peer's failure
    op->status = p.failure;
    op->done = true;
    return Request{op->id};
  }
  Status st = PrepareLocal(op);
  if (!st.ok()) {
    ops_.Erase(op->id);
    return st;
  }
  if (op->kind == Op::Kind::kRecv) {
    op->index = p.recvs_posted[op->tag]++;
    if (auto a = p.announced.find({op->tag, op->index}); a != p.announced.end()) {
      size_t bytes = a->second;
      p.announced.erase(a);
      if (bytes > op->len) {  // the sender holds a message this receive cannot take
        SendCtrl(op->peer, CtrlType::kReject, op->tag,
                 fmt::format("s {} {} {}", op->index, bytes, op->len));
        op->status = TooLong(op->peer, op->tag, bytes, op->len);
        op->done = true;
        return Request{op->id};
      }
    }
    p.open_recvs[{op->tag, op->index}] = op;
    p.recvq.push_back(op);
    Flush(op->peer);
  } else if (op->kind == Op::Kind::kSend) {
    SubmitSend(op);
  } else {
    QueueSend(op);
  }
  return Request{op->id};
}

Result<Request> OfiTransport::PostSend(int peer, Tag tag, const void* data, size_t len) {
  std::lock_guard lock(mu_);
  RY_RETURN_IF_ERROR(Usable());
  RY_RETURN_IF_ERROR(CheckPeer(peer));
  if (tag >= kOfiMaxUserTag) {
    return InvalidArgument("{}: tag {:#x} is reserved (user tags are below 2^60)", Self(), tag);
  }
  Op* op = NewOp(Op::Kind::kSend, peer, tag, const_cast<void*>(data), len);
  return Submit(op);
}

Result<Request> OfiTransport::PostRecv(int peer, Tag tag, void* data, size_t len) {
  std::lock_guard lock(mu_);
  RY_RETURN_IF_ERROR(Usable());
  RY_RETURN_IF_ERROR(CheckPeer(peer));
  if (tag >= kOfiMaxUserTag) {
    return InvalidArgument("{}: tag {:#x} is reserved (user tags are below 2^60)", Self(), tag);
  }
  Op* op = NewOp(Op::Kind::kRecv, peer, tag, data, len);
  if (len < kEagerBytes) op->bounce.assign(kEagerBytes, '\0');
  return Submit(op);
}

Status OfiTransport::WaitAll(std::span<const Request> requests, base::Deadline deadline) {
  std::unique_lock lock(mu_);
  ops_.StartWait();
  internal::WaitSet<Op> w =
      ops_.Collect(requests, Self(), [](const Op& op) { return op.user && !op.abandoned; });
  auto consume = [&](Status result) {
    for (Op* op : w.ops) {
      if (op->done) {
        if (op->kind == Op::Kind::kRecv && op->status.ok()) ops_.SetReceived(op->id, op->received);
        ops_.Erase(op->id);
      } else {
        Abandon(op);
      }
    }
    // Any error but the caller's own mistake fails the transport (transport.h), a missed
    // deadline included: a send handed to the provider cannot be taken back.
    if (!result.ok() && result.code() != StatusCode::kInvalidArgument) {
      failure_.Fail(result);
      return failure_.status();
    }
    return result;
  };
  if (!w.status.ok()) return consume(w.status);
  if (failure_.failed()) return consume(failure_.status());
  if (!started_) return consume(Usable());
  auto next_check = base::Clock::now() + kLivenessTick;
  for (;;) {
    if (failure_.failed()) return consume(failure_.status());
    if (base::Clock::now() >= next_check) {
      next_check = base::Clock::now() + kLivenessTick;
      for (Op* op : w.ops) {
        if (!op->done) CheckLiveness(op->peer, op);
      }
    }
    bool all = true;
    for (Op* op : w.ops) {
      if (op->done && !op->status.ok()) return consume(op->status);
      if (!op->done && !peers_[op->peer].failure.ok()) return consume(peers_[op->peer].failure);
      all = all && op->done;
    }
    if (all) return consume(Status::Ok());
    if (deadline.Expired()) {
      std::vector<internal::PendingRequest> left;
      for (Op* op : w.ops) {
        if (op->done) continue;
        const auto& held = peers_[op->peer].awaiting_cts;
        bool is_held = std::find(held.begin(), held.end(), op) != held.end();
        left.push_back({.peer = op->peer,
                        .is_send = op->kind != Op::Kind::kRecv,
                        .tag = op->tag,
                        .done_bytes = 0,
                        .bytes = op->len,
                        .note = is_held ? " (held: that rank has not posted the receive)" : ""});
      }
      return consume(internal::DeadlinePassed(Self(), left, w.ops.size(),
                                              [this](int peer) { return Who(peer); }));
    }
    Progress(lock, deadline);
  }
}

std::vector<ProbeResult> OfiTransport::Probe(std::span<const int> ranks, base::Deadline deadline) {
  std::unique_lock lock(mu_);
  internal::ProbeSet probes(ranks, options_.rank, options_.size, activity_);
  std::vector<uint64_t> seqs(ranks.size(), 0);
  for (size_t i : probes.Pending()) {
    const PeerState& p = peers_[probes.rank(i)];
    if (!started_) {
      probes.Unresponsive(i, "this rank's transport has not started");
    } else if (!p.failure.ok()) {
      probes.Dead(i, p.failure.message());
    } else {
      seqs[i] = ++probe_seq_;
      SendCtrl(probes.rank(i), CtrlType::kPing, seqs[i], "");
    }
  }
  auto next_check = base::Clock::now();
  for (;;) {
    const bool check = base::Clock::now() >= next_check;
    if (check) next_check = base::Clock::now() + kLivenessTick;
    for (size_t i : probes.Pending()) {
      if (check) CheckLiveness(probes.rank(i), nullptr);
      const PeerState& p = peers_[probes.rank(i)];
      if (p.pong_seq >= seqs[i]) {
        probes.Alive(i, p.pong_activity);
      } else if (!p.failure.ok()) {
        probes.Dead(i, p.failure.message());
      }
    }
    if (probes.settled() || deadline.Expired()) break;
    Progress(lock, deadline);
  }
  return std::move(probes).Finish();
}

void OfiTransport::Abort(std::string_view reason, base::Deadline deadline) {
  std::unique_lock lock(mu_);
  if (!failure_.RequestAbort(reason)) return;
  // Peers are told even when this transport already failed otherwise.
  failure_.Fail(Aborted("{}: this rank aborted the job: {}", Self(), reason));
  if (!started_) return;
  for (int r = 0; r < options_.size; ++r) {
    if (r != options_.rank && peers_[r].failure.ok()) SendCtrl(r, CtrlType::kAbort, 0, reason);
  }
  // Progress until every ABORT left (best effort): with manual progress nothing moves unless
  // this rank reads its CQ.
  for (;;) {
    bool pending = false;
    ops_.ForEach([&](const Op& op) {
      if (op.kind == Op::Kind::kCtrlSend && !op.done && peers_[op.peer].failure.ok()) {
        pending = true;
      }
    });
    if (!pending || deadline.Expired()) return;
    Progress(lock, deadline);
  }
}

}  // namespace railyard::net::ofi
