#include "railyard/base/checksum.h"

#include <atomic>
#include <new>

#include "railyard/base/checksum_variants.h"

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

namespace checksum_internal {

const Xxh3Variant* Xxh3Avx2() {
#ifdef RAILYARD_XXH3_AVX2
  // libgcc's and compiler-rt's check include the OS's saving of the AVX registers (XGETBV).
  static const bool supported = __builtin_cpu_supports("avx2");
  if (supported) return &Xxh3Avx2Unchecked();
#endif
  return nullptr;
}

namespace {
// Set at most once per process, by a benchmark before it hashes anything.
std::atomic<const Xxh3Variant*> g_chosen{nullptr};
}  // namespace

const Xxh3Variant& Xxh3Best() {
  const Xxh3Variant* avx2 = Xxh3Avx2();
  return avx2 != nullptr ? *avx2 : Xxh3Baseline();
}

const Xxh3Variant* Xxh3Named(std::string_view name) {
  if (name == "library") return &Xxh3Library();
  if (name == "baseline" || name == Xxh3Baseline().name) return &Xxh3Baseline();
  if (name == "avx2") return Xxh3Avx2();
  return nullptr;
}

const Xxh3Variant& Xxh3Selected() {
  const Xxh3Variant* chosen = g_chosen.load(std::memory_order_acquire);
  return chosen != nullptr ? *chosen : Xxh3Best();
}

}  // namespace checksum_internal

using checksum_internal::Xxh3Selected;

uint64_t Xxh3(const void* data, size_t n) { return Xxh3Selected().hash(data, n); }

uint64_t Xxh3(std::string_view data) { return Xxh3Selected().hash(data.data(), data.size()); }

std::string_view Xxh3Implementation() { return Xxh3Selected().name; }

Status UseXxh3Implementation(std::string_view name) {
  if (name.empty() || name == "best") {
    checksum_internal::g_chosen.store(nullptr, std::memory_order_release);
    return Status::Ok();
  }
  const checksum_internal::Xxh3Variant* v = checksum_internal::Xxh3Named(name);
  if (v == nullptr) {
    return InvalidArgument(
        "XXH3 implementation '{}' is unknown or not supported by this CPU (expected best, "
        "library, baseline{})",
        name, checksum_internal::Xxh3Avx2() != nullptr ? " or avx2" : "");
  }
  checksum_internal::g_chosen.store(v, std::memory_order_release);
  return Status::Ok();
}

void Xxh3Stream::StateDeleter::operator()(void* state) const {
  ::operator delete(state, std::align_val_t(Xxh3Selected().state_align));
}

Xxh3Stream::Xxh3Stream()
    : state_(
          ::operator new(Xxh3Selected().state_size, std::align_val_t(Xxh3Selected().state_align))) {
  Reset();
}

Xxh3Stream::Xxh3Stream(Xxh3Stream&&) noexcept = default;
Xxh3Stream& Xxh3Stream::operator=(Xxh3Stream&&) noexcept = default;
Xxh3Stream::~Xxh3Stream() = default;

void Xxh3Stream::Update(const void* data, size_t n) {
  Xxh3Selected().update(state_.get(), data, n);
}

uint64_t Xxh3Stream::Digest() const { return Xxh3Selected().digest(state_.get()); }

void Xxh3Stream::Reset() { Xxh3Selected().reset(state_.get()); }

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
