// One tcp connection ("stream") of the tcp backend, in each direction, and the message it
// carries a part of.
//
// A rank's sends to a peer travel on the OutStreams it opened to that peer; its receives
// arrive on the InStreams the peer opened to it. An OutStream walks kIdle -> kConnecting
// (non-blocking connect) -> kAwaitChallenge (hello sent) -> kReady (answer sent, frames
// flow); an InStream proves the peer (AuthenticateInStream) and then parses frames.
//
// Parking. A message is split into chunks; chunk 0 always travels on stream 0, the others
// on streams 1..k-1. Stream 0 therefore announces messages in send order, and a message is
// matched to a receive when it is announced, so FIFO per (peer, tag) holds whatever the
// streams' relative speeds. A chunk that arrives on stream s > 0 before its message was
// announced has nowhere to go yet: its stream "parks" (epoll stops reporting it, nothing
// more is read) until stream 0 announces the message, rather than buffering an unbounded
// amount of data from a fast stream. Stream 0 never parks (an announced message without a
// posted receive is read into a buffer of its own), so parking cannot deadlock.
//
// Internal to net/tcp. Thread-safety: owned by the transport's progress thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>

#include "railyard/base/files.h"
#include "railyard/net/buffer_pool.h"
#include "railyard/net/handshake.h"
#include "railyard/net/internal/unit_joiner.h"
#include "railyard/net/tcp/wire.h"
#include "railyard/net/transport.h"

namespace railyard::net::tcp {

// TCP_NODELAY, and both socket buffers at `buffer_bytes` when it is not 0.
void TuneSocket(int fd, size_t buffer_bytes);

// One chunk queued on an outbound stream.
struct SendChunk {
  uint64_t req = 0;  // 0 for control frames
  FrameHeader hdr{};
  const char* data = nullptr;
  std::string owned;  // control payloads, and sends abandoned by their caller
  bool owns = false;  // payload is `owned`, not `data`
  size_t sent = 0;    // bytes of header + payload written
};

struct OutStream {
  base::UniqueFd fd;
  enum State { kIdle, kConnecting, kAwaitChallenge, kReady } state = kIdle;
  std::optional<Handshake> handshake;
  char challenge[kChallengeBytes];
  size_t challenge_got = 0;
  std::deque<SendChunk> queue;
  bool want_out = false;
};

// A message announced by a peer (its chunk 0 arrived on stream 0).
struct InMessage {
  Tag tag = 0;
  uint64_t total = 0;
  uint64_t received = 0;
  char* dst = nullptr;
  PooledBuffer unexpected;              // when no receive was posted at announcement
  uint64_t held = 0;                    // bytes counted against the unexpected-message budget
  uint64_t req = 0;                     // bound receive, 0 = none yet
  bool orphan = false;                  // its receive was abandoned: drop when complete
  ConsumingReceiver::Consumer consume;  // bound to a consuming receive (no dst, no unexpected)
  size_t granule = 1;
};

struct InStream {
  uint64_t key = 0;  // its epoll key and the transport's in_streams_ index
  base::UniqueFd fd;
  std::string remote;  // address, for logs
  int peer = -1;       // -1 until the handshake proved the secret
  uint32_t index = 0;
  std::optional<Handshake> handshake;  // until proven
  std::string handshake_in;            // the hello, then the answer, as they arrive
  bool challenged = false;
  HelloContext claim{};
  // Buffered reads.
  std::unique_ptr<char[]> rx;
  size_t rx_begin = 0, rx_end = 0;
  // Frame being read.
  FrameHeader hdr{};
  size_t hdr_got = 0;
  bool in_payload = false;
  uint64_t payload_done = 0;
  char* payload_dst = nullptr;  // nullptr while parked or for control frames
  // Or the message whose consumer takes the payload; a unit split between two reads waits in
  // `joiner` (frames start on 64-byte boundaries, so units never straddle frames).
  InMessage* payload_msg = nullptr;
  UnitJoiner joiner;
  std::string control;  // control payload
  bool parked = false;  // waiting for stream 0 to announce hdr.msg_id (see above)
  bool closed = false;
};

}  // namespace railyard::net::tcp
