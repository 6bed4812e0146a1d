// FileStore: the rendezvous Store on a directory of a shared file system (NFS, Lustre, ...).
//
// For jobs that have a shared directory but no host to run a TcpStoreServer on. Each key is
// one file, "k.<escaped key>", written atomically (temporary file, fsync, rename), so a
// reader sees a whole value or none. Set, Add and CompareAndSet hold a per-key lock file
// ("l.<escaped key>", flock) for their read-modify-write, which makes them atomic across
// processes and, where the file system supports flock (NFSv4, Lustre mounted with -o flock),
// across nodes.
//
// With the job secret, every value file carries an HMAC-SHA-256 of its key and value, and a
// read refuses a value that is unsigned or whose signature does not match (PERMISSION_DENIED
// naming the key and the file): whoever can write the directory still cannot plant a peer
// address. Files are created 0600, and the directory 0700 when OpenFileStore creates it.
// Without a secret (tests, one process) values are plain.
//
// Shared file systems have no cross-node notification, so Get and Wait poll: 1 ms between
// looks at first, growing to 50 ms. NFS clients cache directory lookups; mount the directory
// with lookupcache=positive (or a small actimeo) so a key set on another node shows up
// promptly.
//
//   RY_ASSIGN_OR_RETURN(auto store, OpenFileStore("/lustre/jobs/1234/rdzv", secret));
//
// Thread-safety: the Store may be called from any thread and from several processes.
#pragma once

#include <memory>
#include <string>

#include "railyard/base/status.h"
#include "railyard/net/store.h"

namespace railyard::net {

// Creates `dir` (and parents) if needed. `secret` signs and checks every value (empty: values
// are plain). Errors name the directory: FAILED_PRECONDITION when it is not a directory, the
// errno-derived code when it cannot be created.
Result<std::unique_ptr<Store>> OpenFileStore(std::string dir, std::string secret = {});

// The file name (no directory) under which `key` is stored: bytes other than [A-Za-z0-9_-]
// become %XX, and an escaped name too long for a directory entry is cut and suffixed with a
// hash of the whole key. Exposed for tests and for operators inspecting a store directory.
std::string FileStoreKeyFileName(std::string_view key);

}  // namespace railyard::net
