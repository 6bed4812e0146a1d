// tcp backend: see tcp_transport.h for the model.
//
// Wire, per connection:
//   the secret handshake of net/handshake.h, proven both ways; its context is HelloContext
//     (which rank connects to which, on which stream), so a proof holds for one pair only
//   connector -> acceptor  frames: FrameHeader + payload (host byte order), until close.
// The connector sends no frame before the acceptor has proven the secret, so a listener
// that is not the rank it expects (a stale or forged address) never receives its data.
//
// Matching. Message m from a peer is split into chunks; chunk 0 always travels on stream 0,
// other chunks on streams 1..k-1. Stream 0 therefore announces messages in send order, and
// a message is matched to a receive when it is announced: FIFO per (peer, tag) holds
// whatever the streams' relative speeds. A chunk that arrives on stream s > 0 before its
// message was announced "parks" its stream (no reads) until stream 0 catches up; stream 0
// never parks (an announced message without a posted receive is read into a buffer of its
// own), so parking cannot deadlock. Those buffers hold at most kMaxUnexpectedBytes in all:
// a peer that announces more fails with an error naming it, before anything is allocated.
#include "railyard/net/tcp/tcp_transport.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <bit>
#include <cerrno>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "railyard/base/files.h"
#include "railyard/base/hmac.h"
#include "railyard/base/logging.h"
#include "railyard/net/buffer_pool.h"
#include "railyard/net/handshake.h"
#include "railyard/net/interfaces.h"
#include "railyard/net/internal/sockaddr.h"
#include "railyard/net/peer_directory.h"
#include "railyard/net/spin_budget.h"
#include "railyard/net/tcp/congestion.h"

namespace railyard::net {
namespace {

const base::Logger kLog("net");

constexpr uint64_t kMaxMessageBytes = uint64_t{1} << 44;
// Messages that arrive before their receive is posted wait in buffers of their own; this is
// the most those may hold at once, so that a peer (buggy or hostile, but knowing the secret)
// cannot make a rank allocate what it announces. The collectives post receives ahead and
// send in pieces of at most a few MiB; only point-to-point messages of this size sent well
// ahead of their receive come near it.
constexpr uint64_t kMaxUnexpectedBytes = uint64_t{1} << 30;
constexpr uint64_t kMaxControlBytes = 64 << 10;
// Messages at least this long are split across streams, in chunks no smaller than this.
constexpr size_t kMinChunkBytes = 256 << 10;
// Payloads this long are read straight into their destination, not through the rx buffer.
constexpr size_t kDirectReadBytes = 16 << 10;
constexpr size_t kRxBufferBytes = 64 << 10;
// A wait whose requests are all this short polls twice per yield instead of once. Its
// answer is usually already on its way from a rank on another core, and a second poll
// catches it without handing the core to a rank that is itself only waiting: with 4 ranks
// on 2 cores, 31% of a 4 KiB allreduce's time went to switches out of sched_yield, and two
// polls per yield cut that allreduce from 84 to 59 us (2 ranks, 4-32 KiB: 17 to 15 us).
// Larger waits yield at every poll: a rank sharing the core has copying to do, and two polls
// per yield in every wait cost a 4-rank 16 MiB allreduce a fifth of its busbw (1.32 GB/s
// against 1.63).
constexpr size_t kSmallWaitBytes = 128 << 10;
// Most polls at the start of a wait before sleeping in epoll, each an epoll_wait(0) followed
// by sched_yield (so a peer waiting for this core runs; every second poll for small waits,
// see kSmallWaitBytes); RAILYARD_TCP_SPIN sets the count, 0
// sleeps at once. Bounded: an idle wait sleeps after about 100 polls, and fewer once waits
// keep ending in sleep (SpinBudget). Polling first because the answer to a small message is
// usually microseconds away: a 4 KiB allreduce on 2 cores takes 24 us with 2 ranks and 110
// with 4, against 50 and 170 when a wait sleeps at once. The yield matters: polling without
// it was slower than sleeping (59 and 240 us).
int SpinPolls() {
  static const int polls = [] {
    const char* v = std::getenv("RAILYARD_TCP_SPIN");
    return v != nullptr ? std::max(0, std::atoi(v)) : 100;
  }();
  return polls;
}

enum FrameType : uint32_t { kData = 1, kPing = 2, kPong = 3, kAbort = 4, kBye = 5 };

// The handshake's context: both proofs cover it.
struct HelloContext {
  int32_t from;  // the connecting rank
  int32_t to;    // the rank it means to reach
  uint32_t stream;
  uint32_t streams;
};
static_assert(sizeof(HelloContext) == 16);

constexpr HandshakeProtocol kTcpHandshake = {.magic = 0x52595432,  // "RYT2"
                                             .version = 2,
                                             .domain = "railyard-tcp",
                                             .acceptor = "a Railyard rank of this job",
                                             .context_bytes = sizeof(HelloContext)};
struct FrameHeader {
  uint32_t type;
  uint32_t reserved;
  uint64_t tag;
  uint64_t msg_id;  // data: per (sender, receiver) sequence; ping/pong: the probe nonce
  uint64_t total;   // data: message length
  uint64_t offset;  // data: this chunk's offset in the message
  uint64_t length;  // payload bytes following this header
};
static_assert(sizeof(FrameHeader) == 48);

void TuneSocket(int fd, size_t buffer_bytes) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (buffer_bytes > 0) {
    int b = static_cast<int>(std::min<size_t>(buffer_bytes, 1 << 30));
    setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &b, sizeof b);
    setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &b, sizeof b);
  }
}

// A posted send or receive.
struct Req {
  bool is_send = false;
  int peer = -1;
  Tag tag = 0;
  char* buf = nullptr;
  size_t cap = 0;       // receive: posted length; send: message length
  size_t received = 0;  // receive: message length once matched
  int chunks_left = 0;  // send: chunks not yet handed to the kernel
  uint64_t msg_id = 0;  // receive: the matched message, 0 = unmatched
  bool matched = false;
  bool done = false;
  Transport::Consumer consume;  // a consuming receive (PostRecvConsume): `buf` is null
  size_t granule = 1;
};

// One chunk queued on an outbound stream.
struct SendChunk {
  uint64_t req = 0;  // 0 for control frames
  FrameHeader hdr{};
  const char* data = nullptr;
  std::string owned;  // control payloads, and sends abandoned by their caller
  bool owns = false;  // payload is `owned`, not `data`
  size_t sent = 0;    // bytes of header + payload written
};

struct OutStream {
  base::UniqueFd fd;
  enum State { kIdle, kConnecting, kAwaitChallenge, kReady } state = kIdle;
  std::optional<Handshake> handshake;
  char challenge[kChallengeBytes];
  size_t challenge_got = 0;
  std::deque<SendChunk> queue;
  bool want_out = false;
};

struct InStream;

// A message announced by a peer (its chunk 0 arrived on stream 0).
struct InMessage {
  Tag tag = 0;
  uint64_t total = 0;
  uint64_t received = 0;
  char* dst = nullptr;
  PooledBuffer unexpected;      // when no receive was posted at announcement
  uint64_t held = 0;            // bytes counted against kMaxUnexpectedBytes
  uint64_t req = 0;             // bound receive, 0 = none yet
  bool orphan = false;          // its receive was abandoned: drop when complete
  Transport::Consumer consume;  // bound to a consuming receive (no dst, no unexpected)
  size_t granule = 1;
};

