#include "railyard/net/shm/shm_transport.h"

#include <sched.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "railyard/base/hmac.h"
#include "railyard/base/logging.h"
#include "railyard/net/buffer_pool.h"
#include "railyard/net/internal/failure_state.h"
#include "railyard/net/internal/matcher.h"
#include "railyard/net/internal/pending.h"
#include "railyard/net/internal/probe_set.h"
#include "railyard/net/internal/request_table.h"
#include "railyard/net/internal/unexpected_budget.h"
#include "railyard/net/peer_directory.h"
#include "railyard/net/shm/shm_ring.h"

namespace railyard::net {
namespace {

using base::Deadline;
using shm::ProcessState;
using shm::Segment;
using shm::SegmentHeader;

const base::Logger kLog("shm");

constexpr uint64_t kHeaderMagic = 0x67736d7972ULL;  // "rymsg"
constexpr auto kLivenessTick = std::chrono::milliseconds(50);

// Precedes every message in a ring; messages start on 64-byte boundaries.
struct alignas(64) MessageHeader {
  uint64_t magic;
  uint64_t tag;
  uint64_t len;
  uint64_t seq;  // per (sender, receiver) stream, for error messages and sanity
};
static_assert(sizeof(MessageHeader) == shm::kRecordAlign);

std::string Hex(uint64_t v) { return fmt::format("{:#x}", v); }

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

Status ShmTransport::Start(Deadline deadline) {
  if (started_.load()) return FailedPrecondition("shm transport of {} started twice", Me());
  Store& store = *options_.store;
  const std::string prefix = ShmSegmentNamePrefix(options_.key_prefix);
  if (int n = shm::RemoveStaleSegments(prefix); n > 0) {
    kLog.Info("removed {} shm segments of communicator '{}' whose creators are gone", n,
              options_.key_prefix);
  }
  static std::atomic<int> counter{0};
  const int pid = infos_[static_cast<size_t>(rank_)].pid;
  std::string name = fmt::format("/{}r{}-p{}-{}", prefix, rank_, pid, counter.fetch_add(1));
  RY_ASSIGN_OR_RETURN(own_, Segment::Create(name, shm::SegmentLayout::For(size_, shm_.ring_bytes,
                                                                          WindowToAskFor())));
  SegmentHeader* h = own_.header();
  h->rank = rank_;
  own_.Sign(options_.secret);
  h->magic.store(shm::kSegmentMagic, std::memory_order_release);
  infos_[static_cast<size_t>(rank_)].address = name;

  auto key = [&](std::string_view what, int r) {
    return fmt::format("{}/shm/{}/{}", options_.key_prefix, what, r);
  };
  auto wait_all = [&](std::string_view what) -> Status {
    std::vector<std::string> keys;
    for (int r = 0; r < size_; ++r) keys.push_back(key(what, r));
    std::vector<std::string> missing_keys;
    Status st = store.Wait(keys, deadline, &missing_keys);
    if (st.ok()) return st;
    std::vector<int> missing = MissingRanks(keys, missing_keys);
    if (missing.empty()) return st.WithContext(fmt::format("shm transport {}", Me()));
    return Status(
        st.code(),
        fmt::format("shm transport {}: ranks {} did not {} ({}): {}", Me(), DescribeRanks(missing),
                    what == "peer" ? "publish their segments" : "map every segment",
                    store.Describe(), st.message()));
  };

  const PeerInfo& me = infos_[static_cast<size_t>(rank_)];
  RY_RETURN_IF_ERROR(
      store.Set(key("peer", rank_), shm::PeerRecord{me.host, pid, name}.Format(), deadline));
  RY_RETURN_IF_ERROR(wait_all("peer"));
  peers_.resize(static_cast<size_t>(size_));
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    RY_ASSIGN_OR_RETURN(std::string value, store.Get(key("peer", r), deadline));
    RY_RETURN_IF_ERROR(ConnectPeer(r, value));
  }
  // Everyone has mapped everything once all "mapped" keys exist: the names can go.
  RY_RETURN_IF_ERROR(store.Set(key("mapped", rank_), "1", deadline));
  RY_RETURN_IF_ERROR(wait_all("mapped"));
  own_.Unlink();
  // Every rank computes the same minimum from the same segments, so all agree on whether
  // window collectives run.
  window_bytes_ = own_.layout().window_bytes;
  for (int r = 0; r < size_; ++r) {
    if (r != rank_)
      window_bytes_ = std::min<size_t>(window_bytes_, P(r).segment.layout().window_bytes);
  }
  started_.store(true, std::memory_order_release);
  if (failure_.abort_requested()) SignalAbort(failure_.abort_reason());  // raced with Start
  kLog.Debug("{} started: segment {}, {} ranks, {}-byte rings", Me(), name, size_, shm_.ring_bytes);
  return Status::Ok();
}

// The window is preallocated but the rings fill on first touch: a window that left too little
// of /dev/shm for every rank's rings would turn into SIGBUS later (a container's default
// /dev/shm is 64 MiB). So ask for one only while all ranks' whole segments fit in what is
// free now; otherwise every rank runs without (one rank without a window turns it off).
size_t ShmTransport::WindowToAskFor() const {
  if (size_ < 2 || shm_.window_bytes == 0) return 0;
  struct statvfs st {};
  if (::statvfs("/dev/shm", &st) != 0) return shm_.window_bytes;  // shm_open will tell
  const uint64_t free_bytes = static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
  const uint64_t window =
      shm::WindowThatFits(size_, shm_.ring_bytes, shm_.window_bytes, free_bytes);
  if (window == 0) {
    kLog.Info(
        "{}: no shared window ({} MiB free in /dev/shm is less than {} ranks' whole "
        "segments): allreduce uses the ring",
        Me(), free_bytes >> 20, size_);
  }
  return window;
}

Status ShmTransport::ConnectPeer(int r, const std::string& value) {
  PeerInfo& info = infos_[static_cast<size_t>(r)];
  std::optional<shm::PeerRecord> rec = shm::PeerRecord::Parse(value);
  if (!rec) {
    return InvalidArgument("rank {}: malformed shm peer record in {}: '{}'", r,
                           options_.store->Describe(), value);
  }
  info.host = rec->host;
  info.pid = rec->pid;
  const std::string& segment = rec->segment;
  std::string who = DescribePeer(info);
  info.address = segment;
  const std::string& my_host = infos_[static_cast<size_t>(rank_)].host;
  if (info.host != my_host) {
    return FailedPrecondition(
        "{} is on host {}, this rank ({}) on {}: the shm transport only connects ranks of one host",
        who, info.host, rank_, my_host);
  }
  Peer& p = P(r);
  p.info = info;
  RY_ASSIGN_OR_RETURN(p.segment, Segment::Open(segment, who));
  p.header = p.segment.header();
  if (p.header->rank != r || p.header->size != size_ || p.header->pid != info.pid) {
    return FailedPrecondition(
        "{}: shm segment {} belongs to rank {} of {} (pid {}), expected rank {} of {}: a stale "
        "segment or a different job",
        who, segment, p.header->rank, p.header->size, p.header->pid, r, size_);
  }
  if (!p.segment.Verify(options_.secret)) {
    return PermissionDenied(
        "{}: shm segment {} does not prove the job secret: it belongs to another job using key "
        "prefix '{}'",
        who, segment, options_.key_prefix);
  }
  if (info.pid != infos_[static_cast<size_t>(rank_)].pid) p.watch = shm::ProcessWatch(info.pid);
  p.out = shm::RingWriter(p.segment.ring_control(rank_), p.segment.ring_data(rank_),
                          p.segment.layout().ring_bytes, p.header);
  p.in =
      shm::RingReader(own_.ring_control(r), own_.ring_data(r), own_.layout().ring_bytes, p.header);
  return Status::Ok();
}

Status ShmTransport::Usable() {
  if (failed()) return failure_.status();  // the first error stays, even after a later Abort
  if (started_.load(std::memory_order_relaxed)) CheckRemoteAbort();
  return failure_.status();
}

Op* ShmTransport::NewOp(bool is_send, int peer, Tag tag, size_t len) {
  Op* op = ops_.Add();
  op->is_send = is_send;
  op->peer = peer;
  op->tag = tag;
  op->len = len;
  if (peer != rank_) ++P(peer).pending;
  return op;
}

void ShmTransport::Finish(Op* op, Status status) {
  if (op->complete) return;
  op->complete = true;
  op->status = std::move(status);
  if (op->peer != rank_) --P(op->peer).pending;
}

void ShmTransport::Deliver(Op* op, const char* data, size_t len) {
  if (len > op->len) {
    Status st = DataLossFor(op->peer, op->tag, len, op->len);
    SetFatal(st);
    Finish(op, st);
    return;
  }
  Put(op, 0, data, len);
  FlushCarry(op);
  op->done_bytes = len;
  Finish(op);
}

void ShmTransport::Put(Op* op, size_t at, const char* data, size_t n) {
  if (n == 0) return;
  if (op->consume) {
    Feed(op, data, n);
  } else {
    std::memcpy(op->dst + at, data, n);
  }
}

void ShmTransport::Feed(Op* op, const char* data, size_t n) {
  op->joiner.Feed(op->consume, op->granule, op->fed, data, n);
  op->fed += n;
}

void ShmTransport::FlushCarry(Op* op) {
  if (op->consume) op->joiner.Flush(op->consume, op->fed);
}

Result<Request> ShmTransport::PostSend(int peer, Tag tag, const void* data, size_t len) {
  RY_RETURN_IF_ERROR(Usable());
  if (peer < 0 || peer >= size_) {
    return InvalidArgument("{}: send to rank {} of a {}-rank job", Me(), peer, size_);
  }
  if (!started_.load()) return FailedPrecondition("shm transport of {} is not started", Me());
  if (peer != rank_ && !P(peer).send_broken.ok()) return P(peer).send_broken;
  Op* op = NewOp(true, peer, tag, len);
  op->src = static_cast<const char*>(data);
  if (peer == rank_) {  // to self: match or buffer now; the caller's buffer is free at once
    if (std::optional<Op*> recv = matcher_.TakeRecv(peer, tag)) {
      Deliver(*recv, op->src, len);
    } else {
      auto u = std::make_unique<Unexpected>();
      u->len = len;
      u->data = spare_.Take(len);
      if (len > 0) std::memcpy(u->data.data(), data, len);
      u->complete = true;
      matcher_.AddMessage(peer, tag, std::move(u));
    }
    Finish(op);
  } else {
    P(peer).sends.push_back(op);
  }
  return Request{op->id};
}

Result<Request> ShmTransport::PostRecv(int peer, Tag tag, void* data, size_t len) {
  return PostRecvImpl(peer, tag, data, len, 1, nullptr);
}

Result<Request> ShmTransport::PostRecvConsume(int peer, Tag tag, size_t len, size_t granule,
                                              Consumer consume) {
  if (granule == 0 || granule > UnitJoiner::kMaxGranule || !consume) {
    return InvalidArgument(
        "{}: consuming receive needs a consumer and a granule of 1 to {} "
        "bytes, got {}",
        Me(), UnitJoiner::kMaxGranule, granule);
  }
  return PostRecvImpl(peer, tag, nullptr, len, granule, std::move(consume));
}

Result<Request> ShmTransport::PostRecvImpl(int peer, Tag tag, void* data, size_t len,
                                           size_t granule, Consumer consume) {
  RY_RETURN_IF_ERROR(Usable());
  if (peer < 0 || peer >= size_) {
    return InvalidArgument("{}: receive from rank {} of a {}-rank job", Me(), peer, size_);
  }
  if (!started_.load()) return FailedPrecondition("shm transport of {} is not started", Me());
  Op* op = NewOp(false, peer, tag, len);
  op->dst = static_cast<char*>(data);
  op->granule = granule;
  op->consume = std::move(consume);
  if (std::optional<std::unique_ptr<Unexpected>> u = matcher_.TakeMessage(peer, tag)) {
    TakeUnexpected(op, std::move(*u));
  } else {
    matcher_.AddRecv(peer, tag, op);
  }
  return Request{op->id};
}

void ShmTransport::TakeUnexpected(Op* op, std::unique_ptr<Unexpected> u) {
  budget_.Release(u->held);
  if (u->complete) {
    Deliver(op, u->data.data(), u->len);
    spare_.Give(std::move(u->data));
    return;
  }
  // Still streaming in (only the newest message of a peer can be): copy what is there and
  // let the rest go straight to the caller's buffer.
  Peer::Incoming& in = P(op->peer).incoming;
  if (u->len > op->len) {
    Status st = DataLossFor(op->peer, op->tag, u->len, op->len);
    SetFatal(st);
    Finish(op, st);
    in.buffer = nullptr;  // discard the rest
    return;
  }
  Put(op, 0, u->data.data(), in.got);
  spare_.Give(std::move(u->data));
  in.buffer = nullptr;
  in.op = op;
}

bool ShmTransport::ProgressSends(Peer& p) {
  bool moved = false;
  while (!p.sends.empty()) {
    Op* op = p.sends.front();
    if (!op->header_sent) {
      MessageHeader h{kHeaderMagic, op->tag, op->len, p.out_seq};
      if (!p.out.WriteRecord(&h, sizeof(h))) break;
      ++p.out_seq;
      op->header_sent = true;
      moved = true;
    }
    size_t n = p.out.Write(op->src + op->done_bytes, op->len - op->done_bytes);
    op->done_bytes += n;
    moved |= n > 0;
    if (op->done_bytes < op->len) break;  // the ring is full
    Finish(op);
    p.sends.pop_front();
  }
  p.out.Publish();
  return moved;
}

void ShmTransport::StartIncoming(int r, Peer& p, const MessageHeader& h) {
  Peer::Incoming& in = p.incoming;
  in = Peer::Incoming{true, h.tag, h.len, 0, nullptr, nullptr};
  if (h.magic != kHeaderMagic || h.seq != p.in_seq) {
    SetFatal(DataLoss("{}: corrupt shm stream: message #{} has magic {} and sequence {}",
                      DescribePeer(p.info), p.in_seq, Hex(h.magic), h.seq));
    return;
  }
  ++p.in_seq;
  if (std::optional<Op*> recv = matcher_.TakeRecv(r, h.tag)) {
    Op* op = *recv;
    if (h.len > op->len) {
      Status st = DataLossFor(r, h.tag, h.len, op->len);
      SetFatal(st);
      Finish(op, st);
      return;  // discard
    }
    in.op = op;
    return;
  }
  if (Status st = budget_.Hold(h.len, h.tag); !st.ok()) {
    SetFatal(Status(st.code(), fmt::format("{}: {}", DescribePeer(p.info), st.message())));
    return;  // discard
  }
  auto u = std::make_unique<Unexpected>();
  u->len = h.len;
  u->held = h.len;
  u->data = spare_.Take(h.len);
  in.buffer = u.get();
  matcher_.AddMessage(r, h.tag, std::move(u));
}

bool ShmTransport::ProgressRecvs(int r, Peer& p) {
  if (!p.in.Snapshot()) return false;
  const uint64_t before = p.in.position();
  Peer::Incoming& in = p.incoming;
  while (!failed()) {
    if (!in.active) {
      MessageHeader h;
      if (!p.in.ReadRecord(&h, sizeof(h))) break;
      StartIncoming(r, p, h);
      if (failed()) break;
    }
    if (in.op != nullptr && in.op->consume) {
      Op* op = in.op;
      in.got +=
          p.in.ReadInPlace(in.len - in.got, [op](const char* d, size_t n) { Feed(op, d, n); });
    } else {
      char* dst = in.op != nullptr       ? in.op->dst
                  : in.buffer != nullptr ? in.buffer->data.data()
                                         : nullptr;  // abandoned: skip the bytes
      in.got += p.in.Read(dst != nullptr ? dst + in.got : nullptr, in.len - in.got);
    }
    if (in.got < in.len) break;
    if (in.op != nullptr) {
      FlushCarry(in.op);
      in.op->done_bytes = in.len;
      Finish(in.op);
    } else if (in.buffer != nullptr) {
      in.buffer->complete = true;
    }
    in = Peer::Incoming{};
  }
  p.in.Publish();
  return p.in.position() != before;
}

bool ShmTransport::Progress() {
  bool moved = false;
  for (int r = 0; r < size_ && !failed(); ++r) {
    if (r == rank_) continue;
    Peer& p = P(r);
    if (!p.sends.empty()) moved |= ProgressSends(p);
    moved |= ProgressRecvs(r, p);
  }
  return moved;
}

bool ShmTransport::HasWork() {
  SegmentHeader* h = own_.header();
  if (failure_.abort_requested() || h->abort_state.load(std::memory_order_acquire) != 0 ||
      h->probe_flag.load(std::memory_order_acquire) != 0) {
    return true;
  }
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    Peer& p = P(r);
    if (p.in.HasData() || (!p.sends.empty() && p.out.SpaceFreed())) return true;
  }
  return false;
}

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

