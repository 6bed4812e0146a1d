#include "railyard/net/shm/shm_ring.h"

#include <dirent.h>
#include <fcntl.h>
#include <linux/futex.h>
#include <poll.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <cstring>
#include <new>
#include <utility>

#include "railyard/base/hmac.h"

namespace railyard::net::shm {
namespace {

constexpr size_t RoundUp(size_t n, size_t align) { return (n + align - 1) / align * align; }

static_assert(sizeof(ProbeSlot) == 256);
static_assert(sizeof(RingControl) == 256);
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(std::atomic<uint64_t>::is_always_lock_free);

}  // namespace

SegmentLayout SegmentLayout::For(int size, uint64_t ring_bytes, uint64_t window_bytes) {
  SegmentLayout l;
  l.size = size;
  l.ring_bytes = ring_bytes;
  l.window_bytes = window_bytes;
  l.probe_offset = RoundUp(sizeof(SegmentHeader), 256);
  l.control_offset = l.probe_offset + static_cast<size_t>(size) * sizeof(ProbeSlot);
  l.data_offset =
      RoundUp(l.control_offset + static_cast<size_t>(size) * sizeof(RingControl), kRingAlign);
  l.window_offset = l.data_offset + static_cast<size_t>(size) * ring_bytes;
  l.total_bytes = l.window_offset + window_bytes;
  return l;
}

Result<Segment> Segment::Create(const std::string& name, const SegmentLayout& asked) {
  SegmentLayout layout = asked;
  base::UniqueFd fd(::shm_open(name.c_str(), O_CREAT | O_EXCL | O_RDWR | O_CLOEXEC, 0600));
  if (!fd.valid()) return ErrnoStatus(errno, "shm_open(" + name + ", O_CREAT|O_EXCL)");
  Segment seg;
  seg.name_ = name;
  seg.owner_ = true;  // from here on the destructor unlinks the name
  // umask can only clear bits, but an explicit fchmod states the intent: owner only.
  if (::fchmod(fd.get(), 0600) != 0) return ErrnoStatus(errno, "fchmod(" + name + ")");
  if (::ftruncate(fd.get(), static_cast<off_t>(layout.total_bytes)) != 0) {
    return ErrnoStatus(errno, fmt::format("ftruncate({}, {} bytes) (is /dev/shm full?)", name,
                                          layout.total_bytes));
  }
  if (layout.window_bytes > 0 &&
      ::posix_fallocate(fd.get(), static_cast<off_t>(layout.window_offset),
                        static_cast<off_t>(layout.window_bytes)) != 0) {
    layout = SegmentLayout::For(layout.size, layout.ring_bytes, 0);  // the rings are enough
    if (::ftruncate(fd.get(), static_cast<off_t>(layout.total_bytes)) != 0) {
      return ErrnoStatus(errno, fmt::format("ftruncate({}, {} bytes)", name, layout.total_bytes));
    }
  }
  void* p = ::mmap(nullptr, layout.total_bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd.get(), 0);
  if (p == MAP_FAILED) return ErrnoStatus(errno, "mmap(" + name + ")");
  seg.base_ = static_cast<char*>(p);
  seg.mapped_bytes_ = layout.total_bytes;
  seg.layout_ = layout;
  SegmentHeader* h = new (seg.base_) SegmentHeader();
  h->version = kSegmentVersion;
  h->size = layout.size;
  h->ring_bytes = layout.ring_bytes;
  h->total_bytes = layout.total_bytes;
  h->window_bytes = layout.window_bytes;
  h->pid = static_cast<int32_t>(::getpid());
  for (int r = 0; r < layout.size; ++r) {
    new (seg.probe_slot(r)) ProbeSlot();
    new (seg.ring_control(r)) RingControl();
  }
  return seg;
}

Result<Segment> Segment::Open(const std::string& name, const std::string& who) {
  base::UniqueFd fd(::shm_open(name.c_str(), O_RDWR | O_CLOEXEC, 0));
  if (!fd.valid()) {
    int err = errno;
    return ErrnoStatus(
        err, fmt::format(
                 "{}: opening its shm segment {}{}", who, name,
                 err == ENOENT ? " (is the rank on another host or in another container?)" : ""));
  }
  struct stat st {};
  if (::fstat(fd.get(), &st) != 0) return ErrnoStatus(errno, "fstat(" + name + ")");
  if (static_cast<size_t>(st.st_size) < sizeof(SegmentHeader)) {
    return FailedPrecondition("{}: shm segment {} has {} bytes, less than its header", who, name,
                              st.st_size);
  }
  void* p = ::mmap(nullptr, static_cast<size_t>(st.st_size), PROT_READ | PROT_WRITE, MAP_SHARED,
                   fd.get(), 0);
  if (p == MAP_FAILED) return ErrnoStatus(errno, "mmap(" + name + ")");
  Segment seg;
  seg.name_ = name;
  seg.base_ = static_cast<char*>(p);
  seg.mapped_bytes_ = static_cast<size_t>(st.st_size);
  const SegmentHeader* h = seg.header();
  uint64_t magic = h->magic.load(std::memory_order_acquire);
  if (magic != kSegmentMagic || h->version != kSegmentVersion) {
    return FailedPrecondition(
        "{}: shm segment {} is not a railyard v{} segment (magic {:#x}, version {})", who, name,
        kSegmentVersion, magic, h->version);
  }
  seg.layout_ = SegmentLayout::For(h->size, h->ring_bytes, h->window_bytes);
  if (h->ring_bytes == 0 || h->ring_bytes % kRingAlign != 0 ||
      h->window_bytes > (uint64_t{1} << 40) || seg.layout_.total_bytes != h->total_bytes ||
      h->total_bytes > seg.mapped_bytes_) {
    return FailedPrecondition(
        "{}: shm segment {} has an inconsistent layout ({} ranks, {}-byte rings, {} bytes, file {} "
        "bytes)",
        who, name, h->size, h->ring_bytes, h->total_bytes, seg.mapped_bytes_);
  }
  return seg;
}

Segment::Segment(Segment&& other) noexcept { *this = std::move(other); }

Segment& Segment::operator=(Segment&& other) noexcept {
  if (this != &other) {
    Release();
    name_ = std::move(other.name_);
    base_ = std::exchange(other.base_, nullptr);
    mapped_bytes_ = std::exchange(other.mapped_bytes_, 0);
    layout_ = other.layout_;
    owner_ = std::exchange(other.owner_, false);
    unlinked_ = other.unlinked_;
  }
  return *this;
}

Segment::~Segment() { Release(); }

void Segment::Release() {
  Unlink();
  if (base_ != nullptr) ::munmap(base_, mapped_bytes_);
  base_ = nullptr;
}

void Segment::Unlink() {
  if (owner_ && !unlinked_) {
    ::shm_unlink(name_.c_str());  // best effort: ENOENT means someone cleaned it up already
    unlinked_ = true;
  }
}

ProbeSlot* Segment::probe_slot(int prober) const {
  return reinterpret_cast<ProbeSlot*>(base_ + layout_.probe_offset) + prober;
}

RingControl* Segment::ring_control(int sender) const {
  return reinterpret_cast<RingControl*>(base_ + layout_.control_offset) + sender;
}

char* Segment::ring_data(int sender) const {
  return base_ + layout_.data_offset + static_cast<size_t>(sender) * layout_.ring_bytes;
}

namespace {
constexpr uint64_t AlignRecord(uint64_t n) {
  return (n + kRecordAlign - 1) & ~uint64_t{kRecordAlign - 1};
}
}  // namespace

bool RingWriter::Reserve(uint64_t n) {
  if (bytes_ - (head_ - tail_) >= n) return true;
  tail_ = control_->tail.value.load(std::memory_order_acquire);
  return bytes_ - (head_ - tail_) >= n;
}

bool RingWriter::WriteRecord(const void* record, size_t n) {
  uint64_t start = AlignRecord(head_);
  if (!Reserve(start - head_ + kRecordAlign)) return false;
  // Ring sizes are multiples of kRecordAlign: a record never straddles the wrap-around.
  std::memcpy(data_ + start % bytes_, record, std::min(n, kRecordAlign));
  head_ = start + kRecordAlign;
  return true;
}

size_t RingWriter::Write(const char* src, size_t n) {
  size_t done = 0;
  while (done < n && Reserve(1)) {
    uint64_t off = head_ % bytes_;
    size_t k = std::min<uint64_t>({n - done, bytes_ - (head_ - tail_), bytes_ - off, kRingChunk});
    std::memcpy(data_ + off, src + done, k);
    head_ += k;
    done += k;
    if (head_ - published_ >= kRingChunk) Publish();
  }
  return done;
}

void RingWriter::Publish() {
  if (head_ == published_) return;
  control_->head.value.store(head_, std::memory_order_release);
  published_ = head_;
  WakeIfSleeping(reader_);
}

bool RingReader::ReadRecord(void* record, size_t n) {
  uint64_t start = AlignRecord(tail_);
  if (limit_ < start + kRecordAlign) return false;
  std::memcpy(record, data_ + start % bytes_, std::min(n, kRecordAlign));
  tail_ = start + kRecordAlign;
  return true;
}

size_t RingReader::Read(char* dst, size_t n) {
  size_t done = 0;
  while (done < n && tail_ < limit_) {
    uint64_t off = tail_ % bytes_;
    size_t k = std::min<uint64_t>({n - done, limit_ - tail_, bytes_ - off, kRingChunk});
    if (dst != nullptr) std::memcpy(dst + done, data_ + off, k);
    tail_ += k;
    done += k;
    if (tail_ - published_ >= kRingChunk) Publish();
  }
  return done;
}

void RingReader::Publish() {
  if (tail_ == published_) return;
  control_->tail.value.store(tail_, std::memory_order_release);
  published_ = tail_;
  WakeIfSleeping(writer_);
}

namespace {
base::Sha256Digest Auth(std::string_view secret, const std::string& name, int rank, int pid) {
  return base::HmacSha256(secret, fmt::format("railyard shm segment v1|{}|{}|{}", name, rank, pid));
}
}  // namespace

void Segment::Sign(std::string_view secret) {
  SegmentHeader* h = header();
  base::Sha256Digest d = Auth(secret, name_, h->rank, h->pid);
  std::memcpy(h->auth, d.data(), sizeof(h->auth));
}

bool Segment::Verify(std::string_view secret) const {
  const SegmentHeader* h = header();
  base::Sha256Digest d = Auth(secret, name_, h->rank, h->pid);
  return base::ConstantTimeEqual(
      std::string_view(reinterpret_cast<const char*>(d.data()), d.size()),
      std::string_view(reinterpret_cast<const char*>(h->auth), sizeof(h->auth)));
}

int RemoveStaleSegments(const std::string& prefix) {
  DIR* dir = ::opendir("/dev/shm");
  if (dir == nullptr) return 0;
  int removed = 0;
  while (struct dirent* e = ::readdir(dir)) {
    std::string_view n(e->d_name);
    if (!n.starts_with(prefix)) continue;
    size_t p = n.find("-p", prefix.size());
    if (p == std::string_view::npos) continue;
    int pid = std::atoi(std::string(n.substr(p + 2)).c_str());
    // EPERM (another user's live process) is not ESRCH: only provably dead creators.
    if (pid > 0 && ::kill(pid, 0) != 0 && errno == ESRCH &&
        ::shm_unlink(("/" + std::string(n)).c_str()) == 0) {
      ++removed;
    }
  }
  ::closedir(dir);
  return removed;
}

std::string PeerRecord::Format() const {
  return fmt::format("host={}\npid={}\nsegment={}\n", host, pid, segment);
}

std::optional<PeerRecord> PeerRecord::Parse(std::string_view text) {
  PeerRecord rec;
  while (!text.empty()) {
    size_t eol = text.find('\n');
    std::string_view line = text.substr(0, eol);
    text = eol == std::string_view::npos ? std::string_view() : text.substr(eol + 1);
    size_t eq = line.find('=');
    if (eq == std::string_view::npos) continue;
    std::string_view k = line.substr(0, eq), v = line.substr(eq + 1);
    if (k == "host") rec.host = std::string(v);
    if (k == "pid") rec.pid = std::atoi(std::string(v).c_str());
    if (k == "segment") rec.segment = std::string(v);
  }
  if (rec.pid <= 0 || !rec.segment.starts_with('/')) return std::nullopt;
  return rec;
}

void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds timeout) {
  if (timeout <= std::chrono::nanoseconds::zero()) return;
  struct timespec ts;
  ts.tv_sec = static_cast<time_t>(timeout.count() / 1000000000);
  ts.tv_nsec = static_cast<long>(timeout.count() % 1000000000);
  // EAGAIN (value changed), EINTR and ETIMEDOUT all mean "look again".
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, &ts, nullptr, 0);
}

