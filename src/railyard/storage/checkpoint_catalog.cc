#include "railyard/storage/checkpoint_catalog.h"

#include <algorithm>
#include <set>

#include "railyard/base/logging.h"
#include "railyard/storage/checkpoint.h"
#include "railyard/storage/fs_util.h"
#include "railyard/storage/internal/checkpoint_dir.h"

namespace railyard::storage {
namespace {

const base::Logger kLog("ckpt");

}  // namespace

Result<std::vector<int64_t>> ListStepDirs(Fs& fs, const std::string& dir) {
  RY_RETURN_IF_ERROR(internal::RequireCheckpointDir(fs, dir));
  RY_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, fs.ListDir(dir));
  std::vector<int64_t> steps;
  for (const DirEntry& e : entries) {
    auto step = ParseStepDirName(e.name);
    if (e.is_dir && step.has_value()) steps.push_back(*step);
  }
  std::sort(steps.begin(), steps.end());
  return steps;
}

std::string_view StepStateName(StepState state) {
  switch (state) {
    case StepState::kCommitted:
      return "committed";
    case StepState::kIncomplete:
      return "incomplete";
    case StepState::kCorrupt:
      return "corrupt";
  }
  return "?";
}

Result<std::vector<StepInfo>> ListCheckpoints(const std::string& dir_in, bool verify,
                                              const ReaderOptions& options) {
  const std::string dir = internal::TrimSlashes(dir_in);
  Fs* fs = internal::FsOf(options);
  RY_RETURN_IF_ERROR(internal::RequireCheckpointDir(*fs, dir));
  RY_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, fs->ListDir(dir));
  std::optional<int64_t> latest;
  if (auto text = ReadWholeFile(*fs, dir + "/" + std::string(kLatestFileName)); text.ok()) {
    latest = ParseStepDirName("step-" + text->substr(0, text->find('\n')));
  }
  std::vector<StepInfo> out;
  for (const DirEntry& e : entries) {
    if (!e.is_dir) continue;
    StepInfo info;
    info.path = dir + "/" + e.name;
    auto step = ParseStepDirName(e.name);
    if (!step.has_value() && e.name.starts_with(".tmp-step-")) {
      step = ParseStepDirName(e.name.substr(5));
      info.detail = "save in progress or interrupted (removed when a writer next opens)";
    }
    if (!step.has_value()) continue;
    info.step = *step;
    info.latest = latest == step && !e.name.starts_with(".");
    if (auto files = fs->ListDir(info.path); files.ok()) {
      for (const DirEntry& f : *files) {
        if (!f.is_dir) info.bytes += fs->FileSize(info.path + "/" + f.name).value_or(0);
      }
    }
    if (e.name.starts_with(".")) {
      out.push_back(std::move(info));
      continue;
    }
    if (auto m = LoadManifest(*fs, info.path + "/" + std::string(kManifestFileName)); m.ok()) {
      info.world_size = m->world_size;
    }
    ReaderOptions ropt = options;
    ropt.verify_on_open = verify;
    auto reader = CheckpointReader::Open(dir, *step, ropt);
    if (reader.ok()) {
      info.state = StepState::kCommitted;
    } else if (reader.status().code() == StatusCode::kNotFound) {
      info.detail = reader.status().message();
    } else {
      info.state = StepState::kCorrupt;
      info.detail = reader.status().ToString();
    }
    out.push_back(std::move(info));
  }
  std::sort(out.begin(), out.end(), [](const StepInfo& a, const StepInfo& b) {
    return a.step != b.step ? a.step < b.step : a.path < b.path;
  });
  return out;
}

