// AsyncSaver: checkpoint saves that stall the training thread only for a memory copy.
//
// SaveAsync copies the pieces into a staging buffer (bounded, reused between saves, each
// piece 4 KiB-aligned so O_DIRECT writes need no bounce copy) and returns; a background
// thread then runs CheckpointWriter::Save on the copy, commit protocol included. Views marked
// `immutable` (TensorView) are not copied but written in place: the caller keeps them valid
// and unchanged until the save finishes (the next SaveAsync or Wait returned). A new save
// first waits for the previous one to finish (back-pressure: one save in flight, one staging
// buffer). A background failure is returned by the next SaveAsync or Wait call, once
// (LevelDB's bg_error_); the SaveAsync that reports it starts nothing, so the caller decides
// whether to retry.
//
//   RY_ASSIGN_OR_RETURN(auto saver, AsyncSaver::Create(std::move(writer), {}));
//   for (step...) {
//     train();
//     RY_RETURN_IF_ERROR(saver->SaveAsync(step, views, {{"loader.pos", pos}}));
//     // views' memory may change from here on
//   }
//   RY_RETURN_IF_ERROR(saver->Wait());
//
// With `snapshot = SnapshotMode::kWriteProtect` the copy leaves the training thread too:
// SaveAsync write-protects the pieces' pages (PageSnapshot, userfaultfd) and returns in well
// under a millisecond; the background thread copies them into staging, and a training-thread
// write to a page not yet copied waits for that 2 MiB chunk to be copied first. The caller may
// then change the views' memory at once but must keep it mapped until the save finishes.
// Where the kernel or the memory does not allow it, the save copies as in kCopy and says so
// in stats (last_write_protected) and once in the log.
//
// With several ranks every rank has its own AsyncSaver (and writer); the background threads
// run the commit agreement among themselves.
//
// Thread-safety: SaveAsync, Wait and stats from one thread at a time (the training thread).
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <thread>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/storage/aligned_buffer.h"
#include "railyard/storage/checkpoint.h"
#include "railyard/storage/fs.h"
#include "railyard/storage/page_snapshot.h"

namespace railyard::storage {

class TaskPool;

enum class SnapshotMode {
  kCopy,          // SaveAsync copies the pieces into staging
  kWriteProtect,  // SaveAsync write-protects them; the background copies (see above)
};

struct AsyncSaverOptions {
  SnapshotMode snapshot = SnapshotMode::kCopy;
  // Upper bound on the staging buffer. A save that needs more (its pieces, each rounded up to
  // 4 KiB) fails at once with RESOURCE_EXHAUSTED.
  uint64_t max_staging_bytes = uint64_t{64} << 30;
  // Staging allocated and faulted in by Create, so that not even the first save's stall pays
  // for page faults; a later save that needs more grows it. 0: allocated by the first save.
  uint64_t reserve_bytes = 0;
  // Parallel memcpy into staging (the copy is the whole stall). 0: one per core, at most 4;
  // more threads than cores only contend.
  int copy_threads = 0;
};

struct AsyncSaverStats {
  int64_t last_step = -1;
  double last_stall_seconds = 0;      // SaveAsync's duration: wait for the previous save + copy
  double last_wait_seconds = 0;       // back-pressure part of the stall
  double last_copy_seconds = 0;       // copy (or write-protect) part of the stall
  bool last_write_protected = false;  // the last save used kWriteProtect (no fallback)
  // kWriteProtect: 2 MiB chunks of the last finished save that the training thread wrote to
  // before the background copied them (each such write waited for that chunk's copy).
  size_t last_faulted_chunks = 0;
  SaveStats last_save;            // the background write of the last finished save
  uint64_t staging_capacity = 0;  // bytes held for staging
  // Staging used by the last SaveAsync: its copied pieces, each rounded up to 4 KiB
  // (immutable views take none).
  uint64_t last_copied_bytes = 0;
};

class AsyncSaver {
 public:
  // Takes the writer; its Save then runs only on the background thread.
  static Result<std::unique_ptr<AsyncSaver>> Create(std::unique_ptr<CheckpointWriter> writer,
                                                    AsyncSaverOptions options = {});
  // Waits for the save in flight. An error nobody collected is logged.
  ~AsyncSaver();
  AsyncSaver(const AsyncSaver&) = delete;
  AsyncSaver& operator=(const AsyncSaver&) = delete;

  // Waits for the previous save; returns its error if it failed (and starts nothing).
  // Otherwise validates the sizes, copies the pieces (but not immutable ones) and queues the
  // save, returning as soon as the copy is done. Errors: the previous save's,
  // RESOURCE_EXHAUSTED when the staging limit is too small (naming both sizes),
  // INVALID_ARGUMENT for a malformed view.
  Status SaveAsync(int64_t step, std::span<const TensorView> pieces,
                   const std::map<std::string, std::string>& metadata = {});

  // Waits for the save in flight; returns its error, or OK when it succeeded, when there is
  // none, or when its error was already returned.
  Status Wait();

  AsyncSaverStats stats() const;

 private:
  struct Job {
    int64_t step = 0;
    std::vector<TensorView> views;  // pointing into staging_
    std::map<std::string, std::string> metadata;
    std::unique_ptr<PageSnapshot> snapshot;  // kWriteProtect: staging filled by Loop
  };
  AsyncSaver(std::unique_ptr<CheckpointWriter> writer, AsyncSaverOptions options);
  // Fills staging with the non-immutable pieces: write-protected for the background to copy
  // (into job->snapshot) when asked and possible, else copied now.
  Status Stage(std::span<const TensorView> pieces, std::span<const uint64_t> at, Job* job);
  void Loop();
  // Blocks until no job is in flight; returns and clears the pending error.
  Status WaitIdle(std::unique_lock<std::mutex>& lock);

  std::unique_ptr<CheckpointWriter> writer_;
  AsyncSaverOptions options_;
  std::unique_ptr<TaskPool> copy_pool_;
  AlignedBuffer staging_;  // written by SaveAsync only while no job is in flight

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::optional<Job> job_;  // the save in flight
  bool stop_ = false;
  Status bg_error_;
  AsyncSaverStats stats_;
  bool warned_no_snapshot_ = false;
  std::thread thread_;
};

}  // namespace railyard::storage
