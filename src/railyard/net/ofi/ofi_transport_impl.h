// The ofi backend's Transport, declared for the files that implement it by job:
//   ofi_transport.cc  the Transport: post, wait, probe, abort
//   endpoint.cc       the fabric objects (fabric, domain, CQ, AV, endpoint), the address
//                     exchange in Start, memory registration, provider choice
//   connection.cc     each peer's ordered queues: the HELLO, control messages, posting
//                     to libfabric, failing a peer, giving up an operation
//   clear_to_send.cc  the clear-to-send protocol for messages over kEagerBytes
//   loop.cc           progress: reading the completion queue and handling what completed
//   rma.cc            one-sided writes (RmaWriter)
// See ofi_transport.h for the model and wire.h for what travels.
//
// Internal to net/ofi. Thread-safety: as net::Transport; every member under mu_.
#pragma once

#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>

#include <chrono>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "railyard/net/internal/failure_state.h"
#include "railyard/net/internal/request_table.h"
#include "railyard/net/ofi/fabric_library.h"
#include "railyard/net/ofi/ofi_transport.h"
#include "railyard/net/ofi/wire.h"
#include "railyard/net/shm/shm_ring.h"
#include "railyard/net/transport.h"

namespace railyard::net::ofi {

inline constexpr uint32_t kApiVersion = FI_VERSION(1, 17);
inline constexpr auto kSpin = std::chrono::microseconds(30);
inline constexpr int kMaxBlockMs = 20;
inline constexpr size_t kCqBatch = 16;
// How often a wait or probe checks whether the peers it waits on still run, for peers on
// this kernel (same boot id; the virtual cluster's hosts included). rxm (1.17, over tcp)
// fails nothing posted when a peer's process dies: it retries the connection, logs the
// refusal and keeps the operations, so without this check a wait on a dead peer would end
// at its deadline instead of naming it.
inline constexpr auto kLivenessTick = std::chrono::milliseconds(100);

// True for the errors that mean the connection to the peer is gone.
bool IsConnectionError(int err);

// One operation handed (or to be handed) to libfabric. The context is the first member so
// providers in FI_CONTEXT/FI_CONTEXT2 mode may use it as scratch.
struct Op {
  fi_context2 ctx{};
  enum class Kind { kSend, kRecv, kWrite, kHelloSend, kHelloRecv, kCtrlSend, kCtrlRecv };
  Kind kind = Kind::kSend;
  uint64_t id = 0;
  int peer = -1;
  Tag tag = 0;
  void* buf = nullptr;
  size_t len = 0;
  std::string owned;  // payload of internal messages
  // A user receive shorter than kEagerBytes: the provider fills this, and the message is
  // copied to `buf` if it fits. Every message that can reach such a receive is at most
  // kEagerBytes (longer ones wait for a clear-to-send), so the whole message arrives and
  // its length is known: rxm reports neither length when it truncates a message that
  // waited unexpected.
  std::string bounce;
  uint64_t remote_addr = 0, remote_key = 0;
  FidOwner<fid_mr> mr;  // FI_MR_LOCAL registration
  bool user = false;    // a Request the application waits for
  uint64_t index = 0;   // user sends and receives: its place among the (peer, tag)'s
  bool done = false;
  bool abandoned = false;  // its waiter gave up; drop on completion
  Status status;
  size_t received = 0;
};

const char* KindVerb(Op::Kind k);

struct PeerState {
  PeerInfo info;
  fi_addr_t addr = FI_ADDR_UNSPEC;
  std::string nonce;  // the peer's, for our proof to it
  bool hello_sent = false;
  bool proven = false;
  Status failure;
  std::deque<Op*> sendq;  // sends/writes not yet accepted by libfabric, in order
  std::deque<Op*> recvq;  // receives held until the peer is proven (or after -FI_EAGAIN)
  // Message k of a (peer, tag) matches receive k (per-tag order on both sides), so the
  // clear-to-send protocol names messages by that index.
  std::deque<Op*> awaiting_cts;  // sends held until the peer's clear-to-send, in order
  std::unordered_map<Tag, uint64_t> sends_posted;        // next send index per tag
  std::map<std::pair<Tag, uint64_t>, size_t> cts;        // capacity of cleared receives
  std::unordered_map<Tag, uint64_t> recvs_posted;        // next receive index per tag
  std::map<std::pair<Tag, uint64_t>, Op*> open_recvs;    // user receives not finished
  std::map<std::pair<Tag, uint64_t>, size_t> announced;  // held messages' lengths
  uint64_t pong_seq = 0;
  std::string pong_activity;
  // The peer's process, where it runs on this kernel in another process; else unset.
  std::optional<shm::ProcessWatch> watch;
};

struct RmaRegionState {
  FidOwner<fid_mr> mr;
  uint64_t base = 0;
  size_t len = 0;
};

class OfiTransport final : public Transport, public RmaWriter {
 public:
  OfiTransport(const FabricLibrary* fi, TransportOptions options, fi_info* info)
      : fi_(fi), options_(std::move(options)), info_(info), peers_(options_.size) {
    mr_mode_ = info_->domain_attr->mr_mode;
    rma_ = (info_->caps & FI_RMA) != 0;
    for (int r = 0; r < options_.size; ++r) peers_[r].info.rank = r;
  }
  ~OfiTransport() override {
    ep_.Reset();  // first: no completion may touch an op after this
    regions_.clear();
    ops_.Clear();
    av_.Reset();
    cq_.Reset();
    domain_.Reset();
    fabric_.Reset();
    fi_->freeinfo(info_);
  }

