#include "railyard/storage/fs_util.h"

#include <memory>
#include <vector>

#include "railyard/base/files.h"

namespace railyard::storage {

Status MakeDirs(Fs& fs, const std::string& dir) {
  if (dir.empty() || fs.Exists(dir)) {
    return Status::Ok();
  }
  std::string parent = base::ParentDir(dir);
  if (parent != dir && parent != "." && parent != "/") RY_RETURN_IF_ERROR(MakeDirs(fs, parent));
  RY_RETURN_IF_ERROR(fs.CreateDir(dir));
  // A new directory's entry lives in its parent: without this fsync a power cut can take the
  // directory, and everything later made durable inside it, away.
  return fs.SyncDir(parent);
}

Status RemoveTree(Fs& fs, const std::string& path) {
  if (!fs.Exists(path)) return Status::Ok();
  auto entries = fs.ListDir(path);
  if (!entries.ok()) {
    // Not a directory (or a symlink to one): remove it as a file.
    Status st = fs.RemoveFile(path);
    if (st.ok() || st.code() == StatusCode::kNotFound) return Status::Ok();
    return st;
  }
  for (const DirEntry& e : *entries) {
    std::string child = path + "/" + e.name;
    if (e.is_dir) {
      RY_RETURN_IF_ERROR(RemoveTree(fs, child));
    } else {
      Status st = fs.RemoveFile(child);
      if (!st.ok() && st.code() != StatusCode::kNotFound) return st;
    }
  }
  Status st = fs.RemoveDir(path);
  if (!st.ok() && st.code() != StatusCode::kNotFound) return st;
  return Status::Ok();
}

Result<std::string> ReadWholeFile(Fs& fs, const std::string& path) {
  RY_ASSIGN_OR_RETURN(std::unique_ptr<ReadableFile> file, fs.NewReadableFile(path));
  RY_ASSIGN_OR_RETURN(uint64_t size, file->Size());
  std::string out(size, '\0');
  RY_RETURN_IF_ERROR(file->PRead(0, out.data(), out.size()));
  return out;
}

Status WriteFileAtomic(Fs& fs, const std::string& path, std::string_view data) {
  base::AtomicReplaceSteps steps;
  steps.write_synced = [&](const std::string& tmp) {
    return WriteNewFile(fs, tmp, data, /*sync=*/true);
  };
  steps.rename = [&](const std::string& from, const std::string& to) {
    return fs.Rename(from, to);
  };
  steps.sync_dir = [&](const std::string& dir) { return fs.SyncDir(dir); };
  steps.remove = [&](const std::string& tmp) { fs.RemoveFile(tmp).IgnoreError(); };
  return base::ReplaceFileAtomic(path, steps);
}

Status WriteNewFile(Fs& fs, const std::string& path, std::string_view data, bool sync) {
  RY_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, fs.NewWritableFile(path, {}));
  RY_RETURN_IF_ERROR(file->Write(data));
  if (sync) RY_RETURN_IF_ERROR(file->Sync());
  return file->Close();
}

Result<int> RemoveStaleTempFiles(Fs& fs, const std::string& dir) {
  RY_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, fs.ListDir(dir));
  int removed = 0;
  for (const DirEntry& e : entries) {
    if (e.is_dir || !base::IsStaleTempFileName(e.name)) continue;
    RY_RETURN_IF_ERROR(
        fs.RemoveFile(dir + "/" + e.name).WithContext("removing a crash's leftover"));
    ++removed;
  }
  return removed;
}

}  // namespace railyard::storage