Result<VerifyReport> VerifyCheckpoint(const std::string& dir_in, std::optional<int64_t> step,
                                      const ReaderOptions& options) {
  const std::string dir = internal::TrimSlashes(dir_in);
  Fs* fs = internal::FsOf(options);
  RY_ASSIGN_OR_RETURN(std::vector<int64_t> steps, ListStepDirs(*fs, dir));
  if (steps.empty()) {
    return NotFound("'{}' holds no checkpoint (no step-<N> directory with a manifest.json)", dir);
  }
  VerifyReport report;
  report.step = step.value_or(steps.back());
  if (std::find(steps.begin(), steps.end(), report.step) == steps.end()) {
    return NotFound("step {} is not in '{}' (steps there: {})", report.step, dir,
                    fmt::join(steps, ", "));
  }
  ReaderOptions ropt = options;
  ropt.verify_on_open = false;
  auto reader = CheckpointReader::Open(dir, report.step, ropt);
  report.status = reader.ok() ? (*reader)->VerifyAll(&report.warnings, &report.bytes_verified)
                              : reader.status();
  if (!report.status.ok()) {
    ropt.verify_on_open = true;
    for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
      if (*it >= report.step) continue;
      if (CheckpointReader::Open(dir, *it, ropt).ok()) {
        report.fallback_step = *it;
        break;
      }
    }
  }
  return report;
}

Result<std::vector<int64_t>> ApplyRetention(const std::string& dir_in, int keep_last,
                                            int64_t known_valid_step,
                                            const ReaderOptions& options) {
  const std::string dir = internal::TrimSlashes(dir_in);
  std::vector<int64_t> removed;
  if (keep_last <= 0) return removed;
  Fs* fs = internal::FsOf(options);
  RY_ASSIGN_OR_RETURN(std::vector<int64_t> all, ListStepDirs(*fs, dir));
  std::vector<int64_t> steps;  // committed ones: only those have a manifest
  for (int64_t s : all) {
    if (fs->Exists(dir + "/" + StepDirName(s) + "/" + std::string(kManifestFileName))) {
      steps.push_back(s);
    }
  }
  if (steps.size() <= static_cast<size_t>(keep_last)) return removed;
  std::set<int64_t> keep(steps.end() - keep_last, steps.end());
  std::optional<int64_t> newest_valid;
  if (known_valid_step >= 0 &&
      std::find(steps.begin(), steps.end(), known_valid_step) != steps.end()) {
    newest_valid = known_valid_step;
  } else {
    ReaderOptions ropt = options;
    ropt.verify_on_open = true;
    for (auto it = steps.rbegin(); it != steps.rend() && !newest_valid; ++it) {
      if (CheckpointReader::Open(dir, *it, ropt).ok()) newest_valid = *it;
    }
  }
  if (!newest_valid.has_value()) {
    kLog.Warn("retention in '{}': no step verifies, so none is removed", dir);
    return removed;
  }
  keep.insert(*newest_valid);
  for (int64_t s : steps) {
    if (keep.count(s) != 0) continue;
    const std::string from = dir + "/" + StepDirName(s);
    const std::string trash = dir + "/.tmp-delete-" + StepDirName(s);
    RY_RETURN_IF_ERROR(fs->Rename(from, trash));
    RY_RETURN_IF_ERROR(fs->SyncDir(dir));
    RY_RETURN_IF_ERROR(RemoveTree(*fs, trash));
    removed.push_back(s);
  }
  if (!removed.empty()) {
    kLog.Info("retention in '{}': removed step(s) {}", dir, fmt::join(removed, ", "));
  }
  return removed;
}

Result<std::vector<int64_t>> SetAsideStepsAfter(Fs& fs, const std::string& dir, int64_t step) {
  RY_ASSIGN_OR_RETURN(std::vector<int64_t> steps, ListStepDirs(fs, dir));
  std::vector<int64_t> moved;
  for (int64_t s : steps) {
    if (s <= step) continue;
    const std::string base = dir + "/set-aside-" + StepDirName(s);
    std::string to = base;
    for (int k = 2; fs.Exists(to); ++k) to = fmt::format("{}-{}", base, k);
    RY_RETURN_IF_ERROR(fs.Rename(dir + "/" + StepDirName(s), to));
    moved.push_back(s);
  }
  if (!moved.empty()) {
    RY_RETURN_IF_ERROR(fs.SyncDir(dir));
    kLog.Warn("'{}': step(s) {} newer than the resumed step {} set aside as set-aside-step-<N>",
              dir, fmt::join(moved, ", "), step);
  }
  return moved;
}

}  // namespace railyard::storage