  Status Open();

  std::string_view name() const override { return "ofi"; }
  int rank() const override { return options_.rank; }
  int size() const override { return options_.size; }
  const PeerInfo& peer(int rank) const override { return peers_.at(rank).info; }

  Status Start(base::Deadline deadline) override;
  Result<Request> PostSend(int peer, Tag tag, const void* data, size_t len) override;
  Result<Request> PostRecv(int peer, Tag tag, void* data, size_t len) override;
  Status WaitAll(std::span<const Request> requests, base::Deadline deadline) override;
  size_t ReceivedBytes(Request request) const override {
    std::lock_guard lock(mu_);
    return ops_.ReceivedBytes(request);
  }
  std::vector<ProbeResult> Probe(std::span<const int> ranks, base::Deadline deadline) override;
  void SetActivity(std::string activity) override {
    std::lock_guard lock(mu_);
    activity_ = std::move(activity);
  }
  void Abort(std::string_view reason, base::Deadline deadline) override;

  RmaWriter* rma_writer() override { return rma_ ? this : nullptr; }
  Result<RmaRegion> RegisterRma(void* data, size_t len) override;
  Status DeregisterRma(uint64_t region_id) override;
  Result<Request> PostWrite(int peer, const void* data, size_t len, std::string_view remote_key,
                            uint64_t offset) override;

 private:
  std::string Self() const {
    return fmt::format("ofi {} rank {}", info_->fabric_attr->prov_name, options_.rank);
  }
  std::string Who(int peer) const { return DescribePeer(peers_[peer].info); }
  Status Usable() const {
    if (failure_.failed()) return failure_.status();
    if (!started_) return FailedPrecondition("{}: Start() has not succeeded", Self());
    return Status::Ok();
  }
  Status CheckPeer(int peer) const {
    if (peer < 0 || peer >= options_.size) {
      return InvalidArgument("{}: peer {} is not a rank of this job (size {})", Self(), peer,
                             options_.size);
    }
    return Status::Ok();
  }
  Result<fid_mr*> Register(void* buf, size_t len, uint64_t access, FidOwner<fid_mr>* out);
  Op* NewOp(Op::Kind kind, int peer, Tag tag, void* buf, size_t len);
  Status PrepareLocal(Op* op);
  void QueueSend(Op* op);
  void EnsureHello(int peer);
  // Queues a control message behind the HELLO, without flushing; nullptr if it failed.
  Op* QueueCtrl(int peer, CtrlType type, uint64_t seq, std::string_view text);
  void SendCtrl(int peer, CtrlType type, uint64_t seq, std::string_view text);
  void SubmitSend(Op* op);
  void OnClearToSend(int peer, Tag tag, std::string_view text);
  void OnRequestToSend(int peer, Tag tag, std::string_view text);
  void OnReject(int peer, Tag tag, std::string_view text);
  // Sends the held sends of `tag` whose turn has come and whose receive is cleared.
  void Release(int peer, Tag tag);
  // A message that does not fit its receive: fails the local operation (a held send, or
  // the transport for a posted receive) and tells the peer, so both ends fail at once.
  void RejectSend(Op* op, size_t capacity);
  void RejectRecv(Op* op, size_t message_bytes, bool tell_peer);
  Status TooLong(int peer, Tag tag, size_t message_bytes, size_t capacity) const {
    return DataLoss(
        "{}: message from {} with tag {:#x} is {} bytes but the posted receive "
        "holds {}",
        Self(), Who(peer), tag, message_bytes, capacity);
  }
  Op* NewInternalOp(Op::Kind kind, int peer, Tag tag, std::string payload);
  void PostControlRecv(int peer, Op::Kind kind);
  Result<Request> Submit(Op* op);
  int Post(Op* op);  // 0, -FI_EAGAIN or another error
  void Flush(int peer);
  void FlushAll();
  void FailOp(Op* op, Status status);
  void FailPeer(int peer, Status status);
  void Finish(Op* op);
  void OnCompletion(Op* op, size_t len);
  void OnError(const fi_cq_err_entry& err);
  void OnHello(Op* op, size_t len);
  void OnCtrl(Op* op, size_t len);
  int PollCq();
  void Progress(std::unique_lock<std::mutex>& lock, base::Deadline deadline);
  void Abandon(Op* op);
  // Fails `peer` when its process (on this kernel) has exited, naming `pending` if given.
  void CheckLiveness(int peer, const Op* pending);

  const FabricLibrary* fi_;
  TransportOptions options_;
  fi_info* info_;
  uint64_t mr_mode_ = 0;
  bool rma_ = false;
  bool cq_waitable_ = true;
  FidOwner<fid_fabric> fabric_;
  FidOwner<fid_domain> domain_;
  FidOwner<fid_cq> cq_;
  FidOwner<fid_av> av_;
  FidOwner<fid_ep> ep_;
  std::string ep_name_;
  std::string nonce_;

  mutable std::mutex mu_;
  bool started_ = false;
  internal::FailureState failure_;  // the first error (WaitAll's, or an abort); the abort request
  std::string activity_;
  std::vector<PeerState> peers_;
  internal::RequestTable<Op> ops_;  // user requests and the transport's own messages
  std::map<uint64_t, std::unique_ptr<RmaRegionState>> regions_;
  uint64_t next_region_ = 1;
  uint64_t probe_seq_ = 0;
};

// The fi_getinfo hints for `provider` (any when empty), with RMA or without.
fi_info* Hints(const FabricLibrary& fi, const std::string& provider, bool rma);

}  // namespace railyard::net::ofi
