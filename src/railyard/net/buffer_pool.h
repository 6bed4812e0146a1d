// Reusable heap buffers for messages that arrive before their receive is posted.
//
// A transport that buffers such a message needs a buffer for it until the receive comes, then
// frees it. Allocating and freeing one per message is far from free: glibc serves large
// blocks with mmap (or grows and trims the heap), so every message pays page faults on first
// touch and, when the block goes back, an munmap whose TLB shootdown interrupts every CPU
// the process ran on. Measured with 4 ranks on 2 cores, tcp, 1 MiB allreduce: about 7% of
// all time in those faults and shootdowns; busbw was 0.92 GB/s with a malloc per message
// and 1.63 with glibc told never to give memory back. A library cannot set the process's
// malloc tunables, so a pool per transport keeps the buffers instead.
//
// Buffers come in power-of-two sizes from 256 bytes (small, so that many queued short
// messages do not each hold a large buffer). The pool keeps at most `max_pooled_bytes`
// in all, and no buffer above `max_buffer_bytes`; anything beyond goes back to the heap. Not
// thread-safe: each transport drives its progress from one thread at a time.
#pragma once

#include <cstddef>
#include <memory>
#include <vector>

namespace railyard::net {

class PooledBuffer {
 public:
  PooledBuffer() = default;
  char* data() const { return data_.get(); }
  size_t capacity() const { return capacity_; }
  explicit operator bool() const { return data_ != nullptr; }

 private:
  friend class BufferPool;
  std::unique_ptr<char[]> data_;
  size_t capacity_ = 0;
};

class BufferPool {
 public:
  static constexpr size_t kMinBytes = 256;
  explicit BufferPool(size_t max_pooled_bytes = size_t{64} << 20,
                      size_t max_buffer_bytes = size_t{16} << 20)
      : max_pooled_(max_pooled_bytes), max_buffer_(max_buffer_bytes) {}

  // A buffer of at least `bytes` (contents undefined), reused when one of its size is kept.
  PooledBuffer Take(size_t bytes);
  // Returns a buffer for reuse; an empty one is ignored.
  void Give(PooledBuffer buffer);

  size_t pooled_bytes() const { return pooled_; }

 private:
  static size_t ClassOf(size_t bytes);  // log2 of the rounded-up size

  size_t max_pooled_, max_buffer_;
  size_t pooled_ = 0;
  std::vector<std::vector<std::unique_ptr<char[]>>> free_;  // by ClassOf
};

}  // namespace railyard::net
