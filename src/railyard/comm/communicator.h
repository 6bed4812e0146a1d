// Communicator: host-memory collectives over a net::Transport, that never hang and name the
// rank that failed.
//
//   RY_ASSIGN_OR_RETURN(auto comm, Communicator::Create(std::move(transport), CommOptions{}));
//   RY_RETURN_IF_ERROR(comm->Allreduce(grad, grad, n, DataType::kF32, ReduceOp::kSum));
//
// Every operation has a sequence number and a deadline (CommOptions::timeout, or the call's
// CollectiveOptions). When a peer dies, stalls or becomes unreachable, every surviving rank
// returns an error within the deadline plus about one second, naming the operation, its
// sequence number, and the failed rank with its host: the rank that notices first probes
// the others (a rank inside a communication call answers probes; a stopped or cut-off rank
// does not; a dead one refuses connections), then aborts the job with that finding, so the
// others fail with the same culprit instead of blaming their neighbour. After any error the
// communicator is failed and every later call returns that error.
//
// With CommOptions::check_consistency, ranks compare (operation, type, count, root) with
// their ring neighbours before each collective: mismatched calls become a clear error
// naming both ranks instead of corrupt data or a hang.
//
// Algorithms: ring (bandwidth-optimal, pipelined in pieces) for large messages, recursive
// doubling / binomial trees for small ones, pairwise exchange for alltoall, and for
// allreduce across hosts that each run several ranks, hierarchical: reduce inside each host
// (over shm), allreduce among one leader per host, broadcast inside each host. kAuto picks by
// size and placement; RAILYARD_COMM_ALGO or CollectiveOptions::algorithm override. The ring follows
// `ring_order` (a permutation of ranks, e.g. from topology: neighbours on one leaf next to
// each other).
//
// Thread-safety: blocking calls and the *Async variants may come from any thread; they run
// one at a time, in the order they were issued. Abort() may be called from any thread.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"
#include "railyard/comm/types.h"
#include "railyard/net/transport.h"

namespace railyard::comm {

enum class Algorithm {
  kAuto,
  kRing,
  kRecursiveDoubling,
  kTree,
  kPairwise,
  kHierarchical,
  kWindow,  // allreduce through the shm transport's shared window (else ring)
};
std::string_view AlgorithmName(Algorithm algorithm);
// "auto", "ring", "rd" (or "recursive_doubling"), "tree", "pairwise", "hier", "window".
Result<Algorithm> ParseAlgorithm(std::string_view text);

// The ring's piece size for CommOptions::piece_bytes == 0, from the hosts of the ranks.
inline constexpr size_t kPieceOneHost = 1 << 20;
inline constexpr size_t kPieceAcrossHosts = 128 << 10;
// Whether `operation` ("allreduce", "broadcast", "reduce", "reduce_scatter", "allgather",
// "alltoall", "barrier") can run `algorithm`; INVALID_ARGUMENT lists the ones it can.
// kAuto always can. "hier" and "window" depend on placement and transport: where they do
// not apply, allreduce runs the ring (see Communicator::Allreduce).
Status CheckAlgorithm(std::string_view operation, Algorithm algorithm);

struct CommOptions {
  std::chrono::milliseconds timeout{30000};  // per operation; RAILYARD_COMM_TIMEOUT
  bool check_consistency = false;            // RAILYARD_COMM_CHECK=1
  Algorithm algorithm = Algorithm::kAuto;    // RAILYARD_COMM_ALGO
  // Messages up to this size use latency-optimal algorithms under kAuto.
  size_t small_message_bytes = 64 << 10;
  // Ring pipelines its blocks in pieces of this size (rounded to the element size). 0 picks
  // by placement (PiecesFor): 1 MiB when every rank is on one host, where the ring is bound
  // by CPU and each piece costs a wake-up; 128 KiB when it crosses hosts, where smaller
  // pieces let a step start before the previous one has fully arrived (docs/comm.md).
  size_t piece_bytes = 0;
  // Where the transport can hand over received bytes in place (a net::ConsumingReceiver:
  // shm, tcp), the ring reduces a piece as it arrives instead of receiving it into scratch
  // and reducing from there: one pass over memory fewer. False only for A/B measurements
  // (`railyard bench comm --no-reduce-on-receive`).
  bool reduce_on_receive = true;
  std::vector<int> ring_order;  // empty: 0, 1, ..., n-1
  // Names a sub-communicator in messages ("ranks on node3", "host leaders"); its ranks are
  // numbered within it, so messages say which group the numbers belong to.
  std::string group_name;

