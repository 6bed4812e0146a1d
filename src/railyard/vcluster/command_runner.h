// CommandRunner: the seam between the virtual cluster and the `ip`/`tc` commands that build
// it. The system runner spawns them with a deadline; tests use a recording runner to check
// the command sequence without root, and a failing wrapper to prove that a half-built
// cluster is torn down.
//
// Thread-safety: implementations are not thread-safe; use one per operation.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"

namespace railyard::vcluster {

class CommandRunner {
 public:
  virtual ~CommandRunner() = default;
  // Runs argv to completion and returns its stdout. A non-zero exit is an error whose
  // message names the command and its first line of stderr.
  virtual Result<std::string> Run(const std::vector<std::string>& argv) = 0;
};

// Spawns real processes; each command gets `per_command` to finish.
std::unique_ptr<CommandRunner> MakeSystemRunner(base::Duration per_command);

// Forwards to `inner` but fails the `fail_at`-th command (1-based) with INTERNAL, as a
// crash-in-the-middle stand-in. Owns nothing; `inner` must outlive it.
class FailingRunner final : public CommandRunner {
 public:
  FailingRunner(CommandRunner* inner, int fail_at) : inner_(inner), fail_at_(fail_at) {}
  Result<std::string> Run(const std::vector<std::string>& argv) override;

 private:
  CommandRunner* inner_;
  int fail_at_;
  int count_ = 0;
};

}  // namespace railyard::vcluster
