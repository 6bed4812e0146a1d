#include "railyard/comm/communicator.h"

#include <algorithm>
#include <condition_variable>
#include <cstdlib>
#include <deque>
#include <functional>
#include <mutex>
#include <numeric>
#include <span>
#include <thread>

#include "railyard/base/logging.h"
#include "railyard/base/units.h"
#include "railyard/comm/internal/op_context.h"

namespace railyard::comm {
namespace {

const base::Logger kLog("comm");

// Time a rank spends finding the culprit, and telling the others, after its deadline: both
// together stay under the one second the issue allows past the deadline.
constexpr auto kProbeBudget = std::chrono::milliseconds(450);
constexpr auto kAbortBudget = std::chrono::milliseconds(300);

enum class OpKind : uint32_t {
  kSend = 1,
  kRecv,
  kBarrier,
  kBroadcast,
  kReduce,
  kAllreduce,
  kReduceScatter,
  kAllgather,
  kAlltoall,
};

std::string_view OpName(OpKind k) {
  switch (k) {
    case OpKind::kSend:
      return "send";
    case OpKind::kRecv:
      return "recv";
    case OpKind::kBarrier:
      return "barrier";
    case OpKind::kBroadcast:
      return "broadcast";
    case OpKind::kReduce:
      return "reduce";
    case OpKind::kAllreduce:
      return "allreduce";
    case OpKind::kReduceScatter:
      return "reduce_scatter";
    case OpKind::kAllgather:
      return "allgather";
    case OpKind::kAlltoall:
      return "alltoall";
  }
  return "?";
}

// What ranks compare in the consistency check; fixed layout, sent as bytes.
struct WireDesc {
  uint32_t kind;
  uint32_t type;
  uint32_t op;
  int32_t root;
  uint64_t count;
  uint64_t seq;
};

constexpr net::Tag kCheckPhase = 200;

}  // namespace

// The implementation behind Communicator: the transport, the sequence numbers and the
// queue of non-blocking operations with the worker thread that runs them.
class WorkImpl final : public Work {
 public:
  Status Wait() override {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return done_; });  // bounded: the operation has its own deadline
    return status_;
  }
  bool Done() const override {
    std::lock_guard lock(mu_);
    return done_;
  }
  void Finish(Status status) {
    {
      std::lock_guard lock(mu_);
      status_ = std::move(status);
      done_ = true;
    }
    cv_.notify_all();
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  Status status_;
};

class CommunicatorImpl final : public Communicator {
 public:
  CommunicatorImpl(std::unique_ptr<net::Transport> transport, CommOptions options);
  ~CommunicatorImpl() override;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  net::Transport& transport() override { return *transport_; }

