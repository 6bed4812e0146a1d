// The clear-to-send protocol (ofi_transport.h): a user message over kEagerBytes leaves only
// once the receiver's clear-to-send names it; a held one announces its length, so a receive
// too short for it fails at once on both ranks.
#include <algorithm>
#include <cstdio>

#include "railyard/base/logging.h"
#include "railyard/net/ofi/ofi_transport_impl.h"

namespace railyard::net::ofi {
namespace {

const base::Logger kLog("ofi");

}  // namespace

void OfiTransport::SubmitSend(Op* op) {
  PeerState& p = peers_[op->peer];
  op->index = p.sends_posted[op->tag]++;
  const std::pair<Tag, uint64_t> key{op->tag, op->index};
  // A send behind a held one with its tag waits too: per-tag order.
  bool behind = std::any_of(p.awaiting_cts.begin(), p.awaiting_cts.end(),
                            [&](const Op* o) { return o->tag == op->tag; });
  if (!behind) {
    if (op->len <= kEagerBytes) {
      p.cts.erase(key);  // its receive is longer than needed; nothing to wait for
      return QueueSend(op);
    }
    if (auto c = p.cts.find(key); c != p.cts.end()) {
      size_t capacity = c->second;
      p.cts.erase(c);
      if (op->len > capacity) return RejectSend(op, capacity);
      return QueueSend(op);
    }
  }
  // Held until the receive is posted. The HELLO still goes now: the peer posts nothing
  // from this rank, so sends no clear-to-send, before this rank has proven itself. A long
  // message says its length, so that a receive too short for it (which sends no
  // clear-to-send) fails at once instead of at its deadline.
  p.awaiting_cts.push_back(op);
  if (op->len > kEagerBytes) {
    QueueCtrl(op->peer, CtrlType::kRequestToSend, op->tag,
              fmt::format("{} {}", op->index, op->len));
  }
  EnsureHello(op->peer);
  Flush(op->peer);
}

void OfiTransport::Release(int peer, Tag tag) {
  PeerState& p = peers_[peer];
  auto& held = p.awaiting_cts;
  bool moved = false;
  for (;;) {
    auto it = std::find_if(held.begin(), held.end(), [&](const Op* o) { return o->tag == tag; });
    if (it == held.end()) break;
    Op* op = *it;
    auto c = p.cts.find({tag, op->index});
    if (op->len > kEagerBytes && c == p.cts.end()) break;  // its receive is not posted yet
    held.erase(it);
    if (c != p.cts.end()) {
      size_t capacity = c->second;
      p.cts.erase(c);
      if (op->len > capacity) {
        RejectSend(op, capacity);  // the later ones stay held: the receiver has failed
        break;
      }
    }
    p.sendq.push_back(op);  // the HELLO went when the first was held
    moved = true;
  }
  if (moved) Flush(peer);
}

void OfiTransport::OnClearToSend(int peer, Tag tag, std::string_view text) {
  unsigned long long index = 0, capacity = 0;
  if (std::sscanf(std::string(text).c_str(), "%llu %llu", &index, &capacity) != 2) {
    kLog.Warn("{}: dropping a malformed clear-to-send from {}", Self(), Who(peer));
    return;
  }
  peers_[peer].cts[{tag, index}] = capacity;
  Release(peer, tag);
}

void OfiTransport::OnRequestToSend(int peer, Tag tag, std::string_view text) {
  unsigned long long index = 0, bytes = 0;
  if (std::sscanf(std::string(text).c_str(), "%llu %llu", &index, &bytes) != 2) {
    kLog.Warn("{}: dropping a malformed request-to-send from {}", Self(), Who(peer));
    return;
  }
  PeerState& p = peers_[peer];
  if (auto o = p.open_recvs.find({tag, index}); o != p.open_recvs.end()) {
    // Posted: a receive longer than 4 KiB sent its clear-to-send; a shorter one cannot hold
    // the message.
    if (bytes > o->second->len) RejectRecv(o->second, bytes, /*tell_peer=*/true);
    return;
  }
  if (index >= p.recvs_posted[tag]) p.announced[{tag, index}] = bytes;
}

void OfiTransport::OnReject(int peer, Tag tag, std::string_view text) {
  char side = 0;
  unsigned long long index = 0, bytes = 0, capacity = 0;
  if (std::sscanf(std::string(text).c_str(), "%c %llu %llu %llu", &side, &index, &bytes,
                  &capacity) != 4) {
    kLog.Warn("{}: dropping a malformed reject from {}", Self(), Who(peer));
    return;
  }
  PeerState& p = peers_[peer];
  if (side == 's') {  // our held send `index`: the peer's receive is too short
    auto& held = p.awaiting_cts;
    auto it = std::find_if(held.begin(), held.end(),
                           [&](const Op* o) { return o->tag == tag && o->index == index; });
    if (it == held.end()) return;
    Op* op = *it;
    held.erase(it);
    RejectSend(op, capacity);
    return;
  }
  if (auto o = p.open_recvs.find({tag, index}); o != p.open_recvs.end()) {
    RejectRecv(o->second, bytes, /*tell_peer=*/false);
  }
}

void OfiTransport::RejectSend(Op* op, size_t capacity) {
  const int peer = op->peer;
  Status st = DataLoss(
      "{}: message to {} with tag {:#x} is {} bytes but the receive that rank "
      "posted holds {}",
      Self(), Who(peer), op->tag, op->len, capacity);
  kLog.Debug("{}", st.message());
  SendCtrl(peer, CtrlType::kReject, op->tag,
           fmt::format("r {} {} {}", op->index, op->len, capacity));
  FailOp(op, std::move(st));
}

void OfiTransport::RejectRecv(Op* op, size_t message_bytes, bool tell_peer) {
  // The receive may be in the provider: it stays there until WaitAll gives it up (cancels
  // it); the transport is failed from here on, so nothing else can match it.
  failure_.Fail(TooLong(op->peer, op->tag, message_bytes, op->len));
  if (tell_peer) {
    SendCtrl(op->peer, CtrlType::kReject, op->tag,
             fmt::format("s {} {} {}", op->index, message_bytes, op->len));
  }
}

}  // namespace railyard::net::ofi
