// One tcp connection ("stream") of the tcp backend, in each direction, and the message it
// carries a part of.
//
// A rank's sends to a peer travel on the OutStreams it opened to that peer; its receives
// arrive on the InStreams the peer opened to it. An OutStream walks kIdle -> kConnecting
// (non-blocking connect) -> kAwaitChallenge (hello sent) -> kReady (answer sent, frames
// flow); an InStream proves the peer (AuthenticateInStream) and then parses frames.
//
// Connect retries. A connect that fails with EHOSTUNREACH, ENETUNREACH or ETIMEDOUT is
// retried: a link that has just come back up (a healed cable, a port whose carrier returns)
// gives exactly these for a second or two. The stream waits in kBackoff on a timerfd
// registered under its own epoll key (10 ms, doubling to 200 ms) and connects again, for up
// to kUnreachableRetry after its first failure; then the peer fails with the last errno
// text, naming its rank and address. ECONNREFUSED is retried only for kRefusedRetry: a peer
// publishes its address after it listens, so a refusal almost always means a dead rank, and
// the communicator's probe (450 ms) must still see it as dead, not hung.
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

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
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

inline constexpr std::chrono::milliseconds kFirstConnectBackoff{10};
inline constexpr std::chrono::milliseconds kMaxConnectBackoff{200};
inline constexpr std::chrono::milliseconds kUnreachableRetry{5000};
inline constexpr std::chrono::milliseconds kRefusedRetry{100};

// True for the connect errors that are retried (see above).
bool IsTransientConnectError(int err);

// Test hook: called on the progress thread with the errno of every failed connect attempt,
// before the transport decides whether to retry it. Empty: none. Set it only while no
// transport runs.
void SetConnectFailureHookForTest(std::function<void(int err)> hook);

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
  base::UniqueFd fd;  // the socket; a timerfd while in kBackoff
  enum State { kIdle, kBackoff, kConnecting, kAwaitChallenge, kReady } state = kIdle;
  // Connect retries of the current attempt to reach the peer (see above).
  int retries = 0;
  std::chrono::steady_clock::time_point first_failure;
  std::chrono::milliseconds backoff = kFirstConnectBackoff;
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
