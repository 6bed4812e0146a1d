// FileStore: the rendezvous Store on a directory of a shared file system (NFS, Lustre, ...).
//
// For jobs that have a shared directory but no host to run a TcpStoreServer on. Each key is
// one file, "k.<escaped key>", written atomically (temporary file, fsync, rename), so a
// reader sees a whole value or none. Set, Add and CompareAndSet hold a per-key lock file
// ("l.<escaped key>", flock) for their read-modify-write, which makes them atomic across
// processes and, where the file system supports flock (NFSv4, Lustre mounted with -o flock),
// across nodes.
//
// Shared file systems have no cross-node notification, so Get and Wait poll: 1 ms between
// looks at first, growing to 50 ms. NFS clients cache directory lookups; mount the directory
// with lookupcache=positive (or a small actimeo) so a key set on another node shows up
// promptly.
//
//   RY_ASSIGN_OR_RETURN(auto store, OpenFileStore("/lustre/jobs/1234/rdzv"));
//
// Thread-safety: the Store may be called from any thread and from several processes.
#pragma once

#include <memory>
#include <string>

#include "railyard/base/status.h"
#include "railyard/net/store.h"

namespace railyard::net {

// Creates `dir` (and parents) if needed. Errors name the directory: FAILED_PRECONDITION when
// it is not a directory, the errno-derived code when it cannot be created.
Result<std::unique_ptr<Store>> OpenFileStore(std::string dir);

// The file name (no directory) under which `key` is stored: bytes other than [A-Za-z0-9_-]
// become %XX, and an escaped name too long for a directory entry is cut and suffixed with a
// hash of the whole key. Exposed for tests and for operators inspecting a store directory.
std::string FileStoreKeyFileName(std::string_view key);

}  // namespace railyard::net