struct InStream {
  uint64_t key = 0;  // its epoll key and in_streams_ index
  base::UniqueFd fd;
  std::string remote;  // address, for logs
  int peer = -1;       // -1 until the handshake proved the secret
  uint32_t index = 0;
  std::optional<Handshake> handshake;  // until proven
  std::string handshake_in;            // the hello, then the answer, as they arrive
  bool challenged = false;
  HelloContext claim{};
  // Buffered reads.
  std::unique_ptr<char[]> rx;
  size_t rx_begin = 0, rx_end = 0;
  // Frame being read.
  FrameHeader hdr{};
  size_t hdr_got = 0;
  bool in_payload = false;
  uint64_t payload_done = 0;
  char* payload_dst = nullptr;  // nullptr while parked or for control frames
  // Or the message whose consumer takes the payload; a unit split between two reads waits in
  // `joiner` (frames start on 64-byte boundaries, so units never straddle frames).
  InMessage* payload_msg = nullptr;
  UnitJoiner joiner;
  std::string control;  // control payload
  bool parked = false;
  bool closed = false;
};

struct PeerState {
  PeerInfo info;
  sockaddr_in addr{};
  std::vector<OutStream> out;
  uint64_t next_msg_id = 1;
  std::map<uint64_t, InMessage> messages;  // announced, not complete or not bound
  std::deque<uint64_t> unbound;            // announced messages without a receive, in order
  std::deque<uint64_t> waiting_recvs;      // posted receives without a message, in order
  std::vector<uint64_t> parked;            // streams (keys) waiting for an announcement
  Status failure;                          // set once: every request with this peer fails
  bool said_bye = false;
  std::string pong_activity;
  uint64_t pong_nonce = 0;
};

class TcpTransport final : public Transport {
 public:
  explicit TcpTransport(TransportOptions options) : opt_(std::move(options)) {}
  ~TcpTransport() override;

  Status Listen();

  std::string_view name() const override { return "tcp"; }
  int rank() const override { return opt_.rank; }
  int size() const override { return opt_.size; }
  const PeerInfo& peer(int r) const override { return peers_[r].info; }
  Status Start(base::Deadline deadline) override;
  Result<Request> PostSend(int peer, Tag tag, const void* data, size_t len) override;
  Result<Request> PostRecv(int peer, Tag tag, void* data, size_t len) override;
  bool SupportsConsume() const override { return true; }
  Result<Request> PostRecvConsume(int peer, Tag tag, size_t len, size_t granule,
                                  Consumer consume) override;
  Status WaitAll(std::span<const Request> requests, base::Deadline deadline) override;
  size_t ReceivedBytes(Request request) const override;
  std::vector<ProbeResult> Probe(std::span<const int> ranks, base::Deadline deadline) override;
  void SetActivity(std::string activity) override { activity_ = std::move(activity); }
  void Abort(std::string_view reason, base::Deadline deadline) override;

 private:
  Status CheckUsable() const;
  Status CheckPeer(int peer) const;
  void FailPeer(int peer, Status why);
  void EnsureConnected(int peer);
  void StartConnect(int peer, uint32_t stream);
  void QueueControl(int peer, FrameType type, uint64_t nonce, std::string payload);
  void FlushStream(int peer, uint32_t stream);
  void SetWantOut(OutStream& s, bool want, uint64_t key);
  Status Poll(int timeout_ms);
  void HandleEvent(uint64_t key, uint32_t events);
  void Accept();
  void ReadInStream(InStream& in);
  bool ConsumeInStream(InStream& in);  // false when it needs more bytes or is parked
  bool BeginPayload(InStream& in);
  // Points a stream's payload at message m: its buffer, its unexpected buffer or its consumer.
  static void TargetPayload(InStream& in, InMessage& m);
  static void FeedConsumer(InStream& in, const char* data, size_t n);
  // Hands a whole message to a receive: copied, or given to its consumer.
  static void DeliverTo(Req& r, const char* data, size_t n);
  Result<Request> PostRecvImpl(int peer, Tag tag, void* data, size_t len, size_t granule,
                               Consumer consume);
  void FinishFrame(InStream& in);
  void Announce(int peer, const FrameHeader& hdr);
  void BindMessage(PeerState& p, uint64_t msg_id, uint64_t req_id);
  void CompleteRecvIfDone(PeerState& p, uint64_t msg_id);
  // Closes an inbound stream; its peer is failed with `why` (a protocol violation when
  // `violation`, else a lost connection).
  void CloseInStream(InStream& in, const std::string& why, bool violation = false);
  // The acceptor's side of the handshake on buffered bytes; false when it needs more bytes
  // or closed the stream.
  bool AuthenticateInStream(InStream& in);
  // Closes an unproven inbound stream without blaming a peer (dropped or timed out).
  void DropPending(uint64_t key, std::string_view why);
  void ExpirePending();
  // The connector's side once the acceptor's challenge is in.
  void AnswerChallenge(int peer, uint32_t stream);
  void ReleaseUnexpected(InMessage& m);
  void HandleAbortFlag(base::Deadline flush_deadline);
  void Abandon(uint64_t req_id);
  void SetReadInterest(InStream& in, bool want);
  std::string PendingDescription(std::span<const Request> requests) const;

  TransportOptions opt_;
  std::vector<PeerState> peers_;
  base::UniqueFd listen_fd_;
  sockaddr_in listen_addr_{};
  CongestionControl congestion_;
  base::UniqueFd epoll_fd_;
  base::UniqueFd wake_fd_;  // eventfd: Abort() from another thread
  std::string listen_address_;
  std::string nonce_prefix_;
  std::unordered_map<uint64_t, Req> reqs_;
  std::unordered_map<uint64_t, size_t> last_received_;  // completed receives' lengths
  std::vector<uint64_t> unparked_;  // streams with buffered bytes to consume again
  uint64_t next_req_ = 1;
  SpinBudget spin_{SpinPolls()};  // polls before a wait sleeps; under progress_mu_
  std::unordered_map<uint64_t, std::unique_ptr<InStream>> in_streams_;
  uint64_t next_in_key_ = 1;
  std::deque<std::pair<uint64_t, std::string>> self_queue_;  // (tag, data) sent to self
  BufferPool spare_;               // buffers of unexpected messages, for reuse
  uint64_t unexpected_bytes_ = 0;  // held by unexpected messages, at most kMaxUnexpectedBytes
  PendingHandshakes pending_;      // inbound streams (keys) still inside the handshake
  bool warned_full_ = false;
  Status failed_;
  std::string activity_ = "idle";
  std::mutex progress_mu_;  // held while a thread drives progress
  std::mutex abort_mu_;
  std::atomic<bool> abort_requested_{false};
  std::string abort_reason_;  // guarded by abort_mu_
  bool abort_sent_ = false;
};

// Epoll keys: listener, wake fd, outbound (peer, stream) and inbound streams.
constexpr uint64_t kListenKey = 1;
constexpr uint64_t kWakeKey = 2;
constexpr uint64_t kOutBit = uint64_t{1} << 62;
constexpr uint64_t kInBit = uint64_t{1} << 61;
uint64_t OutKey(int peer, uint32_t stream) {
  return kOutBit | (uint64_t(uint32_t(peer)) << 16) | stream;
}

TcpTransport::~TcpTransport() {
  // Tell connected peers we are leaving, best effort, without blocking: a BYE lets a peer
  // tell "finished" from "crashed" if it still waits for us.
  for (auto& p : peers_) {
    // Control frames travel on stream 0 only; the other streams just close.
    for (auto& s : std::span(p.out).first(std::min<size_t>(1, p.out.size()))) {
      if (s.state != OutStream::kReady || !s.queue.empty()) continue;
      FrameHeader h{};
      h.type = kBye;
      (void)!::send(s.fd.get(), &h, sizeof h, MSG_DONTWAIT | MSG_NOSIGNAL);
    }
  }
}

