// XXH3-64 checksums: one-shot, streaming, and the hex text form stored in manifests.
//
// XXH3 is not cryptographic; it guards against torn writes, bit rot and transfer bugs, not
// against an adversary. The 64-bit digest is written as exactly 16 lowercase hex digits so
// manifests compare as strings and diff cleanly.
//
//   uint64_t sum = Xxh3(shard_bytes);
//   Xxh3Stream stream;
//   for (const auto& chunk : chunks) stream.Update(chunk.data(), chunk.size());
//   if (stream.Digest() != expected) return DataLoss("shard {}: checksum {} != {}", ...);
//
// The hashing is xxhash's, compiled here for AVX2 and for the baseline and chosen once by
// what the CPU supports (checksum_variants.h); every choice gives the same digests.
//
// Thread-safety: the free functions are pure. An Xxh3Stream is a single-owner object: use it
// from one thread at a time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>

#include "railyard/base/status.h"

namespace railyard::base {

// XXH3-64 (seed 0) of n bytes at data. data may be null when n == 0.
uint64_t Xxh3(const void* data, size_t n);
uint64_t Xxh3(std::string_view data);

// The implementation in use: "avx2", "sse2", ... (instruction set) or "library" (the
// system's libxxhash).
std::string_view Xxh3Implementation();

// For benchmarks that compare implementations in one build (`railyard bench ckpt --xxh3`):
// "best" (the default: AVX2 where the CPU has it, else the baseline), "library", "baseline"
// or "avx2". Call before anything is hashed: a stream keeps the state layout of the choice
// it was created under. INVALID_ARGUMENT for an unknown name or one this CPU cannot run.
Status UseXxh3Implementation(std::string_view name);

// Incremental XXH3-64: feeding the same bytes in any split gives the one-shot digest.
// Move-only; a moved-from stream may only be destroyed or assigned to.
class Xxh3Stream {
 public:
  // Allocates the hashing state (about 600 bytes); throws std::bad_alloc on OOM, as new
  // would.
  Xxh3Stream();
  Xxh3Stream(Xxh3Stream&&) noexcept;
  Xxh3Stream& operator=(Xxh3Stream&&) noexcept;
  Xxh3Stream(const Xxh3Stream&) = delete;
  Xxh3Stream& operator=(const Xxh3Stream&) = delete;
  ~Xxh3Stream();

  // Appends n bytes. data may be null when n == 0.
  void Update(const void* data, size_t n);
  void Update(std::string_view data) { Update(data.data(), data.size()); }

  // Digest of everything fed since construction or the last Reset. Does not end the stream:
  // more Updates may follow.
  uint64_t Digest() const;

  // Starts over, as if newly constructed.
  void Reset();

 private:
  // The state is opaque memory laid out by the selected variant.
  struct StateDeleter {
    void operator()(void* state) const;
  };
  std::unique_ptr<void, StateDeleter> state_;
};

// Exactly 16 lowercase hex digits, zero-padded: ChecksumHex(0x2d) == "000000000000002d".
std::string ChecksumHex(uint64_t sum);

// Inverse of ChecksumHex. Accepts exactly 16 hex digits in either case, no prefix or spaces.
// Errors: INVALID_ARGUMENT quoting the text and saying what is wrong.
Result<uint64_t> ParseChecksumHex(std::string_view text);

}  // namespace railyard::base
