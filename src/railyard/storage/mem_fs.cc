#include "railyard/storage/mem_fs.h"

#include <fmt/format.h>

#include <cerrno>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace railyard::storage {
namespace {

// A file or a directory. The durable_* members are what a power cut keeps.
struct Inode {
  bool is_dir = false;
  std::string data;
  std::string durable_data;
  std::map<std::string, std::shared_ptr<Inode>> entries;
  std::map<std::string, std::shared_ptr<Inode>> durable_entries;
};

// Shared by the file system and its open files, so a file can tell that a power cut
// happened after it was opened.
struct State {
  std::mutex mu;
  std::shared_ptr<Inode> root = std::make_shared<Inode>(Inode{.is_dir = true});
  uint64_t generation = 0;  // bumped by PowerCut: older file handles are dead
};

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

// The inode at the first n of `parts`, or an errno.
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

// What a node at a path must be for an operation to accept it.
enum class Want { kAny, kFile, kDir };

// The inode at `path` (State::mu held), or ErrnoStatus naming `what`: ENOENT/ENOTDIR on the
// way, EISDIR or ENOTDIR when it is not what `want` asks for.
Result<std::shared_ptr<Inode>> Find(const State& s, const std::string& path, Want want,
                                    std::string_view what) {
  std::vector<std::string> parts = Split(path);
  std::shared_ptr<Inode> inode;
  int err = Walk(s, parts, parts.size(), &inode);
  if (err == 0 && want == Want::kFile && inode->is_dir) err = EISDIR;
  if (err == 0 && want == Want::kDir && !inode->is_dir) err = ENOTDIR;
  if (err != 0) return ErrnoStatus(err, fmt::format("{} '{}'", what, path));
  return inode;
}

// A handle on an inode that goes dead when the power is cut after it was opened.
class Handle {
 public:
  Handle(std::shared_ptr<State> state, std::shared_ptr<Inode> inode, std::string path)
      : state_(std::move(state)),
        inode_(std::move(inode)),
        path_(std::move(path)),
        generation_(state_->generation) {}

  // Runs fn(inode) under the file system's lock, unless the handle is dead.
  template <typename Fn>
  auto Locked(Fn fn) const -> decltype(fn(std::declval<Inode&>())) {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (generation_ != state_->generation) {
      return Unavailable("'{}' was opened before a power cut", path_);
    }
    return fn(*inode_);
  }
  const std::string& path() const { return path_; }

 private:
  std::shared_ptr<State> state_;
  std::shared_ptr<Inode> inode_;
  std::string path_;
  uint64_t generation_;
};

class MemWritableFile final : public WritableFile {
 public:
  explicit MemWritableFile(Handle handle) : h_(std::move(handle)) {}

  const std::string& path() const override { return h_.path(); }
  bool direct() const override { return false; }

  Status PWrite(uint64_t offset, const void* data, size_t n) override {
    return h_.Locked([&](Inode& inode) {
      if (inode.data.size() < offset + n) inode.data.resize(offset + n, '\0');
      std::memcpy(inode.data.data() + offset, data, n);
      return Status::Ok();
    });
  }
  Status Allocate(uint64_t length) override {
    return h_.Locked([&](Inode& inode) {
      if (inode.data.size() < length) inode.data.resize(length, '\0');
      return Status::Ok();
    });
  }
  Status Write(std::string_view data) override {
    RY_RETURN_IF_ERROR(PWrite(append_offset_, data.data(), data.size()));
    append_offset_ += data.size();
    return Status::Ok();
  }
  Status StartWriteback(uint64_t, uint64_t) override { return Alive(); }
  Status DropCache(uint64_t, uint64_t) override { return Alive(); }
  Status Sync() override {
    return h_.Locked([](Inode& inode) {
      inode.durable_data = inode.data;
      return Status::Ok();
    });
  }
  Status Close() override { return Alive(); }

 private:
  Status Alive() {
    return h_.Locked([](Inode&) { return Status::Ok(); });
  }

  Handle h_;
  uint64_t append_offset_ = 0;
};

class MemReadableFile final : public ReadableFile {
 public:
  explicit MemReadableFile(Handle handle) : h_(std::move(handle)) {}

  const std::string& path() const override { return h_.path(); }
  bool direct() const override { return false; }

