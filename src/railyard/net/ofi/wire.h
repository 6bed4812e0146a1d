// What the ofi backend sends besides user messages: the tags it reserves, the HELLO that
// proves the job secret, the control messages (probe, abort and the clear-to-send protocol
// of ofi_transport.h) and the remote key blob of RegisterRma.
//
//   HELLO     tag kHelloTag, payload HmacSha256(secret, "railyard-ofi/<from>/<to>/" + nonce)
//   control   tag kCtrlTag, payload magic u32, type u8, 3 bytes 0, seq u64, then text
//   RMA key   magic u32, 4 bytes 0, key u64, base address u64, length u64
// Integers in host byte order: every rank of a job runs on one architecture.
//
// Internal to net/ofi. Thread-safety: constants and pure functions.
#pragma once

#include <fmt/format.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "railyard/base/hmac.h"
#include "railyard/net/transport.h"

namespace railyard::net::ofi {

inline constexpr Tag kHelloTag = Tag{1} << 60;
inline constexpr Tag kCtrlTag = Tag{2} << 60;
inline constexpr size_t kProofBytes = 32;
inline constexpr size_t kHelloBufBytes = 64;  // larger than a proof, so an oversized HELLO is seen
inline constexpr size_t kCtrlHeaderBytes = 16;
inline constexpr size_t kMaxCtrlText = 1024;
inline constexpr size_t kCtrlBufBytes = kCtrlHeaderBytes + kMaxCtrlText;
inline constexpr uint32_t kCtrlMagic = 0x52594f43;  // "RYOC"
inline constexpr uint32_t kKeyMagic = 0x52594f4b;   // "RYOK"
inline constexpr size_t kRemoteKeyBytes = 32;
// User messages longer than this wait for the receiver's clear-to-send (ofi_transport.h).
// Below rxm's smallest eager limit, so everything that may travel by segmentation or
// rendezvous takes the clear-to-send path.
inline constexpr size_t kEagerBytes = 4096;

// Control messages; seq carries the user tag for the last three, and the text "<index>
// <bytes>..." names the message by its place among the (peer, tag)'s user messages.
enum class CtrlType : uint8_t {
  kPing = 1,
  kPong = 2,
  kAbort = 3,
  kClearToSend = 4,    // "<index> <receive capacity>": receive `index` of the tag is posted
  kRequestToSend = 5,  // "<index> <message bytes>": long message `index` waits for its receive
  kReject = 6,         // "s|r <index> <message bytes> <capacity>": the message does not fit;
                       // fails the peer's send (s) or receive (r) `index` of the tag
};

inline void PutU32(char* p, uint32_t v) { std::memcpy(p, &v, 4); }
inline void PutU64(char* p, uint64_t v) { std::memcpy(p, &v, 8); }
inline uint32_t GetU32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
inline uint64_t GetU64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// The HELLO's payload from `sender` to `receiver`, whose published nonce it covers.
inline std::string Proof(std::string_view secret, int sender, int receiver,
                         std::string_view nonce) {
  std::string message = fmt::format("railyard-ofi/{}/{}/", sender, receiver);
  message.append(nonce);
  base::Sha256Digest d = base::HmacSha256(secret, message);
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

}  // namespace railyard::net::ofi
