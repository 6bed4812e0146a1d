// Helpers over any Fs: directory trees, whole-file reads and writes, and atomic replacement.
//
// They use only the Fs interface, so they work on the POSIX backend, the in-memory one and
// through the fault-injecting wrapper alike.
//
//   RY_RETURN_IF_ERROR(MakeDirs(fs, dir));
//   RY_RETURN_IF_ERROR(WriteFileAtomic(fs, dir + "/latest", "step-00000042"));
//
// Thread-safety: as Fs; concurrent calls on the same paths race as the file system would.
#pragma once

#include <string>
#include <string_view>

#include "railyard/base/status.h"
#include "railyard/storage/fs.h"

namespace railyard::storage {

// Creates `dir` and its missing parents, and fsyncs the parent of each directory it created,
// so that the new directories survive a crash (what is later made durable inside them would
// otherwise be lost with them).
Status MakeDirs(Fs& fs, const std::string& dir);

// Removes a file or a directory tree (does not follow symlinks). OK when absent.
Status RemoveTree(Fs& fs, const std::string& path);

Result<std::string> ReadWholeFile(Fs& fs, const std::string& path);

// Replaces `path` with `data` so that a crash leaves the old or the new content, through
// `fs`: base::ReplaceFileAtomic's protocol (base/files.h: a "<path>.tmp.<pid>.<n>" file
// written and fsynced, renamed over `path`, the directory fsynced) with Fs calls for its
// steps. Everything storage/ commits goes through here. The temporary file is removed on
// failure.
Status WriteFileAtomic(Fs& fs, const std::string& path, std::string_view data);

// Creates (or truncates) `path` and writes `data`, then with `sync` fsyncs the file. Not
// atomic, and the name is not durable until its directory is fsynced. For files in a
// directory that becomes visible (by a rename) only after everything in it is durable, where
// WriteFileAtomic's temporary file, rename and directory fsync would buy nothing.
Status WriteNewFile(Fs& fs, const std::string& path, std::string_view data, bool sync);

// Removes the files in `dir` that a crashed WriteFileAtomic left behind
// (base::IsStaleTempFileName). Returns how many it removed.
Result<int> RemoveStaleTempFiles(Fs& fs, const std::string& dir);

}  // namespace railyard::storage
