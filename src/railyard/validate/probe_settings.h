// The parameters of the storage and collective checks (checks/storage_throughput.cc,
// storage_metadata.cc, allreduce.cc, nccl_tests.cc), as the probes take them.
//
// A plan sets a check's parameters as text ("size: 64MiB", "sizes: 64KiB,1MiB"); the
// coordinator reads them here once, so a bad value is one error naming the check, the
// parameter and the value, before any agent is asked to run anything.
//
//   RY_ASSIGN_OR_RETURN(StorageProbeOptions o, StorageProbeOptionsFrom(settings));
//   o.dir = shared + "/" + host;
//   o.deadline = Deadline::After(timeout);
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/validate/check.h"
#include "railyard/validate/collective_probe.h"
#include "railyard/validate/nccl_tests.h"
#include "railyard/validate/storage_probe.h"

namespace railyard::validate {

// storage.throughput's "size", "block" and "files" (dir and deadline left for the caller).
// INVALID_ARGUMENT names the parameter and its value: sizes must parse (base::ParseBytes) and
// be non-zero, files 1 to 1024.
Result<StorageProbeOptions> StorageProbeOptionsFrom(const CheckSettings& settings);

// storage.metadata's "items": 1 to 1,000,000.
Result<int> MetadataItemsFrom(const CheckSettings& settings);

// collective.allreduce's "sizes" (comm::ParseSizes' forms), "warmup" (0 to 100) and "iters"
// (1 to 1000).
struct AllreduceSweepParams {
  std::vector<uint64_t> sizes;
  int warmup = 0;
  int iters = 1;
};
Result<AllreduceSweepParams> AllreduceParamsFrom(const CheckSettings& settings);

// collective.nccl_tests' "binary", "args" and "launcher" (split at whitespace); deadline and
// gpus (the profile's GPU count) left for the caller.
Result<NcclTestsOptions> NcclTestsOptionsFrom(const CheckSettings& settings);

}  // namespace railyard::validate