Status TcpTransport::Listen() {
  if (opt_.size < 1 || opt_.rank < 0 || opt_.rank >= opt_.size) {
    return InvalidArgument("tcp transport: rank {} is outside world size {}", opt_.rank, opt_.size);
  }
  if (opt_.store == nullptr) return InvalidArgument("tcp transport: no rendezvous store");
  if (opt_.streams_per_peer < 1 || opt_.streams_per_peer > 64) {
    return InvalidArgument("tcp transport: streams per peer must be 1..64, got {}",
                           opt_.streams_per_peer);
  }
  RY_ASSIGN_OR_RETURN(congestion_, CongestionControl::Parse(opt_.tcp_congestion));
  RY_RETURN_IF_ERROR(congestion_.Check());
  RY_ASSIGN_OR_RETURN(NetInterface iface, ChooseInterface(opt_.socket_ifname));
  listen_fd_.Reset(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!listen_fd_.valid()) return ErrnoStatus(errno, "tcp transport: socket");
  sockaddr_in a{};
  a.sin_family = AF_INET;
  if (inet_pton(AF_INET, iface.ipv4.c_str(), &a.sin_addr) != 1) {
    return Internal("tcp transport: interface {} has no usable IPv4 '{}'", iface.name, iface.ipv4);
  }
  if (::bind(listen_fd_.get(), reinterpret_cast<sockaddr*>(&a), sizeof a) != 0) {
    return ErrnoStatus(errno, fmt::format("tcp transport: bind {}", iface.ipv4));
  }
  if (::listen(listen_fd_.get(), SOMAXCONN) != 0) {
    return ErrnoStatus(errno, "tcp transport: listen");
  }
  socklen_t len = sizeof a;
  ::getsockname(listen_fd_.get(), reinterpret_cast<sockaddr*>(&a), &len);
  listen_address_ = internal::SockaddrText(a);
  listen_addr_ = a;
  epoll_fd_.Reset(::epoll_create1(EPOLL_CLOEXEC));
  wake_fd_.Reset(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
  if (!epoll_fd_.valid() || !wake_fd_.valid()) return ErrnoStatus(errno, "tcp transport: epoll");
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenKey;
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, listen_fd_.get(), &ev);
  ev.data.u64 = kWakeKey;
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, wake_fd_.get(), &ev);
  peers_ = std::vector<PeerState>(opt_.size);
  return Status::Ok();
}

Status TcpTransport::Start(base::Deadline deadline) {
  PeerInfo self;
  self.rank = opt_.rank;
  self.address = listen_address_;
  RY_ASSIGN_OR_RETURN(std::vector<PeerInfo> all,
                      ExchangePeerInfo(*opt_.store, opt_.key_prefix + "/tcp", opt_.rank, opt_.size,
                                       self, opt_.host, deadline));
  for (int r = 0; r < opt_.size; ++r) {
    peers_[r].info = all[r];
    peers_[r].info.job_rank = JobRankOf(opt_, r);
    peers_[r].out = std::vector<OutStream>(opt_.streams_per_peer);
    if (r == opt_.rank) continue;
    auto addr = internal::ParseIpv4HostPort(all[r].address);
    if (!addr.ok()) {
      return addr.status().WithContext(
          fmt::format("tcp transport: address published by {}", DescribePeer(all[r])));
    }
    peers_[r].addr = *addr;
  }
  kLog.Debug("rank {} listening on {}", opt_.rank, listen_address_);
  return Status::Ok();
}

Status TcpTransport::CheckUsable() const {
  if (!failed_.ok()) return failed_;
  return Status::Ok();
}

Status TcpTransport::CheckPeer(int peer) const {
  if (peer < 0 || peer >= opt_.size) {
    return InvalidArgument("tcp transport: peer rank {} is outside world size {}", peer, opt_.size);
  }
  if (peers_.empty() || (peer != opt_.rank && peers_[peer].info.rank < 0)) {
    return FailedPrecondition("tcp transport: Start() has not completed");
  }
  return Status::Ok();
}

void TcpTransport::FailPeer(int peer, Status why) {
  PeerState& p = peers_[peer];
  if (!p.failure.ok()) return;
  p.failure = Status(why.code(), fmt::format("{}: {}", DescribePeer(p.info), why.message()));
  kLog.Debug("{}", p.failure.message());
  for (auto& s : p.out) {
    if (s.fd.valid()) epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, s.fd.get(), nullptr);
    s.fd.Reset();
    s.queue.clear();
    s.state = OutStream::kIdle;
  }
}

Result<Request> TcpTransport::PostSend(int peer, Tag tag, const void* data, size_t len) {
  RY_RETURN_IF_ERROR(CheckUsable());
  RY_RETURN_IF_ERROR(CheckPeer(peer));
  uint64_t id = next_req_++;
  Req& r = reqs_[id];
  r.is_send = true;
  r.peer = peer;
  r.tag = tag;
  r.buf = const_cast<char*>(static_cast<const char*>(data));
  r.cap = len;
  if (peer == opt_.rank) {
    self_queue_.emplace_back(tag, std::string(static_cast<const char*>(data), len));
    r.done = true;
    // A receive from self may already be waiting.
    for (auto& [rid, rr] : reqs_) {
      if (!rr.is_send && rr.peer == peer && !rr.done && rr.tag == tag) {
        auto& [t, bytes] = self_queue_.front();
        (void)t;
        DeliverTo(rr, bytes.data(), std::min(bytes.size(), rr.cap));
        rr.received = bytes.size();
        rr.done = true;
        self_queue_.pop_front();
        break;
      }
    }
    return Request{id};
  }
  PeerState& p = peers_[peer];
  if (!p.failure.ok()) return p.failure;
  EnsureConnected(peer);
  uint64_t msg_id = p.next_msg_id++;
  size_t streams = p.out.size();
  size_t chunks = std::clamp<size_t>(len / kMinChunkBytes, 1, streams);
  // Chunks start on 64-byte boundaries, so no element of a consuming receive is split
  // between two streams.
  size_t base = len / chunks;
  if (base >= 64) base &= ~size_t{63};
  size_t off = 0;
  r.chunks_left = static_cast<int>(chunks);
  for (size_t c = 0; c < chunks; ++c) {
    size_t n = c + 1 == chunks ? len - off : base;
    SendChunk ch;
    ch.req = id;
    ch.hdr.type = kData;
    ch.hdr.tag = tag;
    ch.hdr.msg_id = msg_id;
    ch.hdr.total = len;
    ch.hdr.offset = off;
    ch.hdr.length = n;
    ch.data = static_cast<const char*>(data) + off;
    p.out[c].queue.push_back(std::move(ch));
    off += n;
    FlushStream(peer, static_cast<uint32_t>(c));
  }
  return Request{id};
}

Result<Request> TcpTransport::PostRecvConsume(int peer, Tag tag, size_t len, size_t granule,
                                              Consumer consume) {
  if (!std::has_single_bit(granule) || granule > 16 || !consume) {
    return InvalidArgument(
        "tcp transport: a consuming receive needs a consumer and a granule "
        "of 1, 2, 4, 8 or 16 bytes, got {}",
        granule);
  }
  return PostRecvImpl(peer, tag, nullptr, len, granule, std::move(consume));
}

Result<Request> TcpTransport::PostRecv(int peer, Tag tag, void* data, size_t len) {
  return PostRecvImpl(peer, tag, data, len, 1, nullptr);
}

