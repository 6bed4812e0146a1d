// The tcp store's wire format, shared by its server (tcp_store_server.cc) and its client
// (tcp_store_client.cc); nothing outside net/store uses it.
//
// First the secret handshake of net/handshake.h, proven both ways (no context bytes), then
// frames both ways: u32 body length, body = u8 op, i64 num, u32 field count, and each field
// as u32 length + bytes. All integers big-endian. One request is answered before the next is
// read, so a connection never has more than one request in flight.
//
// Every function is pure and thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/net/handshake.h"
#include "railyard/net/store.h"

namespace railyard::net::store_wire {

inline constexpr HandshakeProtocol kStoreHandshake = {.magic = 0x52595354,  // "RYST"
                                                      .version = 2,
                                                      .domain = "railyard-store",
                                                      .acceptor = "Railyard's store",
                                                      .context_bytes = 0};
// The largest legal body: CompareAndSet's key and two values plus the fixed fields.
inline constexpr size_t kMaxFrameBytes = kMaxStoreKeyBytes + 2 * kMaxStoreValueBytes + 64;
inline constexpr size_t kMaxWaitKeys = 1 << 16;
// Bytes of the length prefix before every body.
inline constexpr size_t kFrameHeaderBytes = 4;

enum Op : uint8_t { kSet = 1, kGet = 2, kAdd = 3, kCas = 4, kWait = 5 };
enum Reply : uint8_t { kOk = 0, kTimeout = 1, kBadValue = 2 };

struct Message {
  uint8_t op = 0;
  int64_t num = 0;  // Get/Wait: timeout in ms (-1 none); Add: delta; replies: Add's result
  std::vector<std::string> fields;
};

// The whole frame: length prefix and body.
std::string EncodeFrame(const Message& m);

// The body length announced by a frame header; `header` holds at least kFrameHeaderBytes.
uint32_t FrameBodyLength(std::string_view header);

// Parses one body. Every length is checked against the bytes actually present: a lying
// length is DATA_LOSS, never an allocation or a read past the end.
Result<Message> DecodeBody(std::string_view body);

// OK for a request the server can act on: a known op, the right number of fields, sizes in
// limits. DATA_LOSS naming the op and field otherwise.
Status ValidateRequest(const Message& m);

}  // namespace railyard::net::store_wire