void ShmTransport::AnswerProbes() {
  SegmentHeader* h = own_.header();
  if (h->probe_flag.load(std::memory_order_relaxed) == 0) return;
  h->probe_flag.exchange(0, std::memory_order_acq_rel);
  for (int r = 0; r < size_; ++r) {
    if (r == rank_) continue;
    shm::ProbeSlot* slot = own_.probe_slot(r);
    uint64_t req = slot->request.load(std::memory_order_acquire);
    if (req == slot->answer.load(std::memory_order_relaxed)) continue;
    size_t n = std::min(activity_.size(), shm::kMaxActivityBytes);
    std::memcpy(slot->activity, activity_.data(), n);
    slot->activity_len = static_cast<uint32_t>(n);
    slot->answer.store(req, std::memory_order_release);
    shm::WakeIfSleeping(P(r).header);
  }
}

void ShmTransport::CheckRemoteAbort() {
  SegmentHeader* h = own_.header();
  if (failed() || h->abort_state.load(std::memory_order_acquire) != 2) return;
  int who = h->abort_rank;
  std::string reason(h->abort_reason, std::min<size_t>(h->abort_len, shm::kMaxAbortReasonBytes));
  std::string name = who >= 0 && who < size_ ? DescribePeer(infos_[static_cast<size_t>(who)])
                                             : fmt::format("rank {}", who);
  SetFatal(Aborted("{} aborted the job: {}", name, reason));
}