Result<Request> TcpTransport::PostRecvImpl(int peer, Tag tag, void* data, size_t len,
                                           size_t granule, Consumer consume) {
  RY_RETURN_IF_ERROR(CheckUsable());
  RY_RETURN_IF_ERROR(CheckPeer(peer));
  uint64_t id = next_req_++;
  Req& r = reqs_[id];
  r.peer = peer;
  r.tag = tag;
  r.buf = static_cast<char*>(data);
  r.cap = len;
  r.consume = std::move(consume);
  r.granule = granule;
  if (peer == opt_.rank) {
    for (auto it = self_queue_.begin(); it != self_queue_.end(); ++it) {
      if (it->first != tag) continue;
      if (it->second.size() > len) {
        return DataLoss(
            "tcp transport: rank {} sent itself {} bytes with tag {:#x}, receive "
            "posted for {}",
            peer, it->second.size(), tag, len);
      }
      DeliverTo(r, it->second.data(), it->second.size());
      r.received = it->second.size();
      r.done = true;
      self_queue_.erase(it);
      break;
    }
    return Request{id};
  }
  PeerState& p = peers_[peer];
  for (auto it = p.unbound.begin(); it != p.unbound.end(); ++it) {
    if (p.messages[*it].tag != tag) continue;
    uint64_t msg_id = *it;
    p.unbound.erase(it);
    BindMessage(p, msg_id, id);
    return Request{id};
  }
  p.waiting_recvs.push_back(id);
  return Request{id};
}

// Binds an announced message to a posted receive.
void TcpTransport::BindMessage(PeerState& p, uint64_t msg_id, uint64_t req_id) {
  InMessage& m = p.messages[msg_id];
  Req& r = reqs_[req_id];
  if (m.total > r.cap) {
    // Not bound: the receive's buffer is too small to ever be written, and the message is
    // dropped (the peer is failed, so its streams stop being read at the next frame).
    m.orphan = true;
    FailPeer(r.peer, DataLoss("sent {} bytes with tag {:#x}, but the receive was posted for {} "
                              "bytes (mismatched message sizes between ranks)",
                              m.total, m.tag, r.cap));
    return;
  }
  r.msg_id = msg_id;
  r.matched = true;
  m.req = req_id;
  r.received = m.total;
  if (!m.unexpected) {
    m.dst = r.buf;
    m.consume = r.consume;
    m.granule = r.granule;
  }
  CompleteRecvIfDone(p, msg_id);
}

void TcpTransport::CompleteRecvIfDone(PeerState& p, uint64_t msg_id) {
  auto it = p.messages.find(msg_id);
  if (it == p.messages.end()) return;
  InMessage& m = it->second;
  if (m.received != m.total) return;
  if (m.orphan) {
    ReleaseUnexpected(m);
    p.messages.erase(it);
    return;
  }
  if (m.req == 0) return;
  Req& r = reqs_[m.req];
  if (m.unexpected && m.total > 0) DeliverTo(r, m.unexpected.data(), m.total);
  r.done = true;
  ReleaseUnexpected(m);
  p.messages.erase(it);
}

void TcpTransport::ReleaseUnexpected(InMessage& m) {
  unexpected_bytes_ -= m.held;
  m.held = 0;
  spare_.Give(std::move(m.unexpected));
}

void TcpTransport::EnsureConnected(int peer) {
  PeerState& p = peers_[peer];
  for (uint32_t s = 0; s < p.out.size(); ++s) {
    if (p.out[s].state == OutStream::kIdle) StartConnect(peer, s);
  }
}

void TcpTransport::StartConnect(int peer, uint32_t stream) {
  PeerState& p = peers_[peer];
  OutStream& s = p.out[stream];
  s.fd.Reset(::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
  if (!s.fd.valid()) {
    FailPeer(peer, ErrnoStatus(errno, "socket"));
    return;
  }
  TuneSocket(s.fd.get(), opt_.socket_buffer_bytes);
  // Only the connector's algorithm matters: data flows from connector to acceptor.
  const std::string& my_boot = peers_[opt_.rank].info.boot_id;
  const bool same_kernel =
      SameHost(listen_addr_, p.addr) || (!my_boot.empty() && p.info.boot_id == my_boot);
  std::string cc = congestion_.Apply(s.fd.get(), same_kernel);
  if (stream == 0) {
    kLog.Debug("rank {} -> {}: congestion control {}", opt_.rank, p.info.address,
               cc.empty() ? "system default" : cc);
  }
  s.state = OutStream::kConnecting;
  s.handshake.reset();
  s.challenge_got = 0;
  int rc = ::connect(s.fd.get(), reinterpret_cast<sockaddr*>(&p.addr), sizeof p.addr);
  if (rc != 0 && errno != EINPROGRESS) {
    FailPeer(peer, ErrnoStatus(errno, fmt::format("connect to {}", p.info.address)));
    return;
  }
  epoll_event ev{};
  ev.events = EPOLLIN | EPOLLOUT;
  ev.data.u64 = OutKey(peer, stream);
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, s.fd.get(), &ev);
  s.want_out = true;
}

void TcpTransport::SetWantOut(OutStream& s, bool want, uint64_t key) {
  if (s.want_out == want) return;
  epoll_event ev{};
  ev.events = want ? (EPOLLIN | EPOLLOUT) : EPOLLIN;
  ev.data.u64 = key;
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, s.fd.get(), &ev);
  s.want_out = want;
}

void TcpTransport::QueueControl(int peer, FrameType type, uint64_t nonce, std::string payload) {
  PeerState& p = peers_[peer];
  if (!p.failure.ok()) return;
  EnsureConnected(peer);
  SendChunk ch;
  ch.hdr.type = type;
  ch.hdr.msg_id = nonce;
  ch.hdr.total = ch.hdr.length = payload.size();
  ch.owned = std::move(payload);
  ch.owns = true;
  p.out[0].queue.push_back(std::move(ch));
  FlushStream(peer, 0);
}

// Writes as much of the stream's queue as the socket takes.
void TcpTransport::FlushStream(int peer, uint32_t stream) {
  PeerState& p = peers_[peer];
  OutStream& s = p.out[stream];
  if (s.state != OutStream::kReady || !p.failure.ok()) return;
  while (!s.queue.empty()) {
    SendChunk& ch = s.queue.front();
    const char* payload = ch.owns ? ch.owned.data() : ch.data;
    size_t total = sizeof(FrameHeader) + ch.hdr.length;
    iovec iov[2];
    int n = 0;
    if (ch.sent < sizeof(FrameHeader)) {
      iov[n++] = {reinterpret_cast<char*>(&ch.hdr) + ch.sent, sizeof(FrameHeader) - ch.sent};
      if (ch.hdr.length > 0) iov[n++] = {const_cast<char*>(payload), ch.hdr.length};
    } else {
      size_t done = ch.sent - sizeof(FrameHeader);
      iov[n++] = {const_cast<char*>(payload) + done, ch.hdr.length - done};
    }
    msghdr mh{};
    mh.msg_iov = iov;
    mh.msg_iovlen = n;
    ssize_t w = ::sendmsg(s.fd.get(), &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (w < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) break;
      FailPeer(peer, ErrnoStatus(errno, "sending"));
      return;
    }
    ch.sent += static_cast<size_t>(w);
    if (ch.sent < total) break;
    if (ch.req != 0) {
      Req& r = reqs_[ch.req];
      if (--r.chunks_left == 0) r.done = true;
    }
    s.queue.pop_front();
  }
  SetWantOut(s, !s.queue.empty(), OutKey(peer, stream));
}