  Status Send(const void* data, size_t count, DataType type, int peer,
              CollectiveOptions options) override;
  Status Recv(void* data, size_t count, DataType type, int peer,
              CollectiveOptions options) override;
  Status Barrier(CollectiveOptions options) override;
  Status Broadcast(void* data, size_t count, DataType type, int root,
                   CollectiveOptions options) override;
  Status Reduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op, int root,
                CollectiveOptions options) override;
  Status Allreduce(const void* send, void* recv, size_t count, DataType type, ReduceOp op,
                   CollectiveOptions options) override;
  Status ReduceScatter(const void* send, void* recv, size_t recv_count, DataType type, ReduceOp op,
                       CollectiveOptions options) override;
  Status Allgather(const void* send, void* recv, size_t send_count, DataType type,
                   CollectiveOptions options) override;
  Status Alltoall(const void* send, void* recv, size_t count, DataType type,
                  CollectiveOptions options) override;

  std::shared_ptr<Work> AllreduceAsync(const void* send, void* recv, size_t count, DataType type,
                                       ReduceOp op, CollectiveOptions options) override;
  std::shared_ptr<Work> AllgatherAsync(const void* send, void* recv, size_t send_count,
                                       DataType type, CollectiveOptions options) override;
  std::shared_ptr<Work> BroadcastAsync(void* data, size_t count, DataType type, int root,
                                       CollectiveOptions options) override;
  std::shared_ptr<Work> ReduceAsync(const void* send, void* recv, size_t count, DataType type,
                                    ReduceOp op, int root, CollectiveOptions options) override;
  std::shared_ptr<Work> ReduceScatterAsync(const void* send, void* recv, size_t recv_count,
                                           DataType type, ReduceOp op,
                                           CollectiveOptions options) override;
  std::shared_ptr<Work> AlltoallAsync(const void* send, void* recv, size_t count, DataType type,
                                      CollectiveOptions options) override;
  std::shared_ptr<Work> BarrierAsync(CollectiveOptions options) override;
  std::shared_ptr<Work> SendAsync(const void* data, size_t count, DataType type, int peer,
                                  CollectiveOptions options) override;
  std::shared_ptr<Work> RecvAsync(void* data, size_t count, DataType type, int peer,
                                  CollectiveOptions options) override;

  void Abort(std::string_view reason) override;
  uint64_t sequence() const override { return seq_; }
  void AttachHierarchy(std::unique_ptr<Communicator> local,
                       std::unique_ptr<Communicator> leaders) override;
  bool hierarchical() const override { return local_ != nullptr; }
  size_t piece_bytes() const override { return piece_bytes_; }

 private:
  friend class Communicator;  // Create fills the ring positions and the piece size
  struct OpDesc;
  Status Run(const OpDesc& desc, const CollectiveOptions& options,
             const std::function<Status(OpContext&)>& body);
  Status CheckConsistency(OpContext& ctx, const OpDesc& desc);
  Result<Algorithm> PickAlgorithm(std::string_view operation,
                                  const CollectiveOptions& options) const;
  Status Attribute(const OpDesc& desc, Status error, base::Clock::time_point start);
  std::shared_ptr<Work> Submit(std::function<Status()> fn);
  void DrainAsync();
  void WorkerLoop();

  std::unique_ptr<net::Transport> transport_;
  CommOptions options_;
  int rank_ = 0;
  int size_ = 1;
  size_t piece_bytes_ = 1 << 20;  // options_.piece_bytes, or the placement's choice
  size_t wave_segments_ = 1;      // OpContext::wave_segments, from placement
  std::vector<int> position_;     // rank -> position in ring_order
  uint64_t seq_ = 0;              // collectives issued (shared by all ranks: part of every tag)
  uint64_t p2p_seq_ = 0;          // sends and receives issued by this rank, for messages
  Status failed_;
  std::vector<std::vector<char>> scratch_;
  std::unique_ptr<Communicator> local_;    // ranks on this host
  std::unique_ptr<Communicator> leaders_;  // one rank per host; null unless this is a leader

  std::mutex op_mu_;  // one operation at a time
  // Non-blocking operations: a FIFO run by one worker thread, started on first use.
  std::mutex queue_mu_;
  std::condition_variable queue_cv_;
  std::deque<std::function<void()>> queue_;
  uint64_t submitted_ = 0, finished_ = 0;
  bool stopping_ = false;
  std::thread worker_;
};

struct CommunicatorImpl::OpDesc {
  OpKind kind;
  DataType type = DataType::kU8;
  ReduceOp op = ReduceOp::kSum;
  int root = -1;
  size_t count = 0;
  bool collective = true;  // send/recv are not checked for consistency

  std::string Describe(uint64_t seq, Algorithm algo) const {
    std::string s = fmt::format("{} #{} ({} x {}", OpName(kind), seq, count, DataTypeName(type));
    if (kind == OpKind::kReduce || kind == OpKind::kAllreduce || kind == OpKind::kReduceScatter) {
      s += fmt::format(", {}", ReduceOpName(op));
    }
    if (root >= 0) s += fmt::format(", {} {}", collective ? "root" : "peer", root);
    if (algo != Algorithm::kAuto) s += fmt::format(", {}", AlgorithmName(algo));
    return s + ")";
  }
};

std::string_view AlgorithmName(Algorithm a) {
  switch (a) {
    case Algorithm::kAuto:
      return "auto";
    case Algorithm::kRing:
      return "ring";
    case Algorithm::kRecursiveDoubling:
      return "rd";
    case Algorithm::kTree:
      return "tree";
    case Algorithm::kPairwise:
      return "pairwise";
    case Algorithm::kHierarchical:
      return "hier";
    case Algorithm::kWindow:
      return "window";
  }
  return "?";
}

