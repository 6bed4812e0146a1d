// Inbound streams once proven: reading, frame parsing, announcing messages to the matcher
// and parking streams whose chunk came before its announcement (see connection.h).
#include <sys/socket.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "railyard/net/tcp/tcp_transport_impl.h"

namespace railyard::net::tcp {

void TcpTransport::ReadInStream(InStream& in) {
  for (int reads = 0; !in.closed; ++reads) {
    if (in.peer < 0) {
      // Only the handshake's next message is read from an unproven peer, nothing beyond.
      size_t step = in.challenged ? kAnswerBytes : in.handshake->hello_bytes();
      char buf[64];
      ssize_t r = ::recv(in.fd.get(), buf, step - in.handshake_in.size(), MSG_DONTWAIT);
      if (r == 0) {
        return CloseInStream(in, in.challenged ? "closed after this rank proved itself, without "
                                                 "proving the job secret (a different "
                                                 "RAILYARD_JOB_SECRET?)"
                                               : "closed during the handshake");
      }
      if (r < 0) {
        if (errno == EAGAIN || errno == EINTR) return;
        return CloseInStream(in, fmt::format("handshake: {}", std::strerror(errno)));
      }
      in.handshake_in.append(buf, static_cast<size_t>(r));
      AuthenticateInStream(in);
      continue;
    }
    ConsumeInStream(in);
    // Buffered bytes are all consumed unless parked; bound the reads per event for fairness
    // between streams (the socket stays readable, so epoll comes back).
    if (in.parked || in.closed || reads >= 16) return;
    // Need more bytes: read straight into a large payload's destination, else buffer.
    ssize_t r;
    if (in.in_payload && in.payload_dst != nullptr && in.rx_begin == in.rx_end &&
        in.hdr.length - in.payload_done >= kDirectReadBytes) {
      r = ::recv(in.fd.get(), in.payload_dst + in.payload_done, in.hdr.length - in.payload_done,
                 MSG_DONTWAIT);
      if (r > 0) {
        const bool drained = static_cast<uint64_t>(r) < in.hdr.length - in.payload_done;
        in.payload_done += static_cast<uint64_t>(r);
        if (in.payload_done == in.hdr.length) FinishFrame(in);
        // A short read emptied the socket: epoll is level-triggered and reports the next
        // bytes, so a read that would only say EAGAIN is saved (one syscall per message).
        if (drained) {
          ConsumeInStream(in);
          return;
        }
        continue;
      }
    } else {
      if (in.rx_begin == in.rx_end) in.rx_begin = in.rx_end = 0;
      if (in.rx_end == kRxBufferBytes) {
        std::memmove(in.rx.get(), in.rx.get() + in.rx_begin, in.rx_end - in.rx_begin);
        in.rx_end -= in.rx_begin;
        in.rx_begin = 0;
      }
      const size_t room = kRxBufferBytes - in.rx_end;
      r = ::recv(in.fd.get(), in.rx.get() + in.rx_end, room, MSG_DONTWAIT);
      if (r > 0) {
        in.rx_end += static_cast<size_t>(r);
        if (static_cast<size_t>(r) < room) {  // drained, as above
          ConsumeInStream(in);
          return;
        }
        continue;
      }
    }
    if (r == 0) return CloseInStream(in, "connection closed");
    if (errno == EAGAIN || errno == EINTR) return;
    return CloseInStream(in, fmt::format("connection error: {}", std::strerror(errno)));
  }
}

// Parses buffered bytes: headers, then payloads. Returns true if it made progress.
bool TcpTransport::ConsumeInStream(InStream& in) {
  bool progress = false;
  while (!in.closed && !in.parked) {
    size_t avail = in.rx_end - in.rx_begin;
    if (!in.in_payload) {
      if (avail == 0) return progress;
      size_t n = std::min(avail, sizeof(FrameHeader) - in.hdr_got);
      std::memcpy(reinterpret_cast<char*>(&in.hdr) + in.hdr_got, in.rx.get() + in.rx_begin, n);
      in.rx_begin += n;
      in.hdr_got += n;
      progress = true;
      if (in.hdr_got < sizeof(FrameHeader)) return progress;
      in.hdr_got = 0;
      if (!BeginPayload(in)) return progress;
      continue;
    }
    if (in.payload_done == in.hdr.length) {
      FinishFrame(in);
      progress = true;
      continue;
    }
    if (avail == 0) return progress;
    size_t n = std::min<uint64_t>(avail, in.hdr.length - in.payload_done);
    if (in.payload_dst != nullptr) {
      std::memcpy(in.payload_dst + in.payload_done, in.rx.get() + in.rx_begin, n);
    } else if (in.payload_msg != nullptr) {
      FeedConsumer(in, in.rx.get() + in.rx_begin, n);
    } else {
      in.control.append(in.rx.get() + in.rx_begin, n);
    }
    in.rx_begin += n;
    in.payload_done += n;
    progress = true;
  }
  return progress;
}

// A header is complete: validate it and pick the payload's destination. False when the
// stream was closed or parked.
bool TcpTransport::BeginPayload(InStream& in) {
  const FrameHeader& h = in.hdr;
  PeerState& p = peers_[in.peer];
  in.in_payload = true;
  in.payload_done = 0;
  in.payload_dst = nullptr;
  in.payload_msg = nullptr;
  in.joiner.Reset();
  in.control.clear();
  if (!p.failure.ok()) {
    // Nothing more is read from a failed peer: its messages may have no buffer any more.
    CloseInStream(in, "failed");
    return false;
  }
  if (h.type == kData) {
    if (h.total > kMaxMessageBytes || h.offset > h.total || h.length > h.total - h.offset ||
        (in.index != 0 && h.length == 0)) {
      CloseInStream(in,
                    fmt::format("sent a malformed data frame (offset {} length {} total {})",
                                h.offset, h.length, h.total),
                    true);
      return false;
    }
    if (in.index == 0) {
      if (h.offset != 0 || p.messages.count(h.msg_id)) {
        CloseInStream(in, "sent a data frame out of sequence", true);
        return false;
      }
      Announce(in.peer, h);
      if (!p.failure.ok()) {
        // Failed at announcement (too long for its receive, or for the unexpected-message
        // budget): stop reading, so that the payload is neither stored nor parsed.
        CloseInStream(in, "failed");
        return false;
      }
      if (h.length == 0) return true;  // an empty message completed at announcement
    }
    auto it = p.messages.find(h.msg_id);
    if (it == p.messages.end()) {
      // Chunk on stream s > 0 ahead of its announcement on stream 0: park until it comes
      // (connection.h says why).
      in.parked = true;
      p.parked.push_back(in.key);
      SetReadInterest(in, false);
      return false;
    }
    TargetPayload(in, it->second);
    return true;
  }
  if (h.type == kPing || h.type == kPong || h.type == kAbort || h.type == kBye) {
    if (h.length > kMaxControlBytes || in.index != 0) {
      CloseInStream(
          in, fmt::format("sent a control frame of {} bytes on stream {}", h.length, in.index),
          true);
      return false;
    }
    return true;
  }
  CloseInStream(in, fmt::format("sent an unknown frame type {}", h.type), true);
  return false;
}

// Stream 0 delivered the first chunk of a message: create it and match it.
void TcpTransport::Announce(int peer, const FrameHeader& h) {
  PeerState& p = peers_[peer];
  InMessage& m = p.messages[h.msg_id];
  m.tag = h.tag;
  m.total = h.total;
  if (std::optional<uint64_t> recv = matcher_.TakeRecv(peer, h.tag)) {
    BindMessage(p, h.msg_id, *recv);
  } else {
    if (Status st = budget_.Hold(h.total, h.tag); !st.ok()) {
      FailPeer(peer, st);
      p.messages.erase(h.msg_id);
      return;
    }
    m.held = h.total;
    if (h.total > 0) m.unexpected = spare_.Take(h.total);
    matcher_.AddMessage(peer, h.tag, h.msg_id);
  }
  if (!p.failure.ok()) return;  // its parked streams stay parked; the caller closes this one
  // Streams parked on this message may go on.
  for (auto it = p.parked.begin(); it != p.parked.end();) {
    auto sit = in_streams_.find(*it);
    if (sit == in_streams_.end()) {
      it = p.parked.erase(it);
      continue;
    }
    InStream& s = *sit->second;
    if (s.hdr.msg_id != h.msg_id) {
      ++it;
      continue;
    }
    it = p.parked.erase(it);
    s.parked = false;
    TargetPayload(s, p.messages[h.msg_id]);
    SetReadInterest(s, true);
    // Its buffered bytes raise no epoll event: consume them from Poll.
    unparked_.push_back(s.key);
  }
}

void TcpTransport::SetReadInterest(InStream& in, bool want) {
  loop_.Modify(in.fd.get(), in.key, want ? uint32_t{EPOLLIN} : 0u);
}

void TcpTransport::TargetPayload(InStream& in, InMessage& m) {
  in.payload_msg = nullptr;
  in.joiner.Reset();
  if (m.unexpected) {
    in.payload_dst = m.unexpected.data() + in.hdr.offset;
  } else if (m.consume) {
    in.payload_dst = nullptr;
    in.payload_msg = &m;  // std::map nodes stay put until the message is erased
  } else {
    in.payload_dst = m.dst + in.hdr.offset;
  }
}

void TcpTransport::FeedConsumer(InStream& in, const char* data, size_t n) {
  InMessage& m = *in.payload_msg;
  in.joiner.Feed(m.consume, m.granule, in.hdr.offset + in.payload_done, data, n);
}

void TcpTransport::FinishFrame(InStream& in) {
  const FrameHeader h = in.hdr;
  in.in_payload = false;
  PeerState& p = peers_[in.peer];
  switch (h.type) {
    case kData: {
      if (in.payload_msg != nullptr) {  // a message's trailing part, if any
        in.joiner.Flush(in.payload_msg->consume, h.offset + h.length);
      }
      in.payload_msg = nullptr;
      auto it = p.messages.find(h.msg_id);
      if (it != p.messages.end()) {
        it->second.received += h.length;
        CompleteRecvIfDone(p, h.msg_id);
      }
      break;
    }
    case kPing:
      QueueControl(in.peer, kPong, h.msg_id, activity_);
      break;
    case kPong:
      p.pong_nonce = h.msg_id;
      p.pong_activity = in.control;
      break;
    case kAbort:
      failure_.Fail(Aborted("{} aborted the job: {}", DescribePeer(p.info), in.control));
      break;
    case kBye:
      p.said_bye = true;
      break;
  }
  // Parked streams of this peer may have been waiting for a message this frame announced:
  // handled in Announce. Nothing else to do.
}

}  // namespace railyard::net::tcp
