#include "examples/train/trainer.h"

#include <fmt/format.h>
#include <signal.h>

#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <vector>

#include "examples/train/mlp.h"
#include "railyard/base/checksum.h"
#include "railyard/base/clock.h"
#include "railyard/base/files.h"
#include "railyard/base/hmac.h"
#include "railyard/comm/bootstrap.h"
#include "railyard/comm/communicator.h"
#include "railyard/comm/rank_env.h"
#include "railyard/launch/progress.h"
#include "railyard/storage/agreement.h"
#include "railyard/storage/async_saver.h"
#include "railyard/storage/checkpoint.h"
#include "railyard/storage/checkpoint_catalog.h"
#include "railyard/storage/checkpoint_reader.h"
#include "railyard/storage/data_index.h"
#include "railyard/storage/data_pack.h"
#include "railyard/storage/data_reader.h"
#include "railyard/storage/synthetic_data.h"

namespace railyard::train_example {
namespace {

// The ring keeps each element's summation chain fixed for a given world size and ring order
// (docs/comm.md), whatever the message size or placement; kAuto could pick another
// algorithm after a restart onto other hosts.
const comm::CollectiveOptions kDeterministicReduce{.algorithm = comm::Algorithm::kRing};

void Say(int rank, const std::string& line) {
  std::printf("rank %d: %s\n", rank, line.c_str());
  std::fflush(stdout);
}

Result<uint64_t> ParseU64(std::string_view text, std::string_view what) {
  uint64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) {
    return DataLoss("checkpoint metadata '{}': '{}' is not a non-negative integer", what, text);
  }
  return v;
}

// The model and optimizer state as the checkpoint names them.
struct Tensors {
  std::vector<float> params;
  std::vector<float> velocity;
};

struct Piece {
  std::string name;
  std::vector<int64_t> shape;
  size_t offset;  // into the flat vector
  size_t count;
};

std::vector<Piece> Layout(const Mlp& mlp) {
  const int64_t in = mlp.shape().inputs, hid = mlp.shape().hidden;
  return {{"layer1.weight", {hid, in}, mlp.w1_offset(), size_t(hid * in)},
          {"layer1.bias", {hid}, mlp.b1_offset(), size_t(hid)},
          {"layer2.weight", {1, hid}, mlp.w2_offset(), size_t(hid)},
          {"layer2.bias", {1}, mlp.b2_offset(), 1}};
}

// Every setting the saved state depends on: a resume under other settings would not continue
// the same run.
std::string ConfigString(const TrainOptions& o, int world_size) {
  return fmt::format("inputs={} hidden={} batch={} seed={} samples={} lr={} momentum={} world={}",
                     o.inputs, o.hidden, o.batch, o.seed, o.samples, o.lr, o.momentum, world_size);
}

storage::SyntheticSpec SyntheticSpecFor(const TrainOptions& o) {
  return {.samples = o.samples,
          .min_bytes = uint64_t(o.inputs),
          .max_bytes = uint64_t(o.inputs),
          .seed = o.seed};
}

// Rank 0 packs the synthetic data set into options.data_dir unless one is there; every rank
// then checks it is the one these options describe.
Status EnsureDataset(const TrainOptions& o, comm::Communicator& comm) {
  const storage::SyntheticSpec spec = SyntheticSpecFor(o);
  Status packed;
  if (comm.rank() == 0) {
    auto index = storage::DatasetIndex::Load(o.data_dir);
    if (!index.ok() && (index.status().code() == StatusCode::kNotFound ||
                        index.status().code() == StatusCode::kInvalidArgument)) {
      storage::PackOptions pack;
      pack.shard_bytes = 64 << 10;  // a few shards, as a real data set has
      auto st = storage::PackSynthetic(spec, o.data_dir, pack);
      if (st.ok()) {
        Say(0, fmt::format("packed {} samples into {} ({} shards)", st->samples, o.data_dir,
                           st->shards));
      } else {
        packed = st.status().WithContext(fmt::format("packing the data set into '{}'", o.data_dir));
      }
    } else if (!index.ok()) {
      packed = index.status();
    }
  }
  // Rank 0 failing here exits; the others' barrier then fails naming it.
  RY_RETURN_IF_ERROR(packed);
  RY_RETURN_IF_ERROR(comm.Barrier());
  RY_ASSIGN_OR_RETURN(storage::DatasetIndex index, storage::DatasetIndex::Load(o.data_dir));
  if (index.num_samples() != o.samples || index.entry(0).length != uint64_t(o.inputs)) {
    return FailedPrecondition(
        "data set '{}' holds {} samples of {} bytes; this run expects {} of {} (--data names "
        "another run's data: use a fresh directory)",
        o.data_dir, index.num_samples(), index.entry(0).length, o.samples, o.inputs);
  }
  return Status::Ok();
}

// A data set packed from another seed has the same shape: its first sample tells them apart.
Status CheckFirstSample(const TrainOptions& o, const storage::DataReader& reader) {
  std::string got, want;
  RY_RETURN_IF_ERROR(reader.ReadSample(0, &got));
  storage::FillSyntheticSample(SyntheticSpecFor(o), 0, &want);
  if (got != want) {
    return FailedPrecondition(
        "data set '{}' was not packed from --seed {} (its first sample differs): use a fresh "
        "directory",
        o.data_dir, o.seed);
  }
  return Status::Ok();
}

struct Resume {
  int64_t step = 0;
  std::map<std::string, std::string> metadata;
};

// Steps newer than the resumed one do not load; they move aside (storage keeps them for
// inspection) so that this run can save those step numbers again.
Status SetAsideNewerSteps(const std::string& dir, int64_t resumed) {
  RY_ASSIGN_OR_RETURN(std::vector<int64_t> moved,
                      storage::SetAsideStepsAfter(*storage::DefaultFs(), dir, resumed));
  for (int64_t step : moved) {
    Say(0, fmt::format("set aside step {} (it does not load; it will be saved again)", step));
  }
  return Status::Ok();
}

// Rank 0 picks the newest checkpoint that verifies and tells the others, so every rank loads
// the same step; each reads its state from it.
Result<Resume> LoadCheckpoint(const TrainOptions& o, const Mlp& mlp, comm::Communicator& comm,
                              Tensors* t) {
  int64_t step = -1;
  std::unique_ptr<storage::CheckpointReader> reader;
  if (comm.rank() == 0) {
    auto latest = storage::LoadLatest(o.ckpt_dir);
    if (latest.ok()) {
      reader = std::move(*latest);
      step = reader->step();
      for (const std::string& note : reader->fallback_notes()) Say(0, "fallback: " + note);
      RY_RETURN_IF_ERROR(SetAsideNewerSteps(o.ckpt_dir, step));
    } else if (latest.status().code() != StatusCode::kNotFound) {
      return latest.status().WithContext("loading the latest checkpoint");
    }
  }
  RY_RETURN_IF_ERROR(comm.Broadcast(&step, 1, comm::DataType::kI64, 0));
  if (step < 0) return Resume{};
  if (reader == nullptr) {
    RY_ASSIGN_OR_RETURN(reader, storage::CheckpointReader::Open(o.ckpt_dir, step));
  }
  const auto& meta = reader->manifest().metadata;
  auto config = meta.find("config");
  const std::string want = ConfigString(o, comm.size());
  if (config == meta.end() || config->second != want) {
    return FailedPrecondition("checkpoint step {} in '{}' was saved with '{}', this run is '{}'",
                              step, o.ckpt_dir, config == meta.end() ? "" : config->second, want);
  }
  for (const Piece& p : Layout(mlp)) {
    for (auto [prefix, dest] : {std::pair{"", &t->params}, std::pair{"momentum.", &t->velocity}}) {
      const std::string name = prefix + p.name;
      RY_ASSIGN_OR_RETURN(std::vector<uint8_t> bytes, reader->ReadTensor(name));
      if (bytes.size() != p.count * sizeof(float)) {
        return DataLoss("checkpoint step {}: tensor '{}' has {} bytes, expected {}", step, name,
                        bytes.size(), p.count * sizeof(float));
      }
      std::memcpy(dest->data() + p.offset, bytes.data(), bytes.size());
    }
  }
  return Resume{step, meta};
}

std::string MetaOr(const std::map<std::string, std::string>& meta, const std::string& key) {
  auto it = meta.find(key);
  return it == meta.end() ? std::string() : it->second;
}

Result<std::unique_ptr<storage::AsyncSaver>> OpenSaver(
    const TrainOptions& o, const comm::BootstrapConfig& env, comm::Communicator& comm,
    std::unique_ptr<storage::RankAgreement>* agreement) {
  RY_RETURN_IF_ERROR(base::MakeDirs(o.ckpt_dir));
  // The ranks agree through marker files in the checkpoint directory: the agreement runs on
  // the saver's background thread, where a collective on the training communicator would
  // interleave with the training thread's allreduces differently on each rank. Its run id
  // must differ from every earlier run's (whose markers may still lie there): the job id
  // alone repeats when a program is started again by hand, so rank 0 adds a random nonce.
  int64_t nonce = 0;
  if (comm.rank() == 0) std::memcpy(&nonce, base::RandomBytes(sizeof nonce).data(), sizeof nonce);
  RY_RETURN_IF_ERROR(comm.Broadcast(&nonce, 1, comm::DataType::kI64, 0));
  RY_ASSIGN_OR_RETURN(*agreement, storage::FileAgreement::Create(
                                      storage::DefaultFs(), o.ckpt_dir,
                                      fmt::format("{}-{:016x}", env.job_id, uint64_t(nonce)),
                                      env.rank, env.world_size));
  storage::WriterOptions w;
  w.dir = o.ckpt_dir;
  w.rank = env.rank;
  w.world_size = env.world_size;
  w.agreement = agreement->get();
  w.io_threads = 1;
  w.keep_last = 3;
  w.agreement_timeout = std::chrono::minutes(1);
  RY_ASSIGN_OR_RETURN(auto writer, storage::CheckpointWriter::Open(w));
  storage::AsyncSaverOptions a;
  a.copy_threads = 1;
  return storage::AsyncSaver::Create(std::move(writer), a);
}

// Every rank's checksum of its weights, compared: the ranks must hold the same bits.
Result<uint64_t> AgreedChecksum(const std::vector<float>& params, comm::Communicator& comm) {
  const uint64_t mine = base::Xxh3(params.data(), params.size() * sizeof(float));
  std::vector<int64_t> all(comm.size());
  int64_t m = static_cast<int64_t>(mine);
  RY_RETURN_IF_ERROR(comm.Allgather(&m, all.data(), 1, comm::DataType::kI64));
  for (int r = 0; r < comm.size(); ++r) {
    if (static_cast<uint64_t>(all[r]) != mine) {
      return Internal("rank {}'s final weights (xxh3 {:016x}) differ from rank {}'s ({:016x})", r,
                      static_cast<uint64_t>(all[r]), comm.rank(), mine);
    }
  }
  return mine;
}

Status WriteWeights(const std::string& path, const std::vector<float>& params, uint64_t sum) {
  RY_RETURN_IF_ERROR(
      base::WriteFileAtomic(path, std::string_view(reinterpret_cast<const char*>(params.data()),
                                                   params.size() * sizeof(float))));
  return base::WriteFileAtomic(path + ".xxh3", fmt::format("{:016x}  {}\n", sum, path));
}

}  // namespace

