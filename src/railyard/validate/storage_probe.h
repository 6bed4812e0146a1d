// Storage probes a validation agent runs on its host: IOR's easy mode (write your own files
// with fsync, read a neighbour's back) and mdtest's easy mode (create, stat and unlink empty
// files in a directory of your own), on the shared directory of the storage checks.
//
// The coordinator gives each host its own directory under the shared one (<shared>/<host>)
// and runs the phases in lock-step: every host WriteOwnFiles, then every host
// ReadNeighbourFiles on another host's directory (so its page cache never held those bytes),
// then MetadataProbe, and RemoveProbeFiles at the end.
//
//   StorageProbeOptions o{.dir = shared + "/node3", .deadline = Deadline::After(10s)};
//   RY_ASSIGN_OR_RETURN(StorageRate w, WriteOwnFiles(o));
//   RY_ASSIGN_OR_RETURN(StorageRate r, ReadNeighbourFiles(shared + "/node4", o));
//
// Error codes, so the caller can tell a host that cannot write from a probe that ran out of
// time (storage.throughput is FAIL for the first, UNKNOWN for the second):
//   DEADLINE_EXCEEDED   the deadline passed before the probe finished (UNKNOWN);
//   PERMISSION_DENIED   the directory refuses writes: read-only file system (EROFS) or
//                       permissions (EACCES, EPERM) — FAIL;
//   RESOURCE_EXHAUSTED  the file system is full or over quota (ENOSPC, EDQUOT) — FAIL;
//   NOT_FOUND           (reads only) the neighbour's files are missing: its write failed,
//                       so the reader is not to blame (the caller reports the writer);
//   DATA_LOSS           (reads only) a neighbour's file is shorter than it should be;
//   anything else       an unexpected OS answer (EIO, ...) — FAIL, the message names it.
// Every message names the path and, for OS errors, the errno text.
//
// Thread-safety: free functions; concurrent calls on different directories are safe.
#pragma once

#include <cstdint>
#include <string>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"

namespace railyard::validate {

struct StorageProbeOptions {
  std::string dir;  // this host's own directory, e.g. <shared>/<host>; created when missing
  uint64_t bytes_per_file = 64ull << 20;
  uint64_t block_bytes = 1ull << 20;  // one write or read call
  int files = 1;                      // IOR's file per process: one per writer
  base::Deadline deadline = base::Deadline::Never();
};

// Bytes moved by one probe and how fast.
struct StorageRate {
  uint64_t bytes = 0;
  int files = 0;
  double seconds = 0;  // from the first open to the last fsync (write) or read (read)
  double bytes_per_s = 0;
  bool direct = false;  // O_DIRECT was in effect (reads)
  std::string note;     // how the page cache was kept out, when O_DIRECT was refused
};

// Per-phase rates of MetadataProbe (operations per second of each phase alone), and the
// total: 3 * items operations over the time of all three phases.
struct MetadataRate {
  int items = 0;
  double create_ops_per_s = 0;
  double stat_ops_per_s = 0;
  double unlink_ops_per_s = 0;
  double total_ops_per_s = 0;
  double seconds = 0;
};

// The name of the index-th data file in a host's directory ("ry-ior-0.dat"): a reader finds a
// neighbour's files by it.
std::string StorageProbeFileName(int index);

// Creates options.dir (and parents) when missing, then writes options.files files of
// options.bytes_per_file each in blocks of options.block_bytes, fsyncing each file; the rate
// counts from the first open to the last fsync. Errors: see the header comment.
// INVALID_ARGUMENT for an empty dir, no files, or a zero size.
Result<StorageRate> WriteOwnFiles(const StorageProbeOptions& options);

// Reads the files WriteOwnFiles wrote in `neighbour_dir` with the same options (files,
// bytes_per_file, block_bytes), after dropping them from this host's page cache
// (POSIX_FADV_DONTNEED) and with O_DIRECT where the file system allows it (else buffered,
// said in StorageRate::note). NOT_FOUND names the missing file.
Result<StorageRate> ReadNeighbourFiles(const std::string& neighbour_dir,
                                       const StorageProbeOptions& options);

// mdtest's easy mode in `dir`/ry-mdtest (created; removed again at the end): creates `items`
// empty files, stats each, unlinks each. Errors as WriteOwnFiles; a failure part-way removes
// what it created (best effort). INVALID_ARGUMENT for items < 1.
Result<MetadataRate> MetadataProbe(const std::string& dir, int items, base::Deadline deadline);

// Removes what the probes wrote in `dir` (the data files and the metadata subdirectory), and
// `dir` itself when it is empty afterwards. OK when nothing is there. Never touches other
// files. Errors name the path that could not be removed.
Status RemoveProbeFiles(const std::string& dir);

}  // namespace railyard::validate
