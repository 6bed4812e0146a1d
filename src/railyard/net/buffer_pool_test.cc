#include "railyard/net/buffer_pool.h"

#include <gtest/gtest.h>

#include <cstring>

namespace railyard::net {
namespace {

TEST(BufferPool, RoundsUpToAPowerOfTwoOfAtLeast256Bytes) {
  BufferPool pool;
  EXPECT_EQ(pool.Take(0).capacity(), 256u);
  EXPECT_EQ(pool.Take(1).capacity(), 256u);
  EXPECT_EQ(pool.Take(257).capacity(), 512u);
  EXPECT_EQ(pool.Take(4096).capacity(), 4096u);
  EXPECT_EQ(pool.Take(4097).capacity(), 8192u);
  EXPECT_EQ(pool.Take((1 << 20) + 3).capacity(), 2u << 20);
}

TEST(BufferPool, ReusesAGivenBufferOfTheSameClass) {
  BufferPool pool;
  PooledBuffer a = pool.Take(100 << 10);  // 128 KiB class
  char* where = a.data();
  std::memset(where, 7, a.capacity());  // the whole capacity is writable
  pool.Give(std::move(a));
  EXPECT_EQ(pool.pooled_bytes(), 128u << 10);
  PooledBuffer other = pool.Take(4096);  // another class: a new buffer
  EXPECT_NE(other.data(), where);
  PooledBuffer b = pool.Take(128 << 10);
  EXPECT_EQ(b.data(), where);
  EXPECT_EQ(pool.pooled_bytes(), 0u);
}

TEST(BufferPool, KeepsNoMoreThanItsLimits) {
  BufferPool pool(/*max_pooled_bytes=*/64 << 10, /*max_buffer_bytes=*/32 << 10);
  pool.Give(pool.Take(64 << 10));  // above the per-buffer limit: freed
  EXPECT_EQ(pool.pooled_bytes(), 0u);
  PooledBuffer a = pool.Take(32 << 10), b = pool.Take(32 << 10), c = pool.Take(32 << 10);
  pool.Give(std::move(a));
  pool.Give(std::move(b));
  pool.Give(std::move(c));  // would exceed 64 KiB in all: freed
  EXPECT_EQ(pool.pooled_bytes(), 64u << 10);
  pool.Give(PooledBuffer());  // empty: ignored
  EXPECT_EQ(pool.pooled_bytes(), 64u << 10);
}

}  // namespace
}  // namespace railyard::net
