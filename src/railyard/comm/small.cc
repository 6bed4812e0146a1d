// Latency-optimal algorithms for small messages (log2(n) rounds), the barrier, and the
// pairwise alltoall. These work on ranks directly; the ring order does not matter here.
#include <bit>

#include "railyard/comm/internal/op_context.h"

namespace railyard::comm {
namespace {

enum Phase { kFold = 10, kExchange = 11, kUnfold = 12, kTree = 13, kBarrier = 14, kAll = 15 };

}  // namespace

// Recursive doubling. With n not a power of two, the first 2*rem ranks pair up first (odd
// ranks hand their data to the even one below and get the result back at the end). Every
// step combines the same two operands on both partners, so all ranks end bit-identical.
Status RecursiveDoublingAllreduce(OpContext& c, const char* send, char* recv, size_t count,
                                  DataType type, ReduceOp op) {
  const int n = c.size, r = c.rank;
  const size_t bytes = count * SizeOf(type);
  if (send != recv && bytes > 0) std::memcpy(recv, send, bytes);
  if (n == 1) return Status::Ok();
  char* tmp = c.Scratch(0, bytes);
  const int pof2 = static_cast<int>(std::bit_floor(static_cast<unsigned>(n)));
  const int rem = n - pof2;
  int vrank;
  if (r < 2 * rem) {
    if (r % 2 == 1) {
      RY_ASSIGN_OR_RETURN(auto s, c.Send(r - 1, kFold, recv, bytes));
      RY_RETURN_IF_ERROR(c.Wait(s));
      vrank = -1;
    } else {
      RY_ASSIGN_OR_RETURN(auto q, c.Recv(r + 1, kFold, tmp, bytes));
      RY_RETURN_IF_ERROR(c.Wait(q));
      Reduce(type, op, recv, recv, tmp, count);
      vrank = r / 2;
    }
  } else {
    vrank = r - rem;
  }
  if (vrank >= 0) {
    for (int mask = 1; mask < pof2; mask <<= 1) {
      int vpeer = vrank ^ mask;
      int peer = vpeer < rem ? vpeer * 2 : vpeer + rem;
      std::vector<net::Request> reqs;
      RY_ASSIGN_OR_RETURN(auto q, c.Recv(peer, kExchange, tmp, bytes));
      RY_ASSIGN_OR_RETURN(auto s, c.Send(peer, kExchange, recv, bytes));
      reqs = {q, s};
      RY_RETURN_IF_ERROR(c.WaitAll(reqs));
      // Every operation is commutative bit for bit (IEEE sum/product, min, max; half types
      // widen both operands first), so both partners get identical bits.
      Reduce(type, op, recv, recv, tmp, count);
    }
  }
  if (r < 2 * rem) {
    if (r % 2 == 1) {
      RY_ASSIGN_OR_RETURN(auto q, c.Recv(r - 1, kUnfold, recv, bytes));
      RY_RETURN_IF_ERROR(c.Wait(q));
    } else {
      RY_ASSIGN_OR_RETURN(auto s, c.Send(r + 1, kUnfold, recv, bytes));
      RY_RETURN_IF_ERROR(c.Wait(s));
    }
  }
  FinishAverage(type, op, recv, count, n);
  return Status::Ok();
}

// Binomial tree rooted at `root`, on ranks relative to it.
Status TreeBroadcast(OpContext& c, char* data, size_t bytes, int root) {
  const int n = c.size;
  const int vr = (c.rank - root + n) % n;
  int mask = 1;
  while (mask < n) {
    if (vr & mask) {
      int parent = (vr - mask + root) % n;
      RY_ASSIGN_OR_RETURN(auto q, c.Recv(parent, kTree, data, bytes));
      RY_RETURN_IF_ERROR(c.Wait(q));
      break;
    }
    mask <<= 1;
  }
  std::vector<net::Request> sends;
  for (mask >>= 1; mask > 0; mask >>= 1) {
    if (vr + mask < n) {
      RY_ASSIGN_OR_RETURN(auto s, c.Send((vr + mask + root) % n, kTree, data, bytes));
      sends.push_back(s);
    }
  }
  return c.WaitAll(sends);
}

Status TreeReduce(OpContext& c, const char* send, char* recv, size_t count, DataType type,
                  ReduceOp op, int root) {
  const int n = c.size;
  const size_t bytes = count * SizeOf(type);
  const int vr = (c.rank - root + n) % n;
  char* acc = c.rank == root ? recv : c.Scratch(1, bytes);
  if (acc != send && bytes > 0) std::memcpy(acc, send, bytes);
  char* tmp = c.Scratch(0, bytes);
  for (int mask = 1; mask < n; mask <<= 1) {
    if (vr & mask) {
      RY_ASSIGN_OR_RETURN(auto s, c.Send((vr - mask + root) % n, kTree, acc, bytes));
      return c.Wait(s);
    }
    if (vr + mask < n) {
      RY_ASSIGN_OR_RETURN(auto q, c.Recv((vr + mask + root) % n, kTree, tmp, bytes));
      RY_RETURN_IF_ERROR(c.Wait(q));
      Reduce(type, op, acc, acc, tmp, count);
    }
  }
  FinishAverage(type, op, acc, count, n);  // only the root gets here
  return Status::Ok();
}

// Round k: send to rank + 2^k, receive from rank - 2^k. After ceil(log2 n) rounds every
// rank has heard, directly or not, from every other.
Status DisseminationBarrier(OpContext& c) {
  const int n = c.size;
  char out = 1, in = 0;
  for (int k = 1; k < n; k <<= 1) {
    RY_ASSIGN_OR_RETURN(auto q, c.Recv((c.rank - k + n) % n, kBarrier, &in, 1));
    RY_ASSIGN_OR_RETURN(auto s, c.Send((c.rank + k) % n, kBarrier, &out, 1));
    std::vector<net::Request> reqs = {q, s};
    RY_RETURN_IF_ERROR(c.WaitAll(reqs));
  }
  return Status::Ok();
}

// Step s exchanges with rank + s and rank - s; everything is posted at once, receives first.
Status PairwiseAlltoall(OpContext& c, const char* send, char* recv, size_t block) {
  const int n = c.size, r = c.rank;
  if (block > 0 && send + r * block != recv + r * block) {
    std::memcpy(recv + r * block, send + r * block, block);
  }
  std::vector<net::Request> reqs;
  for (int s = 1; s < n; ++s) {
    int from = (r - s + n) % n;
    RY_ASSIGN_OR_RETURN(auto q, c.Recv(from, kAll, recv + from * block, block));
    reqs.push_back(q);
  }
  for (int s = 1; s < n; ++s) {
    int to = (r + s) % n;
    RY_ASSIGN_OR_RETURN(auto q, c.Send(to, kAll, send + to * block, block));
    reqs.push_back(q);
  }
  return c.WaitAll(reqs);
}

}  // namespace railyard::comm
