// Ring algorithms, pipelined: every block travels in pieces, and a piece is reduced and
// forwarded as soon as it arrives, so the network, the reduction and the next send overlap.
//
// Positions, not ranks, go round the ring (OpContext::order). With p my position and
// blk(k) = order[k mod n]:
//   reduce-scatter step s (0..n-2): send block blk(p-s-1), receive blk(p-s-2) from prev and
//     reduce it; the block reduced at step s is the one sent at step s+1, and at the last
//     step it is blk(p) = my rank's block, now complete.
//   allgather step s: send blk(p-s), receive blk(p-s-1); what arrives is forwarded next step.
// Receives are posted ahead of the data (for reduce-scatter all at once when the transport
// reduces as it receives, else a step early; all at once for allgather, straight into the
// output) so the transport rarely has to buffer a message.
// Receiving allgather data into a block that is still being sent is safe by causality: a
// block's final value can only come back round after our contribution to it has left.
#include <algorithm>

#include "railyard/comm/internal/op_context.h"

namespace railyard::comm {
namespace {

enum Phase { kReduceScatter = 1, kAllgather = 2, kBroadcast = 3 };

}  // namespace

Status RingAllreduce(OpContext& c, const char* send, char* recv, size_t count, DataType type,
                     ReduceOp op) {
  const int n = c.size;
  const size_t es = SizeOf(type);
  if (n == 1) {
    if (send != recv && count > 0) std::memcpy(recv, send, count * es);
    return Status::Ok();
  }
  Blocks b(count, n, es);
  const long p = c.MyPosition();
  const int next = c.RingRank(p + 1), prev = c.RingRank(p - 1);
  char* scratch[2] = {nullptr, nullptr};
  auto pieces = [&](int block) { return Pieces(b.bytes[block], c.piece_bytes, es); };

  std::vector<net::Request> sends;
  std::vector<std::vector<net::Request>> rs_recv(n - 1), ag_recv(n - 1);
  // Where the transport can hand over bytes in place (shm), a reduce-scatter piece is reduced
  // into the output as it arrives, straight from the ring: one pass over memory fewer than
  // receiving into scratch and reducing from there. Safe to run early: the output block of
  // step s is read (sent on) only after step s, and written by the allgather only after the
  // whole ring has passed it.
  const bool in_place = c.reduce_on_receive && c.transport->consuming_receiver() != nullptr;
  if (!in_place) scratch[0] = c.Scratch(0, b.max_bytes), scratch[1] = c.Scratch(1, b.max_bytes);
  auto post_rs_recv = [&](int s) -> Status {
    int blk = c.RingRank(p - s - 2);
    for (auto [lo, hi] : pieces(blk)) {
      net::Request r;
      if (in_place) {
        const size_t at = b.offset[blk] + lo;
        RY_ASSIGN_OR_RETURN(
            r, c.RecvReduce(prev, kReduceScatter, recv + at, send + at, hi - lo, type, op));
      } else {
        RY_ASSIGN_OR_RETURN(r, c.Recv(prev, kReduceScatter, scratch[s % 2] + lo, hi - lo));
      }
      rs_recv[s].push_back(r);
    }
    return Status::Ok();
  };
  // Consuming receives reduce into n-1 distinct output blocks, so every step's is posted at
  // once and a fast neighbour's pieces never arrive unexpected (to be buffered and copied);
  // receives into scratch go one step ahead, as the two scratch buffers allow.
  for (int s = 0; s < (in_place ? n - 1 : 1); ++s) RY_RETURN_IF_ERROR(post_rs_recv(s));
  for (int s = 0; s < n - 1; ++s) {
    int blk = c.RingRank(p - s - 1);
    for (auto [lo, hi] : pieces(blk)) {
      RY_ASSIGN_OR_RETURN(auto r, c.Recv(prev, kAllgather, recv + b.offset[blk] + lo, hi - lo));
      ag_recv[s].push_back(r);
    }
  }
  {
    int blk = c.RingRank(p - 1);
    for (auto [lo, hi] : pieces(blk)) {
      RY_ASSIGN_OR_RETURN(auto r, c.Send(next, kReduceScatter, send + b.offset[blk] + lo, hi - lo));
      sends.push_back(r);
    }
  }
  for (int s = 0; s < n - 1; ++s) {
    if (!in_place && s + 1 < n - 1) RY_RETURN_IF_ERROR(post_rs_recv(s + 1));
    int blk = c.RingRank(p - s - 2);
    auto ps = pieces(blk);
    for (size_t i = 0; i < ps.size(); ++i) {
      auto [lo, hi] = ps[i];
      RY_RETURN_IF_ERROR(c.Wait(rs_recv[s][i]));
      char* out = recv + b.offset[blk] + lo;
      if (!in_place) {
        Reduce(type, op, out, send + b.offset[blk] + lo, scratch[s % 2] + lo, (hi - lo) / es);
      }
      // Forward: the next reduce-scatter step, or after the last one (my block is final)
      // the first allgather step.
      int phase = s + 1 < n - 1 ? kReduceScatter : kAllgather;
      RY_ASSIGN_OR_RETURN(auto r, c.Send(next, phase, out, hi - lo));
      sends.push_back(r);
    }
  }
  for (int s = 0; s < n - 1; ++s) {
    int blk = c.RingRank(p - s - 1);
    auto ps = pieces(blk);
    for (size_t i = 0; i < ps.size(); ++i) {
      RY_RETURN_IF_ERROR(c.Wait(ag_recv[s][i]));
      if (s + 1 < n - 1) {
        auto [lo, hi] = ps[i];
        RY_ASSIGN_OR_RETURN(auto r, c.Send(next, kAllgather, recv + b.offset[blk] + lo, hi - lo));
        sends.push_back(r);
      }
    }
  }
  RY_RETURN_IF_ERROR(c.WaitAll(sends));
  FinishAverage(type, op, recv, count, n);
  return Status::Ok();
}

Status RingReduceScatter(OpContext& c, const char* send, char* recv, size_t recv_count,
                         DataType type, ReduceOp op) {
  const int n = c.size;
  const size_t es = SizeOf(type);
  const size_t block = recv_count * es;
  if (n == 1) {
    if (send != recv && block > 0) std::memcpy(recv, send, block);
    FinishAverage(type, op, recv, recv_count, n);
    return Status::Ok();
  }
  const long p = c.MyPosition();
  const int next = c.RingRank(p + 1), prev = c.RingRank(p - 1);
  // Partial sums live in three rotating scratch buffers: step s receives into slot s%3 and
  // reduces there; its forward (step s+1's send) reads slot s%3 while step s+2's receive
  // fills slot (s+2)%3, whose last reader, step s's send, is waited for first.
  char* slot[3] = {c.Scratch(0, block), c.Scratch(1, block), c.Scratch(2, block)};
  auto ps = Pieces(block, c.piece_bytes, es);
  std::vector<std::vector<net::Request>> recvs(n - 1), sends(n);
  // As in RingAllreduce, pieces are reduced as they arrive where the transport allows:
  // straight into the slot (or, at the last step, the output) that step s reduces into.
  const bool in_place = c.reduce_on_receive && c.transport->consuming_receiver() != nullptr;
  auto post_recv = [&](int s) -> Status {
    const int blk = c.RingRank(p - s - 2);
    char* out = s + 1 == n - 1 ? recv : slot[s % 3];
    for (auto [lo, hi] : ps) {
      net::Request r;
      if (in_place) {
        RY_ASSIGN_OR_RETURN(r, c.RecvReduce(prev, kReduceScatter, out + lo, send + blk * block + lo,
                                            hi - lo, type, op));
      } else {
        RY_ASSIGN_OR_RETURN(r, c.Recv(prev, kReduceScatter, slot[s % 3] + lo, hi - lo));
      }
      recvs[s].push_back(r);
    }
    return Status::Ok();
  };
  RY_RETURN_IF_ERROR(post_recv(0));
  {
    int blk = c.RingRank(p - 1);
    for (auto [lo, hi] : ps) {
      RY_ASSIGN_OR_RETURN(auto r, c.Send(next, kReduceScatter, send + blk * block + lo, hi - lo));
      sends[0].push_back(r);
    }
  }
  for (int s = 0; s < n - 1; ++s) {
    if (s + 1 < n - 1) {
      // Slot (s+1)%3 was last read by the forwards of step s-2, queued in sends[s-1].
      if (s >= 2) RY_RETURN_IF_ERROR(c.WaitAll(sends[s - 1]));
      RY_RETURN_IF_ERROR(post_recv(s + 1));
    }
    int blk = c.RingRank(p - s - 2);
    bool last = s + 1 == n - 1;
    for (size_t i = 0; i < ps.size(); ++i) {
      auto [lo, hi] = ps[i];
      RY_RETURN_IF_ERROR(c.Wait(recvs[s][i]));
      char* acc = last ? recv + lo : slot[s % 3] + lo;
      if (!in_place) {
        Reduce(type, op, acc, slot[s % 3] + lo, send + blk * block + lo, (hi - lo) / es);
      }
      if (!last) {
        RY_ASSIGN_OR_RETURN(auto r, c.Send(next, kReduceScatter, acc, hi - lo));
        sends[s + 1].push_back(r);
      }
    }
  }
  for (auto& v : sends) RY_RETURN_IF_ERROR(c.WaitAll(v));
  FinishAverage(type, op, recv, recv_count, n);
  return Status::Ok();
}

Status RingAllgather(OpContext& c, const char* send, char* recv, size_t block) {
  const int n = c.size;
  const long p = c.MyPosition();
  if (send != recv + static_cast<size_t>(c.rank) * block && block > 0) {
    std::memcpy(recv + static_cast<size_t>(c.rank) * block, send, block);
  }
  if (n == 1) return Status::Ok();
  const int next = c.RingRank(p + 1), prev = c.RingRank(p - 1);
  auto ps = Pieces(block, c.piece_bytes, 1);
  std::vector<std::vector<net::Request>> recvs(n - 1);
  std::vector<net::Request> sends;
  for (int s = 0; s < n - 1; ++s) {
    int blk = c.RingRank(p - s - 1);
    for (auto [lo, hi] : ps) {
      RY_ASSIGN_OR_RETURN(auto r, c.Recv(prev, kAllgather, recv + blk * block + lo, hi - lo));
      recvs[s].push_back(r);
    }
  }
  for (auto [lo, hi] : ps) {
    RY_ASSIGN_OR_RETURN(auto r, c.Send(next, kAllgather, recv + c.rank * block + lo, hi - lo));
    sends.push_back(r);
  }
  for (int s = 0; s < n - 1; ++s) {
    int blk = c.RingRank(p - s - 1);
    for (size_t i = 0; i < ps.size(); ++i) {
      RY_RETURN_IF_ERROR(c.Wait(recvs[s][i]));
      if (s + 1 < n - 1) {
        auto [lo, hi] = ps[i];
        RY_ASSIGN_OR_RETURN(auto r, c.Send(next, kAllgather, recv + blk * block + lo, hi - lo));
        sends.push_back(r);
      }
    }
  }
  return c.WaitAll(sends);
}

// A pipelined chain from the root round the ring: each rank forwards a piece as soon as it
// has it, so a large broadcast costs about one message time plus n-1 piece times.
Status ChainBroadcast(OpContext& c, char* data, size_t bytes, int root) {
  const int n = c.size;
  if (n == 1 || bytes == 0) return Status::Ok();
  const long p = c.MyPosition();
  const long root_pos = (*c.position)[root];
  const long dist = ((p - root_pos) % n + n) % n;  // hops from the root
  const int next = c.RingRank(p + 1), prev = c.RingRank(p - 1);
  const bool forwards = dist < n - 1;
  auto ps = Pieces(bytes, c.piece_bytes, 1);
  std::vector<net::Request> recvs, sends;
  if (dist != 0) {
    for (auto [lo, hi] : ps) {
      RY_ASSIGN_OR_RETURN(auto r, c.Recv(prev, kBroadcast, data + lo, hi - lo));
      recvs.push_back(r);
    }
  }
  for (size_t i = 0; i < ps.size(); ++i) {
    auto [lo, hi] = ps[i];
    if (dist != 0) RY_RETURN_IF_ERROR(c.Wait(recvs[i]));
    if (forwards) {
      RY_ASSIGN_OR_RETURN(auto r, c.Send(next, kBroadcast, data + lo, hi - lo));
      sends.push_back(r);
    }
  }
  return c.WaitAll(sends);
}

}  // namespace railyard::comm