Result<Algorithm> ParseAlgorithm(std::string_view text) {
  if (text == "auto") return Algorithm::kAuto;
  if (text == "ring") return Algorithm::kRing;
  if (text == "rd" || text == "recursive_doubling") return Algorithm::kRecursiveDoubling;
  if (text == "tree") return Algorithm::kTree;
  if (text == "pairwise") return Algorithm::kPairwise;
  if (text == "hier" || text == "hierarchical") return Algorithm::kHierarchical;
  if (text == "window") return Algorithm::kWindow;
  return InvalidArgument(
      "unknown algorithm '{}'; expected auto, ring, rd, tree, pairwise, "
      "hier or window",
      text);
}

namespace {
// What each operation can run, besides kAuto. Static tables: PickAlgorithm asks on every
// collective call when RAILYARD_COMM_ALGO is set.
std::span<const Algorithm> AlgorithmsOf(std::string_view operation) {
  using A = Algorithm;
  static constexpr A kAllreduce[] = {A::kRing, A::kRecursiveDoubling, A::kHierarchical, A::kWindow};
  static constexpr A kBroadcast[] = {A::kTree, A::kRing};
  static constexpr A kTreeOnly[] = {A::kTree};
  static constexpr A kRingOnly[] = {A::kRing};
  static constexpr A kPairwiseOnly[] = {A::kPairwise};
  if (operation == "allreduce") return kAllreduce;
  if (operation == "broadcast") return kBroadcast;
  if (operation == "reduce") return kTreeOnly;
  if (operation == "reduce_scatter" || operation == "allgather") return kRingOnly;
  if (operation == "alltoall") return kPairwiseOnly;
  return {};
}
}  // namespace

Status CheckAlgorithm(std::string_view operation, Algorithm algorithm) {
  if (algorithm == Algorithm::kAuto) return Status::Ok();
  std::span<const Algorithm> can = AlgorithmsOf(operation);
  if (std::find(can.begin(), can.end(), algorithm) != can.end()) return Status::Ok();
  std::string list = "auto";
  for (Algorithm a : can) list += fmt::format(", {}", AlgorithmName(a));
  return InvalidArgument("{} cannot run algorithm '{}'; expected {}", operation,
                         AlgorithmName(algorithm), list);
}

Result<CommOptions> CommOptions::FromEnvironment() {
  CommOptions o;
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v ? v : "";
  };
  if (auto v = env("RAILYARD_COMM_TIMEOUT"); !v.empty()) {
    auto d = base::ParseDuration(v);
    if (!d.ok()) return d.status().WithContext("RAILYARD_COMM_TIMEOUT");
    o.timeout = std::chrono::duration_cast<std::chrono::milliseconds>(*d);
  }
  if (auto v = env("RAILYARD_COMM_ALGO"); !v.empty()) {
    auto a = ParseAlgorithm(v);
    if (!a.ok()) return a.status().WithContext("RAILYARD_COMM_ALGO");
    o.algorithm = *a;
  }
  if (auto v = env("RAILYARD_COMM_CHECK"); !v.empty()) {
    if (v != "0" && v != "1") {
      return InvalidArgument("RAILYARD_COMM_CHECK: '{}' is not 0 or 1", v);
    }
    o.check_consistency = v == "1";
  }
  return o;
}

CommunicatorImpl::CommunicatorImpl(std::unique_ptr<net::Transport> transport, CommOptions options)
    : transport_(std::move(transport)), options_(std::move(options)) {
  rank_ = transport_->rank();
  size_ = transport_->size();
}

