// The shared-memory segment of the shm transport and the primitives around it: its layout,
// a move-only owner of a mapping, futex wake-ups and a peer-process state query.
//
// Each rank creates one POSIX shm segment (mode 0600, O_EXCL). It holds
//   - a control block: a futex doorbell and a "sleeping" flag (peers ring the doorbell only
//     when the owner sleeps), the abort flag with the aborting rank and its reason, and a
//     probe flag;
//   - one probe slot per peer (request/answer sequence numbers and the answer's activity);
//   - one inbound SPSC byte ring per sending rank: `head` is written only by the sender,
//     `tail` only by the owner, each on its own pair of cache lines, published with
//     release stores and read with acquire loads;
//   - optionally a shared window (window_bytes, preallocated) that only the owner writes and
//     every peer reads, ordered by the owner's `window_seq` counter (release store; readers
//     acquire), for collectives that read peers' data in place.
// Every peer maps every other rank's segment, writes its outbound stream into its ring
// there and rings that rank's doorbell.
//
// Thread-safety: a Segment is a handle; the synchronisation is in the atomics of the layout.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "railyard/base/files.h"
#include "railyard/base/status.h"

namespace railyard::net::shm {

inline constexpr uint64_t kSegmentMagic = 0x31676573796c6972ULL;  // "rilyseg1"
inline constexpr uint32_t kSegmentVersion = 2;                    // 2: shared window
inline constexpr size_t kMaxActivityBytes = 224;
inline constexpr size_t kMaxAbortReasonBytes = 1024;
// Ring sizes are multiples of this; message headers start on such boundaries so a header is
// never split by the wrap-around.
inline constexpr size_t kRingAlign = 4096;

// An index written by one side only, alone on two cache lines (the adjacent-line prefetcher
// would otherwise make the two sides' indices share traffic).
struct alignas(128) RingIndex {
  std::atomic<uint64_t> value{0};
};

struct RingControl {
  RingIndex head;  // bytes ever written by the sender
  RingIndex tail;  // bytes ever consumed by the owner
};

struct alignas(64) ProbeSlot {
  std::atomic<uint64_t> request{0};  // written by the prober
  std::atomic<uint64_t> answer{0};   // written by the owner once `activity` is filled
  uint32_t activity_len = 0;
  char activity[kMaxActivityBytes];
};

struct SegmentHeader {
  std::atomic<uint64_t> magic{0};  // written last (release) by the creator
  uint32_t version;
  int32_t rank;
  int32_t size;
  int32_t pid;
  uint64_t ring_bytes;
  uint64_t total_bytes;
  uint64_t window_bytes;  // 0: no window (not asked for, or /dev/shm had no room)
  uint8_t auth[32];  // HmacSha256(secret, AuthMessage(...)): proves the creator knows the secret

  alignas(128) std::atomic<uint32_t> doorbell{0};    // futex word; bumped by wakers
  alignas(128) std::atomic<uint32_t> sleeping{0};    // 1 while the owner may be in futex_wait
  alignas(128) std::atomic<uint64_t> window_seq{0};  // written by the owner only
  alignas(128) std::atomic<uint32_t> probe_flag{0};
  std::atomic<uint32_t> abort_state{0};  // 0 none, 1 being written, 2 set
  int32_t abort_rank = -1;
  uint32_t abort_len = 0;
  char abort_reason[kMaxAbortReasonBytes];
};

// Where things are in a segment of `size` ranks with rings of `ring_bytes`.
struct SegmentLayout {
  int size = 0;
  uint64_t ring_bytes = 0;
  size_t probe_offset = 0;
  size_t control_offset = 0;
  size_t data_offset = 0;
  uint64_t window_bytes = 0;
  size_t window_offset = 0;
  size_t total_bytes = 0;
  static SegmentLayout For(int size, uint64_t ring_bytes, uint64_t window_bytes = 0);
};

// The window a rank of `size` may ask for when `free_bytes` are free in /dev/shm: all of
// `window_bytes` while every rank's whole segment (rings and window) fits, else 0.
inline uint64_t WindowThatFits(int size, uint64_t ring_bytes, uint64_t window_bytes,
                               uint64_t free_bytes) {
  const uint64_t need =
      static_cast<uint64_t>(size) * SegmentLayout::For(size, ring_bytes, window_bytes).total_bytes;
  return free_bytes >= need ? window_bytes : 0;
}

// A mapped segment. The creator owns the name and unlinks it (Unlink, or on destruction).
class Segment {
 public:
  // Creates and maps `name` ("/railyard-shm-...") with O_EXCL and mode 0600, zero-filled.
  // The header is initialised except `magic` and `auth`, which the caller fills. The window
  // is preallocated (a later page fault on a full /dev/shm would be SIGBUS); where that
  // fails the segment has no window.
  static Result<Segment> Create(const std::string& name, const SegmentLayout& layout);
  // Maps an existing segment and checks its size against its header. `who` names the owner in
  // errors ("rank 2 (node1 pid 77)").
  static Result<Segment> Open(const std::string& name, const std::string& who);

