#include "railyard/net/ofi/ofi_transport.h"

#include <fmt/format.h>
#include <rdma/fabric.h>
#include <rdma/fi_cm.h>
#include <rdma/fi_domain.h>
#include <rdma/fi_endpoint.h>
#include <rdma/fi_errno.h>
#include <rdma/fi_rma.h>
#include <rdma/fi_tagged.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <map>
#include <mutex>
#include <optional>
#include <thread>
#include <unordered_map>

#include "railyard/base/hmac.h"
#include "railyard/base/logging.h"
#include "railyard/net/internal/failure_state.h"
#include "railyard/net/internal/pending.h"
#include "railyard/net/internal/probe_set.h"
#include "railyard/net/internal/request_table.h"
#include "railyard/net/ofi/fabric_library.h"
#include "railyard/net/peer_directory.h"
#include "railyard/net/shm/shm_ring.h"

namespace railyard::net {
namespace {

const base::Logger kLog("ofi");

constexpr uint32_t kApiVersion = FI_VERSION(1, 17);
constexpr Tag kHelloTag = Tag{1} << 60;
constexpr Tag kCtrlTag = Tag{2} << 60;
constexpr size_t kProofBytes = 32;
constexpr size_t kHelloBufBytes = 64;  // larger than a proof, so an oversized HELLO is seen
constexpr size_t kCtrlHeaderBytes = 16;
constexpr size_t kMaxCtrlText = 1024;
constexpr size_t kCtrlBufBytes = kCtrlHeaderBytes + kMaxCtrlText;
constexpr uint32_t kCtrlMagic = 0x52594f43;  // "RYOC"
constexpr uint32_t kKeyMagic = 0x52594f4b;   // "RYOK"
constexpr size_t kRemoteKeyBytes = 32;
constexpr auto kSpin = std::chrono::microseconds(30);
constexpr int kMaxBlockMs = 20;
constexpr size_t kCqBatch = 16;
// User messages longer than this wait for the receiver's clear-to-send (see the header).
// Below rxm's smallest eager limit, so everything that may travel by segmentation or
// rendezvous takes the clear-to-send path.
constexpr size_t kEagerBytes = 4096;

// Control messages; seq carries the user tag for the last three, and the text "<index>
// <bytes>..." names the message by its place among the (peer, tag)'s user messages.
enum class CtrlType : uint8_t {
  kPing = 1,
  kPong = 2,
  kAbort = 3,
  kClearToSend = 4,    // "<index> <receive capacity>": receive `index` of the tag is posted
  kRequestToSend = 5,  // "<index> <message bytes>": long message `index` is held for its receive
  kReject = 6,         // "s|r <index> <message bytes> <capacity>": the message does not fit;
                       // fails the peer's send (s) or receive (r) `index` of the tag
};

// How often a wait or probe checks whether the peers it waits on still run, for peers on
// this kernel (same boot id; the virtual cluster's hosts included). rxm (1.17, over tcp)
// fails nothing posted when a peer's process dies: it retries the connection, logs the
// refusal and keeps the operations, so without this check a wait on a dead peer would end
// at its deadline instead of naming it.
constexpr auto kLivenessTick = std::chrono::milliseconds(100);

void PutU32(char* p, uint32_t v) { std::memcpy(p, &v, 4); }
void PutU64(char* p, uint64_t v) { std::memcpy(p, &v, 8); }
uint32_t GetU32(const char* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
uint64_t GetU64(const char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

std::string Hex(std::string_view bytes) { return base::ToHex(bytes); }

Result<std::string> Unhex(std::string_view hex) {
  if (hex.size() % 2 != 0) return InvalidArgument("odd-length hex '{}'", hex);
  std::string out(hex.size() / 2, '\0');
  for (size_t i = 0; i < out.size(); ++i) {
    int v = 0;
    for (char c : hex.substr(2 * i, 2)) {
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= c - '0';
      else if (c >= 'a' && c <= 'f')
        v |= c - 'a' + 10;
      else
        return InvalidArgument("bad hex digit '{}'", c);
    }
    out[i] = static_cast<char>(v);
  }
  return out;
}

std::string Proof(std::string_view secret, int sender, int receiver, std::string_view nonce) {
  std::string message = fmt::format("railyard-ofi/{}/{}/", sender, receiver);
  message.append(nonce);
  base::Sha256Digest d = base::HmacSha256(secret, message);
  return std::string(reinterpret_cast<const char*>(d.data()), d.size());
}

bool IsConnectionError(int err) {
  switch (err) {
    case FI_ECONNREFUSED:
    case FI_ECONNRESET:
    case FI_ECONNABORTED:
    case FI_ENOTCONN:
    case FI_EHOSTUNREACH:
    case FI_ENETUNREACH:
    case EPIPE:
    case FI_EIO:
    case FI_ESHUTDOWN:
      return true;
    default:
      return false;
  }
}

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

const char* KindVerb(Op::Kind k) {
  switch (k) {
    case Op::Kind::kRecv:
    case Op::Kind::kHelloRecv:
    case Op::Kind::kCtrlRecv:
      return "receiving";
    case Op::Kind::kWrite:
      return "writing";
    default:
      return "sending";
  }
}

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

Status OfiTransport::Open() {
  int rc = fi_->fabric(info_->fabric_attr, fabric_.out(), nullptr);
  if (rc != 0) return Unavailable("{}: fi_fabric: {}", Self(), fi_->Error(rc));
  rc = fi_domain(fabric_.get(), info_, domain_.out(), nullptr);
  if (rc != 0) {
    return Unavailable("{}: fi_domain {}: {}", Self(), info_->domain_attr->name, fi_->Error(rc));
  }
  fi_cq_attr cq_attr{};
  cq_attr.format = FI_CQ_FORMAT_TAGGED;
  cq_attr.wait_obj = FI_WAIT_UNSPEC;
  rc = fi_cq_open(domain_.get(), &cq_attr, cq_.out(), nullptr);
  if (rc != 0) {  // a CQ without a wait object still works: WaitAll naps instead of sleeping
    cq_attr.wait_obj = FI_WAIT_NONE;
    cq_waitable_ = false;
    rc = fi_cq_open(domain_.get(), &cq_attr, cq_.out(), nullptr);
  }
  if (rc != 0) return Unavailable("{}: fi_cq_open: {}", Self(), fi_->Error(rc));
  fi_av_attr av_attr{};
  av_attr.type = FI_AV_TABLE;
  av_attr.count = static_cast<size_t>(options_.size);
  rc = fi_av_open(domain_.get(), &av_attr, av_.out(), nullptr);
  if (rc != 0) return Unavailable("{}: fi_av_open: {}", Self(), fi_->Error(rc));
  rc = fi_endpoint(domain_.get(), info_, ep_.out(), nullptr);
  if (rc != 0) return Unavailable("{}: fi_endpoint: {}", Self(), fi_->Error(rc));
  if ((rc = fi_ep_bind(ep_.get(), &cq_.get()->fid, FI_TRANSMIT | FI_RECV)) != 0 ||
      (rc = fi_ep_bind(ep_.get(), &av_.get()->fid, 0)) != 0 || (rc = fi_enable(ep_.get())) != 0) {
    return Unavailable("{}: binding and enabling the endpoint: {}", Self(), fi_->Error(rc));
  }
  char name[256];
  size_t len = sizeof(name);
  rc = fi_getname(&ep_.get()->fid, name, &len);
  if (rc != 0) return Internal("{}: fi_getname: {}", Self(), fi_->Error(rc));
  ep_name_.assign(name, len);
  nonce_ = base::RandomBytes(16);
  return Status::Ok();
}

Status OfiTransport::Start(base::Deadline deadline) {
  std::lock_guard lock(mu_);
  if (started_) return FailedPrecondition("{}: Start() called twice", Self());
  if (options_.store == nullptr) return InvalidArgument("{}: no store given", Self());
  char host[256] = "";
  std::string my_host = options_.host;
  if (my_host.empty() && ::gethostname(host, sizeof(host) - 1) == 0) my_host = host;
  const std::string prefix = options_.key_prefix + "/ofi/peer/";
  // The boot id last (optional when parsed): peers on this kernel watch this process.
  const std::string boot_id = LocalBootId();
  std::string value = fmt::format("v1 {} {} {} {} {}", my_host, ::getpid(), Hex(ep_name_),
                                  Hex(nonce_), boot_id.empty() ? "-" : boot_id);
  RY_RETURN_IF_ERROR(options_.store->Set(prefix + std::to_string(options_.rank), value, deadline)
                         .WithContext(Self() + ": publishing address"));
  std::vector<std::string> keys;
  for (int r = 0; r < options_.size; ++r) keys.push_back(prefix + std::to_string(r));
  std::vector<std::string> missing_keys;
  Status waited = options_.store->Wait(keys, deadline, &missing_keys);
  if (!waited.ok()) {
    std::vector<int> missing = MissingRanks(keys, missing_keys);
    if (missing.empty()) return waited.WithContext(Self() + ": waiting for every address");
    return DeadlineExceeded("{}: rank(s) {} never published their address under '{}<rank>' in {}",
                            Self(), DescribeRanks(missing), prefix, options_.store->Describe());
  }
  std::string names;
  for (int r = 0; r < options_.size; ++r) {
    RY_ASSIGN_OR_RETURN(std::string v, options_.store->Get(keys[r], deadline));
    char h[256], name_hex[512], nonce_hex[128], boot[64] = "-";
    int pid = 0;
    if (std::sscanf(v.c_str(), "v1 %255s %d %511s %127s %63s", h, &pid, name_hex, nonce_hex, boot) <
        4) {
      return InvalidArgument("{}: malformed address of rank {} under '{}': '{}'", Self(), r,
                             keys[r], v);
    }
    PeerState& p = peers_[r];
    p.info = PeerInfo{r, h, pid, name_hex, JobRankOf(options_, r)};
    if (std::string_view(boot) != "-") p.info.boot_id = boot;
    if (r != options_.rank && pid != ::getpid() && !boot_id.empty() && p.info.boot_id == boot_id) {
      p.watch.emplace(pid);
    }
    RY_ASSIGN_OR_RETURN(std::string name, Unhex(name_hex));
    RY_ASSIGN_OR_RETURN(p.nonce, Unhex(nonce_hex));
    if (name.size() != ep_name_.size()) {
      return InvalidArgument(
          "{}: {} published a {}-byte endpoint name, this rank's is {} bytes: "
          "are both using provider {}?",
          Self(), Who(r), name.size(), ep_name_.size(), info_->fabric_attr->prov_name);
    }
    names += name;
  }
  std::vector<fi_addr_t> addrs(options_.size, FI_ADDR_NOTAVAIL);
  int n = fi_av_insert(av_.get(), names.data(), options_.size, addrs.data(), 0, nullptr);
  if (n != options_.size) {
    return Internal("{}: fi_av_insert accepted {} of {} addresses{}", Self(), n, options_.size,
                    n < 0 ? ": " + fi_->Error(n) : "");
  }
  for (int r = 0; r < options_.size; ++r) peers_[r].addr = addrs[r];
  started_ = true;
  for (int r = 0; r < options_.size; ++r) PostControlRecv(r, Op::Kind::kHelloRecv);
  return Status::Ok();
}

Result<fid_mr*> OfiTransport::Register(void* buf, size_t len, uint64_t access,
                                       FidOwner<fid_mr>* out) {
  for (int attempt = 0;; ++attempt) {
    // Application-chosen keys are random: a writer must have been handed the blob.
    uint64_t key = 0;
    std::string r = base::RandomBytes(sizeof(key));
    std::memcpy(&key, r.data(), sizeof(key));
    if (info_->domain_attr->mr_key_size < 8)
      key &= (uint64_t{1} << (8 * info_->domain_attr->mr_key_size)) - 1;
    int rc = fi_mr_reg(domain_.get(), buf, len, access, 0, key, 0, out->out(), nullptr);
    if (rc == -FI_ENOKEY && attempt < 8) continue;
    if (rc != 0) {
      return Unavailable("{}: registering {} bytes at {}: {}", Self(), len, buf, fi_->Error(rc));
    }
    break;
  }
  if (mr_mode_ & FI_MR_ENDPOINT) {
    int rc = fi_mr_bind(out->get(), &ep_.get()->fid, 0);
    if (rc == 0) rc = fi_mr_enable(out->get());
    if (rc != 0) return Unavailable("{}: binding a memory region: {}", Self(), fi_->Error(rc));
  }
  return out->get();
}

Op* OfiTransport::NewOp(Op::Kind kind, int peer, Tag tag, void* buf, size_t len) {
  Op* op = ops_.Add();
  op->kind = kind;
  op->peer = peer;
  op->tag = tag;
  op->buf = buf;
  op->len = len;
  return op;
}

Status OfiTransport::PrepareLocal(Op* op) {
  if ((mr_mode_ & FI_MR_LOCAL) == 0) return Status::Ok();
  if (!op->bounce.empty()) {
    return Register(op->bounce.data(), op->bounce.size(), FI_RECV, &op->mr).status();
  }
  if (op->len == 0) return Status::Ok();
  uint64_t access = op->kind == Op::Kind::kRecv || op->kind == Op::Kind::kHelloRecv ||
                            op->kind == Op::Kind::kCtrlRecv
                        ? FI_RECV
                        : (op->kind == Op::Kind::kWrite ? FI_WRITE : FI_SEND);
  return Register(op->buf, op->len, access, &op->mr).status();
}

int OfiTransport::Post(Op* op) {
  fid_ep* ep = ep_.get();
  void* desc = op->mr.get() != nullptr ? fi_mr_desc(op->mr.get()) : nullptr;
  fi_addr_t addr = peers_[op->peer].addr;
  ssize_t rc = 0;
  switch (op->kind) {
    case Op::Kind::kSend:
    case Op::Kind::kHelloSend:
    case Op::Kind::kCtrlSend:
      rc = fi_tsend(ep, op->buf, op->len, desc, addr, op->tag, &op->ctx);
      break;
    case Op::Kind::kRecv:
    case Op::Kind::kHelloRecv:
    case Op::Kind::kCtrlRecv:
      if (!op->bounce.empty()) {
        rc = fi_trecv(ep, op->bounce.data(), op->bounce.size(), desc, addr, op->tag, 0, &op->ctx);
      } else {
        rc = fi_trecv(ep, op->buf, op->len, desc, addr, op->tag, 0, &op->ctx);
      }
      break;
    case Op::Kind::kWrite: {
      iovec iov{op->buf, op->len};
      fi_rma_iov rma{op->remote_addr, op->len, op->remote_key};
      fi_msg_rma msg{};
      msg.msg_iov = &iov;
      msg.desc = &desc;
      msg.iov_count = 1;
      msg.addr = addr;
      msg.rma_iov = &rma;
      msg.rma_iov_count = 1;
      msg.context = &op->ctx;
      // Delivery complete: once the write completes the bytes are visible at the target, so
      // a notify message sent afterwards cannot overtake them on any provider.
      rc = fi_writemsg(ep, &msg, FI_COMPLETION | FI_DELIVERY_COMPLETE);
      break;
    }
  }
  return static_cast<int>(rc);
}

void OfiTransport::QueueSend(Op* op) {
  EnsureHello(op->peer);
  peers_[op->peer].sendq.push_back(op);
  Flush(op->peer);
}

void OfiTransport::EnsureHello(int peer) {
  PeerState& p = peers_[peer];
  if (p.hello_sent) return;
  p.hello_sent = true;
  Op* op = NewInternalOp(Op::Kind::kHelloSend, peer, kHelloTag,
                         Proof(options_.secret, options_.rank, peer, p.nonce));
  if (op == nullptr) return;
  p.sendq.push_back(op);
}

Op* OfiTransport::QueueCtrl(int peer, CtrlType type, uint64_t seq, std::string_view text) {
  text = text.substr(0, kMaxCtrlText);
  std::string payload(kCtrlHeaderBytes + text.size(), '\0');
  PutU32(payload.data(), kCtrlMagic);
  payload[4] = static_cast<char>(type);
  PutU64(payload.data() + 8, seq);
  std::memcpy(payload.data() + kCtrlHeaderBytes, text.data(), text.size());
  Op* op = NewInternalOp(Op::Kind::kCtrlSend, peer, kCtrlTag, std::move(payload));
  if (op == nullptr) return nullptr;
  EnsureHello(peer);
  peers_[peer].sendq.push_back(op);
  return op;
}

void OfiTransport::SendCtrl(int peer, CtrlType type, uint64_t seq, std::string_view text) {
  if (QueueCtrl(peer, type, seq, text) != nullptr) Flush(peer);
}

Op* OfiTransport::NewInternalOp(Op::Kind kind, int peer, Tag tag, std::string payload) {
  Op* op = NewOp(kind, peer, tag, nullptr, 0);
  op->owned = std::move(payload);
  op->buf = op->owned.data();
  op->len = op->owned.size();
  Status st = PrepareLocal(op);
  if (!st.ok()) {
    FailOp(op, st);
    return nullptr;
  }
  return op;
}

void OfiTransport::PostControlRecv(int peer, Op::Kind kind) {
  bool hello = kind == Op::Kind::kHelloRecv;
  Op* op = NewInternalOp(kind, peer, hello ? kHelloTag : kCtrlTag,
                         std::string(hello ? kHelloBufBytes : kCtrlBufBytes, '\0'));
  if (op == nullptr) return;
  // At the front: the HELLO receive is never gated (it is what proves the peer) and the
  // control receive is posted the moment the proof checks out.
  peers_[peer].recvq.push_front(op);
  Flush(peer);
}

void OfiTransport::Flush(int peer) {
  PeerState& p = peers_[peer];
  // The second pass over sendq sends the clear-to-sends queued while posting receives.
  for (auto* q : {&p.sendq, &p.recvq, &p.sendq}) {
    while (!q->empty()) {
      if (!p.failure.ok()) return;
      Op* op = q->front();
      bool gated = q == &p.recvq && !p.proven && op->kind != Op::Kind::kHelloRecv;
      if (gated) break;
      int rc = Post(op);
      if (rc == -FI_EAGAIN) break;  // connection forming or queue full: retried after progress
      q->pop_front();
      if (rc != 0) {
        Status st = Unavailable("{}: {} {} tag {:#x}: {}", Self(), KindVerb(op->kind), Who(peer),
                                op->tag, fi_->Error(rc));
        if (IsConnectionError(-rc)) return FailPeer(peer, st);
        FailOp(op, st);
      } else if (op->kind == Op::Kind::kRecv && op->len > kEagerBytes) {
        QueueCtrl(peer, CtrlType::kClearToSend, op->tag, fmt::format("{} {}", op->index, op->len));
      }
    }
  }
}

void OfiTransport::FlushAll() {
  for (int r = 0; r < options_.size; ++r) {
    if (!peers_[r].sendq.empty() || !peers_[r].recvq.empty()) Flush(r);
  }
}

void OfiTransport::Finish(Op* op) {
  op->done = true;
  if (op->kind == Op::Kind::kRecv && op->user) {
    peers_[op->peer].open_recvs.erase({op->tag, op->index});
  }
  if (!op->user || op->abandoned) ops_.Erase(op->id);
}

void OfiTransport::FailOp(Op* op, Status status) {
  op->status = std::move(status);
  Finish(op);
}

void OfiTransport::FailPeer(int peer, Status status) {
  PeerState& p = peers_[peer];
  if (p.failure.ok()) {
    kLog.Warn("{}", status.message());
    p.failure = status;
  }
  // Unposted operations will never be; posted ones stay until the provider completes them.
  p.cts.clear();
  p.announced.clear();
  for (auto* q : {&p.sendq, &p.recvq, &p.awaiting_cts}) {
    while (!q->empty()) {
      Op* op = q->front();
      q->pop_front();
      FailOp(op, status);
    }
  }
}

void OfiTransport::OnCompletion(Op* op, size_t len) {
  switch (op->kind) {
    case Op::Kind::kRecv:
      op->received = len;
      if (!op->bounce.empty()) {
        if (len > op->len) return FailOp(op, TooLong(op->peer, op->tag, len, op->len));
        if (len > 0 && !op->abandoned) std::memcpy(op->buf, op->bounce.data(), len);
      }
      break;
    case Op::Kind::kHelloRecv:
      return OnHello(op, len);
    case Op::Kind::kCtrlRecv:
      return OnCtrl(op, len);
    default:
      break;
  }
  Finish(op);
}

void OfiTransport::OnHello(Op* op, size_t len) {
  int peer = op->peer;
  std::string expected = Proof(options_.secret, peer, options_.rank, nonce_);
  bool ok = len == kProofBytes &&
            base::ConstantTimeEqual(std::string_view(op->owned.data(), len), expected);
  Finish(op);
  if (!ok) {
    return FailPeer(peer, PermissionDenied("{}: {} did not prove the job secret in its HELLO "
                                           "({} bytes); refusing its data: is it a process of "
                                           "another job or started with another secret?",
                                           Self(), Who(peer), len));
  }
  peers_[peer].proven = true;
  PostControlRecv(peer, Op::Kind::kCtrlRecv);
}

void OfiTransport::OnCtrl(Op* op, size_t len) {
  int peer = op->peer;
  std::string msg = op->owned.substr(0, len);
  Finish(op);
  if (!peers_[peer].failure.ok()) return;
  PostControlRecv(peer, Op::Kind::kCtrlRecv);
  if (len < kCtrlHeaderBytes || GetU32(msg.data()) != kCtrlMagic) {
    kLog.Warn("{}: dropping a malformed control message ({} bytes) from {}", Self(), len,
              Who(peer));
    return;
  }
  auto type = static_cast<CtrlType>(msg[4]);
  uint64_t seq = GetU64(msg.data() + 8);
  std::string text = msg.substr(kCtrlHeaderBytes);
  switch (type) {
    case CtrlType::kPing:
      SendCtrl(peer, CtrlType::kPong, seq, activity_);
      break;
    case CtrlType::kPong:
      peers_[peer].pong_seq = std::max(peers_[peer].pong_seq, seq);
      peers_[peer].pong_activity = std::move(text);
      break;
    case CtrlType::kClearToSend:
      return OnClearToSend(peer, seq, text);
    case CtrlType::kRequestToSend:
      return OnRequestToSend(peer, seq, text);
    case CtrlType::kReject:
      return OnReject(peer, seq, text);
    case CtrlType::kAbort:
      if (!failure_.failed()) {
        failure_.Fail(Aborted("{}: {} aborted the job: {}", Self(), Who(peer), text));
        kLog.Warn("{}", failure_.status().message());
      }
      break;
  }
}

void OfiTransport::OnError(const fi_cq_err_entry& err) {
  Op* op = static_cast<Op*>(err.op_context);
  if (op == nullptr) {
    kLog.Warn("{}: completion error without an operation: {}", Self(), fi_->Error(-err.err));
    return;
  }
  if (err.err == FI_ECANCELED) {
    if (op->abandoned) {
      op->status = Aborted("{}: cancelled", Self());
      return Finish(op);
    }
    // Not cancelled by us: rxm cancels what is posted to a peer whose connection broke.
    int peer = op->peer;
    Status st = peers_[peer].failure.ok()
                    ? Unavailable(
                          "{}: {} {} tag {:#x}: the provider cancelled it (connection "
                          "to the peer lost: process died or link failed)",
                          Self(), KindVerb(op->kind), Who(peer), op->tag)
                    : peers_[peer].failure;
    FailOp(op, st);
    return FailPeer(peer, st);
  }
  char buf[256] = "";
  const char* detail = fi_cq_strerror(cq_.get(), err.prov_errno, err.err_data, buf, sizeof(buf));
  std::string what = fmt::format("{} {} tag {:#x}", KindVerb(op->kind), Who(op->peer), op->tag);
  if (err.err == FI_ETRUNC && op->kind == Op::Kind::kRecv) {
    // rxm reports the overflow only for receives posted before the message came; for one
    // matched from the unexpected queue it reports neither length.
    size_t actual = err.olen > 0 ? op->len + err.olen : (err.len > op->len ? err.len : 0);
    std::string length = actual > 0 ? fmt::format("is {} bytes", actual)
                                    : std::string("is longer (the provider did not say how long)");
    return FailOp(op, DataLoss("{}: message from {} with tag {:#x} {} but the posted receive "
                               "holds {}",
                               Self(), Who(op->peer), op->tag, length, op->len));
  }
  if (op->kind == Op::Kind::kHelloRecv) return OnHello(op, op->len + err.olen);
  Status st = Unavailable("{}: {} failed: {} ({})", Self(), what, fi_->Error(-err.err),
                          detail != nullptr ? detail : "no provider detail");
  // A lost connection fails everything with the peer; so does any failed control message,
  // since probes and aborts could no longer be trusted to get through.
  int peer = op->peer;
  bool whole_peer = IsConnectionError(err.err) || !op->user;
  FailOp(op, st);  // may free op
  if (whole_peer) FailPeer(peer, st);
}

int OfiTransport::PollCq() {
  int handled = 0;
  fi_cq_tagged_entry entries[kCqBatch];
  for (;;) {
    ssize_t n = fi_cq_read(cq_.get(), entries, kCqBatch);
    if (n > 0) {
      for (ssize_t i = 0; i < n; ++i) {
        OnCompletion(static_cast<Op*>(entries[i].op_context), entries[i].len);
      }
      handled += static_cast<int>(n);
      continue;
    }
    if (n == -FI_EAVAIL) {
      fi_cq_err_entry err{};
      if (fi_cq_readerr(cq_.get(), &err, 0) > 0) {
        OnError(err);
        ++handled;
        continue;
      }
    } else if (n != -FI_EAGAIN) {
      kLog.Warn("{}: fi_cq_read: {}", Self(), fi_->Error(static_cast<int>(n)));
    }
    return handled;
  }
}

void OfiTransport::Progress(std::unique_lock<std::mutex>& lock, base::Deadline deadline) {
  int n = PollCq();
  FlushAll();
  if (n > 0) return;
  auto spin_end = base::Clock::now() + kSpin;
  while (base::Clock::now() < spin_end) {
    if (PollCq() > 0) return FlushAll();
  }
  int timeout_ms = std::clamp(deadline.PollTimeoutMs(), 0, kMaxBlockMs);
  if (deadline.IsNever()) timeout_ms = kMaxBlockMs;
  if (timeout_ms == 0) return;
  if (cq_waitable_) {
    fi_cq_tagged_entry entries[kCqBatch];
    lock.unlock();  // Abort() may come from another thread meanwhile
    ssize_t got = fi_cq_sread(cq_.get(), entries, kCqBatch, nullptr, timeout_ms);
    lock.lock();
    for (ssize_t i = 0; i < got; ++i) {
      OnCompletion(static_cast<Op*>(entries[i].op_context), entries[i].len);
    }
    if (got < 0 && got != -FI_EAGAIN && got != -FI_EAVAIL && got != -FI_ETIMEDOUT &&
        got != -FI_EINTR) {
      kLog.Debug("{}: fi_cq_sread: {}; napping instead", Self(), fi_->Error(static_cast<int>(got)));
      cq_waitable_ = false;
    }
  } else {
    lock.unlock();
    std::this_thread::sleep_for(std::chrono::microseconds(200));
    lock.lock();
  }
  PollCq();
  FlushAll();
}

void OfiTransport::CheckLiveness(int peer, const Op* pending) {
  PeerState& p = peers_[peer];
  if (!p.watch || !p.failure.ok() || !p.watch->Exited()) return;
  PollCq();  // take what it sent before it died
  if (!p.failure.ok()) return;
  std::string what = pending == nullptr
                         ? std::string("a probe")
                         : fmt::format("{} tag {:#x}", KindVerb(pending->kind), pending->tag);
  FailPeer(peer,
           Unavailable("{}: {}: process exited while {} was pending", Self(), Who(peer), what));
}

void OfiTransport::Abandon(Op* op) {
  PeerState& p = peers_[op->peer];
  for (auto* q : {&p.sendq, &p.recvq, &p.awaiting_cts}) {
    auto it = std::find(q->begin(), q->end(), op);
    if (it != q->end()) {
      q->erase(it);
      ops_.Erase(op->id);
      return;
    }
  }
  op->abandoned = true;
  if (op->kind == Op::Kind::kRecv) {
    p.open_recvs.erase({op->tag, op->index});
    fi_cancel(&ep_.get()->fid, &op->ctx);
  }
}

void OfiTransport::SubmitSend(Op* op) {
  PeerState& p = peers_[op->peer];
  op->index = p.sends_posted[op->tag]++;
  const std::pair<Tag, uint64_t> key{op->tag, op->index};
  // A send behind a held one with its tag waits too: per-tag order.
  bool behind = std::any_of(p.awaiting_cts.begin(), p.awaiting_cts.end(),
                            [&](const Op* o) { return o->tag == op->tag; });
  if (!behind) {
    if (op->len <= kEagerBytes) {
      p.cts.erase(key);  // its receive is longer than needed; nothing to wait for
      return QueueSend(op);
    }
    if (auto c = p.cts.find(key); c != p.cts.end()) {
      size_t capacity = c->second;
      p.cts.erase(c);
      if (op->len > capacity) return RejectSend(op, capacity);
      return QueueSend(op);
    }
  }
  // Held until the receive is posted. The HELLO still goes now: the peer posts nothing
  // from this rank, so sends no clear-to-send, before this rank has proven itself. A long
  // message says its length, so that a receive too short for it (which sends no
  // clear-to-send) fails at once instead of at its deadline.
  p.awaiting_cts.push_back(op);
  if (op->len > kEagerBytes) {
    QueueCtrl(op->peer, CtrlType::kRequestToSend, op->tag,
              fmt::format("{} {}", op->index, op->len));
  }
  EnsureHello(op->peer);
  Flush(op->peer);
}

void OfiTransport::Release(int peer, Tag tag) {
  PeerState& p = peers_[peer];
  auto& held = p.awaiting_cts;
  bool moved = false;
  for (;;) {
    auto it = std::find_if(held.begin(), held.end(), [&](const Op* o) { return o->tag == tag; });
    if (it == held.end()) break;
    Op* op = *it;
    auto c = p.cts.find({tag, op->index});
    if (op->len > kEagerBytes && c == p.cts.end()) break;  // its receive is not posted yet
    held.erase(it);
    if (c != p.cts.end()) {
      size_t capacity = c->second;
      p.cts.erase(c);
      if (op->len > capacity) {
        RejectSend(op, capacity);  // the later ones stay held: the receiver has failed
        break;
      }
    }
    p.sendq.push_back(op);  // the HELLO went when the first was held
    moved = true;
  }
  if (moved) Flush(peer);
}

void OfiTransport::OnClearToSend(int peer, Tag tag, std::string_view text) {
  unsigned long long index = 0, capacity = 0;
  if (std::sscanf(std::string(text).c_str(), "%llu %llu", &index, &capacity) != 2) {
    kLog.Warn("{}: dropping a malformed clear-to-send from {}", Self(), Who(peer));
    return;
  }
  peers_[peer].cts[{tag, index}] = capacity;
  Release(peer, tag);
}

void OfiTransport::OnRequestToSend(int peer, Tag tag, std::string_view text) {
  unsigned long long index = 0, bytes = 0;
  if (std::sscanf(std::string(text).c_str(), "%llu %llu", &index, &bytes) != 2) {
    kLog.Warn("{}: dropping a malformed request-to-send from {}", Self(), Who(peer));
    return;
  }
  PeerState& p = peers_[peer];
  if (auto o = p.open_recvs.find({tag, index}); o != p.open_recvs.end()) {
    // Posted: a receive longer than 4 KiB sent its clear-to-send; a shorter one cannot hold
    // the message.
    if (bytes > o->second->len) RejectRecv(o->second, bytes, /*tell_peer=*/true);
    return;
  }
  if (index >= p.recvs_posted[tag]) p.announced[{tag, index}] = bytes;
}

void OfiTransport::OnReject(int peer, Tag tag, std::string_view text) {
  char side = 0;
  unsigned long long index = 0, bytes = 0, capacity = 0;
  if (std::sscanf(std::string(text).c_str(), "%c %llu %llu %llu", &side, &index, &bytes,
                  &capacity) != 4) {
    kLog.Warn("{}: dropping a malformed reject from {}", Self(), Who(peer));
    return;
  }
  PeerState& p = peers_[peer];
  if (side == 's') {  // our held send `index`: the peer's receive is too short
    auto& held = p.awaiting_cts;
    auto it = std::find_if(held.begin(), held.end(),
                           [&](const Op* o) { return o->tag == tag && o->index == index; });
    if (it == held.end()) return;
    Op* op = *it;
    held.erase(it);
    RejectSend(op, capacity);
    return;
  }
  if (auto o = p.open_recvs.find({tag, index}); o != p.open_recvs.end()) {
    RejectRecv(o->second, bytes, /*tell_peer=*/false);
  }
}

void OfiTransport::RejectSend(Op* op, size_t capacity) {
  const int peer = op->peer;
  Status st = DataLoss(
      "{}: message to {} with tag {:#x} is {} bytes but the receive that rank "
      "posted holds {}",
      Self(), Who(peer), op->tag, op->len, capacity);
  kLog.Debug("{}", st.message());
  SendCtrl(peer, CtrlType::kReject, op->tag,
           fmt::format("r {} {} {}", op->index, op->len, capacity));
  FailOp(op, std::move(st));
}

void OfiTransport::RejectRecv(Op* op, size_t message_bytes, bool tell_peer) {
  // The receive may be in the provider: it stays there until WaitAll gives it up (cancels
  // it); the transport is failed from here on, so nothing else can match it.
  failure_.Fail(TooLong(op->peer, op->tag, message_bytes, op->len));
  if (tell_peer) {
    SendCtrl(op->peer, CtrlType::kReject, op->tag,
             fmt::format("s {} {} {}", op->index, message_bytes, op->len));
  }
}

Result<Request> OfiTransport::Submit(Op* op) {
  op->user = true;
  PeerState& p = peers_[op->peer];
  if (!p.failure.ok()) {  // completes at once with the peer's failure
    op->status = p.failure;
    op->done = true;
    return Request{op->id};
  }
  Status st = PrepareLocal(op);
  if (!st.ok()) {
    ops_.Erase(op->id);
    return st;
  }
  if (op->kind == Op::Kind::kRecv) {
    op->index = p.recvs_posted[op->tag]++;
    if (auto a = p.announced.find({op->tag, op->index}); a != p.announced.end()) {
      size_t bytes = a->second;
      p.announced.erase(a);
      if (bytes > op->len) {  // the sender holds a message this receive cannot take
        SendCtrl(op->peer, CtrlType::kReject, op->tag,
                 fmt::format("s {} {} {}", op->index, bytes, op->len));
        op->status = TooLong(op->peer, op->tag, bytes, op->len);
        op->done = true;
        return Request{op->id};
      }
    }
    p.open_recvs[{op->tag, op->index}] = op;
    p.recvq.push_back(op);
    Flush(op->peer);
  } else if (op->kind == Op::Kind::kSend) {
    SubmitSend(op);
  } else {
    QueueSend(op);
  }
  return Request{op->id};
}

Result<Request> OfiTransport::PostSend(int peer, Tag tag, const void* data, size_t len) {
  std::lock_guard lock(mu_);
  RY_RETURN_IF_ERROR(Usable());
  RY_RETURN_IF_ERROR(CheckPeer(peer));
  if (tag >= kOfiMaxUserTag) {
    return InvalidArgument("{}: tag {:#x} is reserved (user tags are below 2^60)", Self(), tag);
  }
  Op* op = NewOp(Op::Kind::kSend, peer, tag, const_cast<void*>(data), len);
  return Submit(op);
}

Result<Request> OfiTransport::PostRecv(int peer, Tag tag, void* data, size_t len) {
  std::lock_guard lock(mu_);
  RY_RETURN_IF_ERROR(Usable());
  RY_RETURN_IF_ERROR(CheckPeer(peer));
  if (tag >= kOfiMaxUserTag) {
    return InvalidArgument("{}: tag {:#x} is reserved (user tags are below 2^60)", Self(), tag);
  }
  Op* op = NewOp(Op::Kind::kRecv, peer, tag, data, len);
  if (len < kEagerBytes) op->bounce.assign(kEagerBytes, '\0');
  return Submit(op);
}

Status OfiTransport::WaitAll(std::span<const Request> requests, base::Deadline deadline) {
  std::unique_lock lock(mu_);
  ops_.StartWait();
  internal::WaitSet<Op> w =
      ops_.Collect(requests, Self(), [](const Op& op) { return op.user && !op.abandoned; });
  auto consume = [&](Status result) {
    for (Op* op : w.ops) {
      if (op->done) {
        if (op->kind == Op::Kind::kRecv && op->status.ok()) ops_.SetReceived(op->id, op->received);
        ops_.Erase(op->id);
      } else {
        Abandon(op);
      }
    }
    // Any error but the caller's own mistake fails the transport (transport.h), a missed
    // deadline included: a send handed to the provider cannot be taken back.
    if (!result.ok() && result.code() != StatusCode::kInvalidArgument) {
      failure_.Fail(result);
      return failure_.status();
    }
    return result;
  };
  if (!w.status.ok()) return consume(w.status);
  if (failure_.failed()) return consume(failure_.status());
  if (!started_) return consume(Usable());
  auto next_check = base::Clock::now() + kLivenessTick;
  for (;;) {
    if (failure_.failed()) return consume(failure_.status());
    if (base::Clock::now() >= next_check) {
      next_check = base::Clock::now() + kLivenessTick;
      for (Op* op : w.ops) {
        if (!op->done) CheckLiveness(op->peer, op);
      }
    }
    bool all = true;
    for (Op* op : w.ops) {
      if (op->done && !op->status.ok()) return consume(op->status);
      if (!op->done && !peers_[op->peer].failure.ok()) return consume(peers_[op->peer].failure);
      all = all && op->done;
    }
    if (all) return consume(Status::Ok());
    if (deadline.Expired()) {
      std::vector<internal::PendingRequest> left;
      for (Op* op : w.ops) {
        if (op->done) continue;
        const auto& held = peers_[op->peer].awaiting_cts;
        bool is_held = std::find(held.begin(), held.end(), op) != held.end();
        left.push_back({.peer = op->peer,
                        .is_send = op->kind != Op::Kind::kRecv,
                        .tag = op->tag,
                        .done_bytes = 0,
                        .bytes = op->len,
                        .note = is_held ? " (held: that rank has not posted the receive)" : ""});
      }
      return consume(internal::DeadlinePassed(Self(), left, w.ops.size(),
                                              [this](int peer) { return Who(peer); }));
    }
    Progress(lock, deadline);
  }
}

std::vector<ProbeResult> OfiTransport::Probe(std::span<const int> ranks, base::Deadline deadline) {
  std::unique_lock lock(mu_);
  internal::ProbeSet probes(ranks, options_.rank, options_.size, activity_);
  std::vector<uint64_t> seqs(ranks.size(), 0);
  for (size_t i : probes.Pending()) {
    const PeerState& p = peers_[probes.rank(i)];
    if (!started_) {
      probes.Unresponsive(i, "this rank's transport has not started");
    } else if (!p.failure.ok()) {
      probes.Dead(i, p.failure.message());
    } else {
      seqs[i] = ++probe_seq_;
      SendCtrl(probes.rank(i), CtrlType::kPing, seqs[i], "");
    }
  }
  auto next_check = base::Clock::now();
  for (;;) {
    const bool check = base::Clock::now() >= next_check;
    if (check) next_check = base::Clock::now() + kLivenessTick;
    for (size_t i : probes.Pending()) {
      if (check) CheckLiveness(probes.rank(i), nullptr);
      const PeerState& p = peers_[probes.rank(i)];
      if (p.pong_seq >= seqs[i]) {
        probes.Alive(i, p.pong_activity);
      } else if (!p.failure.ok()) {
        probes.Dead(i, p.failure.message());
      }
    }
    if (probes.settled() || deadline.Expired()) break;
    Progress(lock, deadline);
  }
  return std::move(probes).Finish();
}

void OfiTransport::Abort(std::string_view reason, base::Deadline deadline) {
  std::unique_lock lock(mu_);
  if (!failure_.RequestAbort(reason)) return;
  // Peers are told even when this transport already failed otherwise.
  failure_.Fail(Aborted("{}: this rank aborted the job: {}", Self(), reason));
  if (!started_) return;
  for (int r = 0; r < options_.size; ++r) {
    if (r != options_.rank && peers_[r].failure.ok()) SendCtrl(r, CtrlType::kAbort, 0, reason);
  }
  // Progress until every ABORT left (best effort): with manual progress nothing moves unless
  // this rank reads its CQ.
  for (;;) {
    bool pending = false;
    ops_.ForEach([&](const Op& op) {
      if (op.kind == Op::Kind::kCtrlSend && !op.done && peers_[op.peer].failure.ok()) {
        pending = true;
      }
    });
    if (!pending || deadline.Expired()) return;
    Progress(lock, deadline);
  }
}

Result<RmaWriter::RmaRegion> OfiTransport::RegisterRma(void* data, size_t len) {
  std::lock_guard lock(mu_);
  RY_RETURN_IF_ERROR(Usable());
  if (!rma_) {
    return Unimplemented("{}: provider {} offers no RMA", Self(), info_->fabric_attr->prov_name);
  }
  if (mr_mode_ & FI_MR_RAW) {
    return Unimplemented("{}: provider {} uses raw memory keys (FI_MR_RAW), not supported", Self(),
                         info_->fabric_attr->prov_name);
  }
  auto region = std::make_unique<RmaRegionState>();
  RY_RETURN_IF_ERROR(Register(data, len, FI_REMOTE_WRITE | FI_WRITE, &region->mr).status());
  region->base = (mr_mode_ & FI_MR_VIRT_ADDR) ? reinterpret_cast<uint64_t>(data) : 0;
  region->len = len;
  std::string key(kRemoteKeyBytes, '\0');
  PutU32(key.data(), kKeyMagic);
  PutU64(key.data() + 8, fi_mr_key(region->mr.get()));
  PutU64(key.data() + 16, region->base);
  PutU64(key.data() + 24, len);
  uint64_t id = next_region_++;
  regions_.emplace(id, std::move(region));
  return RmaRegion{id, std::move(key)};
}

Status OfiTransport::DeregisterRma(uint64_t region_id) {
  std::lock_guard lock(mu_);
  if (regions_.erase(region_id) == 0) {
    return NotFound("{}: no RMA region {} registered", Self(), region_id);
  }
  return Status::Ok();
}

Result<Request> OfiTransport::PostWrite(int peer, const void* data, size_t len,
                                        std::string_view remote_key, uint64_t offset) {
  std::lock_guard lock(mu_);
  RY_RETURN_IF_ERROR(Usable());
  RY_RETURN_IF_ERROR(CheckPeer(peer));
  if (!rma_) {
    return Unimplemented("{}: provider {} offers no RMA", Self(), info_->fabric_attr->prov_name);
  }
  if (remote_key.size() != kRemoteKeyBytes || GetU32(remote_key.data()) != kKeyMagic) {
    return InvalidArgument("{}: remote key for {} is not an ofi RMA key ({} bytes)", Self(),
                           Who(peer), remote_key.size());
  }
  uint64_t region_len = GetU64(remote_key.data() + 24);
  if (offset > region_len || len > region_len - offset) {
    return InvalidArgument("{}: write of {} bytes at offset {} exceeds {}'s {}-byte region", Self(),
                           len, offset, Who(peer), region_len);
  }
  Op* op = NewOp(Op::Kind::kWrite, peer, 0, const_cast<void*>(data), len);
  op->remote_key = GetU64(remote_key.data() + 8);
  op->remote_addr = GetU64(remote_key.data() + 16) + offset;
  return Submit(op);
}

fi_info* Hints(const FabricLibrary& fi, const std::string& provider, bool rma) {
  fi_info* hints = fi.AllocInfo();
  if (hints == nullptr) return nullptr;
  hints->ep_attr->type = FI_EP_RDM;
  hints->caps = FI_MSG | FI_TAGGED | FI_DIRECTED_RECV | (rma ? FI_RMA : 0);
  hints->mode = FI_CONTEXT | FI_CONTEXT2;
  // What this transport handles; offering fewer mr_mode bits would hide verbs and efa.
  hints->domain_attr->mr_mode =
      FI_MR_LOCAL | FI_MR_VIRT_ADDR | FI_MR_ALLOCATED | FI_MR_PROV_KEY | FI_MR_ENDPOINT;
  hints->domain_attr->threading = FI_THREAD_SAFE;  // Abort() may come from another thread
  hints->tx_attr->msg_order = FI_ORDER_SAS;
  hints->rx_attr->msg_order = FI_ORDER_SAS;
  if (!provider.empty()) hints->fabric_attr->prov_name = ::strdup(provider.c_str());
  return hints;
}

}  // namespace

Result<std::vector<std::string>> ListOfiProviders() {
  RY_ASSIGN_OR_RETURN(const FabricLibrary* fi, LoadFabricForTransport());
  fi_info* hints = Hints(*fi, "", false);
  if (hints == nullptr) return ResourceExhausted("fi_allocinfo failed");
  fi_info* info = nullptr;
  int rc = fi->getinfo(kApiVersion, nullptr, nullptr, 0, hints, &info);
  fi->freeinfo(hints);
  std::vector<std::string> names;
  if (rc == -FI_ENODATA) return names;
  if (rc != 0) return Unavailable("fi_getinfo listing providers: {}", fi->Error(rc));
  for (fi_info* i = info; i != nullptr; i = i->next) {
    std::string name = i->fabric_attr->prov_name;
    if (std::find(names.begin(), names.end(), name) == names.end()) names.push_back(name);
  }
  fi->freeinfo(info);
  return names;
}

Result<std::unique_ptr<Transport>> NewOfiTransport(const TransportOptions& options,
                                                   const OfiOptions& ofi) {
  if (options.size < 1 || options.rank < 0 || options.rank >= options.size) {
    return InvalidArgument("ofi transport: rank {} of size {} is not a valid rank", options.rank,
                           options.size);
  }
  if (ofi.provider.empty()) return InvalidArgument("ofi transport: no provider named");
  RY_ASSIGN_OR_RETURN(const FabricLibrary* fi, LoadFabricForTransport());
  fi_info* info = nullptr;
  int rc = -FI_ENODATA;
  for (bool rma : {true, false}) {  // RMA when the provider has it
    fi_info* hints = Hints(*fi, ofi.provider, rma);
    if (hints == nullptr) return ResourceExhausted("ofi transport: fi_allocinfo failed");
    const char* node = ofi.node.empty() ? nullptr : ofi.node.c_str();
    rc = fi->getinfo(kApiVersion, node, nullptr, node ? FI_SOURCE : 0, hints, &info);
    fi->freeinfo(hints);
    if (rc != -FI_ENODATA) break;
  }
  if (rc == -FI_ENODATA) {
    auto names = ListOfiProviders();
    std::string available =
        names.ok() ? fmt::format("{}", fmt::join(*names, ", ")) : names.status().message();
    return NotFound("ofi provider '{}' is not available here{}; available: {}", ofi.provider,
                    ofi.node.empty() ? "" : " on address " + ofi.node,
                    available.empty() ? "none" : available);
  }
  if (rc != 0) {
    return Unavailable("ofi transport: fi_getinfo for provider '{}': {}", ofi.provider,
                       fi->Error(rc));
  }
  // Deterministic choice among the per-interface duplicates: the named domain, else the
  // first; IPv4 addressing before IPv6 (link-local IPv6 entries are not routable).
  fi_info* chosen = nullptr;
  std::vector<std::string> domains;
  for (int pass = 0; pass < 2 && chosen == nullptr; ++pass) {
    for (fi_info* i = info; i != nullptr && chosen == nullptr; i = i->next) {
      std::string domain = i->domain_attr->name != nullptr ? i->domain_attr->name : "";
      if (pass == 0 && std::find(domains.begin(), domains.end(), domain) == domains.end()) {
        domains.push_back(domain);
      }
      if (!ofi.domain.empty() && domain != ofi.domain) continue;
      if (pass == 0 && i->addr_format != FI_SOCKADDR_IN) continue;
      chosen = i;
    }
  }
  if (chosen == nullptr) {
    fi->freeinfo(info);
    return NotFound("ofi provider '{}' has no domain '{}'; it offers: {}", ofi.provider, ofi.domain,
                    fmt::join(domains, ", "));
  }
  fi_info* mine = fi->dupinfo(chosen);
  fi->freeinfo(info);
  if (mine == nullptr) return ResourceExhausted("ofi transport: fi_dupinfo failed");
  kLog.Debug("rank {}: provider {} domain {} mr_mode {:#x}", options.rank,
             mine->fabric_attr->prov_name, mine->domain_attr->name, mine->domain_attr->mr_mode);
  auto transport = std::make_unique<OfiTransport>(fi, options, mine);
  RY_RETURN_IF_ERROR(transport->Open());
  return std::unique_ptr<Transport>(std::move(transport));
}

}  // namespace railyard::net
