// Progress: reading the completion queue and handling what completed, and the liveness
// check for peers on this kernel; see ofi_transport_impl.h.
#include <algorithm>
#include <thread>

#include "railyard/base/hmac.h"
#include "railyard/base/logging.h"
#include "railyard/net/ofi/ofi_transport_impl.h"

namespace railyard::net::ofi {
namespace {

const base::Logger kLog("ofi");

}  // namespace

void OfiTransport::OnCompletion(Op* op, size_t len) {
  switch (op->kind) {
    case Op::Kind::kRecv:
      op->received = len;
      if (!op->bounce.empty()) {
        if (len > op->len) return FailOp(op, TooLong(op->peer, op->tag, len, op->len));
        if (len > 0 && !op->abandoned) std::memcpy(op->buf, op->bounce.data(), len);
      }
      break;
    case Op::Kind::kHelloRecv:
      return OnHello(op, len);
    case Op::Kind::kCtrlRecv:
      return OnCtrl(op, len);
    default:
      break;
  }
  Finish(op);
}

void OfiTransport::OnHello(Op* op, size_t len) {
  int peer = op->peer;
  std::string expected = Proof(options_.secret, peer, options_.rank, nonce_);
  bool ok = len == kProofBytes &&
            base::ConstantTimeEqual(std::string_view(op->owned.data(), len), expected);
  Finish(op);
  if (!ok) {
    return FailPeer(peer, PermissionDenied("{}: {} did not prove the job secret in its HELLO "
                                           "({} bytes); refusing its data: is it a process of "
                                           "another job or started with another secret?",
                                           Self(), Who(peer), len));
  }
  peers_[peer].proven = true;
  PostControlRecv(peer, Op::Kind::kCtrlRecv);
}

void OfiTransport::OnCtrl(Op* op, size_t len) {
  int peer = op->peer;
  std::string msg = op->owned.substr(0, len);
  Finish(op);
  if (!peers_[peer].failure.ok()) return;
  PostControlRecv(peer, Op::Kind::kCtrlRecv);
  if (len < kCtrlHeaderBytes || GetU32(msg.data()) != kCtrlMagic) {
    kLog.Warn("{}: dropping a malformed control message ({} bytes) from {}", Self(), len,
              Who(peer));
    return;
  }
  auto type = static_cast<CtrlType>(msg[4]);
  uint64_t seq = GetU64(msg.data() + 8);
  std::string text = msg.substr(kCtrlHeaderBytes);
  switch (type) {
    case CtrlType::kPing:
      SendCtrl(peer, CtrlType::kPong, seq, activity_);
      break;
    case CtrlType::kPong:
      peers_[peer].pong_seq = std::max(peers_[peer].pong_seq, seq);
      peers_[peer].pong_activity = std::move(text);
      break;
    case CtrlType::kClearToSend:
      return OnClearToSend(peer, seq, text);
    case CtrlType::kRequestToSend:
      return OnRequestToSend(peer, seq, text);
    case CtrlType::kReject:
      return OnReject(peer, seq, text);
    case CtrlType::kAbort:
      if (!failure_.failed()) {
        failure_.Fail(Aborted("{}: {} aborted the job: {}", Self(), Who(peer), text));
        kLog.Warn("{}", failure_.status().message());
      }
      break;
  }
}

void OfiTransport::OnError(const fi_cq_err_entry& err) {
  Op* op = static_cast<Op*>(err.op_context);
  if (op == nullptr) {
    kLog.Warn("{}: completion error without an operation: {}", Self(), fi_->Error(-err.err));
    return;
  }
  if (err.err == FI_ECANCELED) {
    if (op->abandoned) {
      op->status = Aborted("{}: cancelled", Self());
      return Finish(op);
    }
    // Not cancelled by us: rxm cancels what is posted to a peer whose connection broke.
    int peer = op->peer;
    Status st = peers_[peer].failure.ok()
                    ? Unavailable(
                          "{}: {} {} tag {:#x}: the provider cancelled it (connection "
                          "to the peer lost: process died or link failed)",
                          Self(), KindVerb(op->kind), Who(peer), op->tag)
                    : peers_[peer].failure;
    FailOp(op, st);
    return FailPeer(peer, st);
  }
  char buf[256] = "";
  const char* detail = fi_cq_strerror(cq_.get(), err.prov_errno, err.err_data, buf, sizeof(buf));
  std::string what = fmt::format("{} {} tag {:#x}", KindVerb(op->kind), Who(op->peer), op->tag);
  if (err.err == FI_ETRUNC && op->kind == Op::Kind::kRecv) {
    // rxm reports the overflow only for receives posted before the message came; for one
    // matched from the unexpected queue it reports neither length.
    size_t actual = err.olen > 0 ? op->len + err.olen : (err.len > op->len ? err.len : 0);
    std::string length = actual > 0 ? fmt::format("is {} bytes", actual)
                                    : std::string("is longer (the provider did not say how long)");
    return FailOp(op, DataLoss("{}: message from {} with tag {:#x} {} but the posted receive "
                               "holds {}",
                               Self(), Who(op->peer), op->tag, length, op->len));
  }
  if (op->kind == Op::Kind::kHelloRecv) return OnHello(op, op->len + err.olen);
  Status st = Unavailable("{}: {} failed: {} ({})", Self(), what, fi_->Error(-err.err),
                          detail != nullptr ? detail : "no provider detail");
  // A lost connection fails everything with the peer; so does any failed control message,
  // since probes and aborts could no longer be trusted to get through.
  int peer = op->peer;
  bool whole_peer = IsConnectionError(err.err) || !op->user;
  FailOp(op, st);  // may free op
  if (whole_peer) FailPeer(peer, st);
}

int OfiTransport::PollCq() {
  int handled = 0;
  fi_cq_tagged_entry entries[kCqBatch];
  for (;;) {
    ssize_t n = fi_cq_read(cq_.get(), entries, kCqBatch);
    if (n > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        OnCompletion(static_cast<Op*>(entries[i].op_context), entries[i].len);
      }
      handled += static_cast<int>(n);
      continue;
    }
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(cq_.get(), &err, 0) > 0) {
        OnError(err);
        ++handled;
        continue;
      }
    } else if (n != -FI_EAGAIN) {
      kLog.Warn("{}: fi_cq_read: {}", Self(), fi_->Error(static_cast<int>(n)));
    }
    return handled;
  }
}

