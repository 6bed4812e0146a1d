// The secret handshake that opens every store and tcp data connection, proven both ways, and
// the cap on connections that have not finished it.
//
// Three messages, each side with a fresh nonce; neither side sends the secret, and the
// connector sends nothing of value before the acceptor has proven itself:
//
//   connector -> acceptor  hello:     magic u32, version u32 (big-endian), nonce_c[16],
//                                     then the protocol's context (fixed size, may be empty)
//   acceptor -> connector  challenge: nonce_a[16], HMAC(secret, "acceptor" | ...)[32]
//   connector -> acceptor  answer:    HMAC(secret, "connector" | ...)[32]
//
// Each proof covers the role, the protocol's domain ("railyard-store", "railyard-tcp"), the
// context (for data connections: which rank connects to which, on which stream) and both
// nonces, each length-prefixed, so a proof never carries over to another role, protocol,
// connection or rank pair. A connector that finds the acceptor's proof wrong stops there
// (the acceptor is not Railyard's, or has another secret); an acceptor that finds the answer
// wrong closes the connection. Proofs are compared in constant time.
//
// Connector first: a real connector that waited in the listen backlog has its hello queued
// by the time it is accepted, so it is answered at once, and PendingHandshakes drops idle
// connections (which have sent nothing) before it.
//
// What it does not do: encrypt or sign the traffic that follows, so an attacker on the path
// can still read or change it; it keeps out whoever merely reaches the port.
//
// Thread-safety: Handshake is used by one thread at a time; PendingHandshakes likewise.
#pragma once

#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"

namespace railyard::net {

struct HandshakeProtocol {
  uint32_t magic;
  uint32_t version;
  std::string_view domain;    // bound into every proof
  std::string_view acceptor;  // for messages: "Railyard's store", "a Railyard rank"
  size_t context_bytes = 0;   // the fixed size of the hello's context
};

inline constexpr size_t kHandshakeNonceBytes = 16;
inline constexpr size_t kHandshakeProofBytes = 32;
inline constexpr size_t kHelloHeaderBytes = 8 + kHandshakeNonceBytes;
inline constexpr size_t kChallengeBytes = kHandshakeNonceBytes + kHandshakeProofBytes;
inline constexpr size_t kAnswerBytes = kHandshakeProofBytes;

// At most this many accepted connections may be inside the handshake at once, each for at
// most kHandshakeTimeout: a flood of idle connects costs a bounded set of descriptors and
// cannot keep a real rank out (see PendingHandshakes).
inline constexpr size_t kMaxPendingHandshakes = 64;
inline constexpr std::chrono::seconds kHandshakeTimeout{5};

// One connection's handshake, from either side. `protocol` must be a static and `secret`
// must outlive the object.
class Handshake {
 public:
  Handshake(const HandshakeProtocol& protocol, std::string_view secret)
      : protocol_(&protocol), secret_(secret) {}

  size_t hello_bytes() const { return kHelloHeaderBytes + protocol_->context_bytes; }

  // Connector: the hello to send first; `context` must have protocol.context_bytes bytes.
  std::string ConnectorHello(std::string_view context);
  // Connector: checks the acceptor's challenge (kChallengeBytes) and returns the answer to
  // send. PERMISSION_DENIED "<acceptor> did not prove the job secret: ..." when it is wrong.
  Result<std::string> ConnectorAnswer(std::string_view challenge, std::string_view acceptor);

  // Acceptor: checks the hello (hello_bytes()) and returns the challenge to send back.
  // UNAVAILABLE for a wrong magic (not a Railyard peer), FAILED_PRECONDITION for another
  // version; the message names `connector`.
  Result<std::string> AcceptorChallenge(std::string_view hello, std::string_view connector);
  // Acceptor: the context the connector sent (valid after AcceptorChallenge succeeded).
  std::string_view context() const { return context_; }
  // Acceptor: true when the answer (kAnswerBytes) proves the secret.
  bool AcceptorCheck(std::string_view answer) const;

 private:
  std::string Proof(std::string_view role) const;

  const HandshakeProtocol* protocol_;
  std::string_view secret_;
  std::string context_;
  std::string connector_nonce_;
  std::string acceptor_nonce_;
};

// The accepted connections still inside the handshake, each with its deadline. When a new
// one would exceed kMaxPendingHandshakes, one is dropped first: the oldest that has not sent
// its hello yet (an idle connect), else the oldest. Idle connects therefore never push out a
// connector that is answering, and nothing stays longer than kHandshakeTimeout.
class PendingHandshakes {
 public:
  // Tests shrink the limits; servers use the defaults.
  explicit PendingHandshakes(base::Duration timeout = kHandshakeTimeout,
                             size_t limit = kMaxPendingHandshakes)
      : timeout_(timeout), limit_(limit) {}

  // Registers `id`; returns the id to close first when the set was full.
  std::optional<uint64_t> Add(uint64_t id);
  // The connection sent its hello: it is now dropped only after every idle one.
  void HelloReceived(uint64_t id);
  // It finished (or failed) the handshake, or closed.
  void Remove(uint64_t id);
  // The connections whose deadline has passed, removed from the set.
  std::vector<uint64_t> TakeExpired();
  base::Deadline NextDeadline() const;
  size_t size() const { return entries_.size(); }

 private:
  struct Entry {
    uint64_t id;
    base::Deadline deadline;
    bool said_hello;
  };
  base::Duration timeout_;
  size_t limit_;
  std::deque<Entry> entries_;  // in order of arrival, so deadlines ascend
};

}  // namespace railyard::net
