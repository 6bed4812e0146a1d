#include "railyard/storage/page_snapshot.h"

#include <fcntl.h>
#include <linux/userfaultfd.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include "railyard/base/clock.h"
#include "railyard/base/units.h"
#include "railyard/storage/aligned_buffer.h"
#include "railyard/storage/fs.h"
#include "railyard/storage/task_pool.h"

namespace railyard::storage {
namespace {

// Debian 12's kernel headers (6.1) predate it; the value is the kernel's ABI (Linux 6.4).
constexpr uint64_t kFeatureWpUnpopulated = uint64_t{1} << 13;
constexpr uint64_t kFeatures = UFFD_FEATURE_PAGEFAULT_FLAG_WP | kFeatureWpUnpopulated;
constexpr size_t kChunksPerTask = 32;   // 64 MiB of copying per pool task
constexpr size_t kCopyAheadChunks = 8;  // 16 MiB: see CopyAhead

uint64_t PageSize() {
  static const uint64_t size = static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  return size;
}

// A userfaultfd with write-protect faults enabled, or UNAVAILABLE saying why not.
Result<base::UniqueFd> OpenUserfaultfd() {
  const int fd = static_cast<int>(::syscall(SYS_userfaultfd, O_CLOEXEC | O_NONBLOCK));
  if (fd < 0) {
    const int err = errno;
    return Unavailable(
        "userfaultfd: {} (needs root, CAP_SYS_PTRACE or sysctl "
        "vm.unprivileged_userfaultfd=1)",
        std::strerror(err));
  }
  base::UniqueFd uffd(fd);
  uffdio_api api{};
  api.api = UFFD_API;
  api.features = kFeatures;
  if (::ioctl(uffd.get(), UFFDIO_API, &api) != 0 || (api.features & kFeatures) != kFeatures) {
    return Unavailable(
        "userfaultfd cannot write-protect unpopulated pages on this kernel "
        "(needs Linux 6.4 or later)");
  }
  return uffd;
}

bool Protect(int uffd, uint64_t start, uint64_t len, bool on) {
  uffdio_writeprotect wp{};
  wp.range.start = start;
  wp.range.len = len;
  wp.mode = on ? UFFDIO_WRITEPROTECT_MODE_WP : 0;  // lifting it also wakes waiting writers
  return ::ioctl(uffd, UFFDIO_WRITEPROTECT, &wp) == 0;
}

}  // namespace

Status PageSnapshot::Probe() { return OpenUserfaultfd().status(); }

Result<std::unique_ptr<PageSnapshot>> PageSnapshot::Begin(
    std::span<const SnapshotSegment> segments) {
  const auto start_time = base::Clock::now();
  std::unique_ptr<PageSnapshot> snap(new PageSnapshot());
  const uint64_t page = PageSize();

  // Page ranges under the sources, merged where they touch.
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
  for (const SnapshotSegment& s : segments) {
    if (s.len == 0) continue;
    const auto src = reinterpret_cast<uint64_t>(s.src);
    ranges.emplace_back(src / page * page, AlignUp(src + s.len, page));
  }
  std::sort(ranges.begin(), ranges.end());
  for (const auto& r : ranges) {
    if (!snap->registered_.empty() && r.first <= snap->registered_.back().second) {
      snap->registered_.back().second = std::max(snap->registered_.back().second, r.second);
    } else {
      snap->registered_.push_back(r);
    }
  }

  // Chunks: the ranges cut at kChunkBytes boundaries, each with the segment parts inside it.
  std::vector<std::pair<uint64_t, uint64_t>> bounds;
  for (auto [start, end] : snap->registered_) {
    for (uint64_t at = start; at < end;) {
      const uint64_t next = std::min(end, (at / kChunkBytes + 1) * kChunkBytes);
      bounds.emplace_back(at, next);
      at = next;
    }
  }
  snap->chunk_count_ = bounds.size();
  snap->chunks_ = std::make_unique<Chunk[]>(bounds.size());
  for (size_t i = 0; i < bounds.size(); ++i) {
    snap->chunks_[i].start = bounds[i].first;
    snap->chunks_[i].end = bounds[i].second;
  }
  for (const SnapshotSegment& s : segments) {
    if (s.len == 0) continue;
    const auto src = reinterpret_cast<uint64_t>(s.src);
    for (Chunk* c = snap->ChunkAt(src);
         c != snap->chunks_.get() + snap->chunk_count_ && c->start < src + s.len; ++c) {
      const uint64_t from = std::max(src, c->start), to = std::min(src + s.len, c->end);
      c->pieces.push_back({reinterpret_cast<const void*>(from),
                           static_cast<uint8_t*>(s.dst) + (from - src), to - from});
    }
  }
  snap->stats_.chunks = snap->chunk_count_;
  for (auto [start, end] : snap->registered_) snap->stats_.protected_bytes += end - start;
  if (snap->chunk_count_ == 0) {
    snap->finished_ = true;
    return snap;
  }

  auto uffd_or = OpenUserfaultfd();
  if (!uffd_or.ok()) {
    snap->finished_ = true;  // nothing protected, nothing to copy
    return uffd_or.status();
  }
  snap->uffd_ = std::move(*uffd_or);
  const int uffd = snap->uffd_.get();
  std::vector<std::pair<uint64_t, uint64_t>> ranges_to_register = std::move(snap->registered_);
  snap->registered_.clear();
  for (auto [start, end] : ranges_to_register) {
    uffdio_register reg{};
    reg.range.start = start;
    reg.range.len = end - start;
    reg.mode = UFFDIO_REGISTER_MODE_WP;
    const bool registered = ::ioctl(uffd, UFFDIO_REGISTER, &reg) == 0;
    const int err = errno;
    if (registered) snap->registered_.emplace_back(start, end);
    if (!registered || (reg.ioctls & (uint64_t{1} << _UFFDIO_WRITEPROTECT)) == 0) {
      snap->Abandon();
      return Unavailable(
          "cannot write-protect {} at {:#x}: {} (only private anonymous memory "
          "can be)",
          base::FormatBytes(end - start), start,
          registered ? "not supported for this mapping" : std::strerror(err));
    }
  }
  for (auto [start, end] : snap->registered_) {
    if (!Protect(uffd, start, end - start, true)) {
      const int err = errno;
      snap->Abandon();  // unregistering also drops the protection set so far
      return Unavailable("write-protecting {:#x}+{}: {}", start, base::FormatBytes(end - start),
                         std::strerror(err));
    }
  }
  const int stop = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (stop < 0) {
    const int err = errno;
    snap->Abandon();
    return ErrnoStatus(err, "page snapshot: eventfd");
  }
  snap->stop_fd_ = base::UniqueFd(stop);
  PageSnapshot* raw = snap.get();
  snap->handler_ = std::thread([raw] { raw->HandleFaults(); });
  snap->stats_.protect_seconds = base::SecondsSince(start_time);
  return snap;
}

PageSnapshot::Chunk* PageSnapshot::ChunkAt(uint64_t address) {
  Chunk* first = chunks_.get();
  Chunk* last = first + chunk_count_;
  Chunk* it = std::upper_bound(first, last, address,
                               [](uint64_t a, const Chunk& c) { return a < c.start; });
  if (it == first) return last;
  --it;
  return address < it->end ? it : last;
}

bool PageSnapshot::CopyChunk(size_t i) {
  Chunk& c = chunks_[i];
  uint8_t expected = kProtected;
  if (!c.state.compare_exchange_strong(expected, kCopying)) return false;
  for (const SnapshotSegment& p : c.pieces) std::memcpy(p.dst, p.src, p.len);
  if (!Protect(uffd_.get(), c.start, c.end - c.start, false)) {
    handler_errno_.store(errno);
  }
  c.state.store(kCopied);
  c.state.notify_all();
  return true;
}

void PageSnapshot::HandleFaults() {
  uffd_msg msgs[16];
  for (;;) {
    pollfd fds[2] = {{uffd_.get(), POLLIN, 0}, {stop_fd_.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      handler_errno_.store(errno);
      return;
    }
    if (fds[1].revents != 0) return;
    const ssize_t n = ::read(uffd_.get(), msgs, sizeof(msgs));
    if (n < 0) {
      if (errno == EAGAIN || errno == EINTR) continue;
      handler_errno_.store(errno);
      return;
    }
    for (size_t m = 0; m < static_cast<size_t>(n) / sizeof(uffd_msg); ++m) {
      if (msgs[m].event != UFFD_EVENT_PAGEFAULT) continue;
      const uint64_t address = msgs[m].arg.pagefault.address;
      Chunk* c = ChunkAt(address);
      if (c == chunks_.get() + chunk_count_) continue;  // not ours: cannot happen
      const size_t index = static_cast<size_t>(c - chunks_.get());
      if (CopyChunk(index)) {
        faulted_.fetch_add(1);
        CopyAhead(index + 1);
        continue;
      }
      // Finish's copy got there first: once it is done the protection is gone; wake the
      // writer in case it queued its fault after that copy's wake-up.
      c->state.wait(kCopying);
      uffdio_range range{c->start, c->end - c->start};
      ::ioctl(uffd_.get(), UFFDIO_WAKE, &range);
    }
  }
}

void PageSnapshot::CopyAhead(size_t next) {
  // Writers usually sweep memory in order (an optimizer step): copying the chunks after a
  // faulted one while the writer is busy with it keeps the handler ahead of the writer, which
  // then faults once instead of once per chunk. Stops as soon as another fault is waiting.
  for (size_t i = next; i < chunk_count_ && i < next + kCopyAheadChunks; ++i) {
    pollfd pending = {uffd_.get(), POLLIN, 0};
    if (::poll(&pending, 1, 0) != 0) return;
    if (!CopyChunk(i)) return;  // Finish's copy is already here
  }
}

Status PageSnapshot::Finish(TaskPool* pool) {
  if (finished_) return Status::Ok();
  finished_ = true;
  if (pool != nullptr) {
    // From the end backwards, so that a writer sweeping forward from the start meets this
    // copy once, in the middle, instead of following it chunk by chunk.
    std::vector<TaskPool::Task> tasks;
    for (size_t end = chunk_count_; end > 0; end -= std::min(end, kChunksPerTask)) {
      const size_t first = end - std::min(end, kChunksPerTask);
      tasks.push_back([this, first, end](int) {
        for (size_t i = end; i-- > first;) CopyChunk(i);
        return Status::Ok();
      });
    }
    // The tasks cannot fail; on a pool error the loop below copies what is left.
    (void)pool->RunAll(std::move(tasks));
  }
  for (size_t i = 0; i < chunk_count_; ++i) {
    CopyChunk(i);
    chunks_[i].state.wait(kCopying);  // the handler may be copying it
  }
  const uint64_t one = 1;
  if (::write(stop_fd_.get(), &one, sizeof(one)) != sizeof(one)) {
    handler_errno_.store(errno);
  }
  if (handler_.joinable()) handler_.join();
  Unregister();
  stats_.faulted_chunks = faulted_.load();
  if (const int err = handler_errno_.load(); err != 0) {
    return ErrnoStatus(err, "page snapshot: userfaultfd");
  }
  return Status::Ok();
}

void PageSnapshot::Abandon() {
  Unregister();
  finished_ = true;
}

void PageSnapshot::Unregister() {
  for (auto [start, end] : registered_) {
    uffdio_range range{start, end - start};
    ::ioctl(uffd_.get(), UFFDIO_UNREGISTER, &range);
  }
  registered_.clear();
  uffd_ = base::UniqueFd();
}

PageSnapshot::~PageSnapshot() {
  // Never leave memory protected with nobody to handle its faults: its writers would hang.
  (void)Finish(nullptr);
}

SnapshotStats PageSnapshot::stats() const {
  SnapshotStats s = stats_;
  s.faulted_chunks = faulted_.load();
  return s;
}

}  // namespace railyard::storage
