// An in-memory Fs for tests, with a model of what a power cut keeps.
//
// It behaves like a local POSIX file system (same error codes: ENOENT, EEXIST, ENOTDIR,
// EISDIR, ENOTEMPTY through ErrnoStatus) whose writes sit in a volatile cache until made
// durable the way ext4 and XFS require:
//   - a file's data (and size) survives only as of its last WritableFile::Sync;
//   - a directory's entries (creates, renames, removals inside it) survive only as of its last
//     SyncDir: a file fsynced in a directory that was never fsynced after the file was created
//     is lost, and so is a new directory whose parent was not fsynced after the mkdir.
// PowerCut() throws away everything not durable: what is left is what a machine would find
// after losing power. Paths are absolute ("/a/b"); a relative path is taken from the root.
// Files report direct() false, as on tmpfs. To cut the power at a chosen call, wrap it in a
// PowerCutFs (power_cut_fs.h).
//
//   std::unique_ptr<MemFs> mem = NewMemFs();
//   RY_RETURN_IF_ERROR(WriteFileAtomic(*mem, "/ckpt/latest", "step-1"));
//   mem->PowerCut();                     // only what was made durable is left
//
// Thread-safety: as Fs. Files opened before a PowerCut fail every later call (UNAVAILABLE),
// as handles of a process that did not survive it.
#pragma once

#include <memory>

#include "railyard/storage/fs.h"

namespace railyard::storage {

class MemFs : public Fs {
 public:
  // Replaces the visible state with the durable one (see above); open files go dead.
  virtual void PowerCut() = 0;
};

// Returns a new, empty in-memory file system (only the root directory, durable).
// The caller owns it, and must keep it alive while files it opened, or wrappers over it,
// are in use. Each call returns an independent file system.
std::unique_ptr<MemFs> NewMemFs();

}  // namespace railyard::storage