  Segment() = default;
  Segment(Segment&& other) noexcept;
  Segment& operator=(Segment&& other) noexcept;
  Segment(const Segment&) = delete;
  Segment& operator=(const Segment&) = delete;
  ~Segment();

  SegmentHeader* header() const { return reinterpret_cast<SegmentHeader*>(base_); }
  const SegmentLayout& layout() const { return layout_; }
  const std::string& name() const { return name_; }
  ProbeSlot* probe_slot(int prober) const;
  RingControl* ring_control(int sender) const;
  char* ring_data(int sender) const;
  char* window() const {
    return layout_.window_bytes > 0 ? base_ + layout_.window_offset : nullptr;
  }

  // Fills / checks header()->auth = HmacSha256(secret, name, rank, pid): only a rank that
  // knows the job secret can make a segment its peers accept. Sign before publishing magic.
  void Sign(std::string_view secret);
  bool Verify(std::string_view secret) const;

  // Removes the name (the mapping stays valid). Idempotent; only the creator unlinks.
  void Unlink();

 private:
  void Release();
  std::string name_;
  char* base_ = nullptr;
  size_t mapped_bytes_ = 0;
  SegmentLayout layout_;
  bool owner_ = false;
  bool unlinked_ = false;
};

// Blocks while *word == expected, at most `timeout`; returns early on wake-up, signal or
// when the value already differs. Works across processes (no FUTEX_PRIVATE_FLAG).
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, std::chrono::nanoseconds timeout);
void FutexWakeAll(std::atomic<uint32_t>* word);

// Rings `owner`'s doorbell if it sleeps. Call after publishing what it waits for; the fence
// pairs with the one in the sleeper's check-then-sleep so no wake-up is lost.
inline void WakeIfSleeping(SegmentHeader* owner) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (owner->sleeping.load(std::memory_order_relaxed) != 0) {
    owner->doorbell.fetch_add(1, std::memory_order_release);
    FutexWakeAll(&owner->doorbell);
  }
}

// Unlinks segments under /dev/shm whose names start with `prefix` and whose creator pid
// (the "-p<pid>" part of the name) no longer exists: leftovers of ranks that died before
// their peers had mapped them. Returns how many were removed.
int RemoveStaleSegments(const std::string& prefix);

// What a rank publishes in the store: "host=...\npid=...\nsegment=...\n".
struct PeerRecord {
  std::string host;
  int pid = 0;
  std::string segment;
  std::string Format() const;
  // nullopt when a field is missing or malformed.
  static std::optional<PeerRecord> Parse(std::string_view text);
};

// Granularity of index publication: the other side starts on a chunk while this side
// copies the next, and a chunk stays in L2 so the reader finds it in cache.
inline constexpr size_t kRingChunk = 128 << 10;
// Records (message headers) start on this boundary and are at most this long.
inline constexpr size_t kRecordAlign = 64;

