// What an algorithm needs to run one collective: the transport, the ranks' ring order, the
// operation's tag space and deadline, and reusable scratch memory. Internal to comm/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <vector>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"
#include "railyard/comm/types.h"
#include "railyard/net/transport.h"

namespace railyard::comm {

struct OpContext {
  net::Transport* transport = nullptr;
  int rank = 0;
  int size = 1;
  const std::vector<int>* order = nullptr;     // ring position -> rank
  const std::vector<int>* position = nullptr;  // rank -> ring position
  net::Tag tag_base = 0;                       // sequence << 8; phases use the low byte
  base::Deadline deadline = base::Deadline::Never();
  size_t piece_bytes = 1 << 20;
  // The ring allreduce's segments (n pieces each) per wave, 0 for all (ring.cc).
  size_t wave_segments = 1;
  bool reduce_on_receive = true;  // CommOptions::reduce_on_receive
  std::vector<std::vector<char>>* scratch = nullptr;

  // Reusable buffer `slot` of at least `bytes`.
  char* Scratch(int slot, size_t bytes) {
    if (scratch->size() <= static_cast<size_t>(slot)) scratch->resize(slot + 1);
    auto& v = (*scratch)[slot];
    if (v.size() < bytes) v.resize(bytes);
    return v.data();
  }
  int RingRank(long pos) const {
    long n = size;
    return (*order)[static_cast<size_t>(((pos % n) + n) % n)];
  }
  int MyPosition() const { return (*position)[rank]; }

  Result<net::Request> Send(int peer, int phase, const void* data, size_t len) {
    return transport->PostSend(peer, tag_base | static_cast<net::Tag>(phase), data, len);
  }
  Result<net::Request> Recv(int peer, int phase, void* data, size_t len) {
    return transport->PostRecv(peer, tag_base | static_cast<net::Tag>(phase), data, len);
  }
  // A receive whose bytes are reduced as they arrive: out[i] = op(mine[i], received[i]) for
  // the `len` bytes at out/mine, `granule` = the element size. Only where the transport is
  // a ConsumingReceiver (shm: reduced straight from the ring, no scratch copy).
  Result<net::Request> RecvReduce(int peer, int phase, char* out, const char* mine, size_t len,
                                  DataType type, ReduceOp op) {
    const size_t es = SizeOf(type);
    net::ConsumingReceiver* consuming = transport->consuming_receiver();
    if (consuming == nullptr) {
      return FailedPrecondition("the {} transport cannot reduce on receive", transport->name());
    }
    return consuming->PostRecvConsume(
        peer, tag_base | static_cast<net::Tag>(phase), len, es,
        [out, mine, es, type, op](size_t at, const char* data, size_t n) {
          if (reinterpret_cast<uintptr_t>(data) % es == 0) {
            Reduce(type, op, out + at, mine + at, data, n / es);
            return;
          }
          // Runs may start anywhere in the transport's buffer (after a frame header, say),
          // and the kernels read typed elements: a misaligned run goes through a small
          // aligned buffer, still in cache.
          alignas(64) char bounce[16 << 10];
          for (size_t done = 0; done < n; done += sizeof(bounce)) {
            const size_t k = std::min(sizeof(bounce), n - done);
            std::memcpy(bounce, data + done, k);
            Reduce(type, op, out + at + done, mine + at + done, bounce, k / es);
          }
        });
  }
  Status Wait(net::Request r) { return transport->WaitAll({&r, 1}, deadline); }
  Status WaitAll(std::vector<net::Request>& reqs) {
    Status st = transport->WaitAll(reqs, deadline);
    reqs.clear();
    return st;
  }
};

// Elements [offset, offset + count) of block `i` when `elems` elements are split into n
// blocks as evenly as possible (the first elems % n blocks one element longer).
struct BlockSpan {
  size_t offset, count;
};
inline BlockSpan BlockOf(size_t elems, int n, int i) {
  const size_t base = elems / n, extra = elems % n, k = static_cast<size_t>(i);
  return {k * base + std::min(k, extra), base + (k < extra ? 1 : 0)};
}

// Every block of that split at once; offsets and lengths in bytes.
struct Blocks {
  std::vector<size_t> offset, bytes;
  size_t max_bytes = 0;
  Blocks(size_t count, int n, size_t elem) : offset(n), bytes(n) {
    for (int i = 0; i < n; ++i) {
      const BlockSpan b = BlockOf(count, n, i);
      offset[i] = b.offset * elem;
      bytes[i] = b.count * elem;
      max_bytes = std::max(max_bytes, bytes[i]);
    }
  }
};

// Pieces of a block for pipelining: [begin, end) byte ranges, element-aligned. An empty block
// has no pieces.
inline std::vector<std::pair<size_t, size_t>> Pieces(size_t bytes, size_t piece, size_t elem) {
  std::vector<std::pair<size_t, size_t>> out;
  piece = std::max(elem, piece / elem * elem);
  for (size_t off = 0; off < bytes; off += piece)
    out.emplace_back(off, std::min(bytes, off + piece));
  return out;
}

// Algorithms (ring.cc, small.cc, window.cc). `send` may equal `recv` where the collective allows.
Status RingAllreduce(OpContext& c, const char* send, char* recv, size_t count, DataType type,
                     ReduceOp op);
Status RingReduceScatter(OpContext& c, const char* send, char* recv, size_t recv_count,
                         DataType type, ReduceOp op);
Status RingAllgather(OpContext& c, const char* send, char* recv, size_t send_bytes);
Status ChainBroadcast(OpContext& c, char* data, size_t bytes, int root);
Status RecursiveDoublingAllreduce(OpContext& c, const char* send, char* recv, size_t count,
                                  DataType type, ReduceOp op);
// Through the transport's shared window (window.cc); FAILED_PRECONDITION without one.
Status WindowAllreduce(OpContext& c, const char* send, char* recv, size_t count, DataType type,
                       ReduceOp op);
Status TreeBroadcast(OpContext& c, char* data, size_t bytes, int root);
Status TreeReduce(OpContext& c, const char* send, char* recv, size_t count, DataType type,
                  ReduceOp op, int root);
Status DisseminationBarrier(OpContext& c);
Status PairwiseAlltoall(OpContext& c, const char* send, char* recv, size_t block_bytes);

}  // namespace railyard::comm
