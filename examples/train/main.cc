// railyard_train_example: the data-parallel MLP trainer of trainer.h as a program. Start one
// process per rank with the launcher's environment (README.md shows it by hand).
#include <CLI/CLI.hpp>
#include <cstdio>

#include "examples/train/trainer.h"
#include "railyard/base/logging.h"

int main(int argc, char** argv) {
  railyard::train_example::TrainOptions o;
  CLI::App app{"Deterministic data-parallel MLP training on Railyard's comm and storage"};
  app.add_option("--steps", o.steps, "training steps in all (a resumed run continues to it)");
  app.add_option("--ckpt-dir", o.ckpt_dir, "checkpoint directory: saved to, resumed from");
  app.add_option("--ckpt-every", o.ckpt_every, "steps between asynchronous checkpoints (0: none)");
  app.add_option("--data", o.data_dir, "packed data set; packed from --seed if absent")->required();
  app.add_option("--batch", o.batch, "samples per rank per step");
  app.add_option("--seed", o.seed, "seed of the data set, the model and the shuffle");
  app.add_option("--out", o.out_file, "final weights as raw float32 bytes (+ FILE.xxh3)");
  app.add_option("--log-every", o.log_every, "steps between loss lines (0: none)");
  app.add_option("--samples", o.samples, "samples in the synthetic data set");
  app.add_option("--hidden", o.hidden, "hidden units");
  app.add_option("--lr", o.lr, "learning rate");
  app.add_option("--momentum", o.momentum, "SGD momentum");
  app.add_option("--fail-at-step-for-test", o.fail_at_step_for_test,
                 "test only: SIGKILL rank --fail-rank-for-test before this step, first attempt");
  app.add_option("--hang-at-step-for-test", o.hang_at_step_for_test,
                 "test only: SIGSTOP rank --fail-rank-for-test before this step, first attempt");
  app.add_option("--fail-rank-for-test", o.fail_rank_for_test,
                 "test only: the rank to kill or stop");
  CLI11_PARSE(app, argc, argv);
  railyard::base::InitLogging(std::nullopt);
  railyard::Status st = railyard::train_example::RunTraining(o);
  if (!st.ok()) {
    std::fprintf(stderr, "railyard_train_example: %s\n", st.ToString().c_str());
    return 1;
  }
  return 0;
}