  // Defaults overridden by RAILYARD_COMM_TIMEOUT, RAILYARD_COMM_ALGO and RAILYARD_COMM_CHECK,
  // the only place they are read; INVALID_ARGUMENT names the variable and its bad value.
  // Tuning (piece_bytes, reduce_on_receive) is set by code or by `railyard bench comm` flags.
  static Result<CommOptions> FromEnvironment();
};

struct CollectiveOptions {
  std::optional<std::chrono::milliseconds> timeout;  // default: CommOptions::timeout
  Algorithm algorithm = Algorithm::kAuto;            // kAuto: CommOptions::algorithm
};

// A non-blocking operation in flight.
class Work {
 public:
  virtual ~Work() = default;
  // Waits for the operation to finish; returns its status. Bounded by the operation's own
  // deadline. May be called more than once.
  virtual Status Wait() = 0;
  virtual bool Done() const = 0;
};

// The interface; Create returns the implementation (communicator.cc), whose locks, queue and
// worker thread stay out of this header.
class Communicator {
 public:
  // Takes a started transport. Fails INVALID_ARGUMENT for a ring_order that is not a
  // permutation of the ranks.
  static Result<std::unique_ptr<Communicator>> Create(std::unique_ptr<net::Transport> transport,
                                                      CommOptions options);
  // Waits for queued non-blocking operations to finish.
  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;
  virtual net::Transport& transport() = 0;
  const net::PeerInfo& peer(int rank) { return transport().peer(rank); }

  // Point to point. Matched by (peer, order of calls).
  virtual Status Send(const void* data, size_t count, DataType type, int peer,
                      CollectiveOptions options = {}) = 0;
  virtual Status Recv(void* data, size_t count, DataType type, int peer,
                      CollectiveOptions options = {}) = 0;

  virtual Status Barrier(CollectiveOptions options = {}) = 0;
  // root's `data` to every rank's `data`.
  virtual Status Broadcast(void* data, size_t count, DataType type, int root,
                           CollectiveOptions options = {}) = 0;
  // Reduction of every rank's `send` into root's `recv` (`recv` unused elsewhere).
  virtual Status Reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                        int root, CollectiveOptions options = {}) = 0;
  // `send` may equal `recv` (in place).
  virtual Status Allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                           CollectiveOptions options = {}) = 0;
  // `send` holds size() blocks of `recv_count`; rank r receives the reduction of block r.
  // In place (as in NCCL): `recv` == `send` + rank() * recv_count.
  virtual Status ReduceScatter(const void* send, void* recv, size_t recv_count, DataType type,
                               ReduceOp op, CollectiveOptions options = {}) = 0;
  // Every rank's `send_count` elements, concatenated by rank, into every rank's `recv`.
  // In place (as in NCCL): `send` == `recv` + rank() * send_count.
  virtual Status Allgather(const void* send, void* recv, size_t send_count, DataType type,
                           CollectiveOptions options = {}) = 0;
  // Block j of `send` (count elements) goes to rank j; block i of `recv` comes from rank i.
  virtual Status Alltoall(const void* send, void* recv, size_t count, DataType type,
                          CollectiveOptions options = {}) = 0;

  // Non-blocking variants: queue the operation and return at once; buffers must stay valid
  // until Work::Wait returns.
  virtual std::shared_ptr<Work> AllreduceAsync(const void* send, void* recv, size_t count,
                                               DataType type, ReduceOp op,
                                               CollectiveOptions options = {}) = 0;
  virtual std::shared_ptr<Work> AllgatherAsync(const void* send, void* recv, size_t send_count,
                                               DataType type, CollectiveOptions options = {}) = 0;
  virtual std::shared_ptr<Work> BroadcastAsync(void* data, size_t count, DataType type, int root,
                                               CollectiveOptions options = {}) = 0;
  virtual std::shared_ptr<Work> ReduceAsync(const void* send, void* recv, size_t count,
                                            DataType type, ReduceOp op, int root,
                                            CollectiveOptions options = {}) = 0;
  virtual std::shared_ptr<Work> ReduceScatterAsync(const void* send, void* recv, size_t recv_count,
                                                   DataType type, ReduceOp op,
                                                   CollectiveOptions options = {}) = 0;
  virtual std::shared_ptr<Work> AlltoallAsync(const void* send, void* recv, size_t count,
                                              DataType type, CollectiveOptions options = {}) = 0;
  virtual std::shared_ptr<Work> BarrierAsync(CollectiveOptions options = {}) = 0;
  // Point to point, in the same queue: a rank's queued operations run one at a time in the
  // order issued, so order sends and receives as blocking calls would have to be ordered.
  virtual std::shared_ptr<Work> SendAsync(const void* data, size_t count, DataType type, int peer,
                                          CollectiveOptions options = {}) = 0;
  virtual std::shared_ptr<Work> RecvAsync(void* data, size_t count, DataType type, int peer,
                                          CollectiveOptions options = {}) = 0;

  // Ends the job: every rank's current and next calls fail ABORTED naming this rank and
  // `reason`.
  virtual void Abort(std::string_view reason) = 0;

  // Operations issued so far (the sequence number of the next one).
  virtual uint64_t sequence() const = 0;

  // Enables the hierarchical allreduce: `local` spans the ranks on this host (its rank 0 is
  // the host's leader), `leaders` spans one leader per host (null on non-leaders). Both must
  // be built the same way on every rank of the job. comm/bootstrap.h does this when ranks
  // share hosts.
  virtual void AttachHierarchy(std::unique_ptr<Communicator> local,
                               std::unique_ptr<Communicator> leaders) = 0;
  virtual bool hierarchical() const = 0;
  // The ring's piece size in use (CommOptions::piece_bytes, or the placement's choice).
  virtual size_t piece_bytes() const = 0;
};

}  // namespace railyard::comm
