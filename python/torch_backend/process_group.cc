// ProcessGroupRailyard (process_group.h) and the extension railyard._torch that hands it to
// Python. One translation unit on purpose: every file that includes torch's headers costs
// about a minute to compile, and the binding is a few lines.
#include "process_group.h"

#include <fmt/ranges.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cmath>
#include <cstdlib>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>

#include "railyard/base/clock.h"
#include "railyard/base/hmac.h"
#include "railyard/comm/rank_env.h"
#include "railyard/net/interfaces.h"
#include "railyard/net/store/tcp_store_server.h"

namespace railyard::torch_backend {
namespace {

// Keys in torch's store (already prefixed per process group by torch): rank 0's Railyard
// store, and the secret rank 0 drew ("" when it used RAILYARD_JOB_SECRET).
constexpr const char* kStoreKey = "railyard/store";
constexpr const char* kSecretKey = "railyard/secret";

std::string GetEnv(const char* name) {
  const char* v = std::getenv(name);
  return v != nullptr ? v : "";
}

std::vector<uint8_t> Bytes(const std::string& s) { return {s.begin(), s.end()}; }
std::string String(const std::vector<uint8_t>& b) { return {b.begin(), b.end()}; }

[[noreturn]] void ThrowStatus(int rank, int size, const Status& status) {
  throw std::runtime_error(
      fmt::format("railyard backend, rank {} of {}: {}", rank, size, status.message()));
}

// How a failed operation reaches Python: a RuntimeError with comm's message, which names the
// operation, its sequence number, the rank that failed and its host.
std::exception_ptr ToException(const Status& status) {
  return std::make_exception_ptr(std::runtime_error("railyard: " + status.message()));
}

std::optional<comm::DataType> CommType(at::ScalarType type) {
  switch (type) {
    case at::kFloat:
      return comm::DataType::kF32;
    case at::kDouble:
      return comm::DataType::kF64;
    case at::kHalf:
      return comm::DataType::kF16;
    case at::kBFloat16:
      return comm::DataType::kBF16;
    case at::kInt:
      return comm::DataType::kI32;
    case at::kLong:
      return comm::DataType::kI64;
    case at::kByte:
      return comm::DataType::kU8;
    default:
      return std::nullopt;
  }
}

// A tensor as comm sees it. Operations that only move data take every dtype, as bytes where
// comm has no type of that name (bool, int8, int16, complex).
struct Elements {
  comm::DataType type;
  size_t count;
};

Elements AsElements(const at::Tensor& t) {
  if (auto type = CommType(t.scalar_type())) return {*type, static_cast<size_t>(t.numel())};
  return {comm::DataType::kU8, static_cast<size_t>(t.numel()) * t.element_size()};
}

void CheckTensor(const char* op, const at::Tensor& t) {
  TORCH_CHECK(t.defined(), "railyard: ", op, ": undefined tensor");
  TORCH_CHECK(t.device().is_cpu(), "railyard: ", op, " takes CPU tensors, got one on ", t.device(),
              " (GPU collectives belong to NCCL: use the nccl backend)");
  TORCH_CHECK(t.layout() == at::kStrided, "railyard: ", op, " takes dense tensors, got ",
              t.layout());
}

const at::Tensor& OneTensor(const char* op, const std::vector<at::Tensor>& tensors) {
  TORCH_CHECK(tensors.size() == 1, "railyard: ", op, " takes one tensor per call, got ",
              tensors.size());
  CheckTensor(op, tensors[0]);
  return tensors[0];
}

comm::DataType ReduceType(const char* op, const at::Tensor& t) {
  auto type = CommType(t.scalar_type());
  TORCH_CHECK(type.has_value(), "railyard: ", op, " cannot reduce ", t.scalar_type(),
              " tensors; Railyard reduces Float, Double, Half, BFloat16, Int, Long and Byte");
  return *type;
}

comm::ReduceOp ToReduceOp(const char* op, const c10d::ReduceOp& r) {
  switch (r.op_) {
    case c10d::ReduceOp::SUM:
      return comm::ReduceOp::kSum;
    case c10d::ReduceOp::AVG:
      return comm::ReduceOp::kAvg;
    case c10d::ReduceOp::PRODUCT:
      return comm::ReduceOp::kProd;
    case c10d::ReduceOp::MIN:
      return comm::ReduceOp::kMin;
    case c10d::ReduceOp::MAX:
      return comm::ReduceOp::kMax;
    default:
      TORCH_CHECK(false, "railyard: ", op,
                  " supports ReduceOp SUM, AVG, PRODUCT, MIN and MAX, not the bitwise ones or "
                  "PREMUL_SUM (op ",
                  static_cast<int>(r.op_), ")");
  }
}

comm::CollectiveOptions CallOptions(std::chrono::milliseconds timeout) {
  comm::CollectiveOptions o;
  if (timeout != c10d::kUnsetTimeout) o.timeout = timeout;
  return o;
}

void CheckSameShape(const char* op, const at::Tensor& a, const at::Tensor& b) {
  CheckTensor(op, b);
  TORCH_CHECK(a.scalar_type() == b.scalar_type() && a.numel() == b.numel(), "railyard: ", op,
              ": every tensor must have the same dtype and size; got ", a.scalar_type(), " ",
              a.sizes(), " and ", b.scalar_type(), " ", b.sizes());
}

// `t` when contiguous, else a contiguous copy that WriteBack() copies into `t`.
class Contiguous {
 public:
  explicit Contiguous(const at::Tensor& t) : target_(t), buffer_(t.contiguous()) {}
  void* data() const { return buffer_.data_ptr(); }
  void WriteBack() {
    if (!buffer_.is_same(target_)) target_.copy_(buffer_);
  }