Result<std::unique_ptr<Communicator>> Communicator::Create(
    std::unique_ptr<net::Transport> transport, CommOptions options) {
  if (!transport) return InvalidArgument("communicator: no transport");
  int n = transport->size();
  if (options.ring_order.empty()) {
    options.ring_order.resize(n);
    std::iota(options.ring_order.begin(), options.ring_order.end(), 0);
  }
  std::vector<int> sorted = options.ring_order;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < n; ++i) {
    if (static_cast<int>(sorted.size()) != n || sorted[i] != i) {
      return InvalidArgument("communicator: ring order must list each of the {} ranks once", n);
    }
  }
  auto c = std::make_unique<CommunicatorImpl>(std::move(transport), std::move(options));
  // Why two sizes: on 4 virtual hosts with 1 Gbit links, busbw MB/s at 1/2/4/16 MiB: 1 MiB
  // pieces 101/102/104/108, 128 KiB 107-111 at every size (64 KiB the same). On one host
  // over loopback the ring is CPU-bound and 64 KiB pieces halved busbw at 1 MiB.
  bool one_host = true;
  for (int r = 1; r < n; ++r) one_host = one_host && c->peer(r).host == c->peer(0).host;
  c->piece_bytes_ = c->options_.piece_bytes;
  if (c->piece_bytes_ == 0) c->piece_bytes_ = one_host ? kPieceOneHost : kPieceAcrossHosts;
  // The ring allreduce's waves (ring.cc): one segment at a time on one host, where the ring
  // is bound by CPU and memory and forwarding a piece while it is in cache pays (tcp, 64 MiB
  // busbw: 2 ranks 2.54 GB/s step by step against 3.33, 4 ranks 1.26 against 1.61); every
  // segment at once across hosts, where a link's latency is hidden only by many pieces in
  // flight (1 Gbit virtual links: 114-116 MB/s against 104-109). docs/performance.md.
  c->wave_segments_ = one_host ? 1 : 0;
  c->position_.resize(n);
  for (int i = 0; i < n; ++i) c->position_[c->options_.ring_order[i]] = i;
  return std::unique_ptr<Communicator>(std::move(c));
}

CommunicatorImpl::~CommunicatorImpl() {
  {
    std::lock_guard lock(queue_mu_);
    stopping_ = true;
  }
  queue_cv_.notify_all();
  if (worker_.joinable()) worker_.join();
}

Status CommunicatorImpl::CheckConsistency(OpContext& ctx, const OpDesc& desc) {
  if (size_ == 1) return Status::Ok();
  WireDesc mine{static_cast<uint32_t>(desc.kind),
                static_cast<uint32_t>(desc.type),
                static_cast<uint32_t>(desc.op),
                desc.root,
                desc.count,
                seq_};
  WireDesc theirs{};
  int next = (rank_ + 1) % size_, prev = (rank_ - 1 + size_) % size_;
  RY_ASSIGN_OR_RETURN(auto q, ctx.Recv(prev, kCheckPhase, &theirs, sizeof theirs));
  RY_ASSIGN_OR_RETURN(auto s, ctx.Send(next, kCheckPhase, &mine, sizeof mine));
  std::vector<net::Request> reqs = {q, s};
  RY_RETURN_IF_ERROR(ctx.WaitAll(reqs));
  if (std::memcmp(&mine, &theirs, sizeof mine) == 0) return Status::Ok();
  OpDesc other{static_cast<OpKind>(theirs.kind), static_cast<DataType>(theirs.type % 7),
               static_cast<ReduceOp>(theirs.op % 5), theirs.root, theirs.count};
  return FailedPrecondition("mismatched collective calls: {} called {}, while {} called {}",
                            net::DescribePeer(peer(prev)),
                            other.Describe(theirs.seq, Algorithm::kAuto),
                            net::DescribePeer(peer(rank_)), desc.Describe(seq_, Algorithm::kAuto));
}

