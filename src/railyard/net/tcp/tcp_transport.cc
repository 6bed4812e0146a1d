// tcp backend: see tcp_transport.h for the model and tcp_transport_impl.h for where each
// job lives. This file is the Transport itself: start, post, match, wait, probe, abort.
//
// Matching happens when stream 0 announces a message (connection.h): the announced message
// binds the oldest waiting receive of its (peer, tag), or waits in a buffer of its own for
// one; those buffers hold at most kMaxUnexpectedBytes in all, and a peer that announces
// more fails with an error naming it, before anything is allocated.
#include "railyard/net/tcp/tcp_transport.h"

#include <arpa/inet.h>
#include <sched.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>

#include "railyard/base/logging.h"
#include "railyard/net/interfaces.h"
#include "railyard/net/internal/pending.h"
#include "railyard/net/internal/probe_set.h"
#include "railyard/net/internal/sockaddr.h"
#include "railyard/net/peer_directory.h"
#include "railyard/net/tcp/tcp_transport_impl.h"

namespace railyard::net {
namespace tcp {
namespace {

const base::Logger kLog("net");

}  // namespace

TcpTransport::~TcpTransport() {
  // Tell connected peers we are leaving, best effort, without blocking: a BYE lets a peer
  // tell "finished" from "crashed" if it still waits for us.
  for (auto& p : peers_) {
    // Control frames travel on stream 0 only; the other streams just close.
    for (auto& s : std::span(p.out).first(std::min<size_t>(1, p.out.size()))) {
      if (s.state != OutStream::kReady || !s.queue.empty()) continue;
      FrameHeader h{};
      h.type = kBye;
      (void)!::send(s.fd.get(), &h, sizeof h, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
  }
}

Status TcpTransport::Listen() {
  if (opt_.size < 1 || opt_.rank < 0 || opt_.rank >= opt_.size) {
    return InvalidArgument("tcp transport: rank {} is outside world size {}", opt_.rank, opt_.size);
  }
  if (opt_.store == nullptr) return InvalidArgument("tcp transport: no rendezvous store");
  if (tcp_.streams_per_peer < 1 || tcp_.streams_per_peer > 64) {
    return InvalidArgument("tcp transport: streams per peer must be 1..64, got {}",
                           tcp_.streams_per_peer);
  }
  if (tcp_.spin_polls < 0) {
    return InvalidArgument("tcp transport: spin polls must be 0 or more, got {}", tcp_.spin_polls);
  }
  RY_ASSIGN_OR_RETURN(congestion_, CongestionControl::Parse(tcp_.congestion));
  RY_RETURN_IF_ERROR(congestion_.Check());
  RY_ASSIGN_OR_RETURN(NetInterface iface, ChooseInterface(opt_.socket_ifname));
  listen_fd_.Reset(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!listen_fd_.valid()) return ErrnoStatus(errno, "tcp transport: socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (inet_pton(AF_INET, iface.ipv4.c_str(), &a.sin_addr) != 1) {
    return Internal("tcp transport: interface {} has no usable IPv4 '{}'", iface.name, iface.ipv4);
  }
  if (::bind(listen_fd_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    return ErrnoStatus(errno, fmt::format("tcp transport: bind {}", iface.ipv4));
  }
  if (::listen(listen_fd_.get(), SOMAXCONN) != 0) {
    return ErrnoStatus(errno, "tcp transport: listen");
  }
  socklen_t len = sizeof a;
  ::getsockname(listen_fd_.get(), reinterpret_cast<sockaddr*>(&a), &len);
  listen_address_ = internal::SockaddrText(a);
  listen_addr_ = a;
  RY_RETURN_IF_ERROR(loop_.Open());
  loop_.Add(listen_fd_.get(), kListenKey, EPOLLIN);
  peers_ = std::vector<PeerState>(opt_.size);
  return Status::Ok();
}

Status TcpTransport::Start(base::Deadline deadline) {
  PeerInfo self;
  self.rank = opt_.rank;
  self.address = listen_address_;
  RY_ASSIGN_OR_RETURN(std::vector<PeerInfo> all,
                      ExchangePeerInfo(*opt_.store, opt_.key_prefix + "/tcp", opt_.rank, opt_.size,
                                       self, opt_.host, deadline));
  for (int r = 0; r < opt_.size; ++r) {
    peers_[r].info = all[r];
    peers_[r].info.job_rank = JobRankOf(opt_, r);
    peers_[r].out = std::vector<OutStream>(tcp_.streams_per_peer);
    if (r == opt_.rank) continue;
    auto addr = internal::ParseIpv4HostPort(all[r].address);
    if (!addr.ok()) {
      return addr.status().WithContext(
          fmt::format("tcp transport: address published by {}", DescribePeer(all[r])));
    }
    peers_[r].addr = *addr;
  }
  kLog.Debug("rank {} listening on {}", opt_.rank, listen_address_);
  return Status::Ok();
}

Status TcpTransport::CheckUsable() const { return failure_.status(); }

Status TcpTransport::CheckPeer(int peer) const {
  if (peer < 0 || peer >= opt_.size) {
    return InvalidArgument("tcp transport: peer rank {} is outside world size {}", peer, opt_.size);
  }
  if (peers_.empty() || (peer != opt_.rank && peers_[peer].info.rank < 0)) {
    return FailedPrecondition("tcp transport: Start() has not completed");
  }
  return Status::Ok();
}

void TcpTransport::FailPeer(int peer, Status why) {
  PeerState& p = peers_[peer];
  if (!p.failure.ok()) return;
  p.failure = Status(why.code(), fmt::format("{}: {}", DescribePeer(p.info), why.message()));
  kLog.Debug("{}", p.failure.message());
  for (auto& s : p.out) {
    if (s.fd.valid()) loop_.Remove(s.fd.get());
    s.fd.Reset();
    s.queue.clear();
    s.state = OutStream::kIdle;
  }
}

Result<Request> TcpTransport::PostSend(int peer, Tag tag, const void* data, size_t len) {
  RY_RETURN_IF_ERROR(CheckUsable());
  RY_RETURN_IF_ERROR(CheckPeer(peer));
  Req& r = *reqs_.Add();
  r.is_send = true;
  r.peer = peer;
  r.tag = tag;
  r.buf = const_cast<char*>(static_cast<const char*>(data));
  r.cap = len;
  PeerState& p = peers_[peer];
  if (peer == opt_.rank) {
    // To self: the message is copied (the caller's buffer is free at once) and matched as
    // if announced.
    uint64_t msg_id = p.next_msg_id++;
    InMessage& m = p.messages[msg_id];
    m.tag = tag;
    m.total = len;
    m.received = len;
    if (len > 0) {
      m.unexpected = spare_.Take(len);
      std::memcpy(m.unexpected.data(), data, len);
    }
    r.done = true;
    if (std::optional<uint64_t> recv = matcher_.TakeRecv(peer, tag)) {
      BindMessage(p, msg_id, *recv);
    } else {
      matcher_.AddMessage(peer, tag, msg_id);
    }
    return Request{r.id};
  }
  if (!p.failure.ok()) return p.failure;
  EnsureConnected(peer);
  uint64_t msg_id = p.next_msg_id++;
  size_t streams = p.out.size();
  size_t chunks = std::clamp<size_t>(len / kMinChunkBytes, 1, streams);
  // Chunks start on 64-byte boundaries, so no element of a consuming receive is split
  // between two streams.
  size_t base = len / chunks;
  if (base >= 64) base &= ~size_t{63};
  size_t off = 0;
  r.chunks_left = static_cast<int>(chunks);
  for (size_t c = 0; c < chunks; ++c) {
    size_t n = c + 1 == chunks ? len - off : base;
    SendChunk ch;
    ch.req = r.id;
    ch.hdr.type = kData;
    ch.hdr.tag = tag;
    ch.hdr.msg_id = msg_id;
    ch.hdr.total = len;
    ch.hdr.offset = off;
    ch.hdr.length = n;
    ch.data = static_cast<const char*>(data) + off;
    p.out[c].queue.push_back(std::move(ch));
    off += n;
    FlushStream(peer, static_cast<uint32_t>(c));
  }
  return Request{r.id};
}

Result<Request> TcpTransport::PostRecvConsume(int peer, Tag tag, size_t len, size_t granule,
                                              Consumer consume) {
  if (!std::has_single_bit(granule) || granule > 16 || !consume) {
    return InvalidArgument(
        "tcp transport: a consuming receive needs a consumer and a granule "
        "of 1, 2, 4, 8 or 16 bytes, got {}",
        granule);
  }
  return PostRecvImpl(peer, tag, nullptr, len, granule, std::move(consume));
}

Result<Request> TcpTransport::PostRecv(int peer, Tag tag, void* data, size_t len) {
  return PostRecvImpl(peer, tag, data, len, 1, nullptr);
}

Result<Request> TcpTransport::PostRecvImpl(int peer, Tag tag, void* data, size_t len,
                                           size_t granule, Consumer consume) {
  RY_RETURN_IF_ERROR(CheckUsable());
  RY_RETURN_IF_ERROR(CheckPeer(peer));
  Req& r = *reqs_.Add();
  r.peer = peer;
  r.tag = tag;
  r.buf = static_cast<char*>(data);
  r.cap = len;
  r.consume = std::move(consume);
  r.granule = granule;
  if (std::optional<uint64_t> msg_id = matcher_.TakeMessage(peer, tag)) {
    BindMessage(peers_[peer], *msg_id, r.id);
  } else {
    matcher_.AddRecv(peer, tag, r.id);
  }
  return Request{r.id};
}

// Binds an announced message to a posted receive.
void TcpTransport::BindMessage(PeerState& p, uint64_t msg_id, uint64_t req_id) {
  InMessage& m = p.messages[msg_id];
  Req& r = *reqs_.Find(req_id);
  if (m.total > r.cap) {
    // Not bound: the receive's buffer is too small to ever be written, and the message is
    // dropped (the peer is failed, so its streams stop being read at the next frame).
    m.orphan = true;
    FailPeer(r.peer, DataLoss("sent {} bytes with tag {:#x}, but the receive was posted for {} "
                              "bytes (mismatched message sizes between ranks)",
                              m.total, m.tag, r.cap));
    return;
  }
  r.msg_id = msg_id;
  r.matched = true;
  m.req = req_id;
  r.received = m.total;
  if (!m.unexpected) {
    m.dst = r.buf;
    m.consume = r.consume;
    m.granule = r.granule;
  }
  CompleteRecvIfDone(p, msg_id);
}

void TcpTransport::CompleteRecvIfDone(PeerState& p, uint64_t msg_id) {
  auto it = p.messages.find(msg_id);
  if (it == p.messages.end()) return;
  InMessage& m = it->second;
  if (m.received != m.total) return;
  if (m.orphan) {
    ReleaseUnexpected(m);
    p.messages.erase(it);
    return;
  }
  if (m.req == 0) return;
  Req& r = *reqs_.Find(m.req);
  if (m.unexpected && m.total > 0) DeliverTo(r, m.unexpected.data(), m.total);
  r.done = true;
  ReleaseUnexpected(m);
  p.messages.erase(it);
}

void TcpTransport::ReleaseUnexpected(InMessage& m) {
  budget_.Release(m.held);
  m.held = 0;
  spare_.Give(std::move(m.unexpected));
}

void TcpTransport::DeliverTo(Req& r, const char* data, size_t n) {
  if (n == 0) return;
  if (r.consume) {
    r.consume(0, data, n);
  } else {
    std::memcpy(r.buf, data, n);
  }
}

// Forgets a request whatever its state. A pending send's remaining bytes are copied so the
// stream stays consistent without the caller's memory; a pending receive's message is
// redirected into a private buffer and dropped when complete. Connections stay up, so
// peers do not mistake an abandoned request for this process dying.
void TcpTransport::Abandon(uint64_t req_id) {
  Req* found = reqs_.Find(req_id);
  if (found == nullptr) return;
  Req& r = *found;
  if (!r.done && !r.matched && !r.is_send) {
    matcher_.RemoveRecv(r.peer, r.tag, req_id);
  } else if (!r.done && r.peer != opt_.rank) {
    PeerState& p = peers_[r.peer];
    if (r.is_send) {
      for (auto& s : p.out) {
        for (auto& ch : s.queue) {
          if (ch.req != req_id) continue;
          ch.req = 0;
          if (!ch.owns) {
            ch.owned.assign(ch.data, ch.hdr.length);
            ch.owns = true;
          }
        }
      }
    } else {
      auto mit = p.messages.find(r.msg_id);
      if (mit != p.messages.end()) {
        InMessage& m = mit->second;
        m.req = 0;
        m.orphan = true;
        m.consume = nullptr;  // the caller's consumer may be gone
        if (!m.unexpected && m.total > 0) {
          m.unexpected = spare_.Take(m.total);
          for (auto& [key, in] : in_streams_) {
            if (in->peer == r.peer && in->in_payload && in->hdr.type == kData &&
                in->hdr.msg_id == r.msg_id &&
                (in->payload_dst != nullptr || in->payload_msg != nullptr)) {
              in->payload_dst = m.unexpected.data() + in->hdr.offset;
              in->payload_msg = nullptr;
              in->joiner.Reset();
            }
          }
        }
      }
    }
  }
  reqs_.Erase(req_id);
}

std::string TcpTransport::Me() const {
  return fmt::format("tcp transport {}", peers_.empty() || peers_[opt_.rank].info.rank < 0
                                             ? fmt::format("rank {}", opt_.rank)
                                             : DescribePeer(peers_[opt_.rank].info));
}

Status TcpTransport::WaitAll(std::span<const Request> requests, base::Deadline deadline) {
  std::lock_guard progress(progress_mu_);
  reqs_.StartWait();
  internal::WaitSet<Req> w = reqs_.Collect(requests, Me());
  // Waited requests are consumed whatever the outcome (transport.h); any error but the
  // caller's own mistake fails the transport.
  auto consume = [&](Status result) {
    for (Req* r : w.ops) {
      if (r->done && !r->is_send && result.ok()) reqs_.SetReceived(r->id, r->received);
      Abandon(r->id);
    }
    if (!result.ok() && result.code() != StatusCode::kInvalidArgument) {
      failure_.Fail(std::move(result));
      return failure_.status();
    }
    return result;
  };
  if (!w.status.ok()) return consume(w.status);
  int spin_polls = 0;
  bool slept = false;
  bool small_wait = true;
  for (const Req* r : w.ops) {
    if (r->cap > kSmallWaitBytes) small_wait = false;
  }
  for (;;) {
    if (Status st = failure_.status(); !st.ok()) return consume(st);
    bool all_done = true;
    for (const Req* r : w.ops) {
      if (r->done) continue;
      if (Status st = peers_[r->peer].failure; !st.ok()) {
        return consume(
            Status(st.code(), fmt::format("{} (while {} tag {:#x})", st.message(),
                                          r->is_send ? "sending" : "receiving", r->tag)));
      }
      all_done = false;
    }
    if (all_done) {
      if (spin_polls > 0 && !slept) spin_.FinishedAfter(spin_polls);
      return consume(Status::Ok());
    }
    if (deadline.Expired()) {
      std::vector<internal::PendingRequest> left;
      for (const Req* r : w.ops) {
        if (r->done) continue;
        uint64_t done_bytes = 0;
        if (!r->is_send && r->matched) {
          auto m = peers_[r->peer].messages.find(r->msg_id);
          if (m != peers_[r->peer].messages.end()) done_bytes = m->second.received;
        }
        left.push_back({.peer = r->peer,
                        .is_send = r->is_send,
                        .tag = r->tag,
                        .done_bytes = done_bytes,
                        .bytes = r->cap});
      }
      return consume(internal::DeadlinePassed(
          Me(), left, w.ops.size(), [this](int peer) { return DescribePeer(peers_[peer].info); }));
    }
    // Poll without sleeping for a few microseconds first: a reply that is already on its
    // way then costs no sleep and wake-up. Bounded, so an idle wait still sleeps.
    if (!slept && spin_polls < spin_.polls()) {
      // Yield between polls: on oversubscribed cores the peer we wait for may need this one.
      ++spin_polls;
      if (Status st = Poll(0); !st.ok()) return consume(st);
      if (!small_wait || spin_polls % 2 == 0) sched_yield();
    } else {
      if (!slept) spin_.Slept();
      slept = true;
      if (Status st = Poll(deadline.PollTimeoutMs()); !st.ok()) return consume(st);
    }
  }
}

size_t TcpTransport::ReceivedBytes(Request request) const { return reqs_.ReceivedBytes(request); }

std::vector<ProbeResult> TcpTransport::Probe(std::span<const int> ranks, base::Deadline deadline) {
  std::lock_guard progress(progress_mu_);
  uint64_t nonce = next_probe_nonce_++;
  internal::ProbeSet probes(ranks, opt_.rank, opt_.size, activity_);
  for (size_t i : probes.Pending()) {
    PeerState& p = peers_[probes.rank(i)];
    if (p.info.rank < 0) {
      probes.Unresponsive(i, "this rank's transport has not started");
      continue;
    }
    // A peer failed by its abort gets fresh connections: the probe is how we learn whether
    // it is gone.
    if (!p.failure.ok() && p.failure.code() == StatusCode::kAborted) p.failure = Status();
    QueueControl(probes.rank(i), kPing, nonce, "");
  }
  auto settle = [&] {
    for (size_t i : probes.Pending()) {
      const PeerState& p = peers_[probes.rank(i)];
      if (p.pong_nonce == nonce) {
        probes.Alive(i, p.pong_activity);
      } else if (!p.failure.ok()) {
        probes.Dead(i, p.failure.message());
      }
    }
    return probes.settled();
  };
  while (!settle() && !deadline.Expired()) {
    if (!Poll(deadline.PollTimeoutMs()).ok()) break;
  }
  return std::move(probes).Finish();
}

// Queues an ABORT to every peer and drives progress until they are written or
// `flush_deadline` passes; a stopped or unreachable peer cannot delay the others, since all
// are queued before any waiting.
void TcpTransport::HandleAbortFlag(base::Deadline flush_deadline) {
  if (abort_sent_) return;
  abort_sent_ = true;
  std::string reason = failure_.abort_reason();
  for (int r = 0; r < opt_.size && !peers_.empty(); ++r) {
    if (r == opt_.rank || peers_[r].info.rank < 0) continue;
    QueueControl(r, kAbort, 0, reason);
  }
  failure_.Fail(Aborted("rank {} aborted the job: {}", opt_.rank, reason));
  auto flushed = [&] {
    for (auto& p : peers_) {
      if (!p.failure.ok()) continue;
      for (auto& s : p.out) {
        if (s.state != OutStream::kIdle && !s.queue.empty()) return false;
      }
    }
    return true;
  };
  while (!flushed() && !flush_deadline.Expired()) {
    if (!Poll(flush_deadline.PollTimeoutMs()).ok()) break;
  }
}

void TcpTransport::Abort(std::string_view reason, base::Deadline deadline) {
  if (!failure_.RequestAbort(reason)) return;
  loop_.Wake();
  // The failure is recorded with the ABORT frames queued, under the progress lock: a thread
  // inside WaitAll sends them from its next Poll before it returns.
  std::unique_lock progress(progress_mu_, std::try_to_lock);
  if (!progress.owns_lock()) return;
  HandleAbortFlag(deadline);
}

}  // namespace tcp

Result<std::unique_ptr<Transport>> NewTcpTransport(const TransportOptions& options,
                                                   const TcpOptions& tcp) {
  auto t = std::make_unique<tcp::TcpTransport>(options, tcp);
  RY_RETURN_IF_ERROR(t->Listen());
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace railyard::net
