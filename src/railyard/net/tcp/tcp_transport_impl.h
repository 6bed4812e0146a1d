// The tcp backend's Transport, declared for the files that implement it by job:
//   tcp_transport.cc  the Transport: start, post, match, wait, probe, abort
//   connection.cc     outbound streams (connect state machine, hello, flushing) and the
//                     acceptor's side of the handshake
//   frames.cc         inbound frame parsing, announcement and parking
//   loop.cc           the epoll set (Loop) and the transport's dispatch of its events
// See tcp_transport.h for the model and connection.h for streams and parking.
//
// Internal to net/tcp. Thread-safety: as net::Transport.
#pragma once

#include <netinet/in.h>

#include <atomic>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "railyard/net/buffer_pool.h"
#include "railyard/net/handshake.h"
#include "railyard/net/internal/failure_state.h"
#include "railyard/net/internal/matcher.h"
#include "railyard/net/internal/request_table.h"
#include "railyard/net/internal/unexpected_budget.h"
#include "railyard/net/spin_budget.h"
#include "railyard/net/tcp/congestion.h"
#include "railyard/net/tcp/connection.h"
#include "railyard/net/tcp/loop.h"
#include "railyard/net/tcp/tcp_transport.h"
#include "railyard/net/tcp/wire.h"
#include "railyard/net/transport.h"

namespace railyard::net::tcp {

// Payloads this long are read straight into their destination, not through the rx buffer.
inline constexpr size_t kDirectReadBytes = 16 << 10;
inline constexpr size_t kRxBufferBytes = 64 << 10;
// A wait whose requests are all this short polls twice per yield instead of once. Its
// answer is usually already on its way from a rank on another core, and a second poll
// catches it without handing the core to a rank that is itself only waiting: with 4 ranks
// on 2 cores, 31% of a 4 KiB allreduce's time went to switches out of sched_yield, and two
// polls per yield cut that allreduce from 84 to 59 us (2 ranks, 4-32 KiB: 17 to 15 us).
// Larger waits yield at every poll: a rank sharing the core has copying to do, and two polls
// per yield in every wait cost a 4-rank 16 MiB allreduce a fifth of its busbw (1.32 GB/s
// against 1.63).
inline constexpr size_t kSmallWaitBytes = 128 << 10;

// Why a wait polls first (TcpOptions::spin_polls, at most that many polls, each an
// epoll_wait(0) followed by sched_yield so a peer waiting for this core runs; every second
// poll for small waits, see kSmallWaitBytes): the answer to a small message is usually
// microseconds away: a 4 KiB allreduce on 2 cores takes 24 us with 2 ranks and 110 with 4,
// against 50 and 170 when a wait sleeps at once. The yield matters: polling without it was
// slower than sleeping (59 and 240 us). Bounded: an idle wait sleeps after spin_polls polls,
// and after fewer once waits keep ending in sleep (SpinBudget).

// A posted send or receive.
struct Req {
  uint64_t id = 0;
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
  ConsumingReceiver::Consumer consume;  // a consuming receive (PostRecvConsume): `buf` is null
  size_t granule = 1;
};

struct PeerState {
  PeerInfo info;
  sockaddr_in addr{};
  std::vector<OutStream> out;
  uint64_t next_msg_id = 1;
  std::map<uint64_t, InMessage> messages;  // announced, not complete or not bound
  std::vector<uint64_t> parked;            // streams (keys) waiting for an announcement
  Status failure;                          // set once: every request with this peer fails
  bool said_bye = false;
  std::string pong_activity;
  uint64_t pong_nonce = 0;
};

class TcpTransport final : public Transport, public ConsumingReceiver {
 public:
  TcpTransport(TransportOptions options, TcpOptions tcp)
      : opt_(std::move(options)), tcp_(std::move(tcp)), spin_(tcp_.spin_polls) {}
  ~TcpTransport() override;

  Status Listen();

  std::string_view name() const override { return "tcp"; }
  int rank() const override { return opt_.rank; }
  int size() const override { return opt_.size; }
  const PeerInfo& peer(int r) const override { return peers_[r].info; }
  Status Start(base::Deadline deadline) override;
  Result<Request> PostSend(int peer, Tag tag, const void* data, size_t len) override;
  Result<Request> PostRecv(int peer, Tag tag, void* data, size_t len) override;
  ConsumingReceiver* consuming_receiver() override { return this; }
  Result<Request> PostRecvConsume(int peer, Tag tag, size_t len, size_t granule,
                                  Consumer consume) override;
  Status WaitAll(std::span<const Request> requests, base::Deadline deadline) override;
  size_t ReceivedBytes(Request request) const override;
  std::vector<ProbeResult> Probe(std::span<const int> ranks, base::Deadline deadline) override;
  void SetActivity(std::string activity) override { activity_ = std::move(activity); }
  void Abort(std::string_view reason, base::Deadline deadline) override;

