// Each peer's rings: writing sends, reading messages into their receives or into buffers
// of their own, and giving up an operation; see shm_transport_impl.h.
#include <algorithm>
#include <cstring>

#include "railyard/base/logging.h"
#include "railyard/net/shm/shm_transport_impl.h"

namespace railyard::net::shm {
void ShmTransport::Deliver(Op* op, const char* data, size_t len) {
  if (len > op->len) {
    Status st = DataLossFor(op->peer, op->tag, len, op->len);
    SetFatal(st);
    Finish(op, st);
    return;
  }
  Put(op, 0, data, len);
  FlushCarry(op);
  op->done_bytes = len;
  Finish(op);
}

void ShmTransport::Put(Op* op, size_t at, const char* data, size_t n) {
  if (n == 0) return;
  if (op->consume) {
    Feed(op, data, n);
  } else {
    std::memcpy(op->dst + at, data, n);
  }
}

void ShmTransport::Feed(Op* op, const char* data, size_t n) {
  op->joiner.Feed(op->consume, op->granule, op->fed, data, n);
  op->fed += n;
}

void ShmTransport::FlushCarry(Op* op) {
  if (op->consume) op->joiner.Flush(op->consume, op->fed);
}

void ShmTransport::TakeUnexpected(Op* op, std::unique_ptr<Unexpected> u) {
  budget_.Release(u->held);
  if (u->complete) {
    Deliver(op, u->data.data(), u->len);
    spare_.Give(std::move(u->data));
    return;
  }
  // Still streaming in (only the newest message of a peer can be): copy what is there and
  // let the rest go straight to the caller's buffer.
  Peer::Incoming& in = P(op->peer).incoming;
  if (u->len > op->len) {
    Status st = DataLossFor(op->peer, op->tag, u->len, op->len);
    SetFatal(st);
    Finish(op, st);
    in.buffer = nullptr;  // discard the rest
    return;
  }
  Put(op, 0, u->data.data(), in.got);
  spare_.Give(std::move(u->data));
  in.buffer = nullptr;
  in.op = op;
}

bool ShmTransport::ProgressSends(Peer& p) {
  bool moved = false;
  while (!p.sends.empty()) {
    Op* op = p.sends.front();
    if (!op->header_sent) {
      MessageHeader h{kHeaderMagic, op->tag, op->len, p.out_seq};
      if (!p.out.WriteRecord(&h, sizeof(h))) break;
      ++p.out_seq;
      op->header_sent = true;
      moved = true;
    }
    size_t n = p.out.Write(op->src + op->done_bytes, op->len - op->done_bytes);
    op->done_bytes += n;
    moved |= n > 0;
    if (op->done_bytes < op->len) break;  // the ring is full
    Finish(op);
    p.sends.pop_front();
  }
  p.out.Publish();
  return moved;
}

void ShmTransport::StartIncoming(int r, Peer& p, const MessageHeader& h) {
  Peer::Incoming& in = p.incoming;
  in = Peer::Incoming{true, h.tag, h.len, 0, nullptr, nullptr};
  if (h.magic != kHeaderMagic || h.seq != p.in_seq) {
    SetFatal(DataLoss("{}: corrupt shm stream: message #{} has magic {} and sequence {}",
                      DescribePeer(p.info), p.in_seq, Hex(h.magic), h.seq));
    return;
  }
  ++p.in_seq;
  if (std::optional<Op*> recv = matcher_.TakeRecv(r, h.tag)) {
    Op* op = *recv;
    if (h.len > op->len) {
      Status st = DataLossFor(r, h.tag, h.len, op->len);
      SetFatal(st);
      Finish(op, st);
      return;  // discard
    }
    in.op = op;
    return;
  }
  if (Status st = budget_.Hold(h.len, h.tag); !st.ok()) {
    SetFatal(Status(st.code(), fmt::format("{}: {}", DescribePeer(p.info), st.message())));
    return;  // discard
  }
  auto u = std::make_unique<Unexpected>();
  u->len = h.len;
  u->held = h.len;
  u->data = spare_.Take(h.len);
  in.buffer = u.get();
  matcher_.AddMessage(r, h.tag, std::move(u));
}

bool ShmTransport::ProgressRecvs(int r, Peer& p) {
  if (!p.in.Snapshot()) return false;
  const uint64_t before = p.in.position();
  Peer::Incoming& in = p.incoming;
  while (!failed()) {
    if (!in.active) {
      MessageHeader h;
      if (!p.in.ReadRecord(&h, sizeof(h))) break;
      StartIncoming(r, p, h);
      if (failed()) break;
    }
    if (in.op != nullptr && in.op->consume) {
      Op* op = in.op;
      in.got +=
          p.in.ReadInPlace(in.len - in.got, [op](const char* d, size_t n) { Feed(op, d, n); });
    } else {
      char* dst = in.op != nullptr       ? in.op->dst
                  : in.buffer != nullptr ? in.buffer->data.data()
                                         : nullptr;  // abandoned: skip the bytes
      in.got += p.in.Read(dst != nullptr ? dst + in.got : nullptr, in.len - in.got);
    }
    if (in.got < in.len) break;
    if (in.op != nullptr) {
      FlushCarry(in.op);
      in.op->done_bytes = in.len;
      Finish(in.op);
    } else if (in.buffer != nullptr) {
      in.buffer->complete = true;
    }
    in = Peer::Incoming{};
  }
  p.in.Publish();
  return p.in.position() != before;
}

bool ShmTransport::Progress() {
  bool moved = false;
  for (int r = 0; r < size_ && !failed(); ++r) {
    if (r == rank_) continue;
    Peer& p = P(r);
    if (!p.sends.empty()) moved |= ProgressSends(p);
    moved |= ProgressRecvs(r, p);
  }
  return moved;
}

void ShmTransport::Cancel(Op* op) {
  if (op->complete) return;
  Peer* p = op->peer != rank_ ? &P(op->peer) : nullptr;
  if (op->is_send) {
    if (p != nullptr) {
      auto& q = p->sends;
      q.erase(std::remove(q.begin(), q.end(), op), q.end());
      if (op->header_sent) {
        p->send_broken = FailedPrecondition(
            "{}: a send with tag {} was abandoned at a deadline after {} of {} bytes; the stream "
            "to this peer is broken",
            DescribePeer(p->info), Hex(op->tag), op->done_bytes, op->len);
        for (Op* later : q) Finish(later, p->send_broken);
        q.clear();
      }
    }
  } else {
    matcher_.RemoveRecv(op->peer, op->tag, op);
    if (p != nullptr && p->incoming.op == op) p->incoming.op = nullptr;  // discard the rest
  }
  Finish(op, DeadlineExceeded("abandoned at a deadline"));
}

}  // namespace railyard::net::shm
