// Aligned memory for O_DIRECT transfers and staging, and the alignment O_DIRECT requires.
//
//   AlignedBuffer buf;
//   RY_RETURN_IF_ERROR(buf.Resize(AlignUp(n, kDirectIoAlignment)));
//   RY_RETURN_IF_ERROR(file->PRead(0, buf.data(), buf.size()));   // straight into place
//
// Thread-safety: an AlignedBuffer is a plain value; share it only with external locking.
#pragma once

#include <cstddef>
#include <cstdint>

#include "railyard/base/status.h"

namespace railyard::storage {

// O_DIRECT transfers must start at, and be a multiple of, this many bytes (the largest
// logical block size in practice), and their memory must be aligned to it.
inline constexpr size_t kDirectIoAlignment = 4096;

// Rounds up to a multiple of `alignment` (a power of two).
constexpr uint64_t AlignUp(uint64_t n, uint64_t alignment) {
  return (n + alignment - 1) & ~(alignment - 1);
}

// Rounds down to a multiple of `alignment` (a power of two).
constexpr uint64_t AlignDown(uint64_t n, uint64_t alignment) { return n & ~(alignment - 1); }

// A heap buffer aligned to kDirectIoAlignment, for O_DIRECT transfers and staging. Buffers of
// 4 MiB and more are aligned to 2 MiB and advised as transparent-huge-page candidates
// (MADV_HUGEPAGE): copies into a large staging buffer run markedly faster with fewer TLB
// misses, in virtual machines especially. Move-only.
class AlignedBuffer {
 public:
  AlignedBuffer() = default;
  AlignedBuffer(AlignedBuffer&& other) noexcept;
  AlignedBuffer& operator=(AlignedBuffer&& other) noexcept;
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  ~AlignedBuffer();

  // Makes size() == n; reallocates only when n exceeds the capacity (contents are then lost).
  // RESOURCE_EXHAUSTED when the allocation fails.
  Status Resize(size_t n);
  // Writes to every page of the capacity once, so that later copies into the buffer do not
  // stop at page faults (the first touch of fresh memory is the slow part of a first copy).
  void Prefault();
  uint8_t* data() { return data_; }
  const uint8_t* data() const { return data_; }
  size_t size() const { return size_; }
  size_t capacity() const { return capacity_; }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace railyard::storage
