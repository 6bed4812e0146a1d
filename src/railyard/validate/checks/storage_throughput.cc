// storage.throughput: IOR's easy mode on the shared directory. Every host writes its own files
// (<shared>/<host>/ry-ior-N.dat, fsynced) and then reads a neighbour's back, so the page cache
// of the host that wrote them cannot answer (storage_probe.h). Per-host write and read rates
// in bits/s (bytes/s x 8, as every rate in validate/) are judged against the fleet median: a
// host far below its peers has a slow client, mount or network path to the storage. A host
// that cannot write (read-only, full, no permission) is FAIL; one whose probe ran out of time
// is UNKNOWN; a reader whose neighbour never wrote is not blamed.
//
// It runs from the coordinator, which drives every host's agent at once; on one host alone
// (`railyard validate node`) it is SKIPPED.
#include "railyard/validate/check.h"

namespace railyard::validate {
namespace {

class StorageThroughputCheck final : public CoordinatorCheck {
 public:
  StorageThroughputCheck()
      : CoordinatorCheck(
            {.id = "storage.throughput",
             .summary = "IOR-easy: write own files with fsync, read a neighbour's back",
             .category = Category::kStorage,
             .cost = Cost::kFull,
             .timeout = std::chrono::seconds(60),
             .needs = {.shared_dir = true},
             .unit = Unit::kRate,
             .default_warn = "70% of median",
             .default_fail = "50% of median",
             .params = {{"size", "16MiB",
                         "bytes each host writes per file (IOR -b); larger than the clients' "
                         "caches on a real file system"},
                        {"block", "1MiB", "bytes per write and read call (IOR -t)"},
                        {"files", "1", "files per host (IOR's file per process)"}}}) {}
};

}  // namespace

std::unique_ptr<Check> NewStorageThroughputCheck() {
  return std::make_unique<StorageThroughputCheck>();
}

}  // namespace railyard::validate
