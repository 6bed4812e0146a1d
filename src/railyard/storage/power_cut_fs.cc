#include "railyard/storage/power_cut_fs.h"

#include <fmt/format.h>

#include <utility>

namespace railyard::storage {
namespace {

class CutWritableFile final : public WritableFile {
 public:
  CutWritableFile(PowerCutFs* fs, std::unique_ptr<WritableFile> base)
      : fs_(fs), base_(std::move(base)) {}
  const std::string& path() const override { return base_->path(); }
  bool direct() const override { return base_->direct(); }
  Status PWrite(uint64_t offset, const void* data, size_t n) override {
    RY_RETURN_IF_ERROR(fs_->Call("write", path()));
    return base_->PWrite(offset, data, n);
  }
  Status Allocate(uint64_t length) override {
    RY_RETURN_IF_ERROR(fs_->Call("allocate", path()));
    return base_->Allocate(length);
  }
  Status Write(std::string_view data) override {
    RY_RETURN_IF_ERROR(fs_->Call("write", path()));
    return base_->Write(data);
  }
  Status StartWriteback(uint64_t offset, uint64_t n) override {
    RY_RETURN_IF_ERROR(fs_->Call("writeback", path()));
    return base_->StartWriteback(offset, n);
  }
  Status DropCache(uint64_t offset, uint64_t n) override {
    RY_RETURN_IF_ERROR(fs_->Call("drop-cache", path()));
    return base_->DropCache(offset, n);
  }
  Status Sync() override {
    RY_RETURN_IF_ERROR(fs_->Call("fsync", path()));
    return base_->Sync();
  }
  Status Close() override {
    RY_RETURN_IF_ERROR(fs_->Call("close", path()));
    return base_->Close();
  }

 private:
  PowerCutFs* fs_;
  std::unique_ptr<WritableFile> base_;
};

class CutReadableFile final : public ReadableFile {
 public:
  CutReadableFile(PowerCutFs* fs, std::unique_ptr<ReadableFile> base)
      : fs_(fs), base_(std::move(base)) {}
  const std::string& path() const override { return base_->path(); }
  bool direct() const override { return base_->direct(); }
  Result<uint64_t> Size() const override {
    RY_RETURN_IF_ERROR(fs_->Call("size", path()));
    return base_->Size();
  }
  Status PRead(uint64_t offset, void* out, size_t n) const override {
    RY_RETURN_IF_ERROR(fs_->Call("read", path()));
    return base_->PRead(offset, out, n);
  }

 private:
  PowerCutFs* fs_;
  std::unique_ptr<ReadableFile> base_;
};

}  // namespace

uint64_t PowerCutFs::calls() const {
  std::lock_guard<std::mutex> lock(mu_);
  return calls_;
}

void PowerCutFs::CutPowerAfter(uint64_t n) {
  std::lock_guard<std::mutex> lock(mu_);
  cut_after_ = n;
}

bool PowerCutFs::power_lost() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lost_;
}

std::vector<std::string> PowerCutFs::trace() const {
  std::lock_guard<std::mutex> lock(mu_);
  return trace_;
}

void PowerCutFs::PowerCut() {
  std::lock_guard<std::mutex> lock(mu_);
  base_->PowerCut();
  cut_after_ = UINT64_MAX;
  lost_ = false;
}

Status PowerCutFs::Call(std::string_view op, const std::string& path) {
  std::lock_guard<std::mutex> lock(mu_);
  const uint64_t n = ++calls_;
  trace_.push_back(fmt::format("{} {} {}", n, op, path));
  if (n <= cut_after_) return Status::Ok();
  lost_ = true;
  return Unavailable("power cut: {} of '{}' (call {}) did not happen", op, path, n);
}

Result<std::unique_ptr<WritableFile>> PowerCutFs::NewWritableFile(const std::string& path,
                                                                  const OpenOptions& options) {
  RY_RETURN_IF_ERROR(Call("create", path));
  RY_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, base_->NewWritableFile(path, options));
  return std::unique_ptr<WritableFile>(std::make_unique<CutWritableFile>(this, std::move(file)));
}

Result<std::unique_ptr<ReadableFile>> PowerCutFs::NewReadableFile(const std::string& path,
                                                                  const OpenOptions& options) {
  RY_RETURN_IF_ERROR(Call("open", path));
  RY_ASSIGN_OR_RETURN(std::unique_ptr<ReadableFile> file, base_->NewReadableFile(path, options));
  return std::unique_ptr<ReadableFile>(std::make_unique<CutReadableFile>(this, std::move(file)));
}

Status PowerCutFs::CreateDir(const std::string& path) {
  RY_RETURN_IF_ERROR(Call("mkdir", path));
  return base_->CreateDir(path);
}

Status PowerCutFs::Rename(const std::string& from, const std::string& to) {
  RY_RETURN_IF_ERROR(Call("rename", from + " -> " + to));
  return base_->Rename(from, to);
}

Status PowerCutFs::RemoveFile(const std::string& path) {
  RY_RETURN_IF_ERROR(Call("unlink", path));
  return base_->RemoveFile(path);
}

Status PowerCutFs::RemoveDir(const std::string& path) {
  RY_RETURN_IF_ERROR(Call("rmdir", path));
  return base_->RemoveDir(path);
}

Result<std::vector<DirEntry>> PowerCutFs::ListDir(const std::string& dir) {
  RY_RETURN_IF_ERROR(Call("list", dir));
  return base_->ListDir(dir);
}

Result<FsStats> PowerCutFs::StatFs(const std::string& path) {
  RY_RETURN_IF_ERROR(Call("statfs", path));
  return base_->StatFs(path);
}

Status PowerCutFs::SyncDir(const std::string& dir) {
  RY_RETURN_IF_ERROR(Call("fsync-dir", dir));
  return base_->SyncDir(dir);
}

Result<uint64_t> PowerCutFs::FileSize(const std::string& path) {
  RY_RETURN_IF_ERROR(Call("stat", path));
  return base_->FileSize(path);
}

bool PowerCutFs::Exists(const std::string& path) {
  if (!Call("exists", path).ok()) return false;
  return base_->Exists(path);
}

}  // namespace railyard::storage
