#include "railyard/base/checksum.h"

#include <xxhash.h>

#include <new>

namespace railyard::base {
namespace {

// Control and non-ASCII bytes escaped, so a corrupt manifest does not garble the terminal.
std::string Printable(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c >= 0x20 && c < 0x7f) {
      out += c;
    } else {
      out += fmt::format("\\x{:02x}", static_cast<unsigned char>(c));
    }
  }
  return out;
}

}  // namespace

uint64_t Xxh3(const void* data, size_t n) { return XXH3_64bits(data, n); }

uint64_t Xxh3(std::string_view data) { return XXH3_64bits(data.data(), data.size()); }

void Xxh3Stream::StateDeleter::operator()(XXH3_state_s* state) const { XXH3_freeState(state); }

Xxh3Stream::Xxh3Stream() : state_(XXH3_createState()) {
  // The only failure is malloc's; treat it like any other allocation in C++.
  if (state_ == nullptr) throw std::bad_alloc();
  Reset();
}

Xxh3Stream::Xxh3Stream(Xxh3Stream&&) noexcept = default;
Xxh3Stream& Xxh3Stream::operator=(Xxh3Stream&&) noexcept = default;
Xxh3Stream::~Xxh3Stream() = default;

void Xxh3Stream::Update(const void* data, size_t n) {
  // XXH3_64bits_update only fails for a null state, which the constructor rules out.
  (void)XXH3_64bits_update(state_.get(), data, n);
}

uint64_t Xxh3Stream::Digest() const { return XXH3_64bits_digest(state_.get()); }

void Xxh3Stream::Reset() { (void)XXH3_64bits_reset(state_.get()); }

std::string ChecksumHex(uint64_t sum) { return fmt::format("{:016x}", sum); }

Result<uint64_t> ParseChecksumHex(std::string_view text) {
  if (text.size() != 16) {
    return InvalidArgument("invalid checksum '{}': expected 16 hex digits, got {} characters",
                           Printable(text), text.size());
  }
  uint64_t sum = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    uint64_t digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else {
      return InvalidArgument("invalid checksum '{}': character {} is '{}', not a hex digit",
                             Printable(text), i + 1, Printable(text.substr(i, 1)));
    }
    sum = (sum << 4) | digit;
  }
  return sum;
}

}  // namespace railyard::base