void TcpTransport::Accept() {
  for (;;) {
    sockaddr_in a{};
    socklen_t len = sizeof a;
    int fd = ::accept4(listen_fd_.get(), reinterpret_cast<sockaddr*>(&a), &len,
                       SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) return;  // EAGAIN, or a transient error: the listener stays armed
    auto in = std::make_unique<InStream>();
    in->fd.Reset(fd);
    in->remote = internal::SockaddrText(a);
    in->handshake.emplace(kTcpHandshake, opt_.secret);
    TuneSocket(fd, opt_.socket_buffer_bytes);
    in->rx.reset(new char[kRxBufferBytes]);
    uint64_t key = kInBit | next_in_key_++;
    in->key = key;
    if (std::optional<uint64_t> victim = pending_.Add(key)) {
      auto vit = in_streams_.find(*victim);
      if (vit != in_streams_.end() && !warned_full_) {
        warned_full_ = true;  // once: under a flood of connects a line per drop is a flood too
        kLog.Warn(
            "tcp transport rank {}: {} connections are inside the handshake; dropping "
            "the oldest idle ones ({} first; a flood of connections that never "
            "authenticate?)",
            opt_.rank, kMaxPendingHandshakes, vit->second->remote);
      }
      DropPending(*victim, "too many connections inside the handshake");
    }
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = key;
    epoll_ctl(epoll_fd_.get(), EPOLL_CTL_ADD, fd, &ev);
    InStream& ref = *in;
    in_streams_[key] = std::move(in);
    // A rank that waited in the backlog has its hello queued already: answer it now.
    ReadInStream(ref);
    if (ref.closed) in_streams_.erase(key);
  }
}

void TcpTransport::DropPending(uint64_t key, std::string_view why) {
  pending_.Remove(key);
  auto it = in_streams_.find(key);
  if (it == in_streams_.end()) return;
  kLog.Debug("tcp transport rank {}: closing connection from {}: {}", opt_.rank, it->second->remote,
             why);
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, it->second->fd.get(), nullptr);
  in_streams_.erase(it);
}

void TcpTransport::ExpirePending() {
  for (uint64_t key : pending_.TakeExpired()) {
    auto it = in_streams_.find(key);
    if (it == in_streams_.end()) continue;
    kLog.Info(
        "tcp transport rank {}: closing connection from {}: handshake not finished "
        "within {} s",
        opt_.rank, it->second->remote, kHandshakeTimeout.count());
    epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, it->second->fd.get(), nullptr);
    in_streams_.erase(it);
  }
}

bool TcpTransport::AuthenticateInStream(InStream& in) {
  Handshake& hs = *in.handshake;
  if (!in.challenged) {
    if (in.handshake_in.size() < hs.hello_bytes()) return false;
    Result<std::string> challenge =
        hs.AcceptorChallenge(in.handshake_in, "connection from " + in.remote);
    if (!challenge.ok()) {
      CloseInStream(in, challenge.status().message());
      return false;
    }
    std::memcpy(&in.claim, hs.context().data(), sizeof(HelloContext));
    const HelloContext& h = in.claim;
    if (h.from < 0 || h.from >= opt_.size || h.from == opt_.rank || h.to != opt_.rank ||
        h.streams != peers_[h.from].out.size() || h.stream >= h.streams) {
      CloseInStream(in, fmt::format("hello from rank {} to rank {} stream {}/{} does not fit "
                                    "this job",
                                    h.from, h.to, h.stream, h.streams));
      return false;
    }
    // 48 bytes into a fresh socket buffer: a short write means a broken peer.
    if (::send(in.fd.get(), challenge->data(), challenge->size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
        static_cast<ssize_t>(challenge->size())) {
      CloseInStream(in, "could not send the challenge");
      return false;
    }
    in.handshake_in.clear();
    in.challenged = true;
    pending_.HelloReceived(in.key);
    return false;
  }
  if (in.handshake_in.size() < kAnswerBytes) return false;
  if (!hs.AcceptorCheck(in.handshake_in)) {
    CloseInStream(in, fmt::format("claims rank {} but its answer does not prove the job "
                                  "secret",
                                  in.claim.from));
    return false;
  }
  pending_.Remove(in.key);
  in.handshake.reset();
  in.handshake_in.clear();
  in.peer = in.claim.from;
  in.index = in.claim.stream;
  return true;
}

void TcpTransport::CloseInStream(InStream& in, const std::string& why, bool violation) {
  if (in.closed) return;
  in.closed = true;
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_DEL, in.fd.get(), nullptr);
  in.fd.Reset();
  if (in.peer < 0) {
    pending_.Remove(in.key);
    // A connection that closes without a word is not worth a warning (a port scan, or one
    // of a flood); one that spoke and failed is.
    bool spoke = in.challenged || !in.handshake_in.empty();
    kLog.Log(spoke ? base::LogLevel::kWarn : base::LogLevel::kDebug,
             "tcp transport rank {}: refused connection from {}: {}", opt_.rank, in.remote, why);
    return;
  }
  PeerState& p = peers_[in.peer];
  if (violation) {
    kLog.Warn("tcp transport rank {}: {} at {} broke the protocol: {}", opt_.rank,
              DescribePeer(p.info), in.remote, why);
    FailPeer(in.peer, Unavailable("{}; connection closed", why));
  } else if (p.said_bye) {
    FailPeer(in.peer, Unavailable("closed its transport (finished or left the job)"));
  } else {
    FailPeer(in.peer, Unavailable("{} (process died, or its host or link failed)", why));
  }
}

void TcpTransport::ReadInStream(InStream& in) {
  for (int reads = 0; !in.closed; ++reads) {
    if (in.peer < 0) {
      // Only the handshake's next message is read from an unproven peer, nothing beyond.
      size_t step = in.challenged ? kAnswerBytes : in.handshake->hello_bytes();
      char buf[64];
      ssize_t r = ::recv(in.fd.get(), buf, step - in.handshake_in.size(), MSG_DONTWAIT);
      if (r == 0) {
        return CloseInStream(in, in.challenged ? "closed after this rank proved itself, without "
                                                 "proving the job secret (a different "
                                                 "RAILYARD_JOB_SECRET?)"
                                               : "closed during the handshake");
      }
      if (r < 0) {
        if (errno == EAGAIN || errno == EINTR) return;
        return CloseInStream(in, fmt::format("handshake: {}", std::strerror(errno)));
      }
      in.handshake_in.append(buf, static_cast<size_t>(r));
      AuthenticateInStream(in);
      continue;
    }
    ConsumeInStream(in);
    // Buffered bytes are all consumed unless parked; bound the reads per event for fairness
    // between streams (the socket stays readable, so epoll comes back).
    if (in.parked || in.closed || reads >= 16) return;
    // Need more bytes: read straight into a large payload's destination, else buffer.
    ssize_t r;
    if (in.in_payload && in.payload_dst != nullptr && in.rx_begin == in.rx_end &&
        in.hdr.length - in.payload_done >= kDirectReadBytes) {
      r = ::recv(in.fd.get(), in.payload_dst + in.payload_done, in.hdr.length - in.payload_done,
                 MSG_DONTWAIT);
      if (r > 0) {
        const bool drained = static_cast<uint64_t>(r) < in.hdr.length - in.payload_done;
        in.payload_done += static_cast<uint64_t>(r);
        if (in.payload_done == in.hdr.length) FinishFrame(in);
        // A short read emptied the socket: epoll is level-triggered and reports the next
        // bytes, so a read that would only say EAGAIN is saved (one syscall per message).
        if (drained) {
          ConsumeInStream(in);
          return;
        }
        continue;
      }
    } else {
      if (in.rx_begin == in.rx_end) in.rx_begin = in.rx_end = 0;
      if (in.rx_end == kRxBufferBytes) {
        std::memmove(in.rx.get(), in.rx.get() + in.rx_begin, in.rx_end - in.rx_begin);
        in.rx_end -= in.rx_begin;
        in.rx_begin = 0;
      }
      const size_t room = kRxBufferBytes - in.rx_end;
      r = ::recv(in.fd.get(), in.rx.get() + in.rx_end, room, MSG_DONTWAIT);
      if (r > 0) {
        in.rx_end += static_cast<size_t>(r);
        if (static_cast<size_t>(r) < room) {  // drained, as above
          ConsumeInStream(in);
          return;
        }
        continue;
      }
    }
    if (r == 0) return CloseInStream(in, "connection closed");
    if (errno == EAGAIN || errno == EINTR) return;
    return CloseInStream(in, fmt::format("connection error: {}", std::strerror(errno)));
  }
}