  Result<uint64_t> Size() const override {
    return h_.Locked(
        [](Inode& inode) -> Result<uint64_t> { return static_cast<uint64_t>(inode.data.size()); });
  }
  Status PRead(uint64_t offset, void* out, size_t n) const override {
    return h_.Locked([&](Inode& inode) {
      const uint64_t size = inode.data.size();
      if (offset + n > size) {
        return DataLoss("'{}' ends at byte {}, expected bytes [{}, {}) (truncated file)", path(),
                        size, offset, offset + n);
      }
      std::memcpy(out, inode.data.data() + offset, n);
      return Status::Ok();
    });
  }

 private:
  Handle h_;
};

class MemFsImpl final : public MemFs {
 public:
  Result<std::unique_ptr<WritableFile>> NewWritableFile(const std::string& path,
                                                        const OpenOptions&) override {
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
    return std::unique_ptr<WritableFile>(
        std::make_unique<MemWritableFile>(Handle(state_, slot, path)));
  }

  Result<std::unique_ptr<ReadableFile>> NewReadableFile(const std::string& path,
                                                        const OpenOptions&) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    RY_ASSIGN_OR_RETURN(std::shared_ptr<Inode> inode,
                        Find(*state_, path, Want::kFile, "cannot open"));
    return std::unique_ptr<ReadableFile>(
        std::make_unique<MemReadableFile>(Handle(state_, inode, path)));
  }

  Status CreateDir(const std::string& path) override {
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

  Status Rename(const std::string& from, const std::string& to) override;

  Status RemoveFile(const std::string& path) override {
    return Remove(path, Want::kFile, fmt::format("remove '{}'", path));
  }
  Status RemoveDir(const std::string& path) override {
    return Remove(path, Want::kDir, fmt::format("remove directory '{}'", path));
  }

  Result<std::vector<DirEntry>> ListDir(const std::string& dir) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    RY_ASSIGN_OR_RETURN(std::shared_ptr<Inode> inode,
                        Find(*state_, dir, Want::kDir, "cannot list directory"));
    std::vector<DirEntry> out;
    for (const auto& [name, child] : inode->entries) out.push_back({name, child->is_dir});
    return out;
  }

  Result<FsStats> StatFs(const std::string& path) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    RY_RETURN_IF_ERROR(Find(*state_, path, Want::kAny, "statfs").status());
    return FsStats{.type = 0x01021994,  // tmpfs
                   .block_size = 4096,
                   .total_bytes = uint64_t{1} << 40,
                   .free_bytes = uint64_t{1} << 40};
  }

  Status SyncDir(const std::string& dir) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    RY_ASSIGN_OR_RETURN(std::shared_ptr<Inode> inode,
                        Find(*state_, dir, Want::kDir, "fsync of directory"));
    inode->durable_entries = inode->entries;
    return Status::Ok();
  }

  Result<uint64_t> FileSize(const std::string& path) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    RY_ASSIGN_OR_RETURN(std::shared_ptr<Inode> inode, Find(*state_, path, Want::kAny, "stat"));
    return static_cast<uint64_t>(inode->data.size());
  }

  bool Exists(const std::string& path) override {
    std::lock_guard<std::mutex> lock(state_->mu);
    return Find(*state_, path, Want::kAny, "stat").ok();
  }

  void PowerCut() override;

 private:
  // unlink (want kFile) or rmdir (want kDir) of `path`; `what` names the operation.
  Status Remove(const std::string& path, Want want, const std::string& what);

  std::shared_ptr<State> state_ = std::make_shared<State>();
};

Status MemFsImpl::Rename(const std::string& from, const std::string& to) {
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

Status MemFsImpl::Remove(const std::string& path, Want want, const std::string& what) {
  std::lock_guard<std::mutex> lock(state_->mu);
  const bool dir_wanted = want == Want::kDir;
  std::shared_ptr<Inode> dir;
  std::string name;
  if (int err = LookupParent(*state_, path, &dir, &name); err != 0) {
    // The root: unlink says EISDIR, rmdir EBUSY, as Linux does.
    return ErrnoStatus(err == EINVAL ? (dir_wanted ? EBUSY : EISDIR) : err, what);
  }
  auto it = dir->entries.find(name);
  if (it == dir->entries.end()) return ErrnoStatus(ENOENT, what);
  const Inode& victim = *it->second;
  if (victim.is_dir != dir_wanted) return ErrnoStatus(dir_wanted ? ENOTDIR : EISDIR, what);
  if (victim.is_dir && !victim.entries.empty()) return ErrnoStatus(ENOTEMPTY, what);
  dir->entries.erase(it);
  return Status::Ok();
}

void MemFsImpl::PowerCut() {
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

}  // namespace

std::unique_ptr<MemFs> NewMemFs() { return std::make_unique<MemFsImpl>(); }

}  // namespace railyard::storage
