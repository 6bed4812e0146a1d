#include "railyard/net/buffer_pool.h"

#include <algorithm>
#include <bit>
#include <utility>

namespace railyard::net {

size_t BufferPool::ClassOf(size_t bytes) {
  return static_cast<size_t>(std::bit_width(std::bit_ceil(std::max(bytes, kMinBytes)) - 1));
}

PooledBuffer BufferPool::Take(size_t bytes) {
  PooledBuffer b;
  const size_t cls = ClassOf(bytes);
  b.capacity_ = size_t{1} << cls;
  if (cls < free_.size() && !free_[cls].empty()) {
    b.data_ = std::move(free_[cls].back());
    free_[cls].pop_back();
    pooled_ -= b.capacity_;
  } else {
    b.data_.reset(new char[b.capacity_]);  // not value-initialised: no zeroing
  }
  return b;
}

void BufferPool::Give(PooledBuffer buffer) {
  if (!buffer) return;
  const size_t cap = buffer.capacity_;
  if (cap > max_buffer_ || pooled_ + cap > max_pooled_) return;  // freed with `buffer`
  const size_t cls = ClassOf(cap);
  if (free_.size() <= cls) free_.resize(cls + 1);
  free_[cls].push_back(std::move(buffer.data_));
  pooled_ += cap;
}

}  // namespace railyard::net