// Turns a transport error into one that names the culprit, and tells every rank.
Status CommunicatorImpl::Attribute(const OpDesc& desc, Status error,
                                   base::Clock::time_point start) {
  std::string what = desc.Describe(desc.collective ? seq_ : p2p_seq_, Algorithm::kAuto);
  if (!options_.group_name.empty()) {
    // Peers carry their job-wide ranks when the bootstrap built the group; otherwise the
    // numbers in the message are the group's own, and the message must say so.
    what += fmt::format(" among the {}{}", options_.group_name,
                        peer(rank_).job_rank >= 0 ? "" : " (rank numbers within that group)");
  }
  double elapsed = base::SecondsSince(start);
  if (error.code() == StatusCode::kAborted) {
    // Another rank found the culprit and said so; its message names it. Pass it on: the
    // aborting rank may not reach everyone (it may need new connections, or die), and a
    // peer that sees this rank leave before the news arrives would blame this rank.
    transport_->Abort(error.message(), base::Deadline::After(kAbortBudget));
    return Aborted("{} aborted after {:.2f} s: {}", what, elapsed, error.message());
  }
  std::string culprit;
  StatusCode code = error.code();
  if (code == StatusCode::kDeadlineExceeded) {
    std::vector<int> others;
    for (int r = 0; r < size_; ++r) {
      if (r != rank_) others.push_back(r);
    }
    auto results = transport_->Probe(others, base::Deadline::After(kProbeBudget));
    std::string activities;
    for (const auto& pr : results) {
      const std::string who = net::DescribePeer(peer(pr.rank));
      if (pr.state == net::ProbeResult::State::kDead) {
        culprit += fmt::format("{}{} is gone: {}", culprit.empty() ? "" : "; ", who, pr.detail);
      } else if (pr.state == net::ProbeResult::State::kUnresponsive) {
        culprit +=
            fmt::format("{}{} is unresponsive: {}", culprit.empty() ? "" : "; ", who, pr.detail);
      } else if (activities.size() < 2000) {
        activities += fmt::format("; rank {}: {}", net::JobRank(peer(pr.rank)), pr.activity);
      }
    }
    if (culprit.empty()) {
      culprit = fmt::format(
          "no rank failed: every rank answered a probe, so the ranks are "
          "probably not calling the same operations (try "
          "RAILYARD_COMM_CHECK=1){}. Transport: {}",
          activities, error.message());
    }
  } else {
    culprit = error.message();
  }
  std::string reason =
      fmt::format("{} on rank {} failed: {}", what, net::JobRank(peer(rank_)), culprit);
  transport_->Abort(reason, base::Deadline::After(kAbortBudget));
  kLog.Error("{}", reason);
  return Status(code, fmt::format("{} failed after {:.2f} s (deadline {}): {}", what, elapsed,
                                  base::FormatDuration(options_.timeout), culprit));
}

Status CommunicatorImpl::Run(const OpDesc& desc, const CollectiveOptions& options,
                             const std::function<Status(OpContext&)>& body) {
  std::lock_guard lock(op_mu_);
  if (!failed_.ok()) return failed_;
  auto timeout = options.timeout.value_or(options_.timeout);
  auto start = base::Clock::now();
  OpContext ctx;
  ctx.transport = transport_.get();
  ctx.rank = rank_;
  ctx.size = size_;
  ctx.order = &options_.ring_order;
  ctx.position = &position_;
  ctx.tag_base = seq_ << 8;
  ctx.deadline = base::Deadline::After(timeout);
  ctx.piece_bytes = piece_bytes_;
  ctx.wave_segments = wave_segments_;
  ctx.reduce_on_receive = options_.reduce_on_receive;
  ctx.scratch = &scratch_;
  // Point-to-point calls happen on some ranks only: they must not advance the collective
  // sequence (which every rank shares and which names the tags).
  uint64_t& counter = desc.collective ? seq_ : p2p_seq_;
  transport_->SetActivity(fmt::format("in {}", desc.Describe(counter, Algorithm::kAuto)));
  Status st;
  if (options_.check_consistency && desc.collective) st = CheckConsistency(ctx, desc);
  if (st.ok()) st = body(ctx);
  if (!st.ok()) {
    if (st.code() == StatusCode::kFailedPrecondition || st.code() == StatusCode::kInvalidArgument) {
      // A local finding (mismatch): tell the others, keep the message.
      std::string reason =
          fmt::format("{}: {}", desc.Describe(counter, Algorithm::kAuto), st.message());
      transport_->Abort(reason, base::Deadline::After(kAbortBudget));
      failed_ = Status(st.code(), reason);
    } else {
      failed_ = Attribute(desc, st, start);
    }
    ++counter;
    transport_->SetActivity("failed");
    // Ranks of this host may be waiting inside the host-local communicator for this one:
    // tell them, with the finding, instead of letting them time out and blame this rank.
    if (local_) local_->transport().Abort(failed_.message(), base::Deadline::After(kAbortBudget));
    if (leaders_) {
      leaders_->transport().Abort(failed_.message(), base::Deadline::After(kAbortBudget));
    }
    return failed_;
  }
  ++counter;
  transport_->SetActivity(
      fmt::format("idle after {} #{}", desc.collective ? "collective" : "send/recv", counter - 1));
  return Status::Ok();
}