void ShmTransport::CheckLiveness() {
  for (int r = 0; r < size_; ++r) {
    if (r == rank_ || P(r).pending == 0) continue;
    if (!P(r).watch.Exited()) continue;
    Progress();  // take what it published before it died
    if (P(r).pending == 0 || failed()) continue;
    const Op* pending = nullptr;
    ops_.ForEach([&](const Op& op) {
      if (op.peer == r && !op.complete && (pending == nullptr || op.id < pending->id)) {
        pending = &op;
      }
    });
    SetFatal(Unavailable(
        "{}: process exited while {} tag {} was pending ({} of {} bytes)", DescribePeer(P(r).info),
        pending != nullptr && pending->is_send ? "a send with" : "a receive of",
        Hex(pending != nullptr ? pending->tag : 0), pending != nullptr ? pending->done_bytes : 0,
        pending != nullptr ? pending->len : 0));
  }
}

void ShmTransport::Cancel(Op* op) {
  if (op->complete) return;
  Peer* p = op->peer != rank_ ? &P(op->peer) : nullptr;
  if (op->is_send) {
    if (p != nullptr) {
      auto& q = p->sends;
      q.erase(std::remove(q.begin(), q.end(), op), q.end());
      if (op->header_sent) {
        p->send_broken = FailedPrecondition(
            "{}: a send with tag {} was abandoned at a deadline after {} of {} bytes; the stream "
            "to this peer is broken",
            DescribePeer(p->info), Hex(op->tag), op->done_bytes, op->len);
        for (Op* later : q) Finish(later, p->send_broken);
        q.clear();
      }
    }
  } else {
    matcher_.RemoveRecv(op->peer, op->tag, op);
    if (p != nullptr && p->incoming.op == op) p->incoming.op = nullptr;  // discard the rest
  }
  Finish(op, DeadlineExceeded("abandoned at a deadline"));
}

