// Transport: moves tagged byte ranges between the ranks of one job. It knows no collective.
//
// One Transport object per rank ("device" in Gloo's words) reaches every other rank of the
// job. Sends and receives are posted and return a Request at once; WaitAll drives progress
// until the requests complete, a peer fails, the deadline passes or the job is aborted.
// Progress happens only inside WaitAll/Test (no hidden progress thread), so a rank that is
// not in a communication call does not answer its peers: that is exactly how a stalled rank
// is told apart from a slow link.
//
//   RY_ASSIGN_OR_RETURN(Request s, t.PostSend(next, tag, out, n));
//   RY_ASSIGN_OR_RETURN(Request r, t.PostRecv(prev, tag, in, n));
//   RY_RETURN_IF_ERROR(t.WaitAll({{s, r}}, deadline));
//
// The contract every backend keeps (net/transport_conformance_test.cc checks it on each):
//
// - Matching: messages from one peer with one tag arrive in the order they were posted, and
//   a receive matches the oldest unmatched message of its (peer, tag). Zero-byte messages
//   are messages like any other.
// - A message longer than the posted receive fails the wait at once, not at its deadline:
//   DATA_LOSS naming the peer, the tag and both lengths. A shorter one completes, with its
//   length readable through ReceivedBytes().
// - A wait that reaches its deadline returns DEADLINE_EXCEEDED naming the peers whose
//   requests are still pending.
// - A peer that dies (its process exits or is killed) fails waits involving it with an
//   error naming it, before their deadline.
// - Abort() on one rank makes its peers' waits return ABORTED naming that rank and its
//   reason.
// - After any error from WaitAll (a peer failure, DATA_LOSS, DEADLINE_EXCEEDED, ABORTED;
//   not INVALID_ARGUMENT for the caller's own mistake) the transport is failed: later
//   PostSend, PostRecv and WaitAll return that same first error, even after a later Abort.
//   Only Probe and Abort still work, so that the caller can find and tell the culprit.
//   A missed deadline is no exception: which part of an abandoned message reached the
//   peer is unknown, so the streams to it cannot be trusted again (NCCL likewise requires
//   an abort after a timeout).
//
// Failures name the peer: "rank 3 (node2, pid 4242): connection reset while receiving tag
// 0x5". The comm layer adds the operation and its sequence number.
//
// Backends: tcp (net/tcp/), shm (net/shm/), ofi (net/ofi/); chosen by net/select.h.
//
// Thread-safety: a Transport is used by one thread at a time (the communicator's); Abort()
// may be called from any thread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"
#include "railyard/net/store.h"

namespace railyard::net {

using Tag = uint64_t;

// Who a rank is, as published through the store when the transport starts.
struct PeerInfo {
  int rank = -1;
  std::string host;     // the host name the rank reported
  int pid = 0;          // its process id, for operators
  std::string address;  // backend-specific endpoint address
  // Its rank in the whole job when this transport serves a sub-group (the hierarchical
  // allreduce's host-local and leaders' groups), else -1. Names the peer in messages.
  int job_rank = -1;
  // The kernel's boot id (/proc/sys/kernel/random/boot_id): equal for ranks that share a
  // kernel, also across network namespaces (virtual hosts). Empty when unknown.
  std::string boot_id;
};

// "rank 3 (node2 pid 4242)", with the job-wide rank where the peer has one.
std::string DescribePeer(const PeerInfo& peer);
// The rank that names the peer to operators: job_rank if set, else rank.
inline int JobRank(const PeerInfo& peer) { return peer.job_rank >= 0 ? peer.job_rank : peer.rank; }

// A posted send or receive. A plain value; completed requests' ids are never reused.
struct Request {
  uint64_t id = 0;
};

// What a liveness probe learned about one peer.
struct ProbeResult {
  enum class State {
    kAlive,         // answered; `activity` says what it is doing
    kDead,          // the connection was refused or reset: the process is gone
    kUnresponsive,  // no answer before the deadline: stopped, hung, or its link is cut
  };
  int rank = -1;
  State state = State::kUnresponsive;
  std::string activity;  // from SetActivity() on the peer, e.g. "allreduce #57 waiting for rank 2"
  std::string detail;    // for kDead/kUnresponsive: what happened
};

// Options common to every backend.
struct TransportOptions {
  int rank = 0;
  int size = 1;
  Store* store = nullptr;  // not owned; must outlive Start()
  std::string key_prefix;  // store keys are "<key_prefix>/<backend>/..."; one per communicator
  std::string secret;      // per-job secret, proven on every data connection
  std::string host;        // reported to peers; default: gethostname()
  // Interface selection in NCCL_SOCKET_IFNAME syntax ("eth", "^docker,lo", "=eth0"); empty
  // means automatic. Backends that do not use sockets ignore it.
  std::string socket_ifname;
  // For a sub-group of a job: the job-wide rank of each of its `size` ranks (known to every
  // member), so that messages name peers as operators know them. Empty: the same numbers.
  std::vector<int> job_ranks;
};

// options.job_ranks[rank] when job_ranks lists every rank, else -1.
inline int JobRankOf(const TransportOptions& options, int rank) {
  return static_cast<int>(options.job_ranks.size()) == options.size && rank >= 0 &&
                 rank < options.size
             ? options.job_ranks[static_cast<size_t>(rank)]
             : -1;
}

class ConsumingReceiver;
class SharedWindow;
class RmaWriter;

class Transport {
 public:
  virtual ~Transport() = default;

  // "tcp", "shm", "ofi".
  virtual std::string_view name() const = 0;
  virtual int rank() const = 0;
  virtual int size() const = 0;
  // Valid after Start() for every rank (own included).
  virtual const PeerInfo& peer(int rank) const = 0;

