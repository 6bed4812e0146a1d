#include "railyard/storage/aligned_buffer.h"

#include <sys/mman.h>

#include <cstdlib>
#include <utility>

namespace railyard::storage {
namespace {

// Buffers from this size on are huge-page aligned and advised (see the header).
constexpr size_t kHugePageBytes = 2 << 20;
constexpr size_t kHugeBufferMin = 4 << 20;

}  // namespace

AlignedBuffer::AlignedBuffer(AlignedBuffer&& other) noexcept
    : data_(std::exchange(other.data_, nullptr)),
      size_(std::exchange(other.size_, 0)),
      capacity_(std::exchange(other.capacity_, 0)) {}

AlignedBuffer& AlignedBuffer::operator=(AlignedBuffer&& other) noexcept {
  if (this != &other) {
    std::free(data_);
    data_ = std::exchange(other.data_, nullptr);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
  }
  return *this;
}

AlignedBuffer::~AlignedBuffer() { std::free(data_); }

Status AlignedBuffer::Resize(size_t n) {
  if (n <= capacity_) {
    size_ = n;
    return Status::Ok();
  }
  const bool huge = n >= kHugeBufferMin;
  const size_t alignment = huge ? kHugePageBytes : kDirectIoAlignment;
  size_t cap = AlignUp(n, alignment);
  void* p = nullptr;
  if (::posix_memalign(&p, alignment, cap) != 0) {
    return ResourceExhausted("cannot allocate {} bytes of aligned memory", cap);
  }
  // Advice only: where transparent huge pages are off, the buffer just has small pages.
  if (huge) ::madvise(p, cap, MADV_HUGEPAGE);
  std::free(data_);
  data_ = static_cast<uint8_t*>(p);
  size_ = n;
  capacity_ = cap;
  return Status::Ok();
}

void AlignedBuffer::Prefault() {
  // One write per small page: enough to fault it in (a huge page takes one fault for 512).
  for (size_t at = 0; at < capacity_; at += kDirectIoAlignment) {
    reinterpret_cast<volatile uint8_t*>(data_)[at] = 0;
  }
}

}  // namespace railyard::storage