void ShmTransport::PublishWindow(uint64_t value) {
  own_.header()->window_seq.store(value, std::memory_order_release);
  for (int r = 0; r < size_; ++r) {
    if (r != rank_) shm::WakeIfSleeping(P(r).header);
  }
}

Status ShmTransport::WaitWindow(uint64_t value, Deadline deadline) {
  if (window_bytes_ == 0)
    return FailedPrecondition("{}: the shm transport has no shared window", Me());
  auto behind = [&](int r) {
    return r != rank_ && P(r).header->window_seq.load(std::memory_order_acquire) < value;
  };
  auto all_there = [&] {
    for (int r = 0; r < size_; ++r) {
      if (behind(r)) return false;
    }
    return true;
  };
  base::Clock::time_point idle_since = base::Clock::now();
  for (;;) {
    if (all_there()) return Status::Ok();
    RY_RETURN_IF_ERROR(Usable());
    bool moved = Progress();
    AnswerProbes();
    if (failed()) return failure_.status();
    base::Clock::time_point now = base::Clock::now();
    if (now >= next_liveness_check_) {
      next_liveness_check_ = now + kLivenessTick;
      CheckLiveness();
      for (int r = 0; r < size_ && !failed(); ++r) {
        if (behind(r) && P(r).watch.Exited()) {
          SetFatal(Unavailable("{}: process exited before its shared-window step {}",
                               DescribePeer(P(r).info), value));
        }
      }
      if (failed()) return failure_.status();
    }
    if (deadline.Expired()) {
      std::vector<int> ranks;
      for (int r = 0; r < size_; ++r) {
        if (behind(r)) ranks.push_back(r);
      }
      std::string detail;
      for (int r : ranks) {
        detail += fmt::format("; {} at step {}", DescribePeer(P(r).info),
                              P(r).header->window_seq.load(std::memory_order_relaxed));
      }
      SetFatal(
          DeadlineExceeded("{}: deadline passed waiting for ranks {} to reach "
                           "shared-window step {}{}",
                           Me(), DescribeRanks(ranks), value, detail));
      return failure_.status();
    }
    Backoff(moved, now, &idle_since, deadline, [&] { return all_there() || HasWork(); });
  }
}

