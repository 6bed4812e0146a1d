#include "railyard/storage/agreement.h"

#include <algorithm>
#include <thread>

#include "railyard/storage/fs.h"
#include "railyard/storage/fs_util.h"

namespace railyard::storage {

Status CombineRankStatuses(std::string_view round, int my_rank,
                           const std::vector<std::optional<Status>>& statuses) {
  if (my_rank >= 0 && static_cast<size_t>(my_rank) < statuses.size() &&
      statuses[my_rank].has_value() && !statuses[my_rank]->ok()) {
    return *statuses[my_rank];
  }
  std::vector<int> missing;
  int first_failed = -1;
  int failed = 0;
  for (size_t r = 0; r < statuses.size(); ++r) {
    if (!statuses[r].has_value()) {
      missing.push_back(static_cast<int>(r));
    } else if (!statuses[r]->ok()) {
      if (first_failed < 0) first_failed = static_cast<int>(r);
      ++failed;
    }
  }
  std::string missing_text;
  if (!missing.empty()) {
    missing_text =
        fmt::format("rank{} {} of {} did not report before the deadline",
                    missing.size() > 1 ? "s" : "", fmt::join(missing, ", "), statuses.size());
  }
  if (first_failed >= 0) {
    std::string more = failed > 1 ? fmt::format(" (and {} more ranks failed)", failed - 1) : "";
    return Aborted("{}: rank {} failed: {}{}{}{}", round, first_failed,
                   statuses[first_failed]->ToString(), more, missing.empty() ? "" : "; ",
                   missing_text);
  }
  if (!missing.empty()) return DeadlineExceeded("{}: {}", round, missing_text);
  return Status::Ok();
}

// ---- InProcessAgreementGroup ----

class InProcessAgreementGroup::Handle final : public RankAgreement {
 public:
  Handle(InProcessAgreementGroup* group, int rank) : group_(group), rank_(rank) {}
  int rank() const override { return rank_; }
  int world_size() const override { return group_->world_size_; }
  Status AllOk(std::string_view round, const Status& mine, base::Deadline deadline) override {
    return group_->Arrive(seq_++, rank_, round, mine, deadline);
  }

 private:
  InProcessAgreementGroup* group_;
  int rank_;
  uint64_t seq_ = 0;
};

InProcessAgreementGroup::InProcessAgreementGroup(int world_size)
    : world_size_(std::max(world_size, 1)) {
  for (int r = 0; r < world_size_; ++r) handles_.push_back(std::make_unique<Handle>(this, r));
}

InProcessAgreementGroup::~InProcessAgreementGroup() = default;

RankAgreement* InProcessAgreementGroup::ForRank(int rank) {
  if (rank < 0 || rank >= world_size_) return nullptr;
  return handles_[static_cast<size_t>(rank)].get();
}

Status InProcessAgreementGroup::Arrive(uint64_t seq, int rank, std::string_view round,
                                       const Status& mine, base::Deadline deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  Round& r = rounds_[seq];
  if (r.statuses.empty()) r.statuses.resize(static_cast<size_t>(world_size_));
  r.statuses[static_cast<size_t>(rank)] = mine;
  ++r.arrived;
  cv_.notify_all();
  auto all_here = [&] { return r.arrived == world_size_; };
  if (deadline.IsNever()) {
    cv_.wait(lock, all_here);
  } else {
    cv_.wait_until(lock, deadline.when(), all_here);
  }
  Status result = CombineRankStatuses(round, rank, r.statuses);
  if (++r.left == world_size_) rounds_.erase(seq);
  return result;
}

// ---- FileAgreement ----

namespace {

std::string SafeLabel(std::string_view round) {
  std::string out;
  for (char c : round) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_';
    out += ok ? c : '_';
  }
  return out;
}

// "rank-00012.ok" -> 12 (and ok = true); -1 for other names (temporary files).
int ParseMarker(const std::string& name, bool* ok) {
  if (!name.starts_with("rank-")) return -1;
  size_t dot = name.find('.');
  if (dot == std::string::npos) return -1;
  std::string_view ext = std::string_view(name).substr(dot);
  if (ext != ".ok" && ext != ".err") return -1;
  int r = 0;
  for (size_t i = 5; i < dot; ++i) {
    if (name[i] < '0' || name[i] > '9' || r > 100000000) return -1;
    r = r * 10 + (name[i] - '0');
  }
  *ok = ext == ".ok";
  return dot > 5 ? r : -1;
}

}  // namespace

