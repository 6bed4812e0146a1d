#include "railyard/vcluster/command_runner.h"

#include "railyard/base/logging.h"
#include "railyard/base/subprocess.h"

namespace railyard::vcluster {
namespace {

class SystemRunner final : public CommandRunner {
 public:
  explicit SystemRunner(base::Duration per_command) : per_command_(per_command) {}

  Result<std::string> Run(const std::vector<std::string>& argv) override {
    log_.Debug("run: {}", base::CommandLine(argv));
    base::SpawnOptions opts{.argv = argv, .env = {{"LC_ALL", "C"}}};
    RY_ASSIGN_OR_RETURN(base::ExitInfo info,
                        base::RunChecked(opts, base::Deadline::After(per_command_)));
    return std::move(info.stdout_text);
  }

 private:
  base::Duration per_command_;
  base::Logger log_{"vcluster"};
};

}  // namespace

std::unique_ptr<CommandRunner> MakeSystemRunner(base::Duration per_command) {
  return std::make_unique<SystemRunner>(per_command);
}

Result<std::string> FailingRunner::Run(const std::vector<std::string>& argv) {
  if (++count_ == fail_at_) {
    return Internal("injected failure at command {} ('{}')", count_, argv.empty() ? "" : argv[0]);
  }
  return inner_->Run(argv);
}

}  // namespace railyard::vcluster
