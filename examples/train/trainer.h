// The example trainer's loop: data-parallel SGD on the Mlp (mlp.h) over Railyard's comm and
// storage, resumable bit-identically from its own asynchronous checkpoints.
//
// Each rank: joins the job from the environment its launcher wrote (comm/rank_env.h:
// RAILYARD_RANK, RAILYARD_WORLD_SIZE, RAILYARD_STORE, RAILYARD_JOB_SECRET, ... or torchrun's
// names; RAILYARD_RESTART_COUNT says which attempt this is); reads its shard of a packed
// synthetic data set (storage/data_reader.h; rank 0 packs it on first use); computes the
// gradient of its local batch; sums the gradients with a ring allreduce and divides by the
// world size; takes an SGD-with-momentum step. Every `ckpt_every` steps it saves, without
// waiting for the disk (storage/async_saver.h), the model, the momentum, the data reader's
// position, its RNG state and the step (every rank all tensors: one replica per rank). On start it
// resumes from the newest checkpoint in `ckpt_dir` that verifies.
//
// Why the result is bit-identical across restarts: the math runs in a fixed order (mlp.h);
// the allreduce is forced to the ring, whose per-element summation chain depends only on
// the world size and ring order (not on message size or on which hosts the ranks landed on,
// as the hierarchical algorithm would), and every rank receives the same bits; the data
// position, the RNG and the momentum are restored exactly.
//
// Progress: every rank reports each finished step, and a heartbeat after each slow phase of
// start-up, to its launcher's supervisor (launch/progress.h, RAILYARD_PROGRESS), which
// detects hangs and stragglers from them; without the variable nothing is sent.
//
// Output (stdout, lines "rank R: ..."): every rank says "resumed from step N" or "starting at
// step 0"; rank 0 prints "step N loss L" lines and "final weights xxh3 <16 hex> (<count>
// floats)". The end of
// the run checks that every rank holds the same weights (an allgather of their checksums).
//
// Thread-safety: RunTraining is the whole program; call it once per process.
#pragma once

#include <cstdint>
#include <string>

#include "railyard/base/status.h"

namespace railyard::train_example {

struct TrainOptions {
  int64_t steps = 100;
  // Empty: RAILYARD_CKPT_DIR (the launcher's --ckpt-dir), else no checkpoints, no resume.
  std::string ckpt_dir;
  int64_t ckpt_every = 10;
  std::string data_dir;  // packed here from `seed` if it holds no data set yet
  size_t batch = 16;     // samples per rank per step
  uint64_t seed = 1234;
  std::string out_file;  // final weights as raw float bytes; "<out>.xxh3" gets the checksum
  int64_t log_every = 10;
  uint64_t samples = 4096;  // size of the synthetic data set
  int inputs = 32;
  int hidden = 64;
  float lr = 0.05f;
  float momentum = 0.9f;
  // Test only: on the first attempt (restart count 0), rank `fail_rank_for_test` SIGKILLs
  // itself just before step `fail_at_step_for_test`, after its checkpoint in flight has
  // committed (so the step it will resume from is known). -1: never.
  int64_t fail_at_step_for_test = -1;
  // Test only: the same, but the rank stops itself with SIGSTOP instead (frozen, as a hung
  // process is: alive, silent, state T), for hang detection. -1: never.
  int64_t hang_at_step_for_test = -1;
  int fail_rank_for_test = -1;
};

// Runs the training. Errors: the environment's (naming the variable), the data set's, a
// failed peer (comm names the rank and host), a checkpoint that cannot be saved or loaded,
// weights that differ between ranks at the end (INTERNAL naming them).
Status RunTraining(const TrainOptions& options);

}  // namespace railyard::train_example
