// A small fixed pool of threads that runs batches of I/O tasks: the "deep queue" of the
// checkpoint writer and reader. Many large pwrite/pread extents in flight at once keep a
// parallel file system (many OSTs) or an NVMe device (many queues) busy, which one thread
// issuing one request at a time cannot.
//
//   TaskPool pool(8);
//   std::vector<TaskPool::Task> tasks;
//   for (...) tasks.push_back([&, extent](int worker) { return WriteExtent(worker, extent); });
//   RY_RETURN_IF_ERROR(pool.RunAll(std::move(tasks)));
//
// Each task gets the index of the worker thread running it (0..threads-1), so it can use
// per-worker scratch memory (an aligned bounce buffer) without locking.
//
// Thread-safety: RunAll may be called from several threads at once; batches then share the
// workers. Destruction waits for running tasks; it must not race with RunAll.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "railyard/base/status.h"

namespace railyard::storage {

class TaskPool {
 public:
  using Task = std::function<Status(int worker)>;

  // threads < 1 is treated as 1.
  explicit TaskPool(int threads);
  ~TaskPool();
  TaskPool(const TaskPool&) = delete;
  TaskPool& operator=(const TaskPool&) = delete;

  int threads() const { return static_cast<int>(workers_.size()); }

  // Runs every task and returns when all have finished: OK, or the error of the lowest-indexed
  // failing task. After the first failure the tasks of this batch not yet started are skipped
  // (a full disk fails the first extent; there is no point writing the other thousand).
  Status RunAll(std::vector<Task> tasks);

 private:
  struct Batch;
  struct Item {
    std::shared_ptr<Batch> batch;
    size_t index;
  };
  void WorkerLoop(int worker);

  std::mutex mu_;
  std::condition_variable work_cv_;
  std::deque<Item> queue_;
  bool stop_ = false;
  std::vector<std::thread> workers_;
};

}  // namespace railyard::storage
