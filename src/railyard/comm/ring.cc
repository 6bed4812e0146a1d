// Ring algorithms, pipelined: every block travels in pieces, and a piece is reduced and
// forwarded as soon as it arrives, so the network, the reduction and the next send overlap.
//
// Positions, not ranks, go round the ring (OpContext::order). With p my position and
// blk(k) = order[k mod n]:
//   reduce-scatter step s (0..n-2): send block blk(p-s-1), receive blk(p-s-2) from prev and
//     reduce it; the block reduced at step s is the one sent at step s+1, and at the last
//     step it is blk(p) = my rank's block, now complete.
//   allgather step s: send blk(p-s), receive blk(p-s-1); what arrives is forwarded next step.
// Receiving allgather data into a block that is still being sent is safe by causality: a
// block's final value can only come back round after our contribution to it has left.
#include <algorithm>

#include "railyard/comm/internal/op_context.h"

namespace railyard::comm {
namespace {

// Tags' low byte. The allreduce's first reduce-scatter step has a tag of its own because it
// runs ahead of the forwards (see RingAllreduce): each tag's messages then leave in the
// order the receiver posts them, as the transport's per-(peer, tag) matching requires.
enum Phase { kReduceScatter = 1, kAllgather = 2, kBroadcast = 3, kReduceScatterFirst = 4 };

// Waves the allreduce runs ahead of the one it forwards: their first-step sends are queued,
// so a link has data to carry while the current wave waits on its ring.
constexpr size_t kLookahead = 2;

}  // namespace

// The vector is cut into segments of n pieces (a piece is OpContext::piece_bytes), and the
// segments go round the ring in waves of OpContext::wave_segments: inside a wave step by
// step (every segment's step s before any step s+1), waves one after another.
//
// One segment per wave (on one host): a piece is reduced and sent on while it is still in
// cache, because the rank forwards nothing of the next segment before this one has gone
// all the way round; the working set is a few segments per rank whatever the vector's size.
// A wave of every segment (across hosts) puts the whole first step on the links at once and
// forwards each piece as it arrives, which keeps a link with latency full but, at 64 MiB,
// forwards pieces that have long left the last-level cache (docs/performance.md, "Ring
// waves", has the figures).
//
// Overlap between waves: the first reduce-scatter step needs nothing from the ring, so it is
// sent kLookahead waves early; while a wave waits on its ring's round trip those sends keep
// the links busy. Receives are posted one wave beyond that, before a peer can send into them
// (a peer runs at most one wave ahead: it cannot finish wave w before this rank has sent its
// allgather data of w), so messages rarely arrive unexpected. Each tag's receives are posted
// in the order the peer sends on it: step by step, and inside a step segment by segment.
Status RingAllreduce(OpContext& c, const char* send, char* recv, size_t count, DataType type,
                     ReduceOp op) {
  const int n = c.size;
  const size_t es = SizeOf(type);
  if (n == 1) {
    if (send != recv && count > 0) std::memcpy(recv, send, count * es);
    return Status::Ok();
  }
  if (count == 0) return Status::Ok();  // every rank has the same count: nothing to exchange
  const long p = c.MyPosition();
  const int next = c.RingRank(p + 1), prev = c.RingRank(p - 1);
  const size_t piece = std::max<size_t>(1, c.piece_bytes / es);  // elements
  const size_t seg_elems = piece * static_cast<size_t>(n);
  const size_t segments = (count + seg_elems - 1) / seg_elems;
  const size_t wave = c.wave_segments == 0 ? segments : std::min(c.wave_segments, segments);
  const size_t waves = (segments + wave - 1) / wave;
  auto first_of = [&](size_t w) { return w * wave; };
  auto end_of = [&](size_t w) { return std::min(segments, (w + 1) * wave); };
  // Byte range of block blk(pos) in segment j.
  auto block = [&](size_t j, long pos) {
    const size_t first = j * seg_elems;
    const BlockSpan b = BlockOf(std::min(seg_elems, count - first), n, c.RingRank(pos));
    return std::pair<size_t, size_t>{(first + b.offset) * es, b.count * es};
  };
  // Where the transport can hand over bytes in place (shm, tcp), a reduce-scatter piece is
  // reduced into the output as it arrives, straight from the transport's buffer: one pass
  // over memory fewer than receiving into scratch and reducing from there. Safe to run
  // early: the output block of step s is read (sent on) only after step s, and written by
  // the allgather only after the whole ring has passed it. Its receives are all posted with
  // the wave's. Receives into scratch (ofi; A/B runs) take the first step's with the wave's,
  // each later step's one step ahead, so scratch is two steps of a wave, not all of them.
  const bool in_place = c.reduce_on_receive && c.transport->consuming_receiver() != nullptr;
  const size_t slots = std::min(kLookahead + 2, waves);  // waves with posted receives
  const size_t steps = static_cast<size_t>(n - 1);
  auto wave_slot = [&](size_t j) { return (j / wave) % slots; };  // of segment j's wave
  // Request index of step s of segment j.
  auto index = [&](size_t j, size_t s) { return (wave_slot(j) * steps + s) * wave + j % wave; };
  char* first_scratch = in_place ? nullptr : c.Scratch(0, slots * wave * piece * es);
  char* step_scratch = in_place || steps < 2 ? nullptr : c.Scratch(1, 2 * wave * piece * es);
  auto slot = [&](size_t j, size_t s) {
    const size_t at = s == 0 ? wave_slot(j) * wave + j % wave : (s % 2) * wave + j % wave;
    return (s == 0 ? first_scratch : step_scratch) + at * piece * es;
  };
  std::vector<net::Request> rs(slots * steps * wave), ag(slots * steps * wave);
  auto post_rs = [&](size_t w, size_t s) -> Status {
    for (size_t j = first_of(w); j < end_of(w); ++j) {
      auto [at, bytes] = block(j, p - static_cast<long>(s) - 2);
      const int phase = s == 0 ? kReduceScatterFirst : kReduceScatter;
      if (in_place) {
        RY_ASSIGN_OR_RETURN(rs[index(j, s)],
                            c.RecvReduce(prev, phase, recv + at, send + at, bytes, type, op));
      } else {
        RY_ASSIGN_OR_RETURN(rs[index(j, s)], c.Recv(prev, phase, slot(j, s), bytes));
      }
    }
    return Status::Ok();
  };
  auto post_recvs = [&](size_t w) -> Status {
    for (size_t s = 0; s < (in_place ? steps : 1); ++s) RY_RETURN_IF_ERROR(post_rs(w, s));
    for (size_t s = 0; s < steps; ++s) {
      for (size_t j = first_of(w); j < end_of(w); ++j) {
        auto [at, bytes] = block(j, p - static_cast<long>(s) - 1);
        RY_ASSIGN_OR_RETURN(ag[index(j, s)], c.Recv(prev, kAllgather, recv + at, bytes));
      }
    }
    return Status::Ok();
  };
  std::vector<net::Request> sends, older;
  auto send_first = [&](size_t w) -> Status {
    for (size_t j = first_of(w); j < end_of(w); ++j) {
      auto [at, bytes] = block(j, p - 1);
      RY_ASSIGN_OR_RETURN(auto r, c.Send(next, kReduceScatterFirst, send + at, bytes));
      sends.push_back(r);
    }
    return Status::Ok();
  };
  for (size_t w = 0; w < std::min(waves, kLookahead + 1); ++w) RY_RETURN_IF_ERROR(post_recvs(w));
  for (size_t w = 0; w < std::min(waves, kLookahead); ++w) RY_RETURN_IF_ERROR(send_first(w));
  for (size_t w = 0; w < waves; ++w) {
    if (w + kLookahead + 1 < waves) RY_RETURN_IF_ERROR(post_recvs(w + kLookahead + 1));
    if (w + kLookahead < waves) RY_RETURN_IF_ERROR(send_first(w + kLookahead));
    for (size_t s = 0; s < steps; ++s) {
      if (!in_place && s + 1 < steps) RY_RETURN_IF_ERROR(post_rs(w, s + 1));
      for (size_t j = first_of(w); j < end_of(w); ++j) {
        auto [at, bytes] = block(j, p - static_cast<long>(s) - 2);
        RY_RETURN_IF_ERROR(c.Wait(rs[index(j, s)]));
        if (!in_place) Reduce(type, op, recv + at, send + at, slot(j, s), bytes / es);
        // Forward: the next reduce-scatter step, or after the last one (my block is final)
        // the first allgather step.
        RY_ASSIGN_OR_RETURN(
            auto r, c.Send(next, s + 1 < steps ? kReduceScatter : kAllgather, recv + at, bytes));
        sends.push_back(r);
      }
    }
    for (size_t s = 0; s < steps; ++s) {
      for (size_t j = first_of(w); j < end_of(w); ++j) {
        RY_RETURN_IF_ERROR(c.Wait(ag[index(j, s)]));
        if (s + 1 < steps) {
          auto [at, bytes] = block(j, p - static_cast<long>(s) - 1);
          RY_ASSIGN_OR_RETURN(auto r, c.Send(next, kAllgather, recv + at, bytes));
          sends.push_back(r);
        }
      }
    }
    // The wave before last's sends have long left: waiting for them keeps the transport's
    // request table short on very long vectors.
    RY_RETURN_IF_ERROR(c.WaitAll(older));
    older.swap(sends);
  }
  RY_RETURN_IF_ERROR(c.WaitAll(older));
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
