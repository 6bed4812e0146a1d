// ProcessGroupRailyard: the torch.distributed backend "railyard", a c10d::ProcessGroup of
// torch 1.13 over Railyard's host-memory collectives (comm/communicator.h).
//
//   import railyard.torch            # registers the backend (python/railyard/torch)
//   torch.distributed.init_process_group("railyard")   # env://, torchrun's variables
//
// It only translates: each call checks its tensors (CPU, dense), maps torch's dtype and
// reduction to comm's, and queues one comm call; comm does the work and keeps its promises
// (deadlines, the failed rank named with its host, every survivor told). Errors come back
// from Work::wait (and the Work's future, which DistributedDataParallel waits on) as a
// std::runtime_error, a RuntimeError in Python, with comm's message.
//
// Rendezvous: torch hands the creator a c10d::Store, which Railyard's bootstrap cannot use,
// so the group's rank 0 starts Railyard's own TcpStore (net/store/tcp_store_server.h) on the
// interface the tcp transport would choose (RAILYARD_SOCKET_IFNAME) and publishes its
// address through torch's store; every rank then runs comm::Bootstrap against it, so
// transport choice, host hierarchy and the RAILYARD_* variables work as for any Railyard
// program. The job secret is RAILYARD_JOB_SECRET where the launcher set one, else rank 0
// draws one and passes it through torch's store (no stronger than that store: docs/torch.md).
//
// Timeout: the one given to init_process_group (or new_group) bounds every operation, unless
// it is torch's default of 30 minutes, which would let a stopped rank stall the job for half
// an hour: then RAILYARD_COMM_TIMEOUT applies (default 30 s). A per-call timeout in the
// options struct overrides both.
//
// Thread-safety: calls may come from any thread; they run one at a time, in the order they
// were issued, on the group's worker thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>
#include <torch/csrc/distributed/c10d/Store.hpp>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/comm/bootstrap.h"

namespace railyard::torch_backend {

// The name messages give a sub-group (comm::CommOptions::group_name): "" for a group of
// every rank in order (the default group), else "torch process group <id> (global ranks
// 2,3)", after which comm says that its rank numbers are the group's.
std::string GroupName(const std::string& group_id, const std::vector<int64_t>& global_ranks);

class ProcessGroupRailyard final : public c10d::ProcessGroup {
 public:
  // Rendezvous through `store` (above) and bootstrap rank `rank` of `size`. `timeout` bounds
  // the rendezvous and, unless it is torch's default, every operation. `group_name` is empty
  // for the default group; otherwise messages say the rank numbers are that group's. Throws
  // std::runtime_error with the bootstrap's message when it fails.
  static c10::intrusive_ptr<ProcessGroupRailyard> Create(c10d::Store& store, int rank, int size,
                                                         std::chrono::milliseconds timeout,
                                                         const std::string& group_name);

  ProcessGroupRailyard(int rank, int size, std::chrono::milliseconds timeout,
                       comm::Bootstrapped job, std::unique_ptr<net::TcpStoreServer> store_server);
  // Runs what is queued, then stops the worker.
  ~ProcessGroupRailyard() override;

  const std::string getBackendName() const override { return "railyard"; }
  // The per-operation timeout in effect.
  std::chrono::milliseconds timeout() const { return timeout_; }

  c10::intrusive_ptr<c10d::Work> broadcast(std::vector<at::Tensor>& tensors,
                                           const c10d::BroadcastOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce(std::vector<at::Tensor>& tensors,
                                           const c10d::AllreduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allreduce_coalesced(
      std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce(std::vector<at::Tensor>& tensors,
                                        const c10d::ReduceOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> allgather(std::vector<std::vector<at::Tensor>>& outputs,
                                           std::vector<at::Tensor>& inputs,
                                           const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _allgather_base(at::Tensor& output, at::Tensor& input,
                                                 const c10d::AllgatherOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> reduce_scatter(std::vector<at::Tensor>& outputs,
                                                std::vector<std::vector<at::Tensor>>& inputs,
                                                const c10d::ReduceScatterOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> _reduce_scatter_base(
      at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) override;
  // Equal splits only: comm's alltoall moves one block size (empty split lists, or every
  // split the same).
  c10::intrusive_ptr<c10d::Work> alltoall_base(at::Tensor& output, at::Tensor& input,
                                               std::vector<int64_t>& output_splits,
                                               std::vector<int64_t>& input_splits,
                                               const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> alltoall(std::vector<at::Tensor>& outputs,
                                          std::vector<at::Tensor>& inputs,
                                          const c10d::AllToAllOptions& opts) override;
  c10::intrusive_ptr<c10d::Work> barrier(const c10d::BarrierOptions& opts) override;
  // Messages between two ranks match in the order they were posted; `tag` is not used.
  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor>& tensors, int dst, int tag) override;
  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor>& tensors, int src, int tag) override;

 private:
  class Work;

  // Queues `run` for the worker; the returned Work completes with its status (an error
  // becomes the Work's exception) and its future holds `outputs`.
  c10::intrusive_ptr<c10d::Work> Enqueue(c10d::OpType type, std::vector<at::Tensor> outputs,
                                         std::function<Status()> run);
  void WorkerLoop();

  comm::Communicator& comm() { return *job_.comm; }

  const std::chrono::milliseconds timeout_;
  std::unique_ptr<net::TcpStoreServer> store_server_;  // rank 0; outlives job_
  comm::Bootstrapped job_;

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  std::deque<std::function<void()>> finished_;  // run, to be released off the worker (.cc)
  bool stopping_ = false;
  std::thread worker_;
};

}  // namespace railyard::torch_backend