// The call's algorithm if it names one (INVALID_ARGUMENT if `operation` cannot run it), else
// the communicator's default where `operation` can run that (RAILYARD_COMM_ALGO is one
// choice for the whole job, so collectives it does not fit keep kAuto), else kAuto.
Result<Algorithm> CommunicatorImpl::PickAlgorithm(std::string_view operation,
                                                  const CollectiveOptions& options) const {
  if (options.algorithm != Algorithm::kAuto) {
    RY_RETURN_IF_ERROR(CheckAlgorithm(operation, options.algorithm));
    return options.algorithm;
  }
  if (CheckAlgorithm(operation, options_.algorithm).ok()) return options_.algorithm;
  return Algorithm::kAuto;
}

Status CommunicatorImpl::Send(const void* data, size_t count, DataType type, int peer_rank,
                              CollectiveOptions options) {
  DrainAsync();
  OpDesc d{OpKind::kSend, type, ReduceOp::kSum, peer_rank, count, false};
  if (peer_rank < 0 || peer_rank >= size_) {
    return InvalidArgument("send: peer rank {} is outside world size {}", peer_rank, size_);
  }
  return Run(d, options, [&](OpContext& c) -> Status {
    // Point-to-point messages share one tag space (phase 255, sequence 0), so that they
    // match by call order per peer whatever collectives ran in between on either side.
    RY_ASSIGN_OR_RETURN(auto s, transport_->PostSend(peer_rank, 0xff, data, count * SizeOf(type)));
    return c.Wait(s);
  });
}

Status CommunicatorImpl::Recv(void* data, size_t count, DataType type, int peer_rank,
                              CollectiveOptions options) {
  DrainAsync();
  OpDesc d{OpKind::kRecv, type, ReduceOp::kSum, peer_rank, count, false};
  if (peer_rank < 0 || peer_rank >= size_) {
    return InvalidArgument("recv: peer rank {} is outside world size {}", peer_rank, size_);
  }
  return Run(d, options, [&](OpContext& c) -> Status {
    RY_ASSIGN_OR_RETURN(auto q, transport_->PostRecv(peer_rank, 0xff, data, count * SizeOf(type)));
    RY_RETURN_IF_ERROR(c.Wait(q));
    size_t got = transport_->ReceivedBytes(q);
    if (got != count * SizeOf(type)) {
      return DataLoss("recv from {}: expected {} bytes, got {}", net::DescribePeer(peer(peer_rank)),
                      count * SizeOf(type), got);
    }
    return Status::Ok();
  });
}

Status CommunicatorImpl::Barrier(CollectiveOptions options) {
  DrainAsync();
  RY_RETURN_IF_ERROR(PickAlgorithm("barrier", options).status());
  return Run({OpKind::kBarrier}, options, [&](OpContext& c) { return DisseminationBarrier(c); });
}

Status CommunicatorImpl::Broadcast(void* data, size_t count, DataType type, int root,
                                   CollectiveOptions options) {
  DrainAsync();
  if (root < 0 || root >= size_) {
    return InvalidArgument("broadcast: root {} is outside world size {}", root, size_);
  }
  OpDesc d{OpKind::kBroadcast, type, ReduceOp::kSum, root, count};
  size_t bytes = count * SizeOf(type);
  RY_ASSIGN_OR_RETURN(Algorithm a, PickAlgorithm("broadcast", options));
  if (a == Algorithm::kAuto)
    a = bytes <= options_.small_message_bytes ? Algorithm::kTree : Algorithm::kRing;
  return Run(d, options, [&](OpContext& c) {
    char* p = static_cast<char*>(data);
    return a == Algorithm::kRing ? ChainBroadcast(c, p, bytes, root)
                                 : TreeBroadcast(c, p, bytes, root);
  });
}

Status CommunicatorImpl::Reduce(const void* send, void* recv, size_t count, DataType type,
                                ReduceOp op, int root, CollectiveOptions options) {
  DrainAsync();
  if (root < 0 || root >= size_) {
    return InvalidArgument("reduce: root {} is outside world size {}", root, size_);
  }
  OpDesc d{OpKind::kReduce, type, op, root, count};
  RY_RETURN_IF_ERROR(PickAlgorithm("reduce", options).status());
  return Run(d, options, [&](OpContext& c) {
    return TreeReduce(c, static_cast<const char*>(send), static_cast<char*>(recv), count, type, op,
                      root);
  });
}