 private:
  // tcp_transport.cc
  std::string Me() const;  // "tcp transport rank 2 (node1 pid 77)", for messages
  Status CheckUsable() const;
  Status CheckPeer(int peer) const;
  void FailPeer(int peer, Status why);
  Result<Request> PostRecvImpl(int peer, Tag tag, void* data, size_t len, size_t granule,
                               Consumer consume);
  // Hands a whole message to a receive: copied, or given to its consumer.
  static void DeliverTo(Req& r, const char* data, size_t n);
  void BindMessage(PeerState& p, uint64_t msg_id, uint64_t req_id);
  void CompleteRecvIfDone(PeerState& p, uint64_t msg_id);
  void ReleaseUnexpected(InMessage& m);
  void HandleAbortFlag(base::Deadline flush_deadline);
  void Abandon(uint64_t req_id);

  // connection.cc
  void EnsureConnected(int peer);
  void StartConnect(int peer, uint32_t stream);
  // A connect attempt failed with `err`: wait and retry it, or fail the peer (connection.h).
  void ConnectFailed(int peer, uint32_t stream, int err);
  void QueueControl(int peer, FrameType type, uint64_t nonce, std::string payload);
  void FlushStream(int peer, uint32_t stream);
  void SetWantOut(OutStream& s, bool want, uint64_t key);
  // An epoll event on outbound stream `key`: the connect state machine, then flushing.
  void HandleOutEvent(uint64_t key, uint32_t events);
  // The connector's side once the acceptor's challenge is in.
  void AnswerChallenge(int peer, uint32_t stream);
  void Accept();
  // The acceptor's side of the handshake on buffered bytes; false when it needs more bytes
  // or closed the stream.
  bool AuthenticateInStream(InStream& in);
  // Closes an unproven inbound stream without blaming a peer (dropped or timed out).
  void DropPending(uint64_t key, std::string_view why);
  void ExpirePending();
  // Closes an inbound stream; its peer is failed with `why` (a protocol violation when
  // `violation`, else a lost connection).
  void CloseInStream(InStream& in, const std::string& why, bool violation = false);

  // frames.cc
  void ReadInStream(InStream& in);
  bool ConsumeInStream(InStream& in);  // false when it needs more bytes or is parked
  bool BeginPayload(InStream& in);
  // Points a stream's payload at message m: its buffer, its unexpected buffer or its consumer.
  static void TargetPayload(InStream& in, InMessage& m);
  static void FeedConsumer(InStream& in, const char* data, size_t n);
  void FinishFrame(InStream& in);
  void Announce(int peer, const FrameHeader& hdr);
  void SetReadInterest(InStream& in, bool want);

  // loop.cc
  Status Poll(int timeout_ms);
  void HandleEvent(uint64_t key, uint32_t events);

  TransportOptions opt_;
  TcpOptions tcp_;
  std::vector<PeerState> peers_;
  base::UniqueFd listen_fd_;
  sockaddr_in listen_addr_{};
  CongestionControl congestion_;
  Loop loop_;
  std::string listen_address_;
  internal::RequestTable<Req> reqs_;
  // Receives (ids) and announced messages (ids in PeerState::messages) waiting for each other.
  internal::Matcher<uint64_t, uint64_t> matcher_;
  std::vector<uint64_t> unparked_;  // streams with buffered bytes to consume again
  uint64_t next_probe_nonce_ = 1;
  SpinBudget spin_;  // polls before a wait sleeps; under progress_mu_
  std::unordered_map<uint64_t, std::unique_ptr<InStream>> in_streams_;
  uint64_t next_in_key_ = 1;
  BufferPool spare_;                   // buffers of unexpected messages, for reuse
  internal::UnexpectedBudget budget_;  // bytes held by unexpected messages
  PendingHandshakes pending_;          // inbound streams (keys) still inside the handshake
  bool warned_full_ = false;
  internal::FailureState failure_;  // the first error; the abort request
  std::string activity_ = "idle";
  std::mutex progress_mu_;   // held while a thread drives progress
  bool abort_sent_ = false;  // under progress_mu_
};

}  // namespace railyard::net::tcp