Result<std::unique_ptr<FileAgreement>> FileAgreement::Create(Fs* fs, std::string dir,
                                                             std::string run_id, int rank,
                                                             int world_size,
                                                             base::Duration poll_interval) {
  if (world_size < 1 || rank < 0 || rank >= world_size) {
    return InvalidArgument("file agreement: rank {} is outside world size {}", rank, world_size);
  }
  if (run_id.empty() || SafeLabel(run_id) != run_id) {
    return InvalidArgument(
        "file agreement: run id '{}' must be non-empty and use only letters, "
        "digits, '-' and '_'",
        run_id);
  }
  std::string agree_dir = dir + "/.agree";
  std::string root = agree_dir + "/" + run_id;
  RY_RETURN_IF_ERROR(MakeDirs(*fs, root));
  if (rank == 0) {
    RY_ASSIGN_OR_RETURN(std::vector<DirEntry> runs, fs->ListDir(agree_dir));
    for (const DirEntry& e : runs) {
      if (e.name != run_id) RemoveTree(*fs, agree_dir + "/" + e.name).IgnoreError();
    }
  }
  return std::unique_ptr<FileAgreement>(
      new FileAgreement(fs, std::move(root), rank, world_size, poll_interval));
}

Status FileAgreement::WriteMarker(const std::string& path, std::string_view content) {
  const std::string tmp = path + ".tmp";  // a name ParseMarker ignores
  RY_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, fs_->NewWritableFile(tmp, {}));
  Status st = file->Write(content);
  Status closed = file->Close();
  if (st.ok()) st = closed;
  if (st.ok()) st = fs_->Rename(tmp, path);
  if (!st.ok()) fs_->RemoveFile(tmp).IgnoreError();
  return st;
}

Status FileAgreement::AllOk(std::string_view round, const Status& mine, base::Deadline deadline) {
  const uint64_t seq = seq_++;
  const std::string round_dir = fmt::format("{}/{:06d}-{}", root_, seq, SafeLabel(round));
  // Markers coordinate live processes only: a crashed run restarts under a new run id and
  // ignores them. So they need to be visible whole (write, then rename), not durable, and
  // the round costs no fsync.
  RY_RETURN_IF_ERROR(fs_->CreateDir(round_dir).WithContext("agreement"));
  const std::string marker =
      fmt::format("{}/rank-{:05d}.{}", round_dir, rank_, mine.ok() ? "ok" : "err");
  std::string content =
      mine.ok() ? "ok\n" : fmt::format("{}\n{}", static_cast<int>(mine.code()), mine.message());
  RY_RETURN_IF_ERROR(WriteMarker(marker, content).WithContext("agreement"));

  std::vector<std::optional<Status>> statuses(static_cast<size_t>(world_size_));
  auto delay = std::chrono::microseconds(500);
  int present = 0;
  for (;;) {
    RY_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, fs_->ListDir(round_dir));
    present = 0;
    for (const DirEntry& e : entries) {
      bool ok = false;
      int r = ParseMarker(e.name, &ok);
      if (r < 0 || r >= world_size_) continue;
      if (!statuses[r].has_value()) {
        if (ok) {
          statuses[r] = Status::Ok();
        } else {
          auto text = ReadWholeFile(*fs_, round_dir + "/" + e.name);
          std::string body = text.ok() ? *text : text.status().ToString();
          size_t nl = body.find('\n');
          int code = std::atoi(body.substr(0, nl).c_str());
          if (code <= 0 || code > static_cast<int>(StatusCode::kInternal)) {
            code = static_cast<int>(StatusCode::kInternal);
          }
          statuses[r] = Status(static_cast<StatusCode>(code),
                               nl == std::string::npos ? body : body.substr(nl + 1));
        }
      }
    }
    for (const auto& s : statuses) present += s.has_value() ? 1 : 0;
    if (present == world_size_ || deadline.Expired()) break;
    // Markers arrive over a shared file system: poll, backing off to the configured interval.
    auto left = std::chrono::duration_cast<std::chrono::microseconds>(deadline.Remaining());
    std::this_thread::sleep_for(std::min(delay, left));
    delay = std::min<std::chrono::microseconds>(
        delay * 2, std::chrono::duration_cast<std::chrono::microseconds>(poll_));
  }
  // Every rank wrote a marker for this round, so every rank has finished reading the previous
  // one: rank 0 can remove it.
  if (rank_ == 0 && seq > 0 && present == world_size_) {
    auto entries = fs_->ListDir(root_);
    if (entries.ok()) {
      std::string prefix = fmt::format("{:06d}-", seq - 1);
      for (const DirEntry& e : *entries) {
        if (e.name.starts_with(prefix)) RemoveTree(*fs_, root_ + "/" + e.name).IgnoreError();
      }
    }
  }
  return CombineRankStatuses(round, rank_, statuses);
}

}  // namespace railyard::storage
