// What the tcp backend puts on a connection, and the limits on what it reads back.
//
// Per connection:
//   the secret handshake of net/handshake.h, proven both ways; its context is HelloContext
//     (which rank connects to which, on which stream), so a proof holds for one pair only
//   connector -> acceptor  frames: FrameHeader + payload (host byte order), until close.
// The connector sends no frame before the acceptor has proven the secret, so a listener
// that is not the rank it expects (a stale or forged address) never receives its data.
// Acceptors never write after the challenge: data flows one way on a connection.
//
// Internal to net/tcp. Thread-safety: constants and plain structs.
#pragma once

#include <cstddef>
#include <cstdint>

#include "railyard/net/handshake.h"

namespace railyard::net::tcp {

enum FrameType : uint32_t { kData = 1, kPing = 2, kPong = 3, kAbort = 4, kBye = 5 };

// The handshake's context: both proofs cover it.
struct HelloContext {
  int32_t from;  // the connecting rank
  int32_t to;    // the rank it means to reach
  uint32_t stream;
  uint32_t streams;
};
static_assert(sizeof(HelloContext) == 16);

inline constexpr HandshakeProtocol kTcpHandshake = {.magic = 0x52595432,  // "RYT2"
                                                    .version = 2,
                                                    .domain = "railyard-tcp",
                                                    .acceptor = "a Railyard rank of this job",
                                                    .context_bytes = sizeof(HelloContext)};

struct FrameHeader {
  uint32_t type;
  uint32_t reserved;
  uint64_t tag;
  uint64_t msg_id;  // data: per (sender, receiver) sequence; ping/pong: the probe nonce
  uint64_t total;   // data: message length
  uint64_t offset;  // data: this chunk's offset in the message
  uint64_t length;  // payload bytes following this header
};
static_assert(sizeof(FrameHeader) == 48);

// Frame lengths from the network are checked against these before anything is allocated.
inline constexpr uint64_t kMaxMessageBytes = uint64_t{1} << 44;
inline constexpr uint64_t kMaxControlBytes = 64 << 10;
// Messages at least this long are split across streams, in chunks no smaller than this.
// Chunks start on 64-byte boundaries, so no element of a consuming receive is split between
// two streams.
inline constexpr size_t kMinChunkBytes = 256 << 10;

}  // namespace railyard::net::tcp
