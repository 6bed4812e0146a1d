#include "railyard/storage/mem_fs.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <set>
#include <utility>

namespace railyard::storage {

// A file or a directory. The durable_* members are what a power cut keeps.
struct MemFs::Inode {
  bool is_dir = false;
  std::string data;
  std::string durable_data;
  std::map<std::string, std::shared_ptr<Inode>> entries;
  std::map<std::string, std::shared_ptr<Inode>> durable_entries;
};

struct MemFs::State {
  std::mutex mu;
  std::shared_ptr<Inode> root = std::make_shared<Inode>(Inode{.is_dir = true});
  uint64_t generation = 0;  // bumped by PowerCut: older file handles are dead
};

namespace {

using Inode = MemFs::Inode;
using State = MemFs::State;

// "/a//b/./c" -> {"a", "b", "c"}; ".." goes one level up (there are no symlinks).
std::vector<std::string> Split(const std::string& path) {
  std::vector<std::string> out;
  size_t at = 0;
  while (at <= path.size()) {
    size_t slash = path.find('/', at);
    if (slash == std::string::npos) slash = path.size();
    std::string part = path.substr(at, slash - at);
    if (part == "..") {
      if (!out.empty()) out.pop_back();
    } else if (!part.empty() && part != ".") {
      out.push_back(std::move(part));
    }
    at = slash + 1;
  }
  return out;
}

// The inode at `parts` (all of them), or an errno.
int Walk(const State& s, const std::vector<std::string>& parts, size_t n,
         std::shared_ptr<Inode>* out) {
  std::shared_ptr<Inode> at = s.root;
  for (size_t i = 0; i < n; ++i) {
    if (!at->is_dir) return ENOTDIR;
    auto it = at->entries.find(parts[i]);
    if (it == at->entries.end()) return ENOENT;
    at = it->second;
  }
  *out = std::move(at);
  return 0;
}

int Lookup(const State& s, const std::string& path, std::shared_ptr<Inode>* out) {
  std::vector<std::string> parts = Split(path);
  return Walk(s, parts, parts.size(), out);
}

// The directory holding `path` and the last component; EINVAL for the root itself.
int LookupParent(const State& s, const std::string& path, std::shared_ptr<Inode>* dir,
                 std::string* name) {
  std::vector<std::string> parts = Split(path);
  if (parts.empty()) return EINVAL;
  int err = Walk(s, parts, parts.size() - 1, dir);
  if (err != 0) return err;
  if (!(*dir)->is_dir) return ENOTDIR;
  *name = parts.back();
  return 0;
}

Status Dead(const std::string& path) {
  return Unavailable("'{}' was opened before a power cut", path);
}

class MemWritableFile final : public WritableFile {
 public:
  MemWritableFile(std::shared_ptr<State> state, std::shared_ptr<Inode> inode, std::string path)
      : state_(std::move(state)),
        inode_(std::move(inode)),
        path_(std::move(path)),
        generation_(state_->generation) {}

  const std::string& path() const override { return path_; }
  bool direct() const override { return false; }

  Status PWrite(uint64_t offset, const void* data, size_t n) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (generation_ != state_->generation) return Dead(path_);
    if (inode_->data.size() < offset + n) inode_->data.resize(offset + n, '\0');
    std::memcpy(inode_->data.data() + offset, data, n);
    return Status::Ok();
  }
  Status Allocate(uint64_t length) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (generation_ != state_->generation) return Dead(path_);
    if (inode_->data.size() < length) inode_->data.resize(length, '\0');
    return Status::Ok();
  }
  Status Write(std::string_view data) override {
    RY_RETURN_IF_ERROR(PWrite(append_offset_, data.data(), data.size()));
    append_offset_ += data.size();
    return Status::Ok();
  }
  Status StartWriteback(uint64_t, uint64_t) override { return Alive(); }
  Status DropCache(uint64_t, uint64_t) override { return Alive(); }
  Status Sync() override {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (generation_ != state_->generation) return Dead(path_);
    inode_->durable_data = inode_->data;
    return Status::Ok();
  }
  Status Close() override { return Alive(); }

 private:
  Status Alive() {
    std::lock_guard<std::mutex> lock(state_->mu);
    return generation_ == state_->generation ? Status::Ok() : Dead(path_);
  }

  std::shared_ptr<State> state_;
  std::shared_ptr<Inode> inode_;
  std::string path_;
  uint64_t generation_;
  uint64_t append_offset_ = 0;
};

class MemReadableFile final : public ReadableFile {
 public:
  MemReadableFile(std::shared_ptr<State> state, std::shared_ptr<Inode> inode, std::string path)
      : state_(std::move(state)),
        inode_(std::move(inode)),
        path_(std::move(path)),
        generation_(state_->generation) {}

