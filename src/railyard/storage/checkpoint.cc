#include "railyard/storage/checkpoint.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <deque>
#include <set>
#include <thread>

#include "railyard/base/checksum.h"
#include "railyard/base/files.h"
#include "railyard/base/logging.h"
#include "railyard/storage/aligned_buffer.h"
#include "railyard/storage/checkpoint_catalog.h"
#include "railyard/storage/checkpoint_reader.h"
#include "railyard/storage/fs_util.h"
#include "railyard/storage/task_pool.h"

namespace railyard::storage {
namespace {

const base::Logger kLog("ckpt");

// Checks one view and fills in its offsets/sizes when it stands for the whole tensor.
Status NormalizeView(const TensorView& in, TensorView* out) {
  *out = in;
  if (in.name.empty()) return InvalidArgument("a tensor piece has an empty name");
  if (in.offsets.empty() && in.sizes.empty()) {
    out->offsets.assign(in.shape.size(), 0);
    out->sizes = in.shape;
  }
  const size_t n = in.shape.size();
  if (out->offsets.size() != n || out->sizes.size() != n) {
    return InvalidArgument(
        "tensor '{}' has {} dimensions but the piece has {} offsets and {} "
        "sizes",
        in.name, n, out->offsets.size(), out->sizes.size());
  }
  auto count = ElementCount(in.shape);
  if (!count.ok()) return InvalidArgument("tensor '{}': {}", in.name, count.status().message());
  for (size_t d = 0; d < n; ++d) {
    if (out->offsets[d] < 0 || out->sizes[d] < 0 || out->offsets[d] + out->sizes[d] > in.shape[d]) {
      return InvalidArgument("tensor '{}' of shape [{}]: piece {} is out of bounds in dim {}",
                             in.name, fmt::join(in.shape, ", "),
                             FormatExtent(out->offsets, out->sizes), d);
    }
  }
  if (out->byte_size() > 0 && in.data == nullptr) {
    return InvalidArgument("tensor '{}' piece {}: data is null", in.name,
                           FormatExtent(out->offsets, out->sizes));
  }
  return Status::Ok();
}

// One write of a shard: `n` bytes from `from` at file offset `at`.
struct ShardWrite {
  uint64_t at;
  const uint8_t* from;
  uint64_t n;
};

// Buffered writes of one contiguous region, in file order, with write-behind (see
// WriterOptions::write_behind_bytes): writeback of each finished window is started at once,
// and the window two behind is waited for and dropped from the page cache, so at most about
// three windows per writer are dirty or cached at any time.
Status WriteRegion(WritableFile& f, std::span<const ShardWrite> writes, uint64_t window) {
  if (writes.empty()) return Status::Ok();
  uint64_t kicked = writes.front().at;  // bytes before this are in writeback already
  std::deque<std::pair<uint64_t, uint64_t>> in_writeback;
  for (const ShardWrite& w : writes) {
    RY_RETURN_IF_ERROR(f.PWrite(w.at, w.from, w.n));
    const uint64_t end = w.at + w.n;
    if (window == 0 || end - kicked < window) continue;
    RY_RETURN_IF_ERROR(f.StartWriteback(kicked, end - kicked));
    in_writeback.emplace_back(kicked, end - kicked);
    kicked = end;
    if (in_writeback.size() > 2) {
      auto [offset, n] = in_writeback.front();
      in_writeback.pop_front();
      RY_RETURN_IF_ERROR(f.DropCache(offset, n));
    }
  }
  return Status::Ok();
}

}  // namespace

uint64_t TensorView::byte_size() const {
  const std::vector<int64_t>& s = (offsets.empty() && sizes.empty()) ? shape : sizes;
  auto count = ElementCount(s);
  return count.ok() ? *count * DTypeSize(dtype) : 0;
}

std::string StepDirName(int64_t step) { return fmt::format("step-{:08d}", step); }
std::string TempStepDirName(int64_t step) { return ".tmp-" + StepDirName(step); }
std::string ShardFileName(int rank) { return fmt::format("rank-{:05d}.bin", rank); }
std::string RankIndexFileName(int rank) { return fmt::format("rank-{:05d}.json", rank); }

std::optional<int64_t> ParseStepDirName(std::string_view name) {
  if (!name.starts_with("step-") || name.size() < 6 || name.size() > 5 + 18) return std::nullopt;
  int64_t step = 0;
  for (char c : name.substr(5)) {
    if (c < '0' || c > '9') return std::nullopt;
    step = step * 10 + (c - '0');
  }
  return step;
}

Result<int> RemoveLeftovers(Fs& fs, const std::string& dir) {
  RY_ASSIGN_OR_RETURN(std::vector<DirEntry> entries, fs.ListDir(dir));
  int removed = 0;
  for (const DirEntry& e : entries) {
    std::string path = dir + "/" + e.name;
    if (e.is_dir && e.name.starts_with(".tmp-")) {
      RY_RETURN_IF_ERROR(RemoveTree(fs, path).WithContext("removing a crashed save's leftovers"));
      ++removed;
    } else if (!e.is_dir && base::IsStaleTempFileName(e.name)) {
      RY_RETURN_IF_ERROR(fs.RemoveFile(path).WithContext("removing a stale temporary file"));
      ++removed;
    }
  }
  return removed;
}

// ---- CheckpointWriter ----

CheckpointWriter::CheckpointWriter(WriterOptions options, std::unique_ptr<Fs> owned_fs)
    : options_(std::move(options)), owned_fs_(std::move(owned_fs)) {
  fs_ = options_.fs != nullptr ? options_.fs : owned_fs_.get();
  pool_ = std::make_unique<TaskPool>(options_.io_threads);
  bounce_.resize(static_cast<size_t>(pool_->threads()));
}

CheckpointWriter::~CheckpointWriter() = default;

Result<std::unique_ptr<CheckpointWriter>> CheckpointWriter::Open(WriterOptions options) {
  if (options.dir.empty()) return InvalidArgument("checkpoint writer: no directory given");
  if (options.world_size < 1 || options.rank < 0 || options.rank >= options.world_size) {
    return InvalidArgument("checkpoint writer: rank {} is outside world size {}", options.rank,
                           options.world_size);
  }
  if (options.world_size > 1 && options.agreement == nullptr) {
    return InvalidArgument("checkpoint writer: world size {} needs a RankAgreement",
                           options.world_size);
  }
  if (options.agreement != nullptr && (options.agreement->rank() != options.rank ||
                                       options.agreement->world_size() != options.world_size)) {
    return InvalidArgument("checkpoint writer: the agreement is for rank {} of {}, not {} of {}",
                           options.agreement->rank(), options.agreement->world_size(), options.rank,
                           options.world_size);
  }
  while (options.dir.size() > 1 && options.dir.back() == '/') options.dir.pop_back();
  options.extent_bytes =
      AlignUp(std::max<uint64_t>(options.extent_bytes, kDirectIoAlignment), kDirectIoAlignment);
  std::unique_ptr<Fs> owned;
  if (options.fs == nullptr) {
    RY_RETURN_IF_ERROR(ValidateStripeOptions(options.stripe));
    owned = NewPosixFs(std::make_shared<LustreLayoutHook>(options.stripe));
  }
  std::unique_ptr<CheckpointWriter> writer(new CheckpointWriter(options, std::move(owned)));
  Status st = MakeDirs(*writer->fs_, writer->options_.dir);
  if (st.ok() && options.rank == 0) {
    auto removed = RemoveLeftovers(*writer->fs_, writer->options_.dir);
    if (!removed.ok()) {
      st = removed.status();
    } else if (*removed > 0) {
      kLog.Info("removed {} leftover(s) of crashed saves in '{}'", *removed, options.dir);
    }
  }
  RY_RETURN_IF_ERROR(writer->Agree("open checkpoint writer", st));
  return writer;
}

Status CheckpointWriter::Agree(std::string_view round, const Status& mine) {
  if (options_.agreement == nullptr) return mine;
  return options_.agreement->AllOk(round, mine, base::Deadline::After(options_.agreement_timeout));
}

Status CheckpointWriter::Save(int64_t step, std::span<const TensorView> pieces,
                              const std::map<std::string, std::string>& metadata) {
  const auto start = base::Clock::now();
  stats_ = SaveStats{};
  stats_.step = step;
  const std::string tmp = options_.dir + "/" + TempStepDirName(step);
  const bool leader = options_.rank == 0;

  Status local = WriteLocal(step, pieces, metadata);
  stats_.write_seconds = base::SecondsSince(start);
  const auto commit_start = base::Clock::now();
  Status written = Agree(fmt::format("step {} written", step), local);
  if (!written.ok()) {
    // Free the space now; a rank still writing after a deadline then fails on its own.
    if (leader) RemoveTree(*fs_, tmp).IgnoreError();
    return written;
  }
  Status commit = leader ? Commit(step) : Status::Ok();
  Status committed = Agree(fmt::format("step {} commit", step), commit);
  if (!commit.ok()) {
    RemoveTree(*fs_, tmp).IgnoreError();
    return commit;
  }
  RY_RETURN_IF_ERROR(committed);
  stats_.commit_seconds = base::SecondsSince(commit_start);
  if (leader && options_.keep_last > 0) {
    ReaderOptions ropt;
    ropt.fs = fs_;
    auto removed = ApplyRetention(options_.dir, options_.keep_last, step, ropt);
    if (!removed.ok()) {
      std::string note = fmt::format("retention after step {} failed (the step is committed): {}",
                                     step, removed.status().ToString());
      kLog.Warn("{}", note);
      stats_.warning += (stats_.warning.empty() ? "" : "; ") + note;
    }
  }
  stats_.total_seconds = base::SecondsSince(start);
  return Status::Ok();
}

Status CheckpointWriter::WriteLocal(int64_t step, std::span<const TensorView> pieces,
                                    const std::map<std::string, std::string>& metadata) {
  if (step < 0) return InvalidArgument("checkpoint step {} is negative", step);
  std::vector<TensorView> views(pieces.size());
  Manifest index;
  index.step = step;
  index.world_size = options_.world_size;
  index.rank = options_.rank;
  index.created = NowIso8601();
  index.metadata = metadata;
  std::set<std::pair<std::string, std::vector<int64_t>>> seen;
  for (size_t i = 0; i < pieces.size(); ++i) {
    RY_RETURN_IF_ERROR(NormalizeView(pieces[i], &views[i])
                           .WithContext(fmt::format("rank {} step {}", options_.rank, step)));
    const TensorView& v = views[i];
    if (const TensorInfo* t = index.FindTensor(v.name)) {
      if (t->dtype != v.dtype || t->shape != v.shape) {
        return InvalidArgument("rank {} step {}: tensor '{}' is given as {} [{}] and as {} [{}]",
                               options_.rank, step, v.name, DTypeName(t->dtype),
                               fmt::join(t->shape, ", "), DTypeName(v.dtype),
                               fmt::join(v.shape, ", "));
      }
    } else {
      index.tensors.push_back({v.name, v.dtype, v.shape});
    }
    if (!seen.insert({v.name, v.offsets}).second) {
      return InvalidArgument("rank {} step {}: tensor '{}' piece {} is given twice", options_.rank,
                             step, v.name, FormatExtent(v.offsets, v.sizes));
    }
  }
  const std::string final_dir = options_.dir + "/" + StepDirName(step);
  if (fs_->Exists(final_dir)) {
    return AlreadyExists("step {} is already committed in '{}'", step, final_dir);
  }
  const std::string tmp = options_.dir + "/" + TempStepDirName(step);
  RY_RETURN_IF_ERROR(fs_->CreateDir(tmp));
  const std::string shard = tmp + "/" + ShardFileName(options_.rank);
  RY_RETURN_IF_ERROR(WriteShard(shard, views, &index.pieces));
  for (const TensorView& v : views) stats_.bytes += v.byte_size();
  // The piece list is rank 0's input to the manifest (Commit reads it, readers never do), so
  // it needs to be visible, not durable: after the commit the manifest, fsynced, holds all of
  // it. Nor does it need to be atomic: the directory becomes the step only by a rename.
  return WriteNewFile(*fs_, tmp + "/" + RankIndexFileName(options_.rank), ManifestToJson(index),
                      /*sync=*/false);
}

Status CheckpointWriter::WriteShard(const std::string& path, std::span<const TensorView> views,
                                    std::vector<PieceInfo>* infos) {
  // Layout: pieces in order, each starting at a 4 KiB boundary so O_DIRECT can write it.
  uint64_t offset = 0;
  infos->clear();
  for (const TensorView& v : views) {
    PieceInfo p;
    p.tensor = v.name;
    p.offsets = v.offsets;
    p.sizes = v.sizes;
    p.file = ShardFileName(options_.rank);
    p.length = v.byte_size();
    p.byte_offset = p.length == 0 ? 0 : offset;
    infos->push_back(std::move(p));
    offset = AlignUp(offset + v.byte_size(), kDirectIoAlignment);
  }
  OpenOptions open;
  open.direct = options_.direct_io;
  open.data_file = true;
  RY_ASSIGN_OR_RETURN(std::unique_ptr<WritableFile> file, fs_->NewWritableFile(path, open));
  WritableFile* f = file.get();
  if (options_.preallocate) RY_RETURN_IF_ERROR(f->Allocate(offset));
  const uint64_t extent = options_.extent_bytes;

  std::vector<TaskPool::Task> tasks;
  std::vector<ShardWrite> writes;  // in file order
  for (size_t i = 0; i < views.size(); ++i) {
    const auto* src = static_cast<const uint8_t*>(views[i].data);
    PieceInfo* info = &(*infos)[i];
    for (uint64_t done = 0; done < info->length; done += extent) {
      writes.push_back(
          {info->byte_offset + done, src + done, std::min(extent, info->length - done)});
    }
  }
  const bool write_behind = !f->direct() && options_.write_behind_bytes > 0;
  if (f->direct()) {
    // O_DIRECT: every extent is its own request, many in flight, as deep as the pool.
    for (const ShardWrite& w : writes) {
      tasks.push_back([this, f, w](int worker) -> Status {
        bool aligned = reinterpret_cast<uintptr_t>(w.from) % kDirectIoAlignment == 0 &&
                       w.n % kDirectIoAlignment == 0;
        if (!f->direct() || aligned) return f->PWrite(w.at, w.from, w.n);
        // O_DIRECT needs aligned memory and lengths: copy into this worker's bounce buffer and
        // pad with zeros up to the next piece's 4 KiB boundary.
        AlignedBuffer& buf = bounce_[static_cast<size_t>(worker)];
        uint64_t padded = AlignUp(w.n, kDirectIoAlignment);
        RY_RETURN_IF_ERROR(buf.Resize(padded));
        std::memcpy(buf.data(), w.from, w.n);
        std::memset(buf.data() + w.n, 0, padded - w.n);
        return f->PWrite(w.at, buf.data(), padded);
      });
    }
  } else {
    // Buffered: one task per contiguous region of about equal size, written sequentially so
    // write-behind can follow each writer.
    const size_t regions = std::min<size_t>(static_cast<size_t>(pool_->threads()), writes.size());
    uint64_t total = 0;
    for (const ShardWrite& w : writes) total += w.n;
    const uint64_t window = write_behind ? options_.write_behind_bytes : 0;
    size_t first = 0;
    uint64_t assigned = 0;
    for (size_t r = 0; r < regions; ++r) {
      const uint64_t goal = total * (r + 1) / regions;
      size_t last = first;
      while (last < writes.size() && (assigned < goal || last == first)) {
        assigned += writes[last++].n;
      }
      if (r + 1 == regions) last = writes.size();
      std::span<const ShardWrite> part(writes.data() + first, last - first);
      tasks.push_back([f, part, window](int) { return WriteRegion(*f, part, window); });
      first = last;
    }
  }
  // The checksums run on a thread of their own beside the writes. As tasks in the pool they
  // would sit ahead of the writes in its queue, and every worker would hash before the first
  // write went out: with O_DIRECT, a device idle for the whole time of hashing the shard.
  std::thread hasher([views, infos] {
    for (size_t i = 0; i < views.size(); ++i) {
      PieceInfo& info = (*infos)[i];
      info.xxh3 = base::Xxh3(static_cast<const uint8_t*>(views[i].data), info.length);
    }
  });
  Status st = pool_->RunAll(std::move(tasks));
  hasher.join();
  if (st.ok()) st = f->Sync();
  // The data is durable now; dropping what is still cached only saves memory.
  if (st.ok() && write_behind) f->DropCache(0, offset).IgnoreError();
  Status closed = f->Close();
  if (st.ok()) st = closed;
  stats_.direct = f->direct();
  return st;
}

Status CheckpointWriter::Commit(int64_t step) {
  const std::string tmp = options_.dir + "/" + TempStepDirName(step);
  const std::string manifest_path = tmp + "/" + std::string(kManifestFileName);
  Manifest merged;
  merged.step = step;
  merged.world_size = options_.world_size;
  merged.created = NowIso8601();
  std::map<std::string, int> meta_rank;  // which rank set each metadata key first
  for (int r = 0; r < options_.world_size; ++r) {
    const std::string path = tmp + "/" + RankIndexFileName(r);
    auto part = LoadManifest(*fs_, path);
    if (!part.ok()) {
      return part.status().WithContext(fmt::format("step {}: piece list of rank {}", step, r));
    }
    if (part->step != step || part->world_size != options_.world_size || part->rank != r) {
      return DataLoss("{}: expected step {} rank {} of {}, found step {} rank {} of {}", path, step,
                      r, options_.world_size, part->step, part->rank, part->world_size);
    }
    for (TensorInfo& t : part->tensors) {
      const TensorInfo* have = merged.FindTensor(t.name);
      if (have == nullptr) {
        merged.tensors.push_back(std::move(t));
      } else if (have->dtype != t.dtype || have->shape != t.shape) {
        return InvalidArgument(
            "step {}: tensor '{}' is {} [{}] on rank {} but {} [{}] on an "
            "earlier rank",
            step, t.name, DTypeName(t.dtype), fmt::join(t.shape, ", "), r, DTypeName(have->dtype),
            fmt::join(have->shape, ", "));
      }
    }
    for (PieceInfo& p : part->pieces) merged.pieces.push_back(std::move(p));
    for (auto& [key, value] : part->metadata) {
      auto [it, inserted] = merged.metadata.emplace(key, value);
      if (inserted) {
        meta_rank[key] = r;
      } else if (it->second != value) {
        return InvalidArgument(
            "step {}: metadata key '{}' is '{}' on rank {} but '{}' on rank "
            "{}; use a key per rank",
            step, key, it->second, meta_rank[key], value, r);
      }
    }
  }
  RY_RETURN_IF_ERROR(ValidateCoverage(merged, manifest_path));
  RY_RETURN_IF_ERROR(WriteNewFile(*fs_, manifest_path, ManifestToJson(merged), /*sync=*/true));
  // Every rank's shard and piece list, and the manifest, are durable; one fsync of the
  // directory makes all their names durable before the directory is renamed into place.
  RY_RETURN_IF_ERROR(fs_->SyncDir(tmp));
  const std::string final_dir = options_.dir + "/" + StepDirName(step);
  RY_RETURN_IF_ERROR(fs_->Rename(tmp, final_dir));
  // The commit point: once this fsync returns, the step survives a crash.
  RY_RETURN_IF_ERROR(fs_->SyncDir(options_.dir));
  // `latest` is for people and tools; readers go by the step directories. A failure here
  // leaves the step committed, so it is reported as a warning, not as a failed save.
  const std::string latest = options_.dir + "/" + std::string(kLatestFileName);
  Status st = WriteFileAtomic(*fs_, latest, fmt::format("{}\n", step));
  if (!st.ok()) {
    stats_.warning =
        fmt::format("step {} is committed in '{}', but '{}' still names an older step: {}", step,
                    final_dir, latest, st.ToString());
    kLog.Warn("{}", stats_.warning);
  }
  return Status::Ok();
}

}  // namespace railyard::storage
