// The shm backend's Transport, declared for the files that implement it by job:
//   shm_transport.cc  the Transport: post, match, wait, probe, abort
//   endpoint.cc       this rank's segment, the address exchange in Start, mapping peers
//   connection.cc     each peer's rings: writing sends, reading messages into receives or
//                     unexpected buffers, giving up an operation
//   loop.cc           waiting: the doorbell, probes answered, remote aborts, dead peers
//   window.cc         the shared window (SharedWindow)
// See shm_transport.h for the model and wire.h for what a ring carries.
//
// Internal to net/shm. Thread-safety: as net::Transport.
#pragma once

#include <sched.h>

#include <atomic>
#include <chrono>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "railyard/net/buffer_pool.h"
#include "railyard/net/internal/failure_state.h"
#include "railyard/net/internal/matcher.h"
#include "railyard/net/internal/request_table.h"
#include "railyard/net/internal/unexpected_budget.h"
#include "railyard/net/internal/unit_joiner.h"
#include "railyard/net/shm/shm_ring.h"
#include "railyard/net/shm/shm_transport.h"
#include "railyard/net/shm/wire.h"
#include "railyard/net/transport.h"

namespace railyard::net::shm {

using base::Deadline;

inline constexpr auto kLivenessTick = std::chrono::milliseconds(50);

inline std::string Hex(uint64_t v) { return fmt::format("{:#x}", v); }

struct Op {
  uint64_t id = 0;
  bool is_send = false;
  int peer = 0;
  Tag tag = 0;
  const char* src = nullptr;
  char* dst = nullptr;
  size_t len = 0;         // send length, or the receive's capacity
  size_t done_bytes = 0;  // copied so far
  bool header_sent = false;
  bool complete = false;
  Status status;
  // A consuming receive (PostRecvConsume): bytes go to `consume` in whole `granule` units.
  ConsumingReceiver::Consumer consume;
  size_t granule = 1;
  size_t fed = 0;  // bytes handed to `joiner` so far
  UnitJoiner joiner;
};

// A message that arrived before its receive was posted.
struct Unexpected {
  size_t len = 0;
  PooledBuffer data;
  bool complete = false;
  size_t held = 0;  // bytes counted against the unexpected-message budget
};

struct Peer {
  PeerInfo info;
  Segment segment;  // the peer's segment: our outbound ring lives there
  shm::ProcessWatch watch;
  SegmentHeader* header = nullptr;
  shm::RingWriter out;  // ring `rank_` in the peer's segment
  uint64_t out_seq = 0;
  std::deque<Op*> sends;
  Status send_broken;
  shm::RingReader in;  // ring `peer` in our segment
  uint64_t in_seq = 0;
  struct Incoming {
    bool active = false;
    Tag tag = 0;
    size_t len = 0;
    size_t got = 0;
    Op* op = nullptr;              // receiving into a posted buffer
    Unexpected* buffer = nullptr;  // or into an unexpected-message buffer
  } incoming;                      // neither op nor buffer: discarded (its receive was abandoned)
  int pending = 0;                 // unfinished ops with this peer
};

class ShmTransport final : public Transport, public ConsumingReceiver, public SharedWindow {
 public:
  ShmTransport(const TransportOptions& options, const ShmOptions& shm)
      : options_(options), shm_(shm), rank_(options.rank), size_(options.size) {
    infos_.resize(static_cast<size_t>(size_));
    for (int r = 0; r < size_; ++r) {
      infos_[static_cast<size_t>(r)].rank = r;
      infos_[static_cast<size_t>(r)].job_rank = JobRankOf(options, r);
    }
    std::string host = options.host;
    if (host.empty()) {
      char buf[256] = {};
      if (::gethostname(buf, sizeof(buf) - 1) == 0) host = buf;
    }
    infos_[static_cast<size_t>(rank_)].host = host;
    infos_[static_cast<size_t>(rank_)].pid = static_cast<int>(::getpid());
    if (shm_.ring_bytes == 0) {
      // Small rings stay in cache: the receiver reads what the sender has just written.
      // 64 MiB allreduce on 2 cores, 2 ranks: 2.4-4.1 GB/s busbw with 1 MiB rings against
      // 2.3-2.8 with 4 MiB; 4 ranks about equal at 64 MiB, 1.2-1.7
      // against 1.0-1.4 at 8-32 MiB. 256 KiB rings were slower again.
      size_t per = (size_t{8} << 20) / static_cast<size_t>(std::max(1, size_ - 1));
      shm_.ring_bytes = std::clamp(per, size_t{256} << 10, size_t{1} << 20);
    }
    shm_.ring_bytes =
        std::max(shm::kRingAlign, shm_.ring_bytes / shm::kRingAlign * shm::kRingAlign);
  }

