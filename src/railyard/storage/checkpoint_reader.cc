#include "railyard/storage/checkpoint_reader.h"

#include <algorithm>
#include <cstring>
#include <set>

#include "railyard/base/checksum.h"
#include "railyard/base/logging.h"
#include "railyard/storage/aligned_buffer.h"
#include "railyard/storage/checkpoint.h"
#include "railyard/storage/checkpoint_catalog.h"
#include "railyard/storage/fs_util.h"
#include "railyard/storage/internal/checkpoint_dir.h"
#include "railyard/storage/task_pool.h"

namespace railyard::storage {
namespace {

using internal::FsOf;
using internal::RequireCheckpointDir;
using internal::TrimSlashes;

const base::Logger kLog("ckpt");

// Row-major strides in elements.
std::vector<uint64_t> Strides(std::span<const int64_t> sizes) {
  std::vector<uint64_t> s(sizes.size(), 1);
  for (size_t d = sizes.size(); d-- > 1;) s[d - 1] = s[d] * static_cast<uint64_t>(sizes[d]);
  return s;
}

uint64_t Linear(std::span<const int64_t> index, std::span<const int64_t> origin,
                const std::vector<uint64_t>& strides) {
  uint64_t at = 0;
  for (size_t d = 0; d < index.size(); ++d) {
    at += static_cast<uint64_t>(index[d] - origin[d]) * strides[d];
  }
  return at;
}

// Reads [offset, offset + n) of `file` front to back through `scratch` (aligned, so O_DIRECT
// reads need no bounce copy) in chunks of `chunk` bytes, feeding each to `stream`.
Status HashFileRange(const ReadableFile& file, uint64_t offset, uint64_t n, uint64_t chunk,
                     AlignedBuffer& scratch, base::Xxh3Stream& stream) {
  if (n == 0) return Status::Ok();
  RY_RETURN_IF_ERROR(scratch.Resize(std::min(chunk, n)));
  for (uint64_t done = 0; done < n; done += chunk) {
    const uint64_t len = std::min(chunk, n - done);
    RY_RETURN_IF_ERROR(file.PRead(offset + done, scratch.data(), len));
    stream.Update(scratch.data(), len);
  }
  return Status::Ok();
}

// Feeds extents of a buffer that are read in parallel, and so finish in any order, to a hash
// stream in buffer order as soon as each and all before it are in. Hashing then overlaps with
// the reads still in flight instead of following the last one, and an extent is mostly
// hashed right after its copy, while it is still in the CPU cache.
class InOrderHasher {
 public:
  InOrderHasher(base::Xxh3Stream& stream, const uint8_t* data, uint64_t n, uint64_t extent)
      : stream_(stream), data_(data), n_(n), extent_(extent), done_((n + extent - 1) / extent) {}

  // Called by the worker that finished extent k. Hashes the run of finished extents at the
  // front, unless another worker is at it already (that one then picks k up too).
  void Done(size_t k) {
    std::unique_lock<std::mutex> lock(mu_);
    done_[k] = true;
    if (hashing_) return;
    hashing_ = true;
    while (next_ < done_.size() && done_[next_]) {
      const uint64_t at = next_ * extent_;
      lock.unlock();  // the stream is ours alone while hashing_ is set
      stream_.Update(data_ + at, std::min(extent_, n_ - at));
      lock.lock();
      ++next_;
    }
    hashing_ = false;
  }

