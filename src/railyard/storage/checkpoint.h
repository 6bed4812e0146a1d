// Writing sharded, atomic, checksummed checkpoints.
//
// A checkpoint directory holds one directory per committed step:
//
//   <dir>/step-00000100/rank-00000.bin   shard of rank 0: its pieces, each at a 4 KiB boundary
//   <dir>/step-00000100/rank-00000.json  rank 0's piece list (the manifest format)
//   <dir>/step-00000100/manifest.json    the merged manifest (docs/formats.md)
//   <dir>/latest                         "100\n": the newest committed step, for humans/tools
//
// Commit protocol (every rank calls Save with its own pieces):
//   1. each rank writes its shard (fsynced) and its piece list (rank 0's input for the
//      manifest, not read after the commit, so not fsynced) into <dir>/.tmp-step-<N>/;
//   2. the ranks agree (RankAgreement) that every one succeeded;
//   3. rank 0 merges the piece lists into manifest.json and fsyncs it, fsyncs .tmp-step-<N>
//      (all ranks' entries at once), renames it to step-<N> and fsyncs <dir> (the commit
//      point), then rewrites `latest` atomically (informational: a failure there is a
//      warning, the step stays committed);
//   4. the ranks agree on the commit, so Save returns OK on every rank only when committed.
// Durability: the shards and the manifest are fsynced before the step's directory, that
// before its rename, and the checkpoint directory after it; so is the parent of every
// directory Open creates (MakeDirs). A power cut at any point, not only a process crash,
// leaves either the previous state or the committed step; a step directory exists only with
// its manifest. Leftovers (.tmp-*) are removed when a writer opens.
//
//   WriterOptions opt{.dir = "/lustre/run7/ckpt", .rank = r, .world_size = w,
//                     .agreement = agreement.get(), .keep_last = 3};
//   RY_ASSIGN_OR_RETURN(auto writer, CheckpointWriter::Open(opt));
//   TensorView w{.name = "layer0.weight", .dtype = DType::kBF16, .shape = {4096, 4096},
//                .offsets = {r * 1024, 0}, .sizes = {1024, 4096}, .data = ptr};
//   RY_RETURN_IF_ERROR(writer->Save(step, {&w, 1}, {{"loader.pos", "123"}}));
//
// Reading is in checkpoint_reader.h; asynchronous saving in async_saver.h.
//
// Thread-safety: a CheckpointWriter is used by one thread at a time (Save blocks until the
// step is committed or failed). Writers of different ranks may live in one process.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"
#include "railyard/storage/agreement.h"
#include "railyard/storage/aligned_buffer.h"
#include "railyard/storage/fs.h"
#include "railyard/storage/lustre.h"
#include "railyard/storage/manifest.h"

namespace railyard::storage {

class TaskPool;

// One piece of a tensor to save: a row-major block of the global tensor. Several ranks (or
// one rank) may save pieces of the same tensor; together they must cover it exactly once,
// except that identical pieces from several ranks are kept as replicas.
struct TensorView {
  std::string name;
  DType dtype = DType::kF32;
  std::vector<int64_t> shape;    // global shape
  std::vector<int64_t> offsets;  // start of this piece; empty = the whole tensor
  std::vector<int64_t> sizes;    // extent of this piece; empty = the whole tensor
  const void* data = nullptr;    // ElementCount(sizes) * DTypeSize(dtype) bytes, not owned
  // For AsyncSaver only: the caller promises that `data` stays valid and unchanged until the
  // save has finished (the next SaveAsync or Wait returned), for example a host copy of GPU
  // memory made for this save. AsyncSaver then writes it in place instead of copying it into
  // staging, so it adds nothing to the stall. CheckpointWriter ignores it.
  bool immutable = false;