Status ShmTransport::WaitAll(std::span<const Request> requests, Deadline deadline) {
  ops_.StartWait();
  internal::WaitSet<Op> w = ops_.Collect(requests, Me());
  // Waited requests are consumed whatever the outcome (transport.h); any error but the
  // caller's own mistake fails the transport: part of an abandoned send may be in a peer's
  // ring, so the streams cannot be trusted again.
  auto consume = [&](Status st) {
    for (Op* op : w.ops) {
      if (!op->complete) Cancel(op);
      if (!op->is_send && op->status.ok()) ops_.SetReceived(op->id, op->done_bytes);
      ops_.Erase(op->id);
    }
    if (!st.ok() && st.code() != StatusCode::kInvalidArgument) {
      SetFatal(st);
      return failure_.status();
    }
    return st;
  };
  if (!w.status.ok()) return consume(w.status);
  base::Clock::time_point idle_since = base::Clock::now();
  for (;;) {
    if (Status st = Usable(); !st.ok()) return consume(st);
    bool moved = Progress();
    AnswerProbes();
    if (failed()) return consume(failure_.status());
    bool all = true;
    for (Op* op : w.ops) {
      if (op->complete && !op->status.ok()) return consume(op->status);
      all &= op->complete;
    }
    if (all) return consume(Status::Ok());
    base::Clock::time_point now = base::Clock::now();
    if (now >= next_liveness_check_) {
      next_liveness_check_ = now + kLivenessTick;
      CheckLiveness();
      if (failed()) return consume(failure_.status());
    }
    if (deadline.Expired()) {
      std::vector<internal::PendingRequest> left;
      for (Op* op : w.ops) {
        if (op->complete) continue;
        left.push_back({.peer = op->peer,
                        .is_send = op->is_send,
                        .tag = op->tag,
                        .done_bytes = op->done_bytes,
                        .bytes = op->len});
      }
      return consume(internal::DeadlinePassed(Me(), left, w.ops.size(), [this](int peer) {
        return DescribePeer(infos_[static_cast<size_t>(peer)]);
      }));
    }
    Backoff(moved, now, &idle_since, deadline, [this] { return HasWork(); });
  }
}