Status CommunicatorImpl::Allreduce(const void* send, void* recv, size_t count, DataType type,
                                   ReduceOp op, CollectiveOptions options) {
  DrainAsync();
  OpDesc d{OpKind::kAllreduce, type, op, -1, count};
  RY_ASSIGN_OR_RETURN(Algorithm a, PickAlgorithm("allreduce", options));
  const bool window = transport_->shared_window() != nullptr;
  if (a == Algorithm::kAuto && local_ == nullptr) {
    // Ring needs at least an element per rank to be worth its 2(n-1) steps. The shared
    // window (shm) moves fewer bytes than the ring from 3 ranks on, and for small vectors
    // needs one wait where recursive doubling needs log2(n) exchanges (see window.cc).
    const bool small =
        count * SizeOf(type) <= options_.small_message_bytes || count < static_cast<size_t>(size_);
    a = window && (small || size_ >= 3) ? Algorithm::kWindow
        : small                         ? Algorithm::kRecursiveDoubling
                                        : Algorithm::kRing;
  }
  if (a == Algorithm::kHierarchical && local_ == nullptr) a = Algorithm::kRing;
  if (a == Algorithm::kWindow && (!window || size_ < 2)) a = Algorithm::kRing;
  if (a == Algorithm::kAuto) {
    a = local_ != nullptr ? Algorithm::kHierarchical : Algorithm::kRing;
  }
  return Run(d, options, [&](OpContext& c) -> Status {
    auto* s = static_cast<const char*>(send);
    auto* r = static_cast<char*>(recv);
    if (a == Algorithm::kHierarchical) {
      // Sum inside the host, combine across hosts, share inside the host; avg divides once,
      // by the whole job's size, at the end.
      ReduceOp inner = op == ReduceOp::kAvg ? ReduceOp::kSum : op;
      CollectiveOptions sub{
          .timeout = std::chrono::duration_cast<std::chrono::milliseconds>(c.deadline.Remaining())};
      RY_RETURN_IF_ERROR(local_->Reduce(s, r, count, type, inner, 0, sub));
      if (leaders_) RY_RETURN_IF_ERROR(leaders_->Allreduce(r, r, count, type, inner, sub));
      RY_RETURN_IF_ERROR(local_->Broadcast(r, count, type, 0, sub));
      FinishAverage(type, op, r, count, size_);
      return Status::Ok();
    }
    if (a == Algorithm::kWindow) return WindowAllreduce(c, s, r, count, type, op);
    return a == Algorithm::kRing ? RingAllreduce(c, s, r, count, type, op)
                                 : RecursiveDoublingAllreduce(c, s, r, count, type, op);
  });
}

Status CommunicatorImpl::ReduceScatter(const void* send, void* recv, size_t recv_count,
                                       DataType type, ReduceOp op, CollectiveOptions options) {
  DrainAsync();
  OpDesc d{OpKind::kReduceScatter, type, op, -1, recv_count};
  RY_RETURN_IF_ERROR(PickAlgorithm("reduce_scatter", options).status());
  return Run(d, options, [&](OpContext& c) {
    return RingReduceScatter(c, static_cast<const char*>(send), static_cast<char*>(recv),
                             recv_count, type, op);
  });
}

Status CommunicatorImpl::Allgather(const void* send, void* recv, size_t send_count, DataType type,
                                   CollectiveOptions options) {
  DrainAsync();
  OpDesc d{OpKind::kAllgather, type, ReduceOp::kSum, -1, send_count};
  RY_RETURN_IF_ERROR(PickAlgorithm("allgather", options).status());
  return Run(d, options, [&](OpContext& c) {
    return RingAllgather(c, static_cast<const char*>(send), static_cast<char*>(recv),
                         send_count * SizeOf(type));
  });
}

Status CommunicatorImpl::Alltoall(const void* send, void* recv, size_t count, DataType type,
                                  CollectiveOptions options) {
  DrainAsync();
  if (send == recv && size_ > 1 && count > 0) {
    return InvalidArgument("alltoall: in-place (send == recv) is not supported; pass two buffers");
  }
  OpDesc d{OpKind::kAlltoall, type, ReduceOp::kSum, -1, count};
  RY_RETURN_IF_ERROR(PickAlgorithm("alltoall", options).status());
  return Run(d, options, [&](OpContext& c) {
    return PairwiseAlltoall(c, static_cast<const char*>(send), static_cast<char*>(recv),
                            count * SizeOf(type));
  });
}