// The sending side of one ring, kept in the sender's process. Bytes become visible to the
// reader at Publish(), which also wakes it if it sleeps; Write publishes every kRingChunk.
class RingWriter {
 public:
  RingWriter() = default;
  RingWriter(RingControl* control, char* data, uint64_t bytes, SegmentHeader* reader)
      : control_(control), data_(data), bytes_(bytes), reader_(reader) {}
  // Writes a record of at most kRecordAlign bytes at the next aligned position (skipping the
  // previous payload's padding). False when it does not fit yet.
  bool WriteRecord(const void* record, size_t n);
  // Copies up to `n` bytes; returns how many fit.
  size_t Write(const char* src, size_t n);
  void Publish();
  // Whether the reader consumed something since this side last looked (it may now fit).
  bool SpaceFreed() const { return control_->tail.value.load(std::memory_order_acquire) != tail_; }

 private:
  bool Reserve(uint64_t n);
  RingControl* control_ = nullptr;
  char* data_ = nullptr;
  uint64_t bytes_ = 0;
  SegmentHeader* reader_ = nullptr;
  uint64_t head_ = 0;
  uint64_t published_ = 0;
  uint64_t tail_ = 0;  // the reader's tail when last loaded
};

// The receiving side of one ring, kept in the owner's process. Reads are bounded by the head
// seen at the last Snapshot(), so one progress pass ends even while the writer keeps going.
class RingReader {
 public:
  RingReader() = default;
  RingReader(RingControl* control, char* data, uint64_t bytes, SegmentHeader* writer)
      : control_(control), data_(data), bytes_(bytes), writer_(writer) {}
  bool HasData() const { return control_->head.value.load(std::memory_order_acquire) != tail_; }
  // Loads the writer's head; returns whether there is anything to read.
  bool Snapshot() {
    limit_ = control_->head.value.load(std::memory_order_acquire);
    return limit_ != tail_;
  }
  uint64_t position() const { return tail_; }
  // Reads a record written by WriteRecord, if the snapshot holds it.
  bool ReadRecord(void* record, size_t n);
  // Copies (or skips, when dst is null) up to `n` bytes of the snapshot; returns how many.
  size_t Read(char* dst, size_t n);
  // As Read, but hands each contiguous run to `fn(data, len)` in place instead of copying.
  template <typename Fn>
  size_t ReadInPlace(size_t n, Fn&& fn);
  void Publish();

 private:
  RingControl* control_ = nullptr;
  char* data_ = nullptr;
  uint64_t bytes_ = 0;
  SegmentHeader* writer_ = nullptr;
  uint64_t tail_ = 0;
  uint64_t published_ = 0;
  uint64_t limit_ = 0;
};

enum class ProcessState { kRunning, kStopped, kExited };

// A process-state watcher: pidfd_open when the kernel has it (no pid-reuse races),
// kill(pid, 0) otherwise; /proc/<pid>/stat tells stopped ('T', 't') and zombie ('Z').
class ProcessWatch {
 public:
  ProcessWatch() = default;
  explicit ProcessWatch(int pid);
  ProcessState State() const;
  // Cheaper than State() (no /proc read when a pidfd is open); for the liveness tick.
  bool Exited() const;

 private:
  int pid_ = 0;
  base::UniqueFd pidfd_;
};

template <typename Fn>
size_t RingReader::ReadInPlace(size_t n, Fn&& fn) {
  size_t done = 0;
  while (done < n && tail_ < limit_) {
    const uint64_t off = tail_ % bytes_;
    const size_t k = std::min<uint64_t>({n - done, limit_ - tail_, bytes_ - off, kRingChunk});
    fn(static_cast<const char*>(data_ + off), k);
    tail_ += k;
    done += k;
    if (tail_ - published_ >= kRingChunk) Publish();
  }
  return done;
}

}  // namespace railyard::net::shm