void FutexWakeAll(std::atomic<uint32_t>* word) {
  ::syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT_MAX, nullptr, nullptr, 0);
}

ProcessWatch::ProcessWatch(int pid) : pid_(pid) {
#ifdef SYS_pidfd_open
  pidfd_ = base::UniqueFd(static_cast<int>(::syscall(SYS_pidfd_open, pid, 0)));
#endif
}

bool ProcessWatch::Exited() const {
  if (pid_ <= 0) return false;
  if (!pidfd_.valid()) return State() == ProcessState::kExited;
  struct pollfd p = {pidfd_.get(), POLLIN, 0};
  return ::poll(&p, 1, 0) > 0;
}

ProcessState ProcessWatch::State() const {
  if (pid_ <= 0) return ProcessState::kRunning;
  if (pidfd_.valid()) {
    // A pidfd becomes readable when the process exits, before its parent reaps it.
    struct pollfd p = {pidfd_.get(), POLLIN, 0};
    if (::poll(&p, 1, 0) > 0) return ProcessState::kExited;
  } else if (::kill(pid_, 0) != 0 && errno == ESRCH) {
    return ProcessState::kExited;
  }
  auto stat = base::ReadFile(fmt::format("/proc/{}/stat", pid_));
  if (!stat.ok()) return pidfd_.valid() ? ProcessState::kRunning : ProcessState::kExited;
  // "pid (comm) S ...": comm may hold spaces and parentheses, the state follows the last ')'.
  size_t close = stat->rfind(')');
  if (close == std::string::npos || close + 2 >= stat->size()) return ProcessState::kRunning;
  char state = (*stat)[close + 2];
  if (state == 'Z' || state == 'X') return ProcessState::kExited;
  if (state == 'T' || state == 't') return ProcessState::kStopped;
  return ProcessState::kRunning;
}

}  // namespace railyard::net::shm
