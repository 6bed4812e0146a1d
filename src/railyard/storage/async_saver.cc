#include "railyard/storage/async_saver.h"

#include <algorithm>
#include <cstring>

#include "railyard/base/clock.h"
#include "railyard/base/logging.h"
#include "railyard/base/units.h"
#include "railyard/storage/aligned_buffer.h"
#include "railyard/storage/task_pool.h"

namespace railyard::storage {
namespace {

const base::Logger kLog("ckpt");
constexpr uint64_t kCopyChunk = 64 << 20;  // per copy task: large enough to amortise dispatch

}  // namespace

Result<std::unique_ptr<AsyncSaver>> AsyncSaver::Create(std::unique_ptr<CheckpointWriter> writer,
                                                       AsyncSaverOptions options) {
  if (writer == nullptr) return InvalidArgument("async saver: no checkpoint writer given");
  if (options.max_staging_bytes == 0) {
    return InvalidArgument("async saver: max_staging_bytes must be positive");
  }
  if (options.reserve_bytes > options.max_staging_bytes) {
    return InvalidArgument("async saver: reserve_bytes {} exceeds max_staging_bytes {}",
                           base::FormatBytes(options.reserve_bytes),
                           base::FormatBytes(options.max_staging_bytes));
  }
  if (options.copy_threads <= 0) {
    options.copy_threads =
        static_cast<int>(std::clamp(std::thread::hardware_concurrency(), 1u, 4u));
  }
  std::unique_ptr<AsyncSaver> saver(new AsyncSaver(std::move(writer), options));
  if (options.reserve_bytes > 0) {
    RY_RETURN_IF_ERROR(saver->staging_.Resize(options.reserve_bytes)
                           .WithContext("async saver: reserving staging memory"));
    saver->staging_.Prefault();
    std::lock_guard<std::mutex> lock(saver->mu_);
    saver->stats_.staging_capacity = saver->staging_.capacity();
  }
  return saver;
}

AsyncSaver::AsyncSaver(std::unique_ptr<CheckpointWriter> writer, AsyncSaverOptions options)
    : writer_(std::move(writer)), options_(options) {
  copy_pool_ = std::make_unique<TaskPool>(options_.copy_threads);
  thread_ = std::thread([this] { Loop(); });
}

AsyncSaver::~AsyncSaver() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    Status pending = WaitIdle(lock);
    if (!pending.ok()) {
      kLog.Error("checkpoint save failed and nobody asked: {}", pending.ToString());
    }
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void AsyncSaver::Loop() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stop_ || job_.has_value(); });
    if (!job_.has_value()) return;
    Job& job = *job_;
    lock.unlock();
    Status st;
    size_t faulted = 0;
    if (job.snapshot) {
      st = job.snapshot->Finish(copy_pool_.get());
      faulted = job.snapshot->stats().faulted_chunks;
      job.snapshot.reset();  // the training thread's memory is its own again
    }
    if (st.ok()) st = writer_->Save(job.step, job.views, job.metadata);
    lock.lock();
    stats_.last_faulted_chunks = faulted;
    stats_.last_save = writer_->last_stats();
    if (!st.ok() && bg_error_.ok()) {
      bg_error_ = st.WithContext(fmt::format("background save of step {}", job.step));
    }
    job_.reset();
    cv_.notify_all();
  }
}

Status AsyncSaver::WaitIdle(std::unique_lock<std::mutex>& lock) {
  cv_.wait(lock, [&] { return !job_.has_value(); });
  return std::exchange(bg_error_, Status::Ok());
}

Status AsyncSaver::Wait() {
  std::unique_lock<std::mutex> lock(mu_);
  return WaitIdle(lock);
}

AsyncSaverStats AsyncSaver::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  return stats_;
}

Status AsyncSaver::SaveAsync(int64_t step, std::span<const TensorView> pieces,
                             const std::map<std::string, std::string>& metadata) {
  const auto start = base::Clock::now();
  {
    std::unique_lock<std::mutex> lock(mu_);
    RY_RETURN_IF_ERROR(WaitIdle(lock));  // back-pressure, and the previous save's error
  }
  const double waited = base::SecondsSince(start);
  // From here no job is in flight, so the staging buffer is this thread's alone.
  Job job;
  job.step = step;
  job.metadata = metadata;
  job.views.assign(pieces.begin(), pieces.end());
  uint64_t total = 0;
  std::vector<uint64_t> at(pieces.size());
  for (size_t i = 0; i < pieces.size(); ++i) {
    const TensorView& v = pieces[i];
    if (v.byte_size() > 0 && v.data == nullptr) {
      return InvalidArgument("async save of step {}: tensor '{}': data is null", step, v.name);
    }
    if (v.immutable) continue;  // written in place
    at[i] = total;
    total = AlignUp(total + v.byte_size(), kDirectIoAlignment);
  }
  if (total > options_.max_staging_bytes) {
    return ResourceExhausted(
        "async save of step {} needs {} of staging memory, the limit is {} "
        "(AsyncSaverOptions.max_staging_bytes)",
        step, base::FormatBytes(total), base::FormatBytes(options_.max_staging_bytes));
  }
  RY_RETURN_IF_ERROR(staging_.Resize(total));
  const auto copy_start = base::Clock::now();
  RY_RETURN_IF_ERROR(Stage(pieces, at, &job));
  const double copied = base::SecondsSince(copy_start);
  {
    std::lock_guard<std::mutex> lock(mu_);
    job_ = std::move(job);
    stats_.last_step = step;
    stats_.last_wait_seconds = waited;
    stats_.last_copy_seconds = copied;
    stats_.last_stall_seconds = base::SecondsSince(start);
    stats_.staging_capacity = staging_.capacity();
    stats_.last_copied_bytes = total;
    stats_.last_write_protected = job_->snapshot != nullptr;
  }
  cv_.notify_all();
  return Status::Ok();
}

Status AsyncSaver::Stage(std::span<const TensorView> pieces, std::span<const uint64_t> at,
                         Job* job) {
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (!pieces[i].immutable) job->views[i].data = staging_.data() + at[i];
  }
  if (options_.snapshot == SnapshotMode::kWriteProtect) {
    std::vector<SnapshotSegment> segments;
    for (size_t i = 0; i < pieces.size(); ++i) {
      if (pieces[i].immutable) continue;
      segments.push_back({pieces[i].data, staging_.data() + at[i], pieces[i].byte_size()});
    }
    auto snapshot = PageSnapshot::Begin(segments);
    if (snapshot.ok()) {
      job->snapshot = std::move(*snapshot);
      return Status::Ok();
    }
    if (!std::exchange(warned_no_snapshot_, true)) {
      kLog.Warn("async save of step {}: copying instead of write-protecting: {}", job->step,
                snapshot.status().message());
    }
  }
  std::vector<TaskPool::Task> tasks;
  for (size_t i = 0; i < pieces.size(); ++i) {
    if (pieces[i].immutable) continue;
    const auto* src = static_cast<const uint8_t*>(pieces[i].data);
    uint8_t* dst = staging_.data() + at[i];
    const uint64_t n = pieces[i].byte_size();
    for (uint64_t off = 0; off < n; off += kCopyChunk) {
      uint64_t len = std::min(kCopyChunk, n - off);
      tasks.push_back([src, dst, off, len](int) {
        std::memcpy(dst + off, src + off, len);
        return Status::Ok();
      });
    }
  }
  return copy_pool_->RunAll(std::move(tasks));
}

}  // namespace railyard::storage
