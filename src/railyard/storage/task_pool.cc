#include "railyard/storage/task_pool.h"

#include <atomic>
#include <optional>

namespace railyard::storage {

struct TaskPool::Batch {
  std::vector<Task> tasks;
  std::vector<std::optional<Status>> results;
  size_t remaining = 0;             // guarded by the pool's mu_
  std::atomic<bool> failed{false};  // lets later tasks of a failed batch skip their work
  std::condition_variable done_cv;
};

TaskPool::TaskPool(int threads) {
  if (threads < 1) threads = 1;
  workers_.reserve(static_cast<size_t>(threads));
  for (int i = 0; i < threads; ++i) workers_.emplace_back([this, i] { WorkerLoop(i); });
}

TaskPool::~TaskPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  work_cv_.notify_all();
  for (std::thread& t : workers_) t.join();
}

Status TaskPool::RunAll(std::vector<Task> tasks) {
  if (tasks.empty()) return Status::Ok();
  auto batch = std::make_shared<Batch>();
  batch->results.resize(tasks.size());
  batch->remaining = tasks.size();
  batch->tasks = std::move(tasks);
  std::unique_lock<std::mutex> lock(mu_);
  for (size_t i = 0; i < batch->tasks.size(); ++i) queue_.push_back({batch, i});
  work_cv_.notify_all();
  batch->done_cv.wait(lock, [&] { return batch->remaining == 0; });
  for (const auto& r : batch->results) {
    if (r.has_value() && !r->ok()) return *r;
  }
  return Status::Ok();
}

void TaskPool::WorkerLoop(int worker) {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    work_cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stop_ and nothing left
    Item item = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    Batch& b = *item.batch;
    std::optional<Status> result;
    if (!b.failed.load(std::memory_order_relaxed)) {
      result = b.tasks[item.index](worker);
      if (!result->ok()) b.failed.store(true);
    }
    b.tasks[item.index] = nullptr;  // release captured state early
    lock.lock();
    b.results[item.index] = std::move(result);
    if (--b.remaining == 0) b.done_cv.notify_all();
  }
}

}  // namespace railyard::storage
