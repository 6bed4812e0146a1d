// SHA-256 (FIPS 180-4) and HMAC-SHA-256 (RFC 2104), for proving the per-job secret.
//
// Railyard's rendezvous store and data connections accept only peers that know the job's
// secret: the acceptor sends a random nonce, the connecting side answers with
// HmacSha256(secret, nonce || context) and the acceptor compares with ConstantTimeEqual.
// The secret itself never crosses the network.
//
// Thread-safety: pure functions.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace railyard::base {

using Sha256Digest = std::array<uint8_t, 32>;

Sha256Digest Sha256(std::string_view data);
Sha256Digest HmacSha256(std::string_view key, std::string_view message);

// Compares without an early exit, so timing does not reveal how many bytes matched.
bool ConstantTimeEqual(std::string_view a, std::string_view b);

// `n` bytes from the kernel's random source (getrandom); for nonces and job secrets.
std::string RandomBytes(size_t n);

// Lower-case hex, for secrets passed in the environment.
std::string ToHex(std::string_view bytes);

}  // namespace railyard::base