void CommunicatorImpl::AttachHierarchy(std::unique_ptr<Communicator> local,
                                       std::unique_ptr<Communicator> leaders) {
  local_ = std::move(local);
  leaders_ = std::move(leaders);
}

void CommunicatorImpl::Abort(std::string_view reason) {
  std::string why = fmt::format("rank {} called abort: {}", rank_, reason);
  transport_->Abort(why, base::Deadline::After(kAbortBudget));
  // Ranks of this host may be waiting inside the hierarchical allreduce's sub-groups, whose
  // transports are separate: tell them too, or they would time out and blame this rank.
  if (local_) local_->transport().Abort(why, base::Deadline::After(kAbortBudget));
  if (leaders_) leaders_->transport().Abort(why, base::Deadline::After(kAbortBudget));
}

std::shared_ptr<Work> CommunicatorImpl::Submit(std::function<Status()> fn) {
  auto work = std::make_shared<WorkImpl>();
  std::lock_guard lock(queue_mu_);
  if (!worker_.joinable()) worker_ = std::thread([this] { WorkerLoop(); });
  ++submitted_;
  queue_.push_back([work, fn = std::move(fn)] { work->Finish(fn()); });
  queue_cv_.notify_all();
  return work;
}

// Blocking calls wait for earlier non-blocking ones: every rank must see the same order.
void CommunicatorImpl::DrainAsync() {
  if (std::this_thread::get_id() == worker_.get_id()) return;
  std::unique_lock lock(queue_mu_);
  queue_cv_.wait(lock, [&] { return finished_ == submitted_; });
}

void CommunicatorImpl::WorkerLoop() {
  std::unique_lock lock(queue_mu_);
  for (;;) {
    queue_cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;
    auto task = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    task();
    lock.lock();
    ++finished_;
    queue_cv_.notify_all();
  }
}

std::shared_ptr<Work> CommunicatorImpl::AllreduceAsync(const void* send, void* recv, size_t count,
                                                       DataType type, ReduceOp op,
                                                       CollectiveOptions options) {
  return Submit([=, this] { return Allreduce(send, recv, count, type, op, options); });
}

std::shared_ptr<Work> CommunicatorImpl::AllgatherAsync(const void* send, void* recv,
                                                       size_t send_count, DataType type,
                                                       CollectiveOptions options) {
  return Submit([=, this] { return Allgather(send, recv, send_count, type, options); });
}

std::shared_ptr<Work> CommunicatorImpl::BroadcastAsync(void* data, size_t count, DataType type,
                                                       int root, CollectiveOptions options) {
  return Submit([=, this] { return Broadcast(data, count, type, root, options); });
}

std::shared_ptr<Work> CommunicatorImpl::ReduceAsync(const void* send, void* recv, size_t count,
                                                    DataType type, ReduceOp op, int root,
                                                    CollectiveOptions options) {
  return Submit([=, this] { return Reduce(send, recv, count, type, op, root, options); });
}

std::shared_ptr<Work> CommunicatorImpl::ReduceScatterAsync(const void* send, void* recv,
                                                           size_t recv_count, DataType type,
                                                           ReduceOp op, CollectiveOptions options) {
  return Submit([=, this] { return ReduceScatter(send, recv, recv_count, type, op, options); });
}

std::shared_ptr<Work> CommunicatorImpl::AlltoallAsync(const void* send, void* recv, size_t count,
                                                      DataType type, CollectiveOptions options) {
  return Submit([=, this] { return Alltoall(send, recv, count, type, options); });
}

std::shared_ptr<Work> CommunicatorImpl::BarrierAsync(CollectiveOptions options) {
  return Submit([=, this] { return Barrier(options); });
}

std::shared_ptr<Work> CommunicatorImpl::SendAsync(const void* data, size_t count, DataType type,
                                                  int peer_rank, CollectiveOptions options) {
  return Submit([=, this] { return Send(data, count, type, peer_rank, options); });
}

std::shared_ptr<Work> CommunicatorImpl::RecvAsync(void* data, size_t count, DataType type,
                                                  int peer_rank, CollectiveOptions options) {
  return Submit([=, this] { return Recv(data, count, type, peer_rank, options); });
}

}  // namespace railyard::comm