  const std::string& path() const override { return path_; }
  bool direct() const override { return false; }

  Result<uint64_t> Size() const override {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (generation_ != state_->generation) return Dead(path_);
    return static_cast<uint64_t>(inode_->data.size());
  }
  Status PRead(uint64_t offset, void* out, size_t n) const override {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (generation_ != state_->generation) return Dead(path_);
    const uint64_t size = inode_->data.size();
    if (offset + n > size) {
      return DataLoss("'{}' ends at byte {}, expected bytes [{}, {}) (truncated file)", path_, size,
                      offset, offset + n);
    }
    std::memcpy(out, inode_->data.data() + offset, n);
    return Status::Ok();
  }

 private:
  std::shared_ptr<State> state_;
  std::shared_ptr<Inode> inode_;
  std::string path_;
  uint64_t generation_;
};

}  // namespace

MemFs::MemFs() : state_(std::make_shared<State>()) {}
MemFs::~MemFs() = default;

std::unique_ptr<MemFs> NewMemFs() { return std::make_unique<MemFs>(); }

Result<std::unique_ptr<WritableFile>> MemFs::NewWritableFile(const std::string& path,
                                                             const OpenOptions&) {
  std::lock_guard<std::mutex> lock(state_->mu);
  std::shared_ptr<Inode> dir;
  std::string name;
  if (int err = LookupParent(*state_, path, &dir, &name); err != 0) {
    return ErrnoStatus(err, fmt::format("cannot create '{}'", path));
  }
  std::shared_ptr<Inode>& slot = dir->entries[name];
  if (slot == nullptr) {
    slot = std::make_shared<Inode>();
  } else if (slot->is_dir) {
    return ErrnoStatus(EISDIR, fmt::format("cannot create '{}'", path));
  } else {
    slot->data.clear();  // O_TRUNC
  }
  return std::unique_ptr<WritableFile>(std::make_unique<MemWritableFile>(state_, slot, path));
}

Result<std::unique_ptr<ReadableFile>> MemFs::NewReadableFile(const std::string& path,
                                                             const OpenOptions&) {
  std::lock_guard<std::mutex> lock(state_->mu);
  std::shared_ptr<Inode> inode;
  if (int err = Lookup(*state_, path, &inode); err != 0) {
    return ErrnoStatus(err, fmt::format("cannot open '{}'", path));
  }
  if (inode->is_dir) return ErrnoStatus(EISDIR, fmt::format("cannot open '{}'", path));
  return std::unique_ptr<ReadableFile>(std::make_unique<MemReadableFile>(state_, inode, path));
}

Status MemFs::CreateDir(const std::string& path) {
  std::lock_guard<std::mutex> lock(state_->mu);
  std::shared_ptr<Inode> dir;
  std::string name;
  if (int err = LookupParent(*state_, path, &dir, &name); err != 0) {
    if (err == EINVAL) return Status::Ok();  // the root
    return ErrnoStatus(err, fmt::format("cannot create directory '{}'", path));
  }
  auto it = dir->entries.find(name);
  if (it != dir->entries.end()) {
    if (it->second->is_dir) return Status::Ok();
    return ErrnoStatus(EEXIST, fmt::format("cannot create directory '{}'", path));
  }
  dir->entries[name] = std::make_shared<Inode>(Inode{.is_dir = true});
  return Status::Ok();
}

Status MemFs::Rename(const std::string& from, const std::string& to) {
  std::lock_guard<std::mutex> lock(state_->mu);
  const std::string what = fmt::format("rename '{}' -> '{}'", from, to);
  std::shared_ptr<Inode> from_dir, to_dir;
  std::string from_name, to_name;
  if (int err = LookupParent(*state_, from, &from_dir, &from_name); err != 0) {
    return ErrnoStatus(err == EINVAL ? EBUSY : err, what);
  }
  if (int err = LookupParent(*state_, to, &to_dir, &to_name); err != 0) {
    return ErrnoStatus(err == EINVAL ? EBUSY : err, what);
  }
  auto src_it = from_dir->entries.find(from_name);
  if (src_it == from_dir->entries.end()) return ErrnoStatus(ENOENT, what);
  std::shared_ptr<Inode> src = src_it->second;
  if (from_dir == to_dir && from_name == to_name) return Status::Ok();
  if (src->is_dir) {
    // Not into itself or below it.
    std::vector<std::string> parts = Split(to);
    std::shared_ptr<Inode> at = state_->root;
    for (size_t i = 0; i + 1 < parts.size(); ++i) {
      at = at->entries.at(parts[i]);
      if (at == src) return ErrnoStatus(EINVAL, what);
    }
  }
  auto dst_it = to_dir->entries.find(to_name);
  if (dst_it != to_dir->entries.end()) {
    const Inode& dst = *dst_it->second;
    if (src->is_dir && !dst.is_dir) return ErrnoStatus(ENOTDIR, what);
    if (!src->is_dir && dst.is_dir) return ErrnoStatus(EISDIR, what);
    if (dst.is_dir && !dst.entries.empty()) return ErrnoStatus(ENOTEMPTY, what);
  }
  to_dir->entries[to_name] = src;
  from_dir->entries.erase(from_name);
  return Status::Ok();
}

