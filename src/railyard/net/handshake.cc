#include "railyard/net/handshake.h"

#include <algorithm>

#include "railyard/base/hmac.h"

namespace railyard::net {
namespace {

void PutU32(std::string& out, uint32_t v) {
  for (int i = 3; i >= 0; --i) out += static_cast<char>(v >> (8 * i));
}

uint32_t GetU32(std::string_view in) {
  uint32_t v = 0;
  for (size_t i = 0; i < 4; ++i) v = v << 8 | static_cast<uint8_t>(in[i]);
  return v;
}

// Length-prefixed, so that no two different transcripts hash the same bytes.
void PutField(std::string& out, std::string_view field) {
  PutU32(out, static_cast<uint32_t>(field.size()));
  out += field;
}

}  // namespace

std::string Handshake::Proof(std::string_view role) const {
  std::string msg;
  PutField(msg, role);
  PutField(msg, protocol_->domain);
  PutField(msg, context_);
  PutField(msg, acceptor_nonce_);
  PutField(msg, connector_nonce_);
  base::Sha256Digest d = base::HmacSha256(secret_, msg);
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

std::string Handshake::ConnectorHello(std::string_view context) {
  context_ = std::string(context);
  connector_nonce_ = base::RandomBytes(kHandshakeNonceBytes);
  std::string hello;
  PutU32(hello, protocol_->magic);
  PutU32(hello, protocol_->version);
  hello += connector_nonce_;
  hello += context_;
  return hello;
}

Result<std::string> Handshake::ConnectorAnswer(std::string_view challenge,
                                               std::string_view acceptor) {
  if (challenge.size() != kChallengeBytes) {
    return Internal("handshake with {}: challenge of {} bytes", acceptor, challenge.size());
  }
  acceptor_nonce_ = std::string(challenge.substr(0, kHandshakeNonceBytes));
  if (!base::ConstantTimeEqual(challenge.substr(kHandshakeNonceBytes), Proof("acceptor"))) {
    return PermissionDenied(
        "{} did not prove the job secret: wrong RAILYARD_JOB_SECRET, or not {}; nothing was "
        "sent to it",
        acceptor, protocol_->acceptor);
  }
  return Proof("connector");
}

Result<std::string> Handshake::AcceptorChallenge(std::string_view hello,
                                                 std::string_view connector) {
  if (hello.size() != hello_bytes()) {
    return Internal("handshake with {}: hello of {} bytes", connector, hello.size());
  }
  if (GetU32(hello) != protocol_->magic) {
    return Unavailable("{} is not a Railyard peer of this kind (bad magic in its hello)",
                       connector);
  }
  uint32_t version = GetU32(hello.substr(4));
  if (version != protocol_->version) {
    return FailedPrecondition("{} speaks {} version {}, this process speaks {}", connector,
                              protocol_->domain, version, protocol_->version);
  }
  connector_nonce_ = std::string(hello.substr(8, kHandshakeNonceBytes));
  context_ = std::string(hello.substr(kHelloHeaderBytes));
  acceptor_nonce_ = base::RandomBytes(kHandshakeNonceBytes);
  return acceptor_nonce_ + Proof("acceptor");
}

bool Handshake::AcceptorCheck(std::string_view answer) const {
  // Without a challenge sent there is nothing to check against: refuse.
  if (acceptor_nonce_.empty()) return false;
  return base::ConstantTimeEqual(answer, Proof("connector"));
}

std::optional<uint64_t> PendingHandshakes::Add(uint64_t id) {
  std::optional<uint64_t> victim;
  if (entries_.size() >= limit_ && !entries_.empty()) {
    auto it = std::find_if(entries_.begin(), entries_.end(),
                           [](const Entry& e) { return !e.said_hello; });
    if (it == entries_.end()) it = entries_.begin();
    victim = it->id;
    entries_.erase(it);
  }
  entries_.push_back({id, base::Deadline::After(timeout_), false});
  return victim;
}

void PendingHandshakes::HelloReceived(uint64_t id) {
  for (auto& e : entries_) {
    if (e.id == id) e.said_hello = true;
  }
}

void PendingHandshakes::Remove(uint64_t id) {
  auto it =
      std::find_if(entries_.begin(), entries_.end(), [id](const Entry& e) { return e.id == id; });
  if (it != entries_.end()) entries_.erase(it);
}

std::vector<uint64_t> PendingHandshakes::TakeExpired() {
  std::vector<uint64_t> out;
  while (!entries_.empty() && entries_.front().deadline.Expired()) {
    out.push_back(entries_.front().id);
    entries_.pop_front();
  }
  return out;
}

base::Deadline PendingHandshakes::NextDeadline() const {
  return entries_.empty() ? base::Deadline::Never() : entries_.front().deadline;
}

}  // namespace railyard::net
