#include "railyard/base/hmac.h"

#include <errno.h>
#include <fmt/format.h>
#include <sys/random.h>

#include <cstdlib>
#include <cstring>

namespace railyard::base {
namespace {

constexpr size_t kBlockBytes = 64;

// FIPS 180-4 section 4.2.2: the first 32 bits of the fractional parts of the cube roots of
// the first 64 primes.
constexpr uint32_t kRound[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

constexpr uint32_t Rotr(uint32_t x, int n) { return (x >> n) | (x << (32 - n)); }

// Incremental SHA-256, so HMAC can hash key pad and message without concatenating copies.
class Sha256State {
 public:
  void Update(std::string_view data) {
    total_bytes_ += data.size();
    for (char c : data) {
      block_[fill_++] = static_cast<uint8_t>(c);
      if (fill_ == kBlockBytes) {
        Compress();
        fill_ = 0;
      }
    }
  }

  Sha256Digest Finish() {
    // Section 5.1.1: a 1 bit, zeros up to 56 mod 64 bytes, then the bit length big-endian.
    uint64_t bit_length = total_bytes_ * 8;
    block_[fill_++] = 0x80;
    if (fill_ > 56) {
      while (fill_ < kBlockBytes) block_[fill_++] = 0;
      Compress();
      fill_ = 0;
    }
    while (fill_ < 56) block_[fill_++] = 0;
    for (int i = 7; i >= 0; --i) block_[fill_++] = static_cast<uint8_t>(bit_length >> (8 * i));
    Compress();
    Sha256Digest out;
    for (int i = 0; i < 8; ++i) {
      for (int b = 0; b < 4; ++b) out[4 * i + b] = static_cast<uint8_t>(h_[i] >> (24 - 8 * b));
    }
    return out;
  }

 private:
  void Compress() {
    uint32_t w[64];
    for (int t = 0; t < 16; ++t) {
      w[t] = uint32_t{block_[4 * t]} << 24 | uint32_t{block_[4 * t + 1]} << 16 |
             uint32_t{block_[4 * t + 2]} << 8 | uint32_t{block_[4 * t + 3]};
    }
    for (int t = 16; t < 64; ++t) {
      uint32_t s0 = Rotr(w[t - 15], 7) ^ Rotr(w[t - 15], 18) ^ (w[t - 15] >> 3);
      uint32_t s1 = Rotr(w[t - 2], 17) ^ Rotr(w[t - 2], 19) ^ (w[t - 2] >> 10);
      w[t] = w[t - 16] + s0 + w[t - 7] + s1;
    }
    uint32_t a = h_[0], b = h_[1], c = h_[2], d = h_[3];
    uint32_t e = h_[4], f = h_[5], g = h_[6], h = h_[7];
    for (int t = 0; t < 64; ++t) {
      uint32_t big_s1 = Rotr(e, 6) ^ Rotr(e, 11) ^ Rotr(e, 25);
      uint32_t ch = (e & f) ^ (~e & g);
      uint32_t t1 = h + big_s1 + ch + kRound[t] + w[t];
      uint32_t big_s0 = Rotr(a, 2) ^ Rotr(a, 13) ^ Rotr(a, 22);
      uint32_t maj = (a & b) ^ (a & c) ^ (b & c);
      uint32_t t2 = big_s0 + maj;
      h = g;
      g = f;
      f = e;
      e = d + t1;
      d = c;
      c = b;
      b = a;
      a = t1 + t2;
    }
    h_[0] += a;
    h_[1] += b;
    h_[2] += c;
    h_[3] += d;
    h_[4] += e;
    h_[5] += f;
    h_[6] += g;
    h_[7] += h;
  }

  // Section 5.3.3: the initial hash value.
  uint32_t h_[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                    0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
  uint8_t block_[kBlockBytes] = {};
  size_t fill_ = 0;
  uint64_t total_bytes_ = 0;
};

std::string_view AsView(const Sha256Digest& d) {
  return std::string_view(reinterpret_cast<const char*>(d.data()), d.size());
}

}  // namespace

Sha256Digest Sha256(std::string_view data) {
  Sha256State state;
  state.Update(data);
  return state.Finish();
}

Sha256Digest HmacSha256(std::string_view key, std::string_view message) {
  // RFC 2104: keys longer than the block are hashed first; shorter ones are zero-padded.
  std::string block_key(kBlockBytes, '\0');
  if (key.size() > kBlockBytes) {
    Sha256Digest hashed = Sha256(key);
    std::memcpy(block_key.data(), hashed.data(), hashed.size());
  } else {
    std::memcpy(block_key.data(), key.data(), key.size());
  }
  std::string ipad(kBlockBytes, '\0');
  std::string opad(kBlockBytes, '\0');
  for (size_t i = 0; i < kBlockBytes; ++i) {
    ipad[i] = static_cast<char>(block_key[i] ^ 0x36);
    opad[i] = static_cast<char>(block_key[i] ^ 0x5c);
  }
  Sha256State inner;
  inner.Update(ipad);
  inner.Update(message);
  Sha256Digest inner_digest = inner.Finish();
  Sha256State outer;
  outer.Update(opad);
  outer.Update(AsView(inner_digest));
  return outer.Finish();
}

bool ConstantTimeEqual(std::string_view a, std::string_view b) {
  // The lengths of a proof are public (always 32 bytes), so an early exit on them leaks
  // nothing; the contents are compared with no data-dependent branch.
  if (a.size() != b.size()) return false;
  volatile uint8_t diff = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff = diff | static_cast<uint8_t>(a[i] ^ b[i]);
  }
  return diff == 0;
}

std::string RandomBytes(size_t n) {
  std::string out(n, '\0');
  size_t got = 0;
  while (got < n) {
    ssize_t r = ::getrandom(out.data() + got, n - got, 0);
    if (r < 0) {
      if (errno == EINTR) continue;
      // getrandom only fails for bad arguments or a kernel without it (< 3.17): a nonce from
      // anything weaker would silently defeat the authentication, so stop here.
      fmt::print(stderr, "railyard: getrandom failed (errno {}); cannot make a nonce\n", errno);
      std::abort();
    }
    got += static_cast<size_t>(r);
  }
  return out;
}

std::string ToHex(std::string_view bytes) {
  static constexpr char kDigits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 2);
  for (char c : bytes) {
    auto u = static_cast<uint8_t>(c);
    out += kDigits[u >> 4];
    out += kDigits[u & 0xf];
  }
  return out;
}

}  // namespace railyard::base
