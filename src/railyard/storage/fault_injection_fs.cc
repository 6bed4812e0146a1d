#include "railyard/storage/fault_injection_fs.h"

#include <utility>

namespace railyard::storage {
namespace {

// Wraps a base file so its calls pass through the wrapper's hook.
class FaultWritableFile final : public WritableFile {
 public:
  FaultWritableFile(FaultInjectionFs* fs, std::unique_ptr<WritableFile> base)
      : fs_(fs), base_(std::move(base)) {}
  const std::string& path() const override { return base_->path(); }
  bool direct() const override { return base_->direct(); }
  Status PWrite(uint64_t offset, const void* data, size_t n) override {
    RY_RETURN_IF_ERROR(fs_->Intercept(FsOp::kWrite, path()));
    return base_->PWrite(offset, data, n);
  }
  Status Write(std::string_view data) override {
    RY_RETURN_IF_ERROR(fs_->Intercept(FsOp::kWrite, path()));
    return base_->Write(data);
  }
  Status Allocate(uint64_t length) override {
    RY_RETURN_IF_ERROR(fs_->Intercept(FsOp::kAllocate, path()));
    return base_->Allocate(length);
  }
  Status StartWriteback(uint64_t offset, uint64_t n) override {
    RY_RETURN_IF_ERROR(fs_->Intercept(FsOp::kWriteback, path()));
    return base_->StartWriteback(offset, n);
  }
  Status DropCache(uint64_t offset, uint64_t n) override {
    RY_RETURN_IF_ERROR(fs_->Intercept(FsOp::kDropCache, path()));
    return base_->DropCache(offset, n);
  }
  Status Sync() override {
    RY_RETURN_IF_ERROR(fs_->Intercept(FsOp::kSync, path()));
    return base_->Sync();
  }
  Status Close() override {
    RY_RETURN_IF_ERROR(fs_->Intercept(FsOp::kClose, path()));
    return base_->Close();
  }

 private:
  FaultInjectionFs* fs_;
  std::unique_ptr<WritableFile> base_;
};

class FaultReadableFile final : public ReadableFile {
 public:
  FaultReadableFile(FaultInjectionFs* fs, std::unique_ptr<ReadableFile> base)
      : fs_(fs), base_(std::move(base)) {}
  const std::string& path() const override { return base_->path(); }
  bool direct() const override { return base_->direct(); }
  Result<uint64_t> Size() const override {
    RY_RETURN_IF_ERROR(fs_->Intercept(FsOp::kSize, path()));
    return base_->Size();
  }
  Status PRead(uint64_t offset, void* out, size_t n) const override {
    RY_RETURN_IF_ERROR(fs_->Intercept(FsOp::kRead, path()));
    return base_->PRead(offset, out, n);
  }

 private:
  FaultInjectionFs* fs_;
  std::unique_ptr<ReadableFile> base_;
};

}  // namespace

std::string_view FsOpName(FsOp op) {
  switch (op) {
    case FsOp::kCreate:
      return "create";
    case FsOp::kWrite:
      return "write";
    case FsOp::kSync:
      return "fsync";
    case FsOp::kRename:
      return "rename";
    case FsOp::kRemove:
      return "remove";
    case FsOp::kMkdir:
      return "mkdir";
    case FsOp::kSyncDir:
      return "fsync-dir";
    case FsOp::kOpen:
      return "open";
    case FsOp::kRead:
      return "read";
    case FsOp::kAllocate:
      return "allocate";
    case FsOp::kWriteback:
      return "writeback";
    case FsOp::kDropCache:
      return "drop-cache";
    case FsOp::kClose:
      return "close";
    case FsOp::kSize:
      return "size";
    case FsOp::kList:
      return "list";
    case FsOp::kStatFs:
      return "statfs";
    case FsOp::kStat:
      return "stat";
    case FsOp::kExists:
      return "exists";
  }
  return "?";
}

void FaultInjectionFs::FailNth(FsOp op, uint64_t n, int err) {
  auto count = std::make_shared<std::atomic<uint64_t>>(0);
  hook_ = [op, n, err, count](const FsOpInfo& info) -> Status {
    if (info.op != op) return Status::Ok();
    if (count->fetch_add(1) + 1 != n) return Status::Ok();
    return ErrnoStatus(err, fmt::format("{} of '{}' (injected)", FsOpName(op), info.path));
  };
}

Status FaultInjectionFs::Intercept(FsOp op, const std::string& path) {
  if (!every_call_ && op >= FsOp::kAllocate) return Status::Ok();
  uint64_t seq = seq_.fetch_add(1) + 1;
  if (!hook_) return Status::Ok();
  return hook_(FsOpInfo{op, path, seq});
}

Result<std::unique_ptr<WritableFile>> FaultInjectionFs::NewWritableFile(
    const std::string& path, const OpenOptions& options) {
  RY_RETURN_IF_ERROR(Intercept(FsOp::kCreate, path));
  RY_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, base_->NewWritableFile(path, options));
  return std::unique_ptr<WritableFile>(std::make_unique<FaultWritableFile>(this, std::move(file)));
}

Result<std::unique_ptr<ReadableFile>> FaultInjectionFs::NewReadableFile(
    const std::string& path, const OpenOptions& options) {
  RY_RETURN_IF_ERROR(Intercept(FsOp::kOpen, path));
  RY_ASSIGN_OR_RETURN(std::unique_ptr<ReadableFile> file, base_->NewReadableFile(path, options));
  return std::unique_ptr<ReadableFile>(std::make_unique<FaultReadableFile>(this, std::move(file)));
}

Status FaultInjectionFs::CreateDir(const std::string& path) {
  RY_RETURN_IF_ERROR(Intercept(FsOp::kMkdir, path));
  return base_->CreateDir(path);
}

Status FaultInjectionFs::Rename(const std::string& from, const std::string& to) {
  RY_RETURN_IF_ERROR(Intercept(FsOp::kRename, from + " -> " + to));
  return base_->Rename(from, to);
}

Status FaultInjectionFs::RemoveFile(const std::string& path) {
  RY_RETURN_IF_ERROR(Intercept(FsOp::kRemove, path));
  return base_->RemoveFile(path);
}

Status FaultInjectionFs::RemoveDir(const std::string& path) {
  RY_RETURN_IF_ERROR(Intercept(FsOp::kRemove, path));
  return base_->RemoveDir(path);
}

Result<std::vector<DirEntry>> FaultInjectionFs::ListDir(const std::string& dir) {
  RY_RETURN_IF_ERROR(Intercept(FsOp::kList, dir));
  return base_->ListDir(dir);
}

Result<FsStats> FaultInjectionFs::StatFs(const std::string& path) {
  RY_RETURN_IF_ERROR(Intercept(FsOp::kStatFs, path));
  return base_->StatFs(path);
}

Status FaultInjectionFs::SyncDir(const std::string& dir) {
  RY_RETURN_IF_ERROR(Intercept(FsOp::kSyncDir, dir));
  return base_->SyncDir(dir);
}

Result<uint64_t> FaultInjectionFs::FileSize(const std::string& path) {
  RY_RETURN_IF_ERROR(Intercept(FsOp::kStat, path));
  return base_->FileSize(path);
}

bool FaultInjectionFs::Exists(const std::string& path) {
  return Intercept(FsOp::kExists, path).ok() && base_->Exists(path);
}

}  // namespace railyard::storage