  std::string_view name() const override { return "shm"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  const PeerInfo& peer(int rank) const override { return infos_.at(static_cast<size_t>(rank)); }

  Status Start(Deadline deadline) override;
  Result<Request> PostSend(int peer, Tag tag, const void* data, size_t len) override;
  Result<Request> PostRecv(int peer, Tag tag, void* data, size_t len) override;
  ConsumingReceiver* consuming_receiver() override { return this; }
  Result<Request> PostRecvConsume(int peer, Tag tag, size_t len, size_t granule,
                                  Consumer consume) override;
  Status WaitAll(std::span<const Request> requests, Deadline deadline) override;
  size_t ReceivedBytes(Request request) const override { return ops_.ReceivedBytes(request); }
  std::vector<ProbeResult> Probe(std::span<const int> ranks, Deadline deadline) override;
  void SetActivity(std::string activity) override { activity_ = std::move(activity); }
  void Abort(std::string_view reason, Deadline deadline) override;

  // No window where any rank could not allocate one (window_bytes_ is their minimum).
  SharedWindow* shared_window() override { return window_bytes_ > 0 ? this : nullptr; }
  size_t WindowBytes() const override { return window_bytes_; }
  char* Window(int rank) override {
    if (window_bytes_ == 0 || rank < 0 || rank >= size_) return nullptr;
    return rank == rank_ ? own_.window() : P(rank).segment.window();
  }
  uint64_t WindowCounter() const override {
    return own_.header()->window_seq.load(std::memory_order_relaxed);
  }
  void PublishWindow(uint64_t value) override;
  Status WaitWindow(uint64_t value, Deadline deadline) override;

 private:
  std::string Me() const { return DescribePeer(infos_[static_cast<size_t>(rank_)]); }
  Peer& P(int r) { return peers_[static_cast<size_t>(r)]; }
  const Peer& P(int r) const { return peers_[static_cast<size_t>(r)]; }
  Status ConnectPeer(int r, const std::string& value);
  size_t WindowToAskFor() const;
  Status Usable();
  void SetFatal(Status s) { failure_.Fail(std::move(s)); }
  bool failed() const { return failure_.failed(); }
  // Writes this rank's abort into every peer's segment and wakes every sleeper.
  void SignalAbort(const std::string& reason);
  // Hands a message that waited for its receive to `op` and gives its buffer back.
  void TakeUnexpected(Op* op, std::unique_ptr<Unexpected> u);
  Op* NewOp(bool is_send, int peer, Tag tag, size_t len);
  void Finish(Op* op, Status status = Status::Ok());
  // Copies a complete message into a receive; DATA_LOSS when it does not fit.
  void Deliver(Op* op, const char* data, size_t len);
  // Puts the next `n` bytes of a message into receive `op`: copied to its buffer, or handed
  // to its consumer (Feed). FlushCarry hands over a trailing part unit at the message's end.
  void Put(Op* op, size_t at, const char* data, size_t n);
  static void Feed(Op* op, const char* data, size_t n);
  static void FlushCarry(Op* op);
  Result<Request> PostRecvImpl(int peer, Tag tag, void* data, size_t len, size_t granule,
                               Consumer consume);
  Status DataLossFor(int peer, Tag tag, size_t msg, size_t cap) const {
    return DataLoss(
        "{}: message with tag {} is {} bytes but the receive posted for it holds {} bytes",
        DescribePeer(infos_[static_cast<size_t>(peer)]), Hex(tag), msg, cap);
  }

  bool Progress();
  bool ProgressSends(Peer& p);
  bool ProgressRecvs(int r, Peer& p);
  void StartIncoming(int r, Peer& p, const MessageHeader& h);
  bool HasWork();
  // Sleeps on this rank's doorbell unless `has_work` already holds; at most until the deadline
  // or one liveness tick.
  template <typename F>
  void Sleep(Deadline deadline, F&& has_work);
  // For wait loops, after each pass: nothing more when the pass `moved` something (and the
  // idle time restarts); else, until ShmOptions::spin has passed since `*idle_since`, gives
  // the CPU to any other runnable process (sched_yield: on a host with more ranks than cores
  // the peer being waited for may need this one; alone on its core it returns at once), then
  // sleeps as Sleep does. Measured, 4 ranks on 2 cores, 4 KiB allreduce: 10-23 us yielding
  // against 64-135 us spinning on the CPU (window algorithm; recursive doubling 22-50
  // against 61-85); large messages unchanged.
  template <typename F>
  void Backoff(bool moved, base::Clock::time_point now, base::Clock::time_point* idle_since,
               Deadline deadline, F&& has_work) {
    if (moved) {
      *idle_since = now;
    } else if (now - *idle_since < std::chrono::duration_cast<base::Duration>(shm_.spin)) {
      sched_yield();
    } else {
      Sleep(deadline, std::forward<F>(has_work));
    }
  }
  void AnswerProbes();
  void CheckRemoteAbort();
  void CheckLiveness();
  void Cancel(Op* op);

  TransportOptions options_;
  ShmOptions shm_;
  const int rank_;
  const int size_;
  std::vector<PeerInfo> infos_;
  std::vector<Peer> peers_;
  Segment own_;
  std::atomic<bool> started_{false};

  internal::RequestTable<Op> ops_;
  internal::Matcher<Op*, std::unique_ptr<Unexpected>> matcher_;
  BufferPool spare_;  // buffers of unexpected messages, for reuse
  internal::UnexpectedBudget budget_;
  internal::FailureState failure_;  // the first error; the abort request
  std::string activity_;
  uint64_t probe_seq_ = 0;
  base::Clock::time_point next_liveness_check_{};
  size_t window_bytes_ = 0;  // the smallest of all ranks' windows: 0 if any has none
};

template <typename F>
void ShmTransport::Sleep(Deadline deadline, F&& has_work) {
  SegmentHeader* h = own_.header();
  uint32_t seq = h->doorbell.load(std::memory_order_acquire);
  h->sleeping.store(1, std::memory_order_relaxed);
  // Pairs with the fence in WakeIfSleeping: either the waker sees `sleeping` and rings, or
  // this check sees what it published.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!has_work()) {
    auto timeout = std::min<base::Duration>(deadline.Remaining(), kLivenessTick);
    shm::FutexWait(&h->doorbell, seq, timeout);
  }
  h->sleeping.store(0, std::memory_order_relaxed);
}

}  // namespace railyard::net::shm
