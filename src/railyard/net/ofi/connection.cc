// Each peer's ordered queues: the HELLO first, control messages, posting to libfabric,
// failing a peer and giving up an operation; see ofi_transport_impl.h.
#include <algorithm>
#include <cstring>

#include "railyard/base/logging.h"
#include "railyard/net/ofi/ofi_transport_impl.h"

namespace railyard::net::ofi {
namespace {

const base::Logger kLog("ofi");

}  // namespace

bool IsConnectionError(int err) {
  switch (err) {
    case FI_ECONNREFUSED:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_EHOSTUNREACH:
    case FI_ENETUNREACH:
    case EPIPE:
    case FI_EIO:
    case FI_ESHUTDOWN:
      return true;
    default:
      return false;
  }
}

const char* KindVerb(Op::Kind k) {
  switch (k) {
    case Op::Kind::kRecv:
    case Op::Kind::kHelloRecv:
    case Op::Kind::kCtrlRecv:
      return "receiving";
    case Op::Kind::kWrite:
      return "writing";
    default:
      return "sending";
  }
}

Op* OfiTransport::NewOp(Op::Kind kind, int peer, Tag tag, void* buf, size_t len) {
  Op* op = ops_.Add();
  op->kind = kind;
  op->peer = peer;
  op->tag = tag;
  op->buf = buf;
  op->len = len;
  return op;
}

Status OfiTransport::PrepareLocal(Op* op) {
  if ((mr_mode_ & FI_MR_LOCAL) == 0) return Status::Ok();
  if (!op->bounce.empty()) {
    return Register(op->bounce.data(), op->bounce.size(), FI_RECV, &op->mr).status();
  }
  if (op->len == 0) return Status::Ok();
  uint64_t access = op->kind == Op::Kind::kRecv || op->kind == Op::Kind::kHelloRecv ||
                            op->kind == Op::Kind::kCtrlRecv
                        ? FI_RECV
                        : (op->kind == Op::Kind::kWrite ? FI_WRITE : FI_SEND);
  return Register(op->buf, op->len, access, &op->mr).status();
}

int OfiTransport::Post(Op* op) {
  fid_ep* ep = ep_.get();
  void* desc = op->mr.get() != nullptr ? fi_mr_desc(op->mr.get()) : nullptr;
  fi_addr_t addr = peers_[op->peer].addr;
  ssize_t rc = 0;
  switch (op->kind) {
    case Op::Kind::kSend:
    case Op::Kind::kHelloSend:
    case Op::Kind::kCtrlSend:
      rc = fi_tsend(ep, op->buf, op->len, desc, addr, op->tag, &op->ctx);
      break;
    case Op::Kind::kRecv:
    case Op::Kind::kHelloRecv:
    case Op::Kind::kCtrlRecv:
      if (!op->bounce.empty()) {
        rc = fi_trecv(ep, op->bounce.data(), op->bounce.size(), desc, addr, op->tag, 0, &op->ctx);
      } else {
        rc = fi_trecv(ep, op->buf, op->len, desc, addr, op->tag, 0, &op->ctx);
      }
      break;
    case Op::Kind::kWrite: {
      iovec iov{op->buf, op->len};
      fi_rma_iov rma{op->remote_addr, op->len, op->remote_key};
      fi_msg_rma msg{};
      msg.msg_iov = &iov;
      msg.desc = &desc;
      msg.iov_count = 1;
      msg.addr = addr;
      msg.rma_iov = &rma;
      msg.rma_iov_count = 1;
      msg.context = &op->ctx;
      // Delivery complete: once the write completes the bytes are visible at the target, so
      // a notify message sent afterwards cannot overtake them on any provider.
      rc = fi_writemsg(ep, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
      break;
    }
  }
  return static_cast<int>(rc);
}

void OfiTransport::QueueSend(Op* op) {
  EnsureHello(op->peer);
  peers_[op->peer].sendq.push_back(op);
  Flush(op->peer);
}

void OfiTransport::EnsureHello(int peer) {
  PeerState& p = peers_[peer];
  if (p.hello_sent) return;
  p.hello_sent = true;
  Op* op = NewInternalOp(Op::Kind::kHelloSend, peer, kHelloTag,
                         Proof(options_.secret, options_.rank, peer, p.nonce));
  if (op == nullptr) return;
  p.sendq.push_back(op);
}

Op* OfiTransport::QueueCtrl(int peer, CtrlType type, uint64_t seq, std::string_view text) {
  text = text.substr(0, kMaxCtrlText);
  std::string payload(kCtrlHeaderBytes + text.size(), '\0');
  PutU32(payload.data(), kCtrlMagic);
  payload[4] = static_cast<char>(type);
  PutU64(payload.data() + 8, seq);
  std::memcpy(payload.data() + kCtrlHeaderBytes, text.data(), text.size());
  Op* op = NewInternalOp(Op::Kind::kCtrlSend, peer, kCtrlTag, std::move(payload));
  if (op == nullptr) return nullptr;
  EnsureHello(peer);
  peers_[peer].sendq.push_back(op);
  return op;
}

void OfiTransport::SendCtrl(int peer, CtrlType type, uint64_t seq, std::string_view text) {
  if (QueueCtrl(peer, type, seq, text) != nullptr) Flush(peer);
}

Op* OfiTransport::NewInternalOp(Op::Kind kind, int peer, Tag tag, std::string payload) {
  Op* op = NewOp(kind, peer, tag, nullptr, 0);
  op->owned = std::move(payload);
  op->buf = op->owned.data();
  op->len = op->owned.size();
  Status st = PrepareLocal(op);
  if (!st.ok()) {
    FailOp(op, st);
    return nullptr;
  }
  return op;
}

void OfiTransport::PostControlRecv(int peer, Op::Kind kind) {
  bool hello = kind == Op::Kind::kHelloRecv;
  Op* op = NewInternalOp(kind, peer, hello ? kHelloTag : kCtrlTag,
                         std::string(hello ? kHelloBufBytes : kCtrlBufBytes, '\0'));
  if (op == nullptr) return;
  // At the front: the HELLO receive is never gated (it is what proves the peer) and the
  // control receive is posted the moment the proof checks out.
  peers_[peer].recvq.push_front(op);
  Flush(peer);
}

void OfiTransport::Flush(int peer) {
  PeerState& p = peers_[peer];
  // The second pass over sendq sends the clear-to-sends queued while posting receives.
  for (auto* q : {&p.sendq, &p.recvq, &p.sendq}) {
    while (!q->empty()) {
      if (!p.failure.ok()) return;
      Op* op = q->front();
      bool gated = q == &p.recvq && !p.proven && op->kind != Op::Kind::kHelloRecv;
      if (gated) break;
      int rc = Post(op);
      if (rc == -FI_EAGAIN) break;  // connection forming or queue full: retried after progress
      q->pop_front();
      if (rc != 0) {
        Status st = Unavailable("{}: {} {} tag {:#x}: {}", Self(), KindVerb(op->kind), Who(peer),
                                op->tag, fi_->Error(rc));
        if (IsConnectionError(-rc)) return FailPeer(peer, st);
        FailOp(op, st);
      } else if (op->kind == Op::Kind::kRecv && op->len > kEagerBytes) {
        QueueCtrl(peer, CtrlType::kClearToSend, op->tag, fmt::format("{} {}", op->index, op->len));
      }
    }
  }
}

void OfiTransport::FlushAll() {
  for (int r = 0; r < options_.size; ++r) {
    if (!peers_[r].sendq.empty() || !peers_[r].recvq.empty()) Flush(r);
  }
}

void OfiTransport::Finish(Op* op) {
  op->done = true;
  if (op->kind == Op::Kind::kRecv && op->user) {
    peers_[op->peer].open_recvs.erase({op->tag, op->index});
  }
  if (!op->user || op->abandoned) ops_.Erase(op->id);
}

void OfiTransport::FailOp(Op* op, Status status) {
  op->status = std::move(status);
  Finish(op);
}

void OfiTransport::FailPeer(int peer, Status status) {
  PeerState& p = peers_[peer];
  if (p.failure.ok()) {
    kLog.Warn("{}", status.message());
    p.failure = status;
  }
  // Unposted operations will never be; posted ones stay until the provider completes them.
  p.cts.clear();
  p.announced.clear();
  for (auto* q : {&p.sendq, &p.recvq, &p.awaiting_cts}) {
    while (!q->empty()) {
      Op* op = q->front();
      q->pop_front();
      FailOp(op, status);
    }
  }
}

void OfiTransport::Abandon(Op* op) {
  PeerState& p = peers_[op->peer];
  for (auto* q : {&p.sendq, &p.recvq, &p.awaiting_cts}) {
    auto it = std::find(q->begin(), q->end(), op);
    if (it != q->end()) {
      q->erase(it);
      ops_.Erase(op->id);
      return;
    }
  }
  op->abandoned = true;
  if (op->kind == Op::Kind::kRecv) {
    p.open_recvs.erase({op->tag, op->index});
    fi_cancel(&ep_.get()->fid, &op->ctx);
  }
}

}  // namespace railyard::net::ofi