std::vector<ProbeResult> ShmTransport::Probe(std::span<const int> ranks, Deadline deadline) {
  internal::ProbeSet probes(ranks, rank_, size_, activity_);
  std::vector<uint64_t> seq(ranks.size(), 0);
  const bool started = started_.load(std::memory_order_acquire);
  for (size_t i : probes.Pending()) {
    const int r = probes.rank(i);
    if (!started) {
      probes.Unresponsive(i, "this rank's transport has not started");
      continue;
    }
    seq[i] = ++probe_seq_;
    P(r).segment.probe_slot(rank_)->request.store(seq[i], std::memory_order_release);
    P(r).header->probe_flag.store(1, std::memory_order_release);
    shm::WakeIfSleeping(P(r).header);
  }
  auto answered = [&](size_t i) {
    return seq[i] != 0 &&
           P(probes.rank(i)).segment.probe_slot(rank_)->answer.load(std::memory_order_acquire) ==
               seq[i];
  };
  auto any_answer = [&] {
    for (size_t i = 0; i < ranks.size(); ++i) {
      if (probes.pending(i) && answered(i)) return true;
    }
    return false;
  };
  const auto start = base::Clock::now();
  base::Clock::time_point next_check = start;
  while (!probes.settled()) {
    AnswerProbes();
    const auto now = base::Clock::now();
    const bool check = now >= next_check || deadline.Expired();
    if (check) next_check = now + kLivenessTick;
    for (size_t i : probes.Pending()) {
      Peer& p = P(probes.rank(i));
      if (answered(i)) {
        const shm::ProbeSlot* slot = p.segment.probe_slot(rank_);
        probes.Alive(i, std::string(slot->activity,
                                    std::min<size_t>(slot->activity_len, shm::kMaxActivityBytes)));
      } else if (!check) {
        continue;
      } else if (ProcessState st = p.watch.State(); st == ProcessState::kExited) {
        probes.Dead(i, "process exited");
      } else if (st == ProcessState::kStopped) {
        probes.Unresponsive(i, "process is stopped (SIGSTOP)");
      } else if (deadline.Expired()) {
        probes.Unresponsive(
            i, fmt::format(
                   "no answer within {} ms: the process runs but is not inside a "
                   "communication call (busy or hung)",
                   std::chrono::duration_cast<std::chrono::milliseconds>(now - start).count()));
      }
    }
    if (!probes.settled()) {
      Sleep(deadline, [&] {
        return failure_.abort_requested() ||
               own_.header()->probe_flag.load(std::memory_order_acquire) != 0 || any_answer();
      });
    }
  }
  return std::move(probes).Finish();
}

