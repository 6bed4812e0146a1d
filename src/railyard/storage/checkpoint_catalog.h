// The catalog of a checkpoint directory: which steps it holds and in what state, a full
// verification of one step, and retention (pruning old steps). `railyard ckpt ls/verify` and
// the writer's `keep_last` are built on these; loading a step is checkpoint_reader.h.
//
//   RY_ASSIGN_OR_RETURN(std::vector<StepInfo> steps, ListCheckpoints("/ckpt", /*verify=*/false));
//   RY_ASSIGN_OR_RETURN(VerifyReport report, VerifyCheckpoint("/ckpt", std::nullopt));
//
// Thread-safety: safe to call concurrently on different directories.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/storage/checkpoint_reader.h"
#include "railyard/storage/fs.h"

namespace railyard::storage {

// Committed-looking step directories (step-<N>) of `dir`, ascending.
Result<std::vector<int64_t>> ListStepDirs(Fs& fs, const std::string& dir);

enum class StepState { kCommitted, kIncomplete, kCorrupt };
std::string_view StepStateName(StepState state);  // "committed", "incomplete", "corrupt"

struct StepInfo {
  int64_t step = -1;
  StepState state = StepState::kIncomplete;
  uint64_t bytes = 0;  // sum of the files in the step directory
  int world_size = 0;  // from the manifest; 0 when unknown
  std::string path;
  std::string detail;   // why incomplete or corrupt
  bool latest = false;  // the `latest` file names this step
};

// Every step of `dir`, ascending: committed (manifest valid, shards present and long enough,
// and with `verify` every checksum right), incomplete (.tmp-step-<N>, or no manifest),
// corrupt (bad manifest, missing or short shard, or with `verify` a checksum mismatch).
Result<std::vector<StepInfo>> ListCheckpoints(const std::string& dir, bool verify,
                                              const ReaderOptions& options = {});

struct VerifyReport {
  int64_t step = -1;                     // the step verified
  Status status;                         // OK, or the first problem (file and extent)
  std::vector<std::string> warnings;     // bad replicas covered by good ones
  std::optional<int64_t> fallback_step;  // when not OK: the newest older step that verifies
  uint64_t bytes_verified = 0;
};

// Verifies every checksum of `step`, or of the newest step directory (the one LoadLatest
// would try first) when absent. The result is an error only when there is nothing to verify
// (no such directory or step); a corrupt step is reported in VerifyReport::status.
Result<VerifyReport> VerifyCheckpoint(const std::string& dir, std::optional<int64_t> step,
                                      const ReaderOptions& options = {});

// Keeps the newest `keep_last` committed steps and the newest valid one, and removes the
// other committed steps (each renamed to .tmp-delete-step-<N> first, so a crash never leaves
// a half-deleted step that looks committed). `known_valid_step` (>= 0) is a step the caller
// knows to be valid (the writer's just-committed step); otherwise the newest valid step is
// found by verifying from the newest down. keep_last <= 0 removes nothing. Returns the
// removed steps.
Result<std::vector<int64_t>> ApplyRetention(const std::string& dir, int keep_last,
                                            int64_t known_valid_step = -1,
                                            const ReaderOptions& options = {});

// Moves every step directory newer than `step` aside, to set-aside-step-<N> (with "-2", "-3"
// ... when that name is taken), and returns the steps moved. A job that resumed from `step`
// because the newer ones do not load calls this before it trains on: it will save those step
// numbers again, and a step directory that exists refuses a new save. Set-aside directories are
// kept for inspection (the damage is evidence) and ignored by readers, writers and retention;
// remove them by hand. Rename is atomic, so a crash leaves each step either in place or aside.
Result<std::vector<int64_t>> SetAsideStepsAfter(Fs& fs, const std::string& dir, int64_t step);

}  // namespace railyard::storage