  // Bytes of this piece; 0 when the view is malformed.
  uint64_t byte_size() const;
};

struct WriterOptions {
  std::string dir;
  int rank = 0;
  int world_size = 1;
  // Required when world_size > 1 (its rank and world size must match); not owned.
  RankAgreement* agreement = nullptr;
  // Not owned. Null: POSIX, with Lustre striping (`stripe`) when `dir` is on Lustre.
  Fs* fs = nullptr;
  StripeOptions stripe;
  // O_DIRECT with aligned bounce buffers; falls back to buffered I/O (logged) where the file
  // system refuses it.
  bool direct_io = false;
  // O_DIRECT: extent writes in flight. Buffered: contiguous regions of the shard written in
  // parallel, each sequentially (the copy into the page cache is CPU-bound, so more threads
  // than cores per node only contend).
  int io_threads = 4;
  uint64_t extent_bytes = 8 << 20;  // largest single write; rounded up to 4 KiB
  // Buffered writes: every this many bytes a writer starts writeback of what it just wrote
  // (sync_file_range) and, two windows behind, waits for it and drops those pages from the
  // page cache. The final fsync then has little left to flush, and a save does not evict the
  // node's page cache (training data) for pages nobody reads soon. 0 turns both off (plain
  // writes, one fsync). The fsync before the commit is unchanged either way.
  uint64_t write_behind_bytes = 32 << 20;
  // fallocate the shard before writing, so a full disk fails before any data is written and
  // parallel extents land contiguously.
  bool preallocate = true;
  int keep_last = 0;  // retention after each commit; 0 keeps every step
  base::Duration agreement_timeout = std::chrono::minutes(10);
};

struct SaveStats {
  int64_t step = -1;
  uint64_t bytes = 0;         // payload bytes this rank wrote
  double write_seconds = 0;   // shard + piece list written and fsynced
  double commit_seconds = 0;  // agreement, manifest, rename, `latest`
  double total_seconds = 0;
  bool direct = false;  // O_DIRECT was in effect for the shard
  // Rank 0: a problem after the commit point that did not undo the commit (`latest` could not
  // be rewritten, retention failed); also logged. Empty when there was none.
  std::string warning;
};

class CheckpointWriter {
 public:
  // Creates `dir` if needed; rank 0 removes leftovers of crashed saves. With several ranks
  // this is a collective: no rank writes before rank 0 has cleaned up.
  static Result<std::unique_ptr<CheckpointWriter>> Open(WriterOptions options);
  ~CheckpointWriter();
  CheckpointWriter(const CheckpointWriter&) = delete;
  CheckpointWriter& operator=(const CheckpointWriter&) = delete;

  // Collective: saves this rank's `pieces` as part of `step` and returns when the step is
  // committed (OK on every rank) or not (an error on every rank, nothing committed, the
  // previous checkpoints untouched). `pieces` memory must stay valid until Save returns.
  // Metadata from all ranks is merged; one key with different values on two ranks is an
  // error. Errors: INVALID_ARGUMENT for malformed pieces (naming the tensor), ALREADY_EXISTS
  // when the step is committed already, RESOURCE_EXHAUSTED for a full disk, PERMISSION_DENIED,
  // ABORTED when another rank failed (naming it), DEADLINE_EXCEEDED when a rank did not
  // report (naming it). The commit point is the fsync of `dir` after the step directory's
  // rename: when that fsync fails the error is returned although the step directory may be
  // in place (loadable, but not known to survive a crash). Failures after the commit point
  // (rewriting `latest`, retention) leave the step committed: Save returns OK and they are
  // logged and put in last_stats().warning.
  Status Save(int64_t step, std::span<const TensorView> pieces,
              const std::map<std::string, std::string>& metadata = {});

  const SaveStats& last_stats() const { return stats_; }
  const WriterOptions& options() const { return options_; }

 private:
  CheckpointWriter(WriterOptions options, std::unique_ptr<Fs> owned_fs);
  Status Agree(std::string_view round, const Status& mine);
  Status WriteLocal(int64_t step, std::span<const TensorView> pieces,
                    const std::map<std::string, std::string>& metadata);
  Status WriteShard(const std::string& path, std::span<const TensorView> pieces,
                    std::vector<PieceInfo>* infos);
  Status Commit(int64_t step);

  WriterOptions options_;
  std::unique_ptr<Fs> owned_fs_;
  Fs* fs_;
  std::unique_ptr<TaskPool> pool_;
  std::vector<AlignedBuffer> bounce_;  // one per pool worker, for O_DIRECT
  SaveStats stats_;
};

// ---- Names inside a checkpoint directory ----

std::string StepDirName(int64_t step);      // "step-00000100"
std::string TempStepDirName(int64_t step);  // ".tmp-step-00000100"
std::string ShardFileName(int rank);        // "rank-00003.bin"
std::string RankIndexFileName(int rank);    // "rank-00003.json"
inline constexpr std::string_view kManifestFileName = "manifest.json";
inline constexpr std::string_view kLatestFileName = "latest";
// "step-00000100" -> 100; nullopt for anything else.
std::optional<int64_t> ParseStepDirName(std::string_view name);

// Removes leftovers of crashed saves in `dir`: ".tmp-*" directories and "*.tmp.<pid>.<n>"
// files of processes that are gone. Returns how many entries were removed. Called by
// CheckpointWriter::Open on rank 0; must not run while a save into `dir` is in progress.
Result<int> RemoveLeftovers(Fs& fs, const std::string& dir);

}  // namespace railyard::storage