 private:
  base::Xxh3Stream& stream_;
  const uint8_t* data_;
  const uint64_t n_;
  const uint64_t extent_;
  std::mutex mu_;
  std::vector<bool> done_;
  size_t next_ = 0;
  bool hashing_ = false;
};

}  // namespace

CheckpointReader::~CheckpointReader() = default;

Result<std::unique_ptr<CheckpointReader>> CheckpointReader::Open(const std::string& dir_in,
                                                                 int64_t step,
                                                                 const ReaderOptions& options) {
  const std::string dir = TrimSlashes(dir_in);
  Fs* fs = FsOf(options);
  if (step < 0) return InvalidArgument("checkpoint step {} is negative", step);
  const std::string step_dir = dir + "/" + StepDirName(step);
  if (!fs->Exists(step_dir)) {
    RY_RETURN_IF_ERROR(RequireCheckpointDir(*fs, dir));
    RY_ASSIGN_OR_RETURN(std::vector<int64_t> steps, ListStepDirs(*fs, dir));
    return NotFound("step {} is not in '{}' (steps there: {})", step, dir,
                    steps.empty() ? "none" : fmt::format("{}", fmt::join(steps, ", ")));
  }
  const std::string manifest_path = step_dir + "/" + std::string(kManifestFileName);
  if (!fs->Exists(manifest_path)) {
    return NotFound("'{}' is not a committed checkpoint: it has no {} (an interrupted save?)",
                    step_dir, kManifestFileName);
  }
  RY_ASSIGN_OR_RETURN(Manifest manifest, LoadManifest(*fs, manifest_path));
  if (manifest.step != step) {
    return DataLoss("{}: the manifest is for step {} but the directory is step {}", manifest_path,
                    manifest.step, step);
  }
  RY_RETURN_IF_ERROR(ValidateCoverage(manifest, manifest_path));

  std::unique_ptr<CheckpointReader> r(new CheckpointReader());
  r->fs_ = fs;
  r->options_ = options;
  r->options_.extent_bytes = std::max<uint64_t>(options.extent_bytes, 64 * 1024);
  r->step_dir_ = step_dir;
  r->manifest_ = std::move(manifest);
  r->verified_ = std::make_unique<std::atomic<bool>[]>(r->manifest_.pieces.size());
  std::map<std::pair<std::string, std::pair<std::vector<int64_t>, std::vector<int64_t>>>, size_t>
      where;
  for (size_t i = 0; i < r->manifest_.pieces.size(); ++i) {
    const PieceInfo& p = r->manifest_.pieces[i];
    if (p.length == 0) continue;
    auto& list = r->extents_[p.tensor];
    auto [it, inserted] = where.insert({{p.tensor, {p.offsets, p.sizes}}, list.size()});
    if (inserted) list.emplace_back();
    list[it->second].replicas.push_back(i);
  }
  r->pool_ = std::make_unique<TaskPool>(options.io_threads);
  RY_RETURN_IF_ERROR(r->CheckFiles());
  if (options.verify_on_open) {
    std::vector<std::string> warnings;
    RY_RETURN_IF_ERROR(r->VerifyAll(&warnings));
    for (const std::string& w : warnings) kLog.Warn("{}", w);
  }
  return r;
}

std::string CheckpointReader::PieceWhere(size_t index) const {
  const PieceInfo& p = manifest_.pieces[index];
  return fmt::format("step {}: '{}/{}' bytes [{}, {}) (tensor '{}' piece {})", manifest_.step,
                     step_dir_, p.file, p.byte_offset, p.byte_offset + p.length, p.tensor,
                     FormatExtent(p.offsets, p.sizes));
}

Status CheckpointReader::CheckFiles() const {
  // Each file must exist and reach the end of its last piece. A bad file only fails the load
  // when some extent has no replica in a good file.
  std::map<std::string, size_t> last;  // file -> piece ending furthest
  for (size_t i = 0; i < manifest_.pieces.size(); ++i) {
    const PieceInfo& p = manifest_.pieces[i];
    if (p.length == 0) continue;  // an empty tensor occupies no bytes
    auto it = last.find(p.file);
    if (it == last.end() || p.byte_offset + p.length > manifest_.pieces[it->second].byte_offset +
                                                           manifest_.pieces[it->second].length) {
      last[p.file] = i;
    }
  }
  std::map<std::string, Status> bad;
  for (const auto& [file, i] : last) {
    const PieceInfo& p = manifest_.pieces[i];
    const std::string path = step_dir_ + "/" + file;
    auto size = fs_->FileSize(path);
    if (!size.ok()) {
      bad[file] = size.status().code() == StatusCode::kNotFound
                      ? DataLoss("step {}: shard '{}' is missing", manifest_.step, path)
                      : size.status();
    } else if (*size < p.byte_offset + p.length) {
      bad[file] = DataLoss(
          "step {}: shard '{}' is truncated: {} bytes, but tensor '{}' piece {} "
          "needs bytes [{}, {})",
          manifest_.step, path, *size, p.tensor, FormatExtent(p.offsets, p.sizes), p.byte_offset,
          p.byte_offset + p.length);
    }
  }
  if (bad.empty()) return Status::Ok();
  for (const auto& [tensor, extents] : extents_) {
    for (const Extent& e : extents) {
      bool any_good = false;
      for (size_t i : e.replicas) any_good |= bad.count(manifest_.pieces[i].file) == 0;
      if (!any_good) return bad.at(manifest_.pieces[e.replicas.front()].file);
    }
  }
  for (const auto& [file, st] : bad) kLog.Warn("{} (replicas elsewhere cover it)", st.message());
  return Status::Ok();
}

Result<const ReadableFile*> CheckpointReader::File(const std::string& name) const {
  std::lock_guard<std::mutex> lock(files_mu_);
  auto it = files_.find(name);
  if (it != files_.end()) return it->second.get();
  const std::string path = step_dir_ + "/" + name;
  OpenOptions open;
  open.direct = options_.direct_io;
  open.sequential = true;  // pieces are read front to back
  auto file = fs_->NewReadableFile(path, open);
  if (!file.ok()) {
    if (file.status().code() == StatusCode::kNotFound) {
      return DataLoss("step {}: shard '{}' is missing", manifest_.step, path);
    }
    return file.status();
  }
  const ReadableFile* raw = file->get();
  files_[name] = std::move(*file);
  return raw;
}

Status CheckpointReader::VerifyPiece(size_t index) const {
  const PieceInfo& p = manifest_.pieces[index];
  RY_ASSIGN_OR_RETURN(const ReadableFile* file, File(p.file));
  base::Xxh3Stream stream;
  AlignedBuffer scratch;
  RY_RETURN_IF_ERROR(
      HashFileRange(*file, p.byte_offset, p.length, options_.extent_bytes, scratch, stream));
  uint64_t sum = p.length == 0 ? base::Xxh3(nullptr, 0) : stream.Digest();
  if (sum != p.xxh3) {
    return DataLoss("{}: checksum {} does not match the manifest's {}", PieceWhere(index),
                    base::ChecksumHex(sum), base::ChecksumHex(p.xxh3));
  }
  verified_[index].store(true);
  return Status::Ok();
}

Status CheckpointReader::VerifyAll(std::vector<std::string>* warnings, uint64_t* bytes_read) const {
  const size_t n = manifest_.pieces.size();
  std::vector<Status> results(n);
  std::atomic<uint64_t> bytes{0};
  std::vector<TaskPool::Task> tasks;
  for (size_t i = 0; i < n; ++i) {
    if (manifest_.pieces[i].length == 0) continue;
    tasks.push_back([this, i, &results, &bytes](int) {
      results[i] = VerifyPiece(i);
      if (results[i].ok()) bytes += manifest_.pieces[i].length;
      return Status::Ok();  // judged per extent below, so every piece gets checked
    });
  }
  RY_RETURN_IF_ERROR(pool_->RunAll(std::move(tasks)));
  if (bytes_read != nullptr) *bytes_read = bytes.load();
  for (const TensorInfo& t : manifest_.tensors) {
    auto it = extents_.find(t.name);
    if (it == extents_.end()) continue;
    for (const Extent& e : it->second) {
      const Status* first_bad = nullptr;
      bool any_good = false;
      for (size_t i : e.replicas) {
        if (results[i].ok()) {
          any_good = true;
        } else if (first_bad == nullptr) {
          first_bad = &results[i];
        }
      }
      if (!any_good) return *first_bad;
      if (first_bad != nullptr && warnings != nullptr) {
        for (size_t i : e.replicas) {
          if (!results[i].ok()) {
            warnings->push_back(results[i].message() + " (another replica is intact)");
          }
        }
      }
    }
  }
  return Status::Ok();
}

Status CheckpointReader::ReadRange(const ReadableFile& file, uint64_t offset, uint64_t n,
                                   uint8_t* out, base::Xxh3Stream* stream) const {
  const uint64_t extent = options_.extent_bytes;
  if (n <= extent) {
    RY_RETURN_IF_ERROR(file.PRead(offset, out, n));
    if (stream != nullptr) stream->Update(out, n);
    return Status::Ok();
  }
  std::optional<InOrderHasher> hasher;
  if (stream != nullptr) hasher.emplace(*stream, out, n, extent);
  std::vector<TaskPool::Task> tasks;
  for (uint64_t done = 0; done < n; done += extent) {
    uint64_t len = std::min(extent, n - done);
    tasks.push_back([&file, &hasher, offset, done, len, extent, out](int) {
      RY_RETURN_IF_ERROR(file.PRead(offset + done, out + done, len));
      if (hasher) hasher->Done(done / extent);
      return Status::Ok();
    });
  }
  return pool_->RunAll(std::move(tasks));
}

Status CheckpointReader::ReadFirstTouch(size_t index, const ReadableFile& file, uint64_t lo,
                                        uint64_t hi, uint8_t* span) const {
  // The checksum covers the whole piece, so the parts around the span are read and hashed too.
  const PieceInfo& p = manifest_.pieces[index];
  const uint64_t chunk = options_.extent_bytes;
  base::Xxh3Stream stream;
  AlignedBuffer scratch;
  RY_RETURN_IF_ERROR(HashFileRange(file, p.byte_offset, lo, chunk, scratch, stream));
  RY_RETURN_IF_ERROR(ReadRange(file, p.byte_offset + lo, hi - lo, span, &stream));
  RY_RETURN_IF_ERROR(
      HashFileRange(file, p.byte_offset + hi, p.length - hi, chunk, scratch, stream));
  if (stream.Digest() != p.xxh3) {
    return DataLoss("{}: checksum {} does not match the manifest's {}", PieceWhere(index),
                    base::ChecksumHex(stream.Digest()), base::ChecksumHex(p.xxh3));
  }
  verified_[index].store(true);
  return Status::Ok();
}

Status CheckpointReader::ReadIntersection(size_t index, std::span<const int64_t> so,
                                          std::span<const int64_t> ss, uint8_t* out) const {
  const PieceInfo& p = manifest_.pieces[index];
  const TensorInfo* t = manifest_.FindTensor(p.tensor);
  const uint64_t esz = DTypeSize(t->dtype);
  const size_t n = p.offsets.size();
  std::vector<int64_t> io(n), ie(n), is(n);
  for (size_t d = 0; d < n; ++d) {
    io[d] = std::max(p.offsets[d], so[d]);
    ie[d] = std::min(p.offsets[d] + p.sizes[d], so[d] + ss[d]);
    if (io[d] >= ie[d]) return Status::Ok();
    is[d] = ie[d] - io[d];
  }
  const std::vector<uint64_t> pstr = Strides(p.sizes);
  const std::vector<uint64_t> sstr = Strides(ss);
  // Inner dimensions that the intersection spans fully in both the piece and the slice merge
  // into one contiguous run; dimensions [0, k) are iterated.
  size_t k = 0;
  uint64_t run = 1;
  if (n > 0) {
    k = n - 1;
    run = static_cast<uint64_t>(is[n - 1]);
    while (k > 0 && is[k] == p.sizes[k] && is[k] == ss[k]) {
      --k;
      run *= static_cast<uint64_t>(is[k]);
    }
  }
  std::vector<int64_t> last(n);
  for (size_t d = 0; d < n; ++d) last[d] = ie[d] - 1;
  const uint64_t lo = Linear(io, p.offsets, pstr) * esz;
  const uint64_t hi = (n == 0 ? 1 : Linear(last, p.offsets, pstr) + 1) * esz;
  const bool single_run = hi - lo == run * esz;

  RY_ASSIGN_OR_RETURN(const ReadableFile* file, File(p.file));
  AlignedBuffer owned;
  uint8_t* span = out + Linear(io, so, sstr) * esz;  // read straight into place when possible
  if (!single_run) {
    RY_RETURN_IF_ERROR(owned.Resize(hi - lo));
    span = owned.data();
  }
  if (verified_[index].load()) {
    RY_RETURN_IF_ERROR(ReadRange(*file, p.byte_offset + lo, hi - lo, span));
  } else {
    RY_RETURN_IF_ERROR(ReadFirstTouch(index, *file, lo, hi, span));
  }
  if (single_run) return Status::Ok();
  std::vector<int64_t> idx = io;
  for (;;) {
    uint64_t src = Linear(idx, p.offsets, pstr) * esz - lo;
    uint64_t dst = Linear(idx, so, sstr) * esz;
    std::memcpy(out + dst, span + src, run * esz);
    int d = static_cast<int>(k) - 1;
    while (d >= 0) {
      if (++idx[d] < ie[d]) break;
      idx[d] = io[d];
      --d;
    }
    if (d < 0) break;
  }
  return Status::Ok();
}

Status CheckpointReader::ReadSlice(std::string_view tensor, std::span<const int64_t> offsets,
                                   std::span<const int64_t> sizes, void* out,
                                   size_t out_bytes) const {
  const TensorInfo* t = manifest_.FindTensor(tensor);
  if (t == nullptr) {
    std::vector<std::string_view> some;
    for (size_t i = 0; i < manifest_.tensors.size() && i < 5; ++i) {
      some.push_back(manifest_.tensors[i].name);
    }
    return NotFound("step {} of '{}' has no tensor '{}' ({} tensors: {}{})", manifest_.step,
                    step_dir_, tensor, manifest_.tensors.size(), fmt::join(some, ", "),
                    manifest_.tensors.size() > some.size() ? ", ..." : "");
  }
  const size_t n = t->shape.size();
  if (offsets.size() != n || sizes.size() != n) {
    return InvalidArgument("tensor '{}' has {} dimensions, the slice has {} offsets and {} sizes",
                           t->name, n, offsets.size(), sizes.size());
  }
  for (size_t d = 0; d < n; ++d) {
    if (offsets[d] < 0 || sizes[d] < 0 || offsets[d] > t->shape[d] ||
        sizes[d] > t->shape[d] - offsets[d]) {
      return InvalidArgument(
          "slice {} of tensor '{}' with shape [{}] is out of bounds in dim {}"
          " (size {})",
          FormatExtent(offsets, sizes), t->name, fmt::join(t->shape, ", "), d, t->shape[d]);
    }
  }
  const uint64_t bytes = *ElementCount(sizes) * DTypeSize(t->dtype);
  if (out_bytes != bytes) {
    return InvalidArgument("slice {} of tensor '{}' ({}) is {} bytes, the buffer is {}",
                           FormatExtent(offsets, sizes), t->name, DTypeName(t->dtype), bytes,
                           out_bytes);
  }
  if (bytes == 0) return Status::Ok();
  auto it = extents_.find(t->name);
  if (it == extents_.end()) return Internal("tensor '{}' has no pieces", t->name);
  for (const Extent& e : it->second) {
    Status first;
    bool done = false;
    for (size_t i : e.replicas) {
      Status st = ReadIntersection(i, offsets, sizes, static_cast<uint8_t*>(out));
      if (st.ok()) {
        done = true;
        break;
      }
      if (first.ok()) first = st;
      if (e.replicas.size() > 1) kLog.Warn("{}; trying another replica", st.message());
    }
    if (!done) return first;
  }
  return Status::Ok();
}

Result<std::vector<uint8_t>> CheckpointReader::ReadTensor(std::string_view tensor) const {
  const TensorInfo* t = manifest_.FindTensor(tensor);
  if (t == nullptr) {
    return NotFound("step {} of '{}' has no tensor '{}'", manifest_.step, step_dir_, tensor);
  }
  std::vector<uint8_t> out(*ElementCount(t->shape) * DTypeSize(t->dtype));
  std::vector<int64_t> zeros(t->shape.size(), 0);
  RY_RETURN_IF_ERROR(ReadSlice(tensor, zeros, t->shape, out.data(), out.size()));
  return out;
}

Result<std::unique_ptr<CheckpointReader>> LoadLatest(const std::string& dir_in,
                                                     const ReaderOptions& options) {
  const std::string dir = TrimSlashes(dir_in);
  Fs* fs = FsOf(options);
  RY_ASSIGN_OR_RETURN(std::vector<int64_t> steps, ListStepDirs(*fs, dir));
  if (steps.empty()) {
    return NotFound("'{}' holds no checkpoint (no step-<N> directory with a manifest.json)", dir);
  }
  std::vector<std::string> notes;
  for (auto it = steps.rbegin(); it != steps.rend(); ++it) {
    auto reader = CheckpointReader::Open(dir, *it, options);
    if (reader.ok()) {
      if (!notes.empty()) {
        kLog.Warn("loading step {} of '{}' instead of newer steps: {}", *it, dir,
                  fmt::join(notes, "; "));
      }
      (*reader)->fallback_notes_ = std::move(notes);
      return reader;
    }
    notes.push_back(fmt::format("step {} skipped: {}", *it, reader.status().ToString()));
  }
  return DataLoss("no valid checkpoint in '{}': {}", dir, fmt::join(notes, "; "));
}

}  // namespace railyard::storage