 private:
  at::Tensor target_;
  at::Tensor buffer_;
};

// The tensors one after the other in one new contiguous buffer.
at::Tensor Concatenate(const std::vector<at::Tensor>& tensors) {
  std::vector<at::Tensor> flat;
  flat.reserve(tensors.size());
  for (const at::Tensor& t : tensors) flat.push_back(t.reshape({-1}));
  return at::cat(flat);
}

// Block i of `flat` (each block `block` elements) into tensors[i].
void Split(const at::Tensor& flat, std::vector<at::Tensor>& tensors, int64_t block) {
  for (size_t i = 0; i < tensors.size(); ++i) {
    tensors[i].copy_(flat.narrow(0, static_cast<int64_t>(i) * block, block).view_as(tensors[i]));
  }
}

}  // namespace

std::string GroupName(const std::string& group_id, const std::vector<int64_t>& global_ranks) {
  bool whole = true;
  for (size_t i = 0; i < global_ranks.size(); ++i) {
    whole = whole && global_ranks[i] == static_cast<int64_t>(i);
  }
  if (whole) return "";
  return fmt::format("torch process group {} (global ranks {})", group_id,
                     fmt::join(global_ranks, ","));
}

class ProcessGroupRailyard::Work final : public c10d::Work {
 public:
  Work(int rank, c10d::OpType type, std::vector<at::Tensor> outputs)
      : c10d::Work(rank, type),
        outputs_(std::move(outputs)),
        future_(c10::make_intrusive<c10::ivalue::Future>(
            c10::ListType::create(c10::TensorType::get()))) {}

  std::vector<at::Tensor> result() override { return outputs_; }
  // DistributedDataParallel waits on this, not on wait().
  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override { return future_; }

  void Complete(std::exception_ptr error) {
    if (error) {
      future_->setError(error);
    } else {
      future_->markCompleted(c10::IValue(outputs_));
    }
    finish(error);
  }