// Parses buffered bytes: headers, then payloads. Returns true if it made progress.
bool TcpTransport::ConsumeInStream(InStream& in) {
  bool progress = false;
  while (!in.closed && !in.parked) {
    size_t avail = in.rx_end - in.rx_begin;
    if (!in.in_payload) {
      if (avail == 0) return progress;
      size_t n = std::min(avail, sizeof(FrameHeader) - in.hdr_got);
      std::memcpy(reinterpret_cast<char*>(&in.hdr) + in.hdr_got, in.rx.get() + in.rx_begin, n);
      in.rx_begin += n;
      in.hdr_got += n;
      progress = true;
      if (in.hdr_got < sizeof(FrameHeader)) return progress;
      in.hdr_got = 0;
      if (!BeginPayload(in)) return progress;
      continue;
    }
    if (in.payload_done == in.hdr.length) {
      FinishFrame(in);
      progress = true;
      continue;
    }
    if (avail == 0) return progress;
    size_t n = std::min<uint64_t>(avail, in.hdr.length - in.payload_done);
    if (in.payload_dst != nullptr) {
      std::memcpy(in.payload_dst + in.payload_done, in.rx.get() + in.rx_begin, n);
    } else if (in.payload_msg != nullptr) {
      FeedConsumer(in, in.rx.get() + in.rx_begin, n);
    } else {
      in.control.append(in.rx.get() + in.rx_begin, n);
    }
    in.rx_begin += n;
    in.payload_done += n;
    progress = true;
  }
  return progress;
}

// A header is complete: validate it and pick the payload's destination. False when the
// stream was closed or parked.
bool TcpTransport::BeginPayload(InStream& in) {
  const FrameHeader& h = in.hdr;
  PeerState& p = peers_[in.peer];
  in.in_payload = true;
  in.payload_done = 0;
  in.payload_dst = nullptr;
  in.payload_msg = nullptr;
  in.joiner.Reset();
  in.control.clear();
  if (!p.failure.ok()) {
    // Nothing more is read from a failed peer: its messages may have no buffer any more.
    CloseInStream(in, "failed");
    return false;
  }
  if (h.type == kData) {
    if (h.total > kMaxMessageBytes || h.offset > h.total || h.length > h.total - h.offset ||
        (in.index != 0 && h.length == 0)) {
      CloseInStream(in,
                    fmt::format("sent a malformed data frame (offset {} length {} total {})",
                                h.offset, h.length, h.total),
                    true);
      return false;
    }
    if (in.index == 0) {
      if (h.offset != 0 || p.messages.count(h.msg_id)) {
        CloseInStream(in, "sent a data frame out of sequence", true);
        return false;
      }
      Announce(in.peer, h);
      if (!p.failure.ok()) {
        // Failed at announcement (too long for its receive, or for the unexpected-message
        // budget): stop reading, so that the payload is neither stored nor parsed.
        CloseInStream(in, "failed");
        return false;
      }
      if (h.length == 0) return true;  // an empty message completed at announcement
    }
    auto it = p.messages.find(h.msg_id);
    if (it == p.messages.end()) {
      // Chunk on stream s > 0 ahead of its announcement on stream 0: wait for it.
      in.parked = true;
      p.parked.push_back(in.key);
      SetReadInterest(in, false);
      return false;
    }
    TargetPayload(in, it->second);
    return true;
  }
  if (h.type == kPing || h.type == kPong || h.type == kAbort || h.type == kBye) {
    if (h.length > kMaxControlBytes || in.index != 0) {
      CloseInStream(
          in, fmt::format("sent a control frame of {} bytes on stream {}", h.length, in.index),
          true);
      return false;
    }
    return true;
  }
  CloseInStream(in, fmt::format("sent an unknown frame type {}", h.type), true);
  return false;
}

// Stream 0 delivered the first chunk of a message: create it and match it.
void TcpTransport::Announce(int peer, const FrameHeader& h) {
  PeerState& p = peers_[peer];
  InMessage& m = p.messages[h.msg_id];
  m.tag = h.tag;
  m.total = h.total;
  uint64_t bound = 0;
  for (auto it = p.waiting_recvs.begin(); it != p.waiting_recvs.end(); ++it) {
    if (reqs_[*it].tag == h.tag) {
      bound = *it;
      p.waiting_recvs.erase(it);
      break;
    }
  }
  if (bound != 0) {
    BindMessage(p, h.msg_id, bound);
  } else {
    if (h.total > kMaxUnexpectedBytes - unexpected_bytes_) {
      FailPeer(peer, ResourceExhausted(
                         "sent a message of {} bytes with tag {:#x} before its receive was "
                         "posted; messages waiting for their receive may hold {} bytes in all "
                         "and hold {} now (post the receive before the peer sends, or send in "
                         "pieces)",
                         h.total, h.tag, kMaxUnexpectedBytes, unexpected_bytes_));
      p.messages.erase(h.msg_id);
      return;
    }
    if (h.total > 0) {
      m.unexpected = spare_.Take(h.total);
      m.held = h.total;
      unexpected_bytes_ += h.total;
    }
    p.unbound.push_back(h.msg_id);
  }
  if (!p.failure.ok()) return;  // its parked streams stay parked; the caller closes this one
  // Streams parked on this message may go on.
  for (auto it = p.parked.begin(); it != p.parked.end();) {
    auto sit = in_streams_.find(*it);
    if (sit == in_streams_.end()) {
      it = p.parked.erase(it);
      continue;
    }
    InStream& s = *sit->second;
    if (s.hdr.msg_id != h.msg_id) {
      ++it;
      continue;
    }
    it = p.parked.erase(it);
    s.parked = false;
    TargetPayload(s, p.messages[h.msg_id]);
    SetReadInterest(s, true);
    // Its buffered bytes raise no epoll event: consume them from Poll.
    unparked_.push_back(s.key);
  }
}

void TcpTransport::SetReadInterest(InStream& in, bool want) {
  epoll_event ev{};
  ev.events = want ? uint32_t{EPOLLIN} : 0u;
  ev.data.u64 = in.key;
  epoll_ctl(epoll_fd_.get(), EPOLL_CTL_MOD, in.fd.get(), &ev);
}

void TcpTransport::TargetPayload(InStream& in, InMessage& m) {
  in.payload_msg = nullptr;
  in.joiner.Reset();
  if (m.unexpected) {
    in.payload_dst = m.unexpected.data() + in.hdr.offset;
  } else if (m.consume) {
    in.payload_dst = nullptr;
    in.payload_msg = &m;  // std::map nodes stay put until the message is erased
  } else {
    in.payload_dst = m.dst + in.hdr.offset;
  }
}

void TcpTransport::FeedConsumer(InStream& in, const char* data, size_t n) {
  InMessage& m = *in.payload_msg;
  in.joiner.Feed(m.consume, m.granule, in.hdr.offset + in.payload_done, data, n);
}

void TcpTransport::DeliverTo(Req& r, const char* data, size_t n) {
  if (n == 0) return;
  if (r.consume) {
    r.consume(0, data, n);
  } else {
    std::memcpy(r.buf, data, n);
  }
}

