// Allreduce through the transport's shared window (shm): every rank's input goes into its
// own window once, each rank reduces its share of the elements reading all ranks' windows in
// place, and every rank copies the reduced shares out. Per rank and byte that is about
// 5 + 1/n passes over memory (copy in, an n-way reduce, copy out) where the ring needs about
// 6.75 at 4 ranks and 7.9 at 8, and three synchronisation points per round instead of 2(n-1)
// ring steps.
//
// The window is split into two halves used by alternate rounds, so a rank fills one half
// while slower peers still copy out of the other. Each half holds the rank's slice of the
// round's input and, after it, the rank's reduced share. Ordering comes from the window
// counters: for round k (0-based) and the counter value v0 the op started at,
//   v0 + 3k + 1  this rank's input slice is in its window
//   v0 + 3k + 2  its reduced share is in its window
//   v0 + 3k + 3  it has copied every share of round k out (so round k + 2 may reuse the half)
// An op ends with every counter at v0 + 3 * rounds; the next op starts from there.
//
// Small vectors (up to 64 KiB) take one round with two steps instead: every rank copies its
// whole vector into its window (v0 + 1) and reduces all of it reading every window, then says
// it is done reading (v0 + 2). One wait on the peers per call where recursive doubling needs
// log2(n) message exchanges; the next call's first write waits for v0 + 2 from everyone.
#include <algorithm>
#include <cstring>
#include <vector>

#include "railyard/comm/internal/op_context.h"

namespace railyard::comm {

Status WindowAllreduce(OpContext& c, const char* send, char* recv, size_t count, DataType type,
                       ReduceOp op) {
  net::SharedWindow* window_or_null = c.transport->shared_window();
  if (window_or_null == nullptr) {
    return FailedPrecondition("window allreduce needs a shared window; the {} transport has none",
                              c.transport->name());
  }
  net::SharedWindow& t = *window_or_null;
  const int n = c.size;
  const size_t es = SizeOf(type);
  const size_t half = t.WindowBytes() / 2 / 64 * 64;
  // Elements per round: the input slice plus the largest share (1/n of it, rounded up, on a
  // 64-byte boundary) fit in a half.
  size_t per_round = half / es * static_cast<size_t>(n) / static_cast<size_t>(n + 1);
  while (per_round > 0 && (per_round * es + 63) / 64 * 64 + (per_round / n + 1) * es > half) {
    --per_round;
  }
  if (n < 2 || per_round < static_cast<size_t>(n)) {
    return FailedPrecondition(
        "window allreduce needs a shared window of at least {} bytes "
        "for {} ranks of {}-byte elements, the transport has {}",
        4 * 64 * n * es, n, es, t.WindowBytes());
  }
  const size_t share_offset = (per_round * es + 63) / 64 * 64;
  const uint64_t v0 = t.WindowCounter();
  constexpr size_t kTileBytes = 16 << 10;  // reduce tile: stays in L1 across the n inputs
  const size_t tile = std::max<size_t>(1, kTileBytes / es);
  std::vector<char*> window(static_cast<size_t>(n));
  for (int r = 0; r < n; ++r) window[static_cast<size_t>(r)] = t.Window(r);
  constexpr size_t kOneRoundBytes = 64 << 10;
  if (count * es <= std::min(kOneRoundBytes, half)) {
    RY_RETURN_IF_ERROR(t.WaitWindow(v0, c.deadline));  // everyone read the last call's data
    if (count > 0) std::memcpy(window[static_cast<size_t>(c.rank)], send, count * es);
    t.PublishWindow(v0 + 1);
    RY_RETURN_IF_ERROR(t.WaitWindow(v0 + 1, c.deadline));
    // The same order on every rank (0, 1, ..., n-1): bit-identical results everywhere.
    for (size_t b = 0; b < count * es; b += tile * es) {
      const size_t m = std::min(tile * es, count * es - b) / es;
      Reduce(type, op, recv + b, window[0] + b, window[1] + b, m);
      for (int r = 2; r < n; ++r)
        Reduce(type, op, recv + b, recv + b, window[static_cast<size_t>(r)] + b, m);
    }
    t.PublishWindow(v0 + 2);
    FinishAverage(type, op, recv, count, n);
    return Status::Ok();
  }
  const size_t rounds = (count + per_round - 1) / per_round;

  for (size_t k = 0; k < rounds; ++k) {
    const size_t off = k * per_round;  // elements
    const size_t len = std::min(per_round, count - off);
    const size_t at = (k % 2) * half;  // this round's half
    Blocks shares(len, n, es);
    // The half was last read by peers in round k - 2 (or the previous op).
    RY_RETURN_IF_ERROR(t.WaitWindow(k >= 2 ? v0 + 3 * (k - 2) + 3 : v0, c.deadline));
    std::memcpy(window[static_cast<size_t>(c.rank)] + at, send + off * es, len * es);
    t.PublishWindow(v0 + 3 * k + 1);

    RY_RETURN_IF_ERROR(t.WaitWindow(v0 + 3 * k + 1, c.deadline));
    const size_t mine_at = shares.offset[static_cast<size_t>(c.rank)];
    const size_t mine_bytes = shares.bytes[static_cast<size_t>(c.rank)];
    char* out = window[static_cast<size_t>(c.rank)] + at + share_offset;
    for (size_t b = 0; b < mine_bytes; b += tile * es) {
      const size_t m = std::min(tile * es, mine_bytes - b) / es;
      const size_t in = at + mine_at + b;
      Reduce(type, op, out + b, window[0] + in, window[1] + in, m);
      for (int r = 2; r < n; ++r)
        Reduce(type, op, out + b, out + b, window[static_cast<size_t>(r)] + in, m);
    }
    t.PublishWindow(v0 + 3 * k + 2);

    RY_RETURN_IF_ERROR(t.WaitWindow(v0 + 3 * k + 2, c.deadline));
    for (int r = 0; r < n; ++r) {
      std::memcpy(recv + off * es + shares.offset[static_cast<size_t>(r)],
                  window[static_cast<size_t>(r)] + at + share_offset,
                  shares.bytes[static_cast<size_t>(r)]);
    }
    t.PublishWindow(v0 + 3 * k + 3);
  }
  FinishAverage(type, op, recv, count, n);
  return Status::Ok();
}

}  // namespace railyard::comm