 private:
  std::vector<at::Tensor> outputs_;
  c10::intrusive_ptr<c10::ivalue::Future> future_;
};

c10::intrusive_ptr<ProcessGroupRailyard> ProcessGroupRailyard::Create(
    c10d::Store& store, int rank, int size, std::chrono::milliseconds timeout,
    const std::string& group_name) {
  Result<comm::CommOptions> options = comm::CommOptions::FromEnvironment();
  if (!options.ok()) ThrowStatus(rank, size, options.status());
  if (timeout != kProcessGroupDefaultTimeout) options->timeout = timeout;
  options->group_name = group_name;
  const base::Deadline deadline = base::Deadline::After(timeout);

  // Rendezvous: rank 0 serves a Railyard store and says where through torch's.
  std::string secret = GetEnv("RAILYARD_JOB_SECRET");
  std::unique_ptr<net::TcpStoreServer> server;
  std::string address;
  try {
    if (rank == 0) {
      const bool drawn = secret.empty();
      if (drawn) secret = base::ToHex(base::RandomBytes(16));
      Result<net::NetInterface> nic = net::ChooseInterface(GetEnv("RAILYARD_SOCKET_IFNAME"));
      if (!nic.ok()) ThrowStatus(rank, size, nic.status());
      auto started = net::TcpStoreServer::Start({.bind_ip = nic->ipv4, .secret = secret});
      if (!started.ok()) {
        ThrowStatus(rank, size, started.status().WithContext("serving the rendezvous store"));
      }
      server = std::move(*started);
      address = server->address();
      store.set(kSecretKey, Bytes(drawn ? secret : ""));
      store.set(kStoreKey, Bytes(address));
    } else {
      store.wait({kStoreKey, kSecretKey}, timeout);
      address = String(store.get(kStoreKey));
      std::string drawn = String(store.get(kSecretKey));
      if (secret.empty() && drawn.empty()) {
        ThrowStatus(rank, size,
                    InvalidArgument("rank 0 took the job secret from RAILYARD_JOB_SECRET, which "
                                    "is not set here; set it on every rank or on none"));
      }
      if (secret.empty()) secret = std::move(drawn);
    }
  } catch (const c10::Error& e) {
    throw std::runtime_error(fmt::format(
        "railyard backend, rank {} of {}: exchanging rank 0's store address through torch's "
        "store: {}",
        rank, size, e.what_without_backtrace()));
  }

  // The rank's environment as a launcher would have written it for this group, so that
  // comm::Bootstrap reads the transport and host variables exactly as for any Railyard rank.
  const std::map<std::string, std::string> group = {
      {"RAILYARD_RANK", std::to_string(rank)},
      {"RAILYARD_WORLD_SIZE", std::to_string(size)},
      {"RAILYARD_STORE", address},
      {"RAILYARD_STORE_DIR", ""},
      {"RAILYARD_STORE_SERVE", ""},
      {"RAILYARD_JOB_SECRET", secret},
      {"RAILYARD_JOB_ID", "torch"},
  };
  comm::EnvGetter process = comm::ProcessEnv();
  comm::EnvGetter get = [&group, process](std::string_view name) {
    auto it = group.find(std::string(name));
    return it != group.end() ? it->second : process(name);
  };
  Result<comm::RankEnvironment> env = comm::RankEnvironment::FromEnv(get);
  if (!env.ok()) ThrowStatus(rank, size, env.status());
  Result<comm::BootstrapConfig> config = comm::BootstrapConfigFrom(*env);
  if (!config.ok()) ThrowStatus(rank, size, config.status());
  config->comm = *options;
  Result<comm::Bootstrapped> job = comm::Bootstrap(*config, deadline);
  if (!job.ok()) ThrowStatus(rank, size, job.status());
  return c10::make_intrusive<ProcessGroupRailyard>(rank, size, options->timeout, std::move(*job),
                                                   std::move(server));
}

ProcessGroupRailyard::ProcessGroupRailyard(int rank, int size, std::chrono::milliseconds timeout,
                                           comm::Bootstrapped job,
                                           std::unique_ptr<net::TcpStoreServer> store_server)
    : c10d::ProcessGroup(rank, size),
      timeout_(timeout),
      store_server_(std::move(store_server)),
      job_(std::move(job)) {
  init();
  worker_ = std::thread([this] { WorkerLoop(); });
}

ProcessGroupRailyard::~ProcessGroupRailyard() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  worker_.join();
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRailyard::Enqueue(c10d::OpType type,
                                                             std::vector<at::Tensor> outputs,
                                                             std::function<Status()> run) {
  auto work = c10::make_intrusive<Work>(rank_, type, std::move(outputs));
  std::deque<std::function<void()>> finished;  // released here, on the caller's thread
  {
    std::lock_guard lock(mu_);
    finished.swap(finished_);
    queue_.push_back([work, run = std::move(run)] {
      std::exception_ptr error;
      try {
        Status st = run();
        if (!st.ok()) error = ToException(st);
      } catch (...) {  // a torch copy that failed: hand it to the waiter
        error = std::current_exception();
      }
      work->Complete(error);
    });
  }
  cv_.notify_one();
  return work;
}

void ProcessGroupRailyard::WorkerLoop() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    std::function<void()> item = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    item();
    lock.lock();
    // The finished operation still holds its tensors and its Work. The worker never drops
    // them: dropping the last reference to a tensor that Python made takes the GIL, and a
    // thread that takes the GIL while the interpreter finalizes (a script ending just after
    // wait() returned) is ended by pthread_exit, whose unwinding through this loop aborts
    // the process. The next call, or the destructor, releases them on its own thread.
    finished_.push_back(std::move(item));
  }
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRailyard::broadcast(std::vector<at::Tensor>& tensors,
                                                               const c10d::BroadcastOptions& opts) {
  const at::Tensor& t = OneTensor("broadcast", tensors);
  const Elements e = AsElements(t);
  const int root = static_cast<int>(opts.rootRank);
  const comm::CollectiveOptions co = CallOptions(opts.timeout);
  return Enqueue(c10d::OpType::BROADCAST, {t}, [this, t, e, root, co]() -> Status {
    Contiguous buf(t);
    RY_RETURN_IF_ERROR(comm().Broadcast(buf.data(), e.count, e.type, root, co));
    buf.WriteBack();
    return Status::Ok();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRailyard::allreduce(std::vector<at::Tensor>& tensors,
                                                               const c10d::AllreduceOptions& opts) {
  const at::Tensor& t = OneTensor("allreduce", tensors);
  const comm::DataType type = ReduceType("allreduce", t);
  const comm::ReduceOp op = ToReduceOp("allreduce", opts.reduceOp);
  const comm::CollectiveOptions co = CallOptions(opts.timeout);
  return Enqueue(c10d::OpType::ALLREDUCE, {t}, [this, t, type, op, co]() -> Status {
    Contiguous buf(t);
    RY_RETURN_IF_ERROR(comm().Allreduce(buf.data(), buf.data(), t.numel(), type, op, co));
    buf.WriteBack();
    return Status::Ok();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRailyard::allreduce_coalesced(
    std::vector<at::Tensor>& tensors, const c10d::AllreduceCoalescedOptions& opts) {
  std::vector<comm::DataType> types;
  for (const at::Tensor& t : tensors) {
    CheckTensor("allreduce_coalesced", t);
    types.push_back(ReduceType("allreduce_coalesced", t));
  }
  const comm::ReduceOp op = ToReduceOp("allreduce_coalesced", opts.reduceOp);
  const comm::CollectiveOptions co = CallOptions(opts.timeout);
  return Enqueue(
      c10d::OpType::ALLREDUCE_COALESCED, tensors, [this, tensors, types, op, co]() -> Status {
        for (size_t i = 0; i < tensors.size(); ++i) {
          Contiguous buf(tensors[i]);
          RY_RETURN_IF_ERROR(
              comm().Allreduce(buf.data(), buf.data(), tensors[i].numel(), types[i], op, co));
          buf.WriteBack();
        }
        return Status::Ok();
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRailyard::reduce(std::vector<at::Tensor>& tensors,
                                                            const c10d::ReduceOptions& opts) {
  const at::Tensor& t = OneTensor("reduce", tensors);
  const comm::DataType type = ReduceType("reduce", t);
  const comm::ReduceOp op = ToReduceOp("reduce", opts.reduceOp);
  const int root = static_cast<int>(opts.rootRank);
  const comm::CollectiveOptions co = CallOptions(opts.timeout);
  return Enqueue(c10d::OpType::REDUCE, {t}, [this, t, type, op, root, co]() -> Status {
    Contiguous buf(t);
    RY_RETURN_IF_ERROR(comm().Reduce(buf.data(), buf.data(), t.numel(), type, op, root, co));
    if (comm().rank() == root) buf.WriteBack();
    return Status::Ok();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRailyard::allgather(
    std::vector<std::vector<at::Tensor>>& outputs, std::vector<at::Tensor>& inputs,
    const c10d::AllgatherOptions& opts) {
  const at::Tensor& in = OneTensor("allgather", inputs);
  TORCH_CHECK(outputs.size() == 1 && outputs[0].size() == static_cast<size_t>(size_),
              "railyard: allgather takes one list of ", size_, " output tensors");
  for (const at::Tensor& o : outputs[0]) CheckSameShape("allgather", in, o);
  const Elements e = AsElements(in);
  const comm::CollectiveOptions co = CallOptions(opts.timeout);
  std::vector<at::Tensor> outs = outputs[0];
  return Enqueue(c10d::OpType::ALLGATHER, outs, [this, in, outs, e, co]() mutable -> Status {
    const at::Tensor send = in.contiguous();
    const at::Tensor flat = at::empty({in.numel() * size_}, in.options());
    RY_RETURN_IF_ERROR(comm().Allgather(send.data_ptr(), flat.data_ptr(), e.count, e.type, co));
    Split(flat, outs, in.numel());
    return Status::Ok();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRailyard::_allgather_base(
    at::Tensor& output, at::Tensor& input, const c10d::AllgatherOptions& opts) {
  CheckTensor("allgather", input);
  CheckTensor("allgather", output);
  TORCH_CHECK(
      output.scalar_type() == input.scalar_type() && output.numel() == input.numel() * size_,
      "railyard: allgather into one tensor needs an output of ", size_,
      " times the input's elements and its dtype; got ", output.scalar_type(), " ", output.sizes(),
      " for ", input.scalar_type(), " ", input.sizes());
  const Elements e = AsElements(input);
  const comm::CollectiveOptions co = CallOptions(opts.timeout);
  return Enqueue(c10d::OpType::_ALLGATHER_BASE, {output}, [this, output, input, e, co]() -> Status {
    const at::Tensor send = input.contiguous();
    Contiguous recv(output);
    RY_RETURN_IF_ERROR(comm().Allgather(send.data_ptr(), recv.data(), e.count, e.type, co));
    recv.WriteBack();
    return Status::Ok();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRailyard::reduce_scatter(
    std::vector<at::Tensor>& outputs, std::vector<std::vector<at::Tensor>>& inputs,
    const c10d::ReduceScatterOptions& opts) {
  const at::Tensor& out = OneTensor("reduce_scatter", outputs);
  TORCH_CHECK(inputs.size() == 1 && inputs[0].size() == static_cast<size_t>(size_),
              "railyard: reduce_scatter takes one list of ", size_, " input tensors");
  for (const at::Tensor& i : inputs[0]) CheckSameShape("reduce_scatter", out, i);
  const comm::DataType type = ReduceType("reduce_scatter", out);
  const comm::ReduceOp op = ToReduceOp("reduce_scatter", opts.reduceOp);
  const comm::CollectiveOptions co = CallOptions(opts.timeout);
  std::vector<at::Tensor> ins = inputs[0];
  return Enqueue(c10d::OpType::REDUCE_SCATTER, {out}, [this, out, ins, type, op, co]() -> Status {
    const at::Tensor send = Concatenate(ins);
    Contiguous recv(out);
    RY_RETURN_IF_ERROR(
        comm().ReduceScatter(send.data_ptr(), recv.data(), out.numel(), type, op, co));
    recv.WriteBack();
    return Status::Ok();
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRailyard::_reduce_scatter_base(
    at::Tensor& output, at::Tensor& input, const c10d::ReduceScatterOptions& opts) {
  CheckTensor("reduce_scatter", input);
  CheckTensor("reduce_scatter", output);
  TORCH_CHECK(
      output.scalar_type() == input.scalar_type() && input.numel() == output.numel() * size_,
      "railyard: reduce_scatter of one tensor needs an input of ", size_,
      " times the output's elements and its dtype; got ", input.scalar_type(), " ", input.sizes(),
      " for ", output.scalar_type(), " ", output.sizes());
  const comm::DataType type = ReduceType("reduce_scatter", output);
  const comm::ReduceOp op = ToReduceOp("reduce_scatter", opts.reduceOp);
  const comm::CollectiveOptions co = CallOptions(opts.timeout);
  return Enqueue(c10d::OpType::_REDUCE_SCATTER_BASE, {output},
                 [this, output, input, type, op, co]() -> Status {
                   const at::Tensor send = input.contiguous();
                   Contiguous recv(output);
                   RY_RETURN_IF_ERROR(comm().ReduceScatter(send.data_ptr(), recv.data(),
                                                           output.numel(), type, op, co));
                   recv.WriteBack();
                   return Status::Ok();
                 });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRailyard::alltoall_base(
    at::Tensor& output, at::Tensor& input, std::vector<int64_t>& output_splits,
    std::vector<int64_t>& input_splits, const c10d::AllToAllOptions& opts) {
  CheckTensor("alltoall", input);
  CheckTensor("alltoall", output);
  TORCH_CHECK(output.scalar_type() == input.scalar_type() && output.numel() == input.numel() &&
                  input.dim() > 0 && input.size(0) % size_ == 0,
              "railyard: alltoall needs input and output of one dtype and size, with a first "
              "dimension divisible by ",
              size_, "; got ", input.scalar_type(), " ", input.sizes(), " and ",
              output.scalar_type(), " ", output.sizes());
  const int64_t rows = input.size(0) / size_;
  for (const auto* splits : {&output_splits, &input_splits}) {
    for (int64_t s : *splits) {
      TORCH_CHECK(s == rows, "railyard: alltoall moves equal blocks only (",
                  "Railyard's alltoall has one block size); got split sizes ", *splits);
    }
  }
  const Elements e = AsElements(input);
  const size_t block = e.count / size_;
  const comm::CollectiveOptions co = CallOptions(opts.timeout);
  return Enqueue(
      c10d::OpType::ALLTOALL_BASE, {output}, [this, output, input, e, block, co]() -> Status {
        at::Tensor send = input.contiguous();
        Contiguous recv(output);
        if (send.data_ptr() == recv.data()) send = send.clone();  // comm: no in place
        RY_RETURN_IF_ERROR(comm().Alltoall(send.data_ptr(), recv.data(), block, e.type, co));
        recv.WriteBack();
        return Status::Ok();
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRailyard::alltoall(std::vector<at::Tensor>& outputs,
                                                              std::vector<at::Tensor>& inputs,
                                                              const c10d::AllToAllOptions& opts) {
  TORCH_CHECK(inputs.size() == static_cast<size_t>(size_) && outputs.size() == inputs.size(),
              "railyard: alltoall takes ", size_, " input and ", size_, " output tensors");
  CheckTensor("alltoall", inputs[0]);
  for (const at::Tensor& t : inputs) CheckSameShape("alltoall", inputs[0], t);
  for (const at::Tensor& t : outputs) CheckSameShape("alltoall", inputs[0], t);
  const Elements e = AsElements(inputs[0]);
  const comm::CollectiveOptions co = CallOptions(opts.timeout);
  return Enqueue(
      c10d::OpType::ALLTOALL, outputs, [this, outputs, inputs, e, co]() mutable -> Status {
        const at::Tensor send = Concatenate(inputs);
        const at::Tensor recv = at::empty_like(send);
        RY_RETURN_IF_ERROR(comm().Alltoall(send.data_ptr(), recv.data_ptr(), e.count, e.type, co));
        Split(recv, outputs, inputs[0].numel());
        return Status::Ok();
      });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRailyard::barrier(const c10d::BarrierOptions& opts) {
  const comm::CollectiveOptions co = CallOptions(opts.timeout);
  return Enqueue(c10d::OpType::BARRIER, {}, [this, co] { return comm().Barrier(co); });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRailyard::send(std::vector<at::Tensor>& tensors, int dst,
                                                          int /*tag*/) {
  const at::Tensor& t = OneTensor("send", tensors);
  const Elements e = AsElements(t);
  return Enqueue(c10d::OpType::SEND, {t}, [this, t, e, dst]() -> Status {
    const at::Tensor buf = t.contiguous();
    return comm().Send(buf.data_ptr(), e.count, e.type, dst);
  });
}

c10::intrusive_ptr<c10d::Work> ProcessGroupRailyard::recv(std::vector<at::Tensor>& tensors, int src,
                                                          int /*tag*/) {
  const at::Tensor& t = OneTensor("recv", tensors);
  const Elements e = AsElements(t);
  return Enqueue(c10d::OpType::RECV, {t}, [this, t, e, src]() -> Status {
    Contiguous buf(t);
    RY_RETURN_IF_ERROR(comm().Recv(buf.data(), e.count, e.type, src));
    buf.WriteBack();
    return Status::Ok();
  });
}

}  // namespace railyard::torch_backend

// ---- railyard._torch ----

namespace py = pybind11;

// torch's own binding (torch/csrc/utils/pybind.h) declares intrusive_ptr a holder the same
// way; repeated here so this file needs none of torch's Python headers.
PYBIND11_DECLARE_HOLDER_TYPE(T, c10::intrusive_ptr<T>, true);

PYBIND11_MODULE(_torch, m) {
  m.doc() = "The torch.distributed backend 'railyard'; import railyard.torch, not this module.";
  // torch.distributed's creator arguments (extended API: c10d::DistributedBackendOptions).
  m.def(
      "create_process_group",
      [](c10d::Store& store, int rank, int size, double timeout_s, const std::string& group_id,
         const std::vector<int64_t>& global_ranks) -> c10::intrusive_ptr<c10d::ProcessGroup> {
        const auto timeout = std::chrono::milliseconds(std::llround(timeout_s * 1000));
        return railyard::torch_backend::ProcessGroupRailyard::Create(
            store, rank, size, timeout, railyard::torch_backend::GroupName(group_id, global_ranks));
      },
      py::arg("store"), py::arg("rank"), py::arg("size"), py::arg("timeout_s"), py::arg("group_id"),
      py::arg("global_ranks"), py::call_guard<py::gil_scoped_release>());
}