  // Publishes this rank's address, waits for every rank's and prepares (lazily opened)
  // connections. Returns DEADLINE_EXCEEDED naming the ranks that never published.
  virtual Status Start(base::Deadline deadline) = 0;

  // Posts a send of [data, data + len). The memory must stay valid and unchanged until the
  // request completes. INVALID_ARGUMENT for a bad peer; ABORTED after Abort.
  virtual Result<Request> PostSend(int peer, Tag tag, const void* data, size_t len) = 0;
  // Posts a receive into [data, data + len); the memory must stay valid until completion.
  virtual Result<Request> PostRecv(int peer, Tag tag, void* data, size_t len) = 0;

  // Drives progress until all `requests` complete. Errors: the first peer failure (naming
  // the peer); DEADLINE_EXCEEDED naming the peers whose requests are still pending; ABORTED
  // with the aborting rank's reason. Waited requests are consumed whatever the outcome, and
  // their buffers are never touched again. After any error but INVALID_ARGUMENT the
  // transport is failed (see the contract above): later PostSend/PostRecv/WaitAll return
  // the same error, while Probe and Abort still work.
  virtual Status WaitAll(std::span<const Request> requests, base::Deadline deadline) = 0;

  // Bytes received by a completed receive (valid until the next WaitAll).
  virtual size_t ReceivedBytes(Request request) const = 0;

  // Asks `ranks` whether they are alive and what they do. Answers come from peers that are
  // inside a WaitAll (or Probe) themselves. Never fails: unreachable peers are reported.
  virtual std::vector<ProbeResult> Probe(std::span<const int> ranks, base::Deadline deadline) = 0;

  // What this rank is doing, reported to probing peers. Cheap; called per operation.
  virtual void SetActivity(std::string activity) = 0;

  // Tells every peer (best effort, until `deadline`) that the job is aborting with `reason`;
  // afterwards every call on this transport fails ABORTED, or with the error it had already
  // failed with. Peers' WaitAll return ABORTED naming this rank and the reason. Safe to call
  // from any thread and more than once.
  virtual void Abort(std::string_view reason, base::Deadline deadline) = 0;

  // Optional capabilities (below): the interface where this backend has it, else nullptr.
  // The pointer is this transport (owned by it, valid as long as it) and is used under the
  // same one-thread rule. Ask after Start(): whether shm has a window is settled there.
  virtual ConsumingReceiver* consuming_receiver() { return nullptr; }  // tcp, shm
  virtual SharedWindow* shared_window() { return nullptr; }            // shm
  virtual RmaWriter* rma_writer() { return nullptr; }                  // ofi
};

// Capability: receives that hand the bytes to a consumer as they arrive instead of copying
// them into a buffer, so that a reduction reads them once, straight from the transport's
// memory (the shm ring) while they are in cache, rather than from a scratch copy.
class ConsumingReceiver {
 public:
  // consume(offset, data, n): called on the waiting thread from inside WaitAll/Probe, once
  // for every byte of the message, in runs of whole `granule`-byte units (an element, a
  // power of two up to 16; a unit split between two reads is joined first) except for a
  // trailing part of a message whose length is not a multiple. The runs may come in any
  // order (tcp: its streams).
  using Consumer = std::function<void(size_t offset, const char* data, size_t n)>;

  // Matching, DATA_LOSS for a longer message and ReceivedBytes are as for PostRecv.
  // INVALID_ARGUMENT for a bad peer or granule.
  virtual Result<Request> PostRecvConsume(int peer, Tag tag, size_t len, size_t granule,
                                          Consumer consume) = 0;

 protected:
  ~ConsumingReceiver() = default;  // owned and destroyed as the Transport
};

// Capability: a shared window (shm): WindowBytes() of memory per rank that every rank of the
// transport has mapped, so a collective can read peers' data in place instead of passing it
// through rings. Only its owner writes a rank's window; PublishWindow(v) raises the owner's
// counter to v after its writes (release), and WaitWindow(v) returns once every rank's
// counter is at least v (acquire), so what they wrote before is visible. It serves requests
// meanwhile and fails, naming the rank, when one died, aborted, or did not get there by the
// deadline (and then the transport is failed, as after WaitAll). Counters only grow: ranks
// that run the same window steps in the same order agree on their values.
class SharedWindow {
 public:
  virtual size_t WindowBytes() const = 0;
  // The window of `rank` (own included); nullptr for a rank outside [0, size).
  virtual char* Window(int rank) = 0;
  // This rank's counter as last published.
  virtual uint64_t WindowCounter() const = 0;
  virtual void PublishWindow(uint64_t value) = 0;
  virtual Status WaitWindow(uint64_t value, base::Deadline deadline) = 0;

 protected:
  ~SharedWindow() = default;
};

// Capability: one-sided writes (RMA, ofi). A target learns that writes landed through a
// message the writer sends after its write requests completed.
class RmaWriter {
 public:
  struct RmaRegion {
    uint64_t id = 0;
    std::string remote_key;  // opaque bytes to hand to the writing peers
  };
  // Registers [data, data + len) as a target of peers' writes.
  virtual Result<RmaRegion> RegisterRma(void* data, size_t len) = 0;
  // NOT_FOUND for an unknown region.
  virtual Status DeregisterRma(uint64_t region_id) = 0;
  // Writes [data, data + len) at `offset` in the peer's region named by `remote_key`; a
  // request like a send's, completed by WaitAll.
  virtual Result<Request> PostWrite(int peer, const void* data, size_t len,
                                    std::string_view remote_key, uint64_t offset) = 0;

 protected:
  ~RmaWriter() = default;
};

// Lists the peers whose requests are still pending, for DEADLINE_EXCEEDED messages.
std::string DescribeRanks(std::span<const int> ranks);

}  // namespace railyard::net
