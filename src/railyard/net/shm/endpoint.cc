// This rank's segment, the address exchange in Start and mapping the peers' segments; see
// shm_transport_impl.h.
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <optional>

#include "railyard/base/hmac.h"
#include "railyard/base/logging.h"
#include "railyard/net/peer_directory.h"
#include "railyard/net/shm/shm_transport_impl.h"

namespace railyard::net::shm {
namespace {

const base::Logger kLog("shm");

}  // namespace

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

}  // namespace railyard::net::shm

namespace railyard::net {

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
  return std::unique_ptr<Transport>(std::make_unique<shm::ShmTransport>(options, shm_options));
}

}  // namespace railyard::net
