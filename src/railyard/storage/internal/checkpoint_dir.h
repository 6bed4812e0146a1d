// Private to storage/: small helpers the checkpoint reader (checkpoint_reader.cc) and the
// catalog of steps (checkpoint_catalog.cc) share. Not part of the module's interface.
#pragma once

#include <string>

#include "railyard/base/status.h"
#include "railyard/storage/checkpoint_reader.h"
#include "railyard/storage/fs.h"

namespace railyard::storage::internal {

// "a/b///" -> "a/b", so that paths built from it and messages naming it read cleanly.
inline std::string TrimSlashes(std::string dir) {
  while (dir.size() > 1 && dir.back() == '/') dir.pop_back();
  return dir;
}

// The Fs a reader option set names, DefaultFs() when none.
inline Fs* FsOf(const ReaderOptions& options) {
  return options.fs != nullptr ? options.fs : DefaultFs();
}

// NOT_FOUND naming `dir` when there is no checkpoint directory.
inline Status RequireCheckpointDir(Fs& fs, const std::string& dir) {
  if (!fs.Exists(dir)) return NotFound("checkpoint directory '{}' does not exist", dir);
  return Status::Ok();
}

}  // namespace railyard::storage::internal
