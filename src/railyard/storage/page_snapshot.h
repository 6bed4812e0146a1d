// PageSnapshot: a consistent copy of memory that the owning thread may keep writing to.
//
// Begin() write-protects the pages under the source ranges (userfaultfd, UFFDIO_WRITEPROTECT:
// a page-table update, about 0.1 ms for 512 MiB on transparent huge pages) and returns. The
// copy into the destinations then happens off the caller's thread: Finish() copies chunk by
// chunk, lifting the protection of each chunk once it is copied; a write by any thread to a
// chunk not yet copied blocks that thread briefly while a handler thread copies that chunk
// first. Either way every destination ends up with the bytes the sources held at Begin().
// This is how AsyncSaver takes a snapshot without stalling the training thread for the whole
// copy (QEMU's background snapshots use the same mechanism).
//
//   auto snap = PageSnapshot::Begin(segments);   // segments: {src, dst, len}
//   if (!snap.ok()) { ...copy now instead... }   // UNAVAILABLE: not supported here
//   // the sources may change from here on, but must stay mapped
//   RY_RETURN_IF_ERROR((*snap)->Finish(&pool));  // destinations now hold the snapshot
//
// Requirements, checked by Begin (UNAVAILABLE naming the reason otherwise, so that the caller
// falls back to copying): userfaultfd permitted (root or vm.unprivileged_userfaultfd=1; the
// user-mode-only variant is not used, because a read(2) into protected memory would then fail
// with EFAULT instead of waiting); write-protection of unpopulated pages (Linux 6.4); sources
// in private anonymous memory (heap, mmap(MAP_ANONYMOUS), transparent huge pages), not file
// mappings. The sources must stay mapped until Finish returns; they may be written freely.
//
// Thread-safety: Begin and Finish from one thread; any thread may write to the sources.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <thread>
#include <vector>

#include "railyard/base/files.h"
#include "railyard/base/status.h"

namespace railyard::storage {

class TaskPool;

struct SnapshotSegment {
  const void* src = nullptr;
  void* dst = nullptr;
  uint64_t len = 0;
};

struct SnapshotStats {
  uint64_t protected_bytes = 0;  // page-rounded bytes under protection
  size_t chunks = 0;
  // Write faults that found their chunk not yet copied; each cost the writing thread one chunk
  // copy (see kChunkBytes) plus a round trip to the handler thread.
  size_t faulted_chunks = 0;
  double protect_seconds = 0;  // Begin's register + write-protect
};

class PageSnapshot {
 public:
  // Protection granularity: the copy a writing thread waits for. 2 MiB is one transparent huge
  // page, so lifting the protection never splits one.
  static constexpr uint64_t kChunkBytes = uint64_t{2} << 20;

  // OK when this kernel and process can take snapshots; UNAVAILABLE with the reason otherwise.
  static Status Probe();

  // Protects the sources' pages. Segments must not overlap at the destination; sources may
  // share pages. Empty segments are ignored. UNAVAILABLE when not supported (see above),
  // nothing left protected.
  static Result<std::unique_ptr<PageSnapshot>> Begin(std::span<const SnapshotSegment> segments);

  // Copies what the handler has not copied (on `pool`, or on this thread when null), lifts the
  // remaining protection and stops the handler. Idempotent; the destructor calls it.
  Status Finish(TaskPool* pool);

  ~PageSnapshot();
  PageSnapshot(const PageSnapshot&) = delete;
  PageSnapshot& operator=(const PageSnapshot&) = delete;

  SnapshotStats stats() const;

 private:
  enum ChunkState : uint8_t { kProtected, kCopying, kCopied };
  struct Chunk {
    uint64_t start = 0;  // page-aligned address range [start, end)
    uint64_t end = 0;
    std::vector<SnapshotSegment> pieces;  // the segments' parts inside the range
    std::atomic<uint8_t> state{kProtected};
  };

  PageSnapshot() = default;
  // Copies chunk `i` and unprotects it, unless another thread got there first; returns
  // whether this call copied it.
  bool CopyChunk(size_t i);
  void HandleFaults();
  // The handler, after a fault in chunk next-1: copies the following chunks (see .cc).
  void CopyAhead(size_t next);
  Chunk* ChunkAt(uint64_t address);
  void Unregister();
  // Unregisters and marks the snapshot finished without copying: Begin's error paths.
  void Abandon();

  base::UniqueFd uffd_;
  base::UniqueFd stop_fd_;                                 // eventfd: tells the handler to exit
  std::vector<std::pair<uint64_t, uint64_t>> registered_;  // [start, end) page ranges
  std::unique_ptr<Chunk[]> chunks_;
  size_t chunk_count_ = 0;
  std::thread handler_;
  bool finished_ = false;
  SnapshotStats stats_;
  std::atomic<size_t> faulted_{0};
  std::atomic<int> handler_errno_{0};
};

}  // namespace railyard::storage
