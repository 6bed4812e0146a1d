// storage.metadata: mdtest's easy mode on the shared directory. Every host creates, stats and
// unlinks `items` empty files in a directory of its own (<shared>/<host>/ry-mdtest;
// storage_probe.h). Its rate in operations per second over the three phases is judged against
// the fleet median: metadata is where parallel file systems slow down first (an overloaded
// metadata server, a client with a stale lock), and a job's start-up (imports, checkpoint
// listing) waits on it. FAIL when the host cannot create files there, UNKNOWN when the probe
// ran out of time.
//
// It runs from the coordinator; on one host alone it is SKIPPED.
#include "railyard/validate/check.h"

namespace railyard::validate {
namespace {

class StorageMetadataCheck final : public CoordinatorCheck {
 public:
  StorageMetadataCheck()
      : CoordinatorCheck(
            {.id = "storage.metadata",
             .summary = "mdtest-easy: create, stat, unlink empty files per host",
             .category = Category::kStorage,
             .cost = Cost::kFull,
             .timeout = std::chrono::seconds(30),
             .needs = {.shared_dir = true},
             .unit = Unit::kCount,  // operations per second
             .default_warn = "70% of median",
             .default_fail = "50% of median",
             .params = {{"items", "1000", "files each host creates, stats and unlinks"}}}) {}
};

}  // namespace

std::unique_ptr<Check> NewStorageMetadataCheck() {
  return std::make_unique<StorageMetadataCheck>();
}

}  // namespace railyard::validate