Status RunTraining(const TrainOptions& options) {
  if (options.steps < 0 || options.batch == 0 || options.data_dir.empty() ||
      options.ckpt_every < 0) {
    return InvalidArgument("need --steps >= 0, --batch >= 1, --ckpt-every >= 0 and --data DIR");
  }
  RY_ASSIGN_OR_RETURN(comm::RankEnvironment rank_env,
                      comm::RankEnvironment::FromEnv(comm::ProcessEnv()));
  RY_ASSIGN_OR_RETURN(comm::BootstrapConfig env, comm::BootstrapConfigFrom(rank_env));
  const int restart_count = rank_env.restart_count;
  RY_ASSIGN_OR_RETURN(launch::ProgressReporter progress,
                      launch::ProgressReporter::FromEnvironment());
  TrainOptions o = options;
  if (o.ckpt_dir.empty()) o.ckpt_dir = rank_env.ckpt_dir;
  RY_ASSIGN_OR_RETURN(comm::Bootstrapped job,
                      comm::Bootstrap(env, base::Deadline::After(std::chrono::seconds(60))));
  comm::Communicator& comm = *job.comm;
  const int rank = comm.rank(), world = comm.size();

  progress.Heartbeat().IgnoreError();  // a lost event is the supervisor's concern, not ours
  RY_RETURN_IF_ERROR(EnsureDataset(o, comm));
  storage::DataReaderOptions ro;
  ro.rank = rank;
  ro.world_size = world;
  ro.seed = o.seed;
  ro.batch = o.batch;
  ro.threads = 1;
  ro.prefetch = 2;
  RY_ASSIGN_OR_RETURN(auto reader, storage::DataReader::Open(o.data_dir, ro));
  RY_RETURN_IF_ERROR(CheckFirstSample(o, *reader));

  const Mlp mlp({.inputs = o.inputs, .hidden = o.hidden});
  const Teacher teacher(o.inputs, o.seed);
  const size_t n_params = mlp.num_params();
  Tensors t{std::vector<float>(n_params), std::vector<float>(n_params, 0.0f)};
  mlp.Init(o.seed, t.params.data());
  // Each rank's input noise differs (its own stream), and is part of its saved state.
  Rng rng(storage::Mix64(o.seed) + 0x100000000ull * uint64_t(rank + 1));
  const std::string rng_key = fmt::format("rng.rank-{}", rank);

  int64_t start = 0;
  std::unique_ptr<storage::RankAgreement> agreement;
  std::unique_ptr<storage::AsyncSaver> saver;
  if (!o.ckpt_dir.empty()) {
    RY_ASSIGN_OR_RETURN(Resume resume, LoadCheckpoint(o, mlp, comm, &t));
    if (resume.step > 0) {
      RY_RETURN_IF_ERROR(reader->RestorePosition(MetaOr(resume.metadata, "data.position")));
      RY_ASSIGN_OR_RETURN(uint64_t state, ParseU64(MetaOr(resume.metadata, rng_key), rng_key));
      rng = Rng(state);
      start = resume.step;
      Say(rank,
          fmt::format("resumed from step {} ({}, restart {})", start, o.ckpt_dir, restart_count));
    }
    RY_ASSIGN_OR_RETURN(saver, OpenSaver(o, env, comm, &agreement));
    progress.Heartbeat().IgnoreError();
  }
  if (start == 0) Say(rank, fmt::format("starting at step 0 (restart {})", restart_count));

  std::vector<storage::TensorView> views;
  for (const Piece& p : Layout(mlp)) {
    views.push_back({p.name, storage::DType::kF32, p.shape, {}, {}, t.params.data() + p.offset});
    views.push_back({"momentum." + p.name,
                     storage::DType::kF32,
                     p.shape,
                     {},
                     {},
                     t.velocity.data() + p.offset});
  }
  const std::string config = ConfigString(o, world);
  const SgdMomentum sgd{.lr = o.lr, .momentum = o.momentum};
  // One buffer for the allreduce: the gradient, then the local loss.
  std::vector<float> grad(n_params + 1);
  std::vector<float> xs(o.batch * o.inputs), ys(o.batch);
  for (int64_t step = start + 1; step <= o.steps; ++step) {
    const bool kill = step == o.fail_at_step_for_test, hang = step == o.hang_at_step_for_test;
    if ((kill || hang) && rank == o.fail_rank_for_test && restart_count == 0) {
      if (saver != nullptr) RY_RETURN_IF_ERROR(saver->Wait());
      Say(rank,
          kill ? fmt::format("killing myself before step {} (--fail-at-step-for-test)", step)
               : fmt::format("stopping myself before step {} (--hang-at-step-for-test)", step));
      ::raise(kill ? SIGKILL : SIGSTOP);
    }
    RY_ASSIGN_OR_RETURN(std::vector<storage::Sample> batch, reader->NextBatch());
    for (size_t s = 0; s < batch.size(); ++s) {
      if (batch[s].data.size() != size_t(o.inputs)) {
        return DataLoss("sample {} of '{}' has {} bytes, expected {}", batch[s].index, o.data_dir,
                        batch[s].data.size(), o.inputs);
      }
      float* x = xs.data() + s * o.inputs;
      ys[s] = teacher.Decode(batch[s].data, x);
      for (int i = 0; i < o.inputs; ++i) x[i] += 0.02f * rng.Uniform();
    }
    grad[n_params] = mlp.BatchGradient(t.params.data(), xs.data(), ys.data(), o.batch, grad.data());
    Status st = comm.Allreduce(grad.data(), grad.data(), grad.size(), comm::DataType::kF32,
                               comm::ReduceOp::kSum, kDeterministicReduce);
    if (!st.ok()) return st.WithContext(fmt::format("gradient allreduce of step {}", step));
    const float inv_world = 1.0f / static_cast<float>(world);
    for (float& g : grad) g *= inv_world;
    SgdStep(sgd, n_params, grad.data(), t.velocity.data(), t.params.data());
    progress.Step(step).IgnoreError();
    if (rank == 0 && o.log_every > 0 && (step == 1 || step % o.log_every == 0 || step == o.steps)) {
      Say(rank, fmt::format("step {} loss {:.6f}", step, grad[n_params]));
    }
    if (saver != nullptr && o.ckpt_every > 0 && step % o.ckpt_every == 0) {
      st = saver->SaveAsync(step, views,
                            {{"step", std::to_string(step)},
                             {"config", config},
                             {"data.position", reader->SavePosition()},
                             {rng_key, std::to_string(rng.state())}});
      if (!st.ok()) return st.WithContext(fmt::format("checkpoint of step {}", step));
    }
  }
  if (saver != nullptr) RY_RETURN_IF_ERROR(saver->Wait());
  RY_ASSIGN_OR_RETURN(uint64_t sum, AgreedChecksum(t.params, comm));
  if (rank == 0) {
    if (!o.out_file.empty()) RY_RETURN_IF_ERROR(WriteWeights(o.out_file, t.params, sum));
    Say(rank, fmt::format("final weights xxh3 {:016x} ({} floats)", sum, n_params));
  }
  return Status::Ok();
}

}  // namespace railyard::train_example