void TcpTransport::FinishFrame(InStream& in) {
  const FrameHeader h = in.hdr;
  in.in_payload = false;
  PeerState& p = peers_[in.peer];
  switch (h.type) {
    case kData: {
      if (in.payload_msg != nullptr) {  // a message's trailing part, if any
        in.joiner.Flush(in.payload_msg->consume, h.offset + h.length);
      }
      in.payload_msg = nullptr;
      auto it = p.messages.find(h.msg_id);
      if (it != p.messages.end()) {
        it->second.received += h.length;
        CompleteRecvIfDone(p, h.msg_id);
      }
      break;
    }
    case kPing:
      QueueControl(in.peer, kPong, h.msg_id, activity_);
      break;
    case kPong:
      p.pong_nonce = h.msg_id;
      p.pong_activity = in.control;
      break;
    case kAbort:
      if (failed_.ok()) {
        failed_ = Aborted("{} aborted the job: {}", DescribePeer(p.info), in.control);
      }
      break;
    case kBye:
      p.said_bye = true;
      break;
  }
  // Parked streams of this peer may have been waiting for a message this frame announced:
  // handled in Announce. Nothing else to do.
}

void TcpTransport::AnswerChallenge(int peer, uint32_t stream) {
  PeerState& p = peers_[peer];
  OutStream& s = p.out[stream];
  Result<std::string> answer = s.handshake->ConnectorAnswer(
      std::string_view(s.challenge, kChallengeBytes), "the listener at " + p.info.address);
  s.handshake.reset();
  if (!answer.ok()) {
    kLog.Warn("tcp transport rank {}: {}", opt_.rank, answer.status().message());
    return FailPeer(peer, answer.status());
  }
  // 32 bytes after 40: the socket buffer has room.
  if (::send(s.fd.get(), answer->data(), answer->size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
      static_cast<ssize_t>(answer->size())) {
    return FailPeer(peer, Unavailable("sending the handshake answer to {} failed", p.info.address));
  }
  s.state = OutStream::kReady;
  FlushStream(peer, stream);
}

void TcpTransport::HandleEvent(uint64_t key, uint32_t events) {
  if (key == kListenKey) return Accept();
  if (key == kWakeKey) {
    uint64_t v;
    (void)!::read(wake_fd_.get(), &v, sizeof v);
    return;
  }
  if (key & kOutBit) {
    int peer = static_cast<int>((key >> 16) & 0xffffffff);
    uint32_t stream = key & 0xffff;
    PeerState& p = peers_[peer];
    OutStream& s = p.out[stream];
    if (!s.fd.valid()) return;
    if (s.state == OutStream::kConnecting) {
      int err = 0;
      socklen_t len = sizeof err;
      getsockopt(s.fd.get(), SOL_SOCKET, SO_ERROR, &err, &len);
      if (err != 0) {
        return FailPeer(peer, ErrnoStatus(err, fmt::format("connect to {}", p.info.address)));
      }
      if (!(events & (EPOLLOUT | EPOLLIN))) return;
      HelloContext ctx{opt_.rank, peer, stream, static_cast<uint32_t>(p.out.size())};
      s.handshake.emplace(kTcpHandshake, opt_.secret);
      std::string hello = s.handshake->ConnectorHello(
          std::string_view(reinterpret_cast<const char*>(&ctx), sizeof ctx));
      // 40 bytes into a fresh socket buffer.
      if (::send(s.fd.get(), hello.data(), hello.size(), MSG_NOSIGNAL | MSG_DONTWAIT) !=
          static_cast<ssize_t>(hello.size())) {
        return FailPeer(peer, Unavailable("sending the hello to {} failed", p.info.address));
      }
      s.state = OutStream::kAwaitChallenge;
      SetWantOut(s, false, key);
      return;
    }
    if (s.state == OutStream::kAwaitChallenge) {
      ssize_t r = ::recv(s.fd.get(), s.challenge + s.challenge_got,
                         kChallengeBytes - s.challenge_got, MSG_DONTWAIT);
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
        return FailPeer(peer, Unavailable("{} closed the connection before proving the job "
                                          "secret (it refused this rank's hello, dropped it "
                                          "while flooded with connections, or died)",
                                          p.info.address));
      }
      if (r > 0) s.challenge_got += static_cast<size_t>(r);
      if (s.challenge_got < kChallengeBytes) return;
      return AnswerChallenge(peer, stream);
    }
    if (events & (EPOLLERR | EPOLLHUP)) {
      return FailPeer(peer, Unavailable("connection reset (process died, or its link failed)"));
    }
    if (events & EPOLLIN) {
      // Acceptors never write after the challenge: readable means closed or reset.
      char c;
      ssize_t r = ::recv(s.fd.get(), &c, 1, MSG_DONTWAIT);
      if (r == 0 || (r < 0 && errno != EAGAIN && errno != EINTR)) {
        return FailPeer(peer, Unavailable("connection closed (process died, or its link "
                                          "failed)"));
      }
    }
    if (events & EPOLLOUT) FlushStream(peer, stream);
    return;
  }
  auto it = in_streams_.find(key);
  if (it == in_streams_.end()) return;
  InStream& in = *it->second;
  ReadInStream(in);
  if (in.closed) in_streams_.erase(it);
}

Status TcpTransport::Poll(int timeout_ms) {
  epoll_event events[64];
  if (!unparked_.empty()) timeout_ms = 0;
  if (pending_.size() > 0) {
    int pending_ms = pending_.NextDeadline().PollTimeoutMs();
    if (timeout_ms < 0 || pending_ms < timeout_ms) timeout_ms = pending_ms;
  }
  int n = ::epoll_wait(epoll_fd_.get(), events, 64, timeout_ms);
  if (n < 0) {
    if (errno == EINTR) return Status::Ok();
    return ErrnoStatus(errno, "tcp transport: epoll_wait");
  }
  for (int i = 0; i < n; ++i) HandleEvent(events[i].data.u64, events[i].events);
  if (pending_.size() > 0) ExpirePending();
  while (!unparked_.empty()) {
    uint64_t key = unparked_.back();
    unparked_.pop_back();
    HandleEvent(key, EPOLLIN);
  }
  if (abort_requested_.load(std::memory_order_acquire)) {
    HandleAbortFlag(base::Deadline::After(std::chrono::milliseconds(500)));
  }
  return Status::Ok();
}

std::string TcpTransport::PendingDescription(std::span<const Request> requests) const {
  std::map<int, std::string> by_peer;
  for (const Request& q : requests) {
    auto it = reqs_.find(q.id);
    if (it == reqs_.end() || it->second.done) continue;
    const Req& r = it->second;
    std::string& s = by_peer[r.peer];
    s +=
        fmt::format("{}{} tag {:#x}", s.empty() ? "" : ", ", r.is_send ? "send" : "receive", r.tag);
  }
  std::string out;
  for (auto& [peer, what] : by_peer) {
    out += fmt::format("{}{} [{}]", out.empty() ? "" : "; ", DescribePeer(peers_[peer].info), what);
  }
  return out;
}