void ShmTransport::Abort(std::string_view reason, Deadline deadline) {
  (void)deadline;  // every step is a bounded store into shared memory
  if (!failure_.RequestAbort(reason)) return;
  SetFatal(Aborted("{} aborted the job: {}", Me(), reason));
  // Before Start has mapped the peers' segments Start signals it.
  if (started_.load(std::memory_order_acquire)) SignalAbort(std::string(reason));
}

void ShmTransport::SignalAbort(const std::string& text) {
  for (int r = 0; r < size_; ++r) {
    SegmentHeader* h = r == rank_ ? own_.header() : P(r).header;
    if (r != rank_) {
      uint32_t expected = 0;
      if (h->abort_state.compare_exchange_strong(expected, 1, std::memory_order_acquire)) {
        size_t n = std::min(text.size(), shm::kMaxAbortReasonBytes);
        std::memcpy(h->abort_reason, text.data(), n);
        h->abort_len = static_cast<uint32_t>(n);
        h->abort_rank = rank_;
        h->abort_state.store(2, std::memory_order_release);
      }
    }
    // Unconditional: our own WaitAll may sleep in another thread.
    h->doorbell.fetch_add(1, std::memory_order_release);
    shm::FutexWakeAll(&h->doorbell);
  }
}

}  // namespace

std::string ShmSegmentNamePrefix(std::string_view key_prefix) {
  base::Sha256Digest d = base::Sha256(key_prefix);
  return fmt::format("railyard-shm-{}-",
                     base::ToHex(std::string_view(reinterpret_cast<const char*>(d.data()), 6)));
}

Result<std::unique_ptr<Transport>> NewShmTransport(const TransportOptions& options,
                                                   const ShmOptions& shm_options) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return InvalidArgument("shm transport: rank {} is not within a job of {} ranks", options.rank,
                           options.size);
  }
  if (options.store == nullptr) return InvalidArgument("shm transport: no rendezvous store");
  if (shm_options.ring_bytes % shm::kRingAlign != 0) {
    return InvalidArgument("shm transport: ring size {} is not a multiple of {}",
                           shm_options.ring_bytes, shm::kRingAlign);
  }
  return std::unique_ptr<Transport>(std::make_unique<ShmTransport>(options, shm_options));
}

}  // namespace railyard::net
