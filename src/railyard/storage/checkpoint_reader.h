// Reading checkpoints written by CheckpointWriter (checkpoint.h): load the latest valid step
// and read any slice of any tensor whatever world size wrote it. Listing, verifying and
// pruning steps is in checkpoint_catalog.h.
//
//   RY_ASSIGN_OR_RETURN(auto reader, LoadLatest("/lustre/run7/ckpt"));
//   for (const auto& note : reader->fallback_notes()) log(note);   // newer steps skipped, why
//   std::vector<float> mine(rows * cols);
//   RY_RETURN_IF_ERROR(reader->ReadSlice("layer0.weight", {rank * rows, 0}, {rows, cols},
//                                        mine.data(), mine.size() * sizeof(float)));
//
// Checksums: every piece's XXH3 is checked when its bytes are read. LoadLatest (and Open with
// verify_on_open) read every piece once up front so that a corrupt or missing shard makes
// the load fall back to the previous committed step instead of failing mid-way through a
// restore; later ReadSlice calls then read only the bytes they need. With verify_on_open
// off, ReadSlice reads whole pieces the first time and checks them (DATA_LOSS on a mismatch).
// A piece saved by several ranks (a replica) is read from the next replica if one is bad.
//
// Errors name the step, the file and the byte range ("step 3: '<dir>/step-00000003/
// rank-00001.bin' bytes [4096, 8192) (tensor 'w' piece [2:4, 0:512]): checksum ... does not
// match the manifest's ..."), the tensor (NOT_FOUND) and the dimension (INVALID_ARGUMENT).
//
// Thread-safety: a CheckpointReader's const methods may be called concurrently. The free
// functions are safe to call concurrently on different directories.
#pragma once

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/checksum.h"
#include "railyard/base/status.h"
#include "railyard/storage/aligned_buffer.h"
#include "railyard/storage/fs.h"
#include "railyard/storage/manifest.h"

namespace railyard::storage {

class TaskPool;

struct ReaderOptions {
  Fs* fs = nullptr;    // not owned; null: DefaultFs()
  int io_threads = 4;  // parallel extent reads
  uint64_t extent_bytes = 8 << 20;
  bool verify_on_open = true;  // read and check every piece before returning from Open
  // Read shards with O_DIRECT (falls back to buffered reads, logged, where the file system
  // refuses it): no page-cache copy and no cache pollution for a restore that reads each byte
  // once. Slices that start at a 4 KiB boundary of the shard and whose destination is 4 KiB
  // aligned (AlignedBuffer) are read straight into place; others go through a bounce copy.
  bool direct_io = false;
};

class CheckpointReader {
 public:
  // Opens committed step `step` of `dir`. Checks the manifest, that its step matches, and
  // that every shard exists and is long enough; with options.verify_on_open every checksum.
  // NOT_FOUND when the step does not exist or has no manifest (an incomplete save),
  // INVALID_ARGUMENT for a bad manifest, DATA_LOSS for missing, short or corrupt shards.
  static Result<std::unique_ptr<CheckpointReader>> Open(const std::string& dir, int64_t step,
                                                        const ReaderOptions& options = {});
  ~CheckpointReader();

  int64_t step() const { return manifest_.step; }
  const Manifest& manifest() const { return manifest_; }
  const std::string& step_dir() const { return step_dir_; }
  // One line per newer step that LoadLatest skipped, with the reason.
  const std::vector<std::string>& fallback_notes() const { return fallback_notes_; }

  // Copies the block [offsets, offsets + sizes) of `tensor`, row-major, into `out`, which
  // holds `out_bytes` == ElementCount(sizes) * DTypeSize bytes. NOT_FOUND naming an unknown
  // tensor; INVALID_ARGUMENT naming the dimension of a slice out of bounds or of the wrong
  // rank; DATA_LOSS naming the file and extent of a bad piece without a good replica.
  Status ReadSlice(std::string_view tensor, std::span<const int64_t> offsets,
                   std::span<const int64_t> sizes, void* out, size_t out_bytes) const;

  // The whole tensor.
  Result<std::vector<uint8_t>> ReadTensor(std::string_view tensor) const;

  // Reads every piece and checks its checksum. DATA_LOSS for the first extent of a tensor
  // without a good replica. Bad replicas covered by a good one are appended to `warnings`.
  Status VerifyAll(std::vector<std::string>* warnings = nullptr,
                   uint64_t* bytes_read = nullptr) const;

 private:
  friend Result<std::unique_ptr<CheckpointReader>> LoadLatest(const std::string&,
                                                              const ReaderOptions&);
  struct Extent {
    std::vector<size_t> replicas;  // indexes into manifest_.pieces
  };
  CheckpointReader() = default;
  Status CheckFiles() const;
  Result<const ReadableFile*> File(const std::string& name) const;
  Status VerifyPiece(size_t index) const;
  Status ReadIntersection(size_t piece, std::span<const int64_t> offsets,
                          std::span<const int64_t> sizes, uint8_t* out) const;
  // First read of piece `index`: reads its bytes [lo, hi) into `span`, hashes the whole piece
  // and marks it verified. DATA_LOSS naming the file and extent on a checksum mismatch.
  Status ReadFirstTouch(size_t index, const ReadableFile& file, uint64_t lo, uint64_t hi,
                        uint8_t* span) const;
  // Reads [offset, offset + n) of `file` into `out` as extents in parallel; with `stream`,
  // also hashes the bytes in order, each extent as soon as it and those before it are in.
  Status ReadRange(const ReadableFile& file, uint64_t offset, uint64_t n, uint8_t* out,
                   base::Xxh3Stream* stream = nullptr) const;
  std::string PieceWhere(size_t index) const;

  Fs* fs_ = nullptr;
  ReaderOptions options_;
  std::string step_dir_;
  Manifest manifest_;
  std::map<std::string, std::vector<Extent>, std::less<>> extents_;  // by tensor
  std::unique_ptr<std::atomic<bool>[]> verified_;                    // by piece
  std::unique_ptr<TaskPool> pool_;
  mutable std::mutex files_mu_;
  mutable std::map<std::string, std::unique_ptr<ReadableFile>> files_;
  std::vector<std::string> fallback_notes_;
};

// The newest committed step of `dir` that opens (and, with verify_on_open, verifies); newer
// steps that fail are skipped and described in fallback_notes() (and logged as warnings).
// NOT_FOUND when `dir` does not exist or holds no step directory; DATA_LOSS listing each
// step's problem when none is valid.
Result<std::unique_ptr<CheckpointReader>> LoadLatest(const std::string& dir,
                                                     const ReaderOptions& options = {});

}  // namespace railyard::storage