void OfiTransport::Progress(std::unique_lock<std::mutex>& lock, base::Deadline deadline) {
  int n = PollCq();
  FlushAll();
  if (n > 0) return;
  auto spin_end = base::Clock::now() + kSpin;
  while (base::Clock::now() < spin_end) {
    if (PollCq() > 0) return FlushAll();
  }
  int timeout_ms = std::clamp(deadline.PollTimeoutMs(), 0, kMaxBlockMs);
  if (deadline.IsNever()) timeout_ms = kMaxBlockMs;
  if (timeout_ms == 0) return;
  if (cq_waitable_) {
    fi_cq_tagged_entry entries[kCqBatch];
    lock.unlock();  // Abort() may come from another thread meanwhile
    ssize_t got = fi_cq_sread(cq_.get(), entries, kCqBatch, nullptr, timeout_ms);
    lock.lock();
    for (ssize_t i = 0; i < got; ++i) {
      OnCompletion(static_cast<Op*>(entries[i].op_context), entries[i].len);
    }
    if (got < 0 && got != -FI_EAGAIN && got != -FI_EAVAIL && got != -FI_ETIMEDOUT &&
        got != -FI_EINTR) {
      kLog.Debug("{}: fi_cq_sread: {}; napping instead", Self(), fi_->Error(static_cast<int>(got)));
      cq_waitable_ = false;
    }
  } else {
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    lock.lock();
  }
  PollCq();
  FlushAll();
}

void OfiTransport::CheckLiveness(int peer, const Op* pending) {
  PeerState& p = peers_[peer];
  if (!p.watch || !p.failure.ok() || !p.watch->Exited()) return;
  PollCq();  // take what it sent before it died
  if (!p.failure.ok()) return;
  std::string what = pending == nullptr
                         ? std::string("a probe")
                         : fmt::format("{} tag {:#x}", KindVerb(pending->kind), pending->tag);
  FailPeer(peer,
           Unavailable("{}: {}: process exited while {} was pending", Self(), Who(peer), what));
}

}  // namespace railyard::net::ofi
