// RankAgreement: how the ranks of a checkpoint save decide together that every one succeeded.
//
// storage/ knows no network, so the commit protocol asks this small interface instead of a
// communicator: each rank calls AllOk with its own outcome and learns whether all ranks
// succeeded. The launcher or comm/ will supply an implementation over their collectives; this
// file has two that need neither:
//
//   - InProcessAgreementGroup: ranks are threads of one process (tests, single-host tools).
//       InProcessAgreementGroup group(4);
//       writer_options.agreement = group.ForRank(r);
//   - FileAgreement: ranks are processes that share a file system (the checkpoint directory).
//     Each rank drops a marker file per round; each waits, with a deadline, for all markers.
//       RY_ASSIGN_OR_RETURN(auto agree, FileAgreement::Create(fs, dir, run_id, rank, world));
//
// AllOk is a collective: every rank calls it, in the same order, the same number of times, as
// with MPI. `round` is a label for messages (and must match between ranks); implementations
// number the calls themselves, so a label may repeat.
//
// Thread-safety: one RankAgreement object per rank, used by one thread at a time.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"

namespace railyard::storage {

class Fs;

class RankAgreement {
 public:
  virtual ~RankAgreement() = default;
  virtual int rank() const = 0;
  virtual int world_size() const = 0;

  // Reports this rank's outcome of `round` and waits until every rank has reported or the
  // deadline passes. Returns OK when every rank reported OK. Otherwise: this rank's own error
  // when `mine` failed; ABORTED naming the lowest failing rank and its message; or
  // DEADLINE_EXCEEDED naming the ranks that did not report.
  virtual Status AllOk(std::string_view round, const Status& mine, base::Deadline deadline) = 0;
};

// Ranks as threads of one process. The group must outlive the handles it gives out.
class InProcessAgreementGroup {
 public:
  explicit InProcessAgreementGroup(int world_size);
  ~InProcessAgreementGroup();

  // The handle for `rank` (0 <= rank < world_size); owned by the group.
  RankAgreement* ForRank(int rank);

 private:
  class Handle;
  friend class Handle;
  struct Round {
    std::vector<std::optional<Status>> statuses;
    int arrived = 0;
    int left = 0;
  };
  Status Arrive(uint64_t seq, int rank, std::string_view round, const Status& mine,
                base::Deadline deadline);

  int world_size_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::map<uint64_t, Round> rounds_;
  std::vector<std::unique_ptr<Handle>> handles_;
};

// Ranks as processes sharing a file system. Markers live in
// `<dir>/.agree/<run_id>/<seq>-<round>/rank-<R>.ok` (or `.err`, holding the error), written
// atomically. `run_id` must be the same for all ranks of one run and differ between runs
// (e.g. the job id and restart count), so that markers of a crashed run never count.
class FileAgreement final : public RankAgreement {
 public:
  // Rank 0 removes marker directories of other runs. `fs` is not owned and must outlive this.
  // `poll_interval` bounds how often the directory is listed while waiting.
  static Result<std::unique_ptr<FileAgreement>> Create(
      Fs* fs, std::string dir, std::string run_id, int rank, int world_size,
      base::Duration poll_interval = std::chrono::milliseconds(20));

  int rank() const override { return rank_; }
  int world_size() const override { return world_size_; }
  Status AllOk(std::string_view round, const Status& mine, base::Deadline deadline) override;

 private:
  FileAgreement(Fs* fs, std::string root, int rank, int world_size, base::Duration poll)
      : fs_(fs), root_(std::move(root)), rank_(rank), world_size_(world_size), poll_(poll) {}
  // Writes `path` whole (a temporary file renamed into place), without fsync.
  Status WriteMarker(const std::string& path, std::string_view content);

  Fs* fs_;
  std::string root_;  // <dir>/.agree/<run_id>
  int rank_;
  int world_size_;
  base::Duration poll_;
  uint64_t seq_ = 0;
};

// Builds the status AllOk returns from every rank's outcome (nullopt = did not report).
// Shared by the implementations so their messages read the same.
Status CombineRankStatuses(std::string_view round, int my_rank,
                           const std::vector<std::optional<Status>>& statuses);

}  // namespace railyard::storage