// Forgets a request whatever its state. A pending send's remaining bytes are copied so the
// stream stays consistent without the caller's memory; a pending receive's message is
// redirected into a private buffer and dropped when complete. Connections stay up, so
// peers do not mistake an abandoned request for this process dying.
void TcpTransport::Abandon(uint64_t req_id) {
  auto it = reqs_.find(req_id);
  if (it == reqs_.end()) return;
  Req& r = it->second;
  if (!r.done && r.peer >= 0 && r.peer != opt_.rank) {
    PeerState& p = peers_[r.peer];
    if (r.is_send) {
      for (auto& s : p.out) {
        for (auto& ch : s.queue) {
          if (ch.req != req_id) continue;
          ch.req = 0;
          if (!ch.owns) {
            ch.owned.assign(ch.data, ch.hdr.length);
            ch.owns = true;
          }
        }
      }
    } else if (!r.matched) {
      auto& w = p.waiting_recvs;
      w.erase(std::remove(w.begin(), w.end(), req_id), w.end());
    } else {
      auto mit = p.messages.find(r.msg_id);
      if (mit != p.messages.end()) {
        InMessage& m = mit->second;
        m.req = 0;
        m.orphan = true;
        m.consume = nullptr;  // the caller's consumer may be gone
        if (!m.unexpected && m.total > 0) {
          m.unexpected = spare_.Take(m.total);
          for (auto& [key, in] : in_streams_) {
            if (in->peer == r.peer && in->in_payload && in->hdr.type == kData &&
                in->hdr.msg_id == r.msg_id &&
                (in->payload_dst != nullptr || in->payload_msg != nullptr)) {
              in->payload_dst = m.unexpected.data() + in->hdr.offset;
              in->payload_msg = nullptr;
              in->joiner.Reset();
            }
          }
        }
      }
    }
  }
  reqs_.erase(it);
}

Status TcpTransport::WaitAll(std::span<const Request> requests, base::Deadline deadline) {
  std::lock_guard progress(progress_mu_);
  last_received_.clear();
  int spin_polls = 0;
  bool slept = false;
  bool small_wait = true;
  for (const Request& q : requests) {
    auto it = reqs_.find(q.id);
    if (it != reqs_.end() && it->second.cap > kSmallWaitBytes) small_wait = false;
  }
  auto consume = [&] {
    for (const Request& q : requests) Abandon(q.id);
  };
  for (;;) {
    if (!failed_.ok()) {
      consume();
      return failed_;
    }
    bool all_done = true;
    for (const Request& q : requests) {
      auto it = reqs_.find(q.id);
      if (it == reqs_.end()) {
        consume();
        return InvalidArgument("tcp transport: unknown or already waited request {}", q.id);
      }
      const Req& r = it->second;
      if (r.done) continue;
      if (r.peer != opt_.rank && !peers_[r.peer].failure.ok()) {
        Status st = peers_[r.peer].failure;
        Status err(st.code(), fmt::format("{} (while {} tag {:#x})", st.message(),
                                          r.is_send ? "sending" : "receiving", r.tag));
        failed_ = err;
        consume();
        return err;
      }
      all_done = false;
    }
    if (all_done) {
      if (spin_polls > 0 && !slept) spin_.FinishedAfter(spin_polls);
      for (const Request& q : requests) {
        auto it = reqs_.find(q.id);
        // Keep receives' lengths readable until the next WaitAll.
        if (!it->second.is_send) {
          last_received_[q.id] = it->second.received;
        }
        reqs_.erase(it);
      }
      return Status::Ok();
    }
    if (deadline.Expired()) {
      Status err = DeadlineExceeded("tcp transport rank {}: still waiting for {}", opt_.rank,
                                    PendingDescription(requests));
      failed_ = err;
      consume();
      return err;
    }
    // Poll without sleeping for a few microseconds first: a reply that is already on its
    // way then costs no sleep and wake-up. Bounded, so an idle wait still sleeps.
    if (!slept && spin_polls < spin_.polls()) {
      // Yield between polls: on oversubscribed cores the peer we wait for may need this one.
      ++spin_polls;
      RY_RETURN_IF_ERROR(Poll(0));
      if (!small_wait || spin_polls % 2 == 0) sched_yield();
    } else {
      if (!slept) spin_.Slept();
      slept = true;
      RY_RETURN_IF_ERROR(Poll(deadline.PollTimeoutMs()));
    }
  }
}

size_t TcpTransport::ReceivedBytes(Request request) const {
  auto it = last_received_.find(request.id);
  return it == last_received_.end() ? 0 : it->second;
}

std::vector<ProbeResult> TcpTransport::Probe(std::span<const int> ranks, base::Deadline deadline) {
  std::lock_guard progress(progress_mu_);
  uint64_t nonce = next_req_++;
  std::vector<ProbeResult> out;
  for (int r : ranks) {
    ProbeResult pr;
    pr.rank = r;
    if (r < 0 || r >= opt_.size || peers_.empty()) {
      pr.state = ProbeResult::State::kDead;
      pr.detail = "no such rank";
    } else if (r == opt_.rank) {
      pr.state = ProbeResult::State::kAlive;
      pr.activity = activity_;
    } else {
      // A failed peer gets fresh connections: the probe is how we learn whether it is gone.
      PeerState& p = peers_[r];
      if (!p.failure.ok() && p.failure.code() == StatusCode::kAborted) {
        p.failure = Status();
      }
      QueueControl(r, kPing, nonce, "");
    }
    out.push_back(pr);
  }
  auto settled = [&] {
    for (auto& pr : out) {
      if (pr.state != ProbeResult::State::kUnresponsive || pr.rank == opt_.rank) continue;
      const PeerState& p = peers_[pr.rank];
      if (p.pong_nonce == nonce) {
        pr.state = ProbeResult::State::kAlive;
        pr.activity = p.pong_activity;
      } else if (!p.failure.ok()) {
        pr.state = ProbeResult::State::kDead;
        pr.detail = p.failure.message();
      }
    }
    for (auto& pr : out) {
      if (pr.state == ProbeResult::State::kUnresponsive && pr.rank != opt_.rank) return false;
    }
    return true;
  };
  while (!settled() && !deadline.Expired()) {
    if (!Poll(deadline.PollTimeoutMs()).ok()) break;
  }
  for (auto& pr : out) {
    if (pr.state == ProbeResult::State::kUnresponsive) {
      pr.detail =
          "did not answer a probe before the deadline (stopped, hung outside "
          "communication, or its link is down)";
    }
  }
  return out;
}

// Queues an ABORT to every peer and drives progress until they are written or
// `flush_deadline` passes; a stopped or unreachable peer cannot delay the others, since all
// are queued before any waiting.
void TcpTransport::HandleAbortFlag(base::Deadline flush_deadline) {
  if (abort_sent_) return;
  abort_sent_ = true;
  std::string reason;
  {
    std::lock_guard lock(abort_mu_);
    reason = abort_reason_;
  }
  for (int r = 0; r < opt_.size && !peers_.empty(); ++r) {
    if (r == opt_.rank || peers_[r].info.rank < 0) continue;
    QueueControl(r, kAbort, 0, reason);
  }
  if (failed_.ok()) failed_ = Aborted("rank {} aborted the job: {}", opt_.rank, reason);
  auto flushed = [&] {
    for (auto& p : peers_) {
      if (!p.failure.ok()) continue;
      for (auto& s : p.out) {
        if (s.state != OutStream::kIdle && !s.queue.empty()) return false;
      }
    }
    return true;
  };
  while (!flushed() && !flush_deadline.Expired()) {
    if (!Poll(flush_deadline.PollTimeoutMs()).ok()) break;
  }
}

void TcpTransport::Abort(std::string_view reason, base::Deadline deadline) {
  {
    std::lock_guard lock(abort_mu_);
    if (abort_requested_.load()) return;
    abort_reason_ = std::string(reason);
  }
  abort_requested_.store(true, std::memory_order_release);
  uint64_t one = 1;
  (void)!::write(wake_fd_.get(), &one, sizeof one);
  std::unique_lock progress(progress_mu_, std::try_to_lock);
  if (!progress.owns_lock()) return;  // the thread inside WaitAll sends it
  HandleAbortFlag(deadline);
}

}  // namespace

Result<std::unique_ptr<Transport>> NewTcpTransport(const TransportOptions& options) {
  auto t = std::make_unique<TcpTransport>(options);
  RY_RETURN_IF_ERROR(t->Listen());
  return std::unique_ptr<Transport>(std::move(t));
}

}  // namespace railyard::net