Status MemFs::RemoveFile(const std::string& path) {
  std::lock_guard<std::mutex> lock(state_->mu);
  const std::string what = fmt::format("remove '{}'", path);
  std::shared_ptr<Inode> dir;
  std::string name;
  if (int err = LookupParent(*state_, path, &dir, &name); err != 0) {
    return ErrnoStatus(err == EINVAL ? EISDIR : err, what);
  }
  auto it = dir->entries.find(name);
  if (it == dir->entries.end()) return ErrnoStatus(ENOENT, what);
  if (it->second->is_dir) return ErrnoStatus(EISDIR, what);
  dir->entries.erase(it);
  return Status::Ok();
}

Status MemFs::RemoveDir(const std::string& path) {
  std::lock_guard<std::mutex> lock(state_->mu);
  const std::string what = fmt::format("remove directory '{}'", path);
  std::shared_ptr<Inode> dir;
  std::string name;
  if (int err = LookupParent(*state_, path, &dir, &name); err != 0) {
    return ErrnoStatus(err == EINVAL ? EBUSY : err, what);
  }
  auto it = dir->entries.find(name);
  if (it == dir->entries.end()) return ErrnoStatus(ENOENT, what);
  if (!it->second->is_dir) return ErrnoStatus(ENOTDIR, what);
  if (!it->second->entries.empty()) return ErrnoStatus(ENOTEMPTY, what);
  dir->entries.erase(it);
  return Status::Ok();
}

Result<std::vector<DirEntry>> MemFs::ListDir(const std::string& dir) {
  std::lock_guard<std::mutex> lock(state_->mu);
  std::shared_ptr<Inode> inode;
  int err = Lookup(*state_, dir, &inode);
  if (err == 0 && !inode->is_dir) err = ENOTDIR;
  if (err != 0) return ErrnoStatus(err, fmt::format("cannot list directory '{}'", dir));
  std::vector<DirEntry> out;
  for (const auto& [name, child] : inode->entries) out.push_back({name, child->is_dir});
  return out;
}

Result<FsStats> MemFs::StatFs(const std::string& path) {
  std::lock_guard<std::mutex> lock(state_->mu);
  std::shared_ptr<Inode> inode;
  if (int err = Lookup(*state_, path, &inode); err != 0) {
    return ErrnoStatus(err, fmt::format("statfs '{}'", path));
  }
  return FsStats{.type = 0x01021994,
                 .block_size = 4096,
                 .total_bytes = uint64_t{1} << 40,
                 .free_bytes = uint64_t{1} << 40};
}

Status MemFs::SyncDir(const std::string& dir) {
  std::lock_guard<std::mutex> lock(state_->mu);
  std::shared_ptr<Inode> inode;
  int err = Lookup(*state_, dir, &inode);
  if (err == 0 && !inode->is_dir) err = ENOTDIR;
  if (err != 0) return ErrnoStatus(err, fmt::format("fsync of directory '{}'", dir));
  inode->durable_entries = inode->entries;
  return Status::Ok();
}

Result<uint64_t> MemFs::FileSize(const std::string& path) {
  std::lock_guard<std::mutex> lock(state_->mu);
  std::shared_ptr<Inode> inode;
  if (int err = Lookup(*state_, path, &inode); err != 0) {
    return ErrnoStatus(err, fmt::format("stat '{}'", path));
  }
  return static_cast<uint64_t>(inode->data.size());
}

bool MemFs::Exists(const std::string& path) {
  std::lock_guard<std::mutex> lock(state_->mu);
  std::shared_ptr<Inode> inode;
  return Lookup(*state_, path, &inode) == 0;
}

void MemFs::PowerCut() {
  std::lock_guard<std::mutex> lock(state_->mu);
  ++state_->generation;
  // Walk what is reachable through durable entries only; everything else is gone.
  std::set<const Inode*> seen;
  std::vector<Inode*> todo = {state_->root.get()};
  while (!todo.empty()) {
    Inode* at = todo.back();
    todo.pop_back();
    if (!seen.insert(at).second) continue;
    if (at->is_dir) {
      at->entries = at->durable_entries;
      for (auto& [name, child] : at->entries) todo.push_back(child.get());
    } else {
      at->data = at->durable_data;
    }
  }
}

// ---- PowerCutFs ----

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
