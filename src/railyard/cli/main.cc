// The `railyard` binary: parses the command line, sets up logging, runs one subcommand.
#include <fmt/format.h>

#include <cstdio>
#include <iostream>

#include "railyard/base/logging.h"
#include "railyard/cli/cli_common.h"

namespace railyard::cli {

namespace {

int Main(int argc, char** argv) {
  CLI::App app(
      "Railyard: the platform layer for reliable multi-node AI training.\n"
      "Communication, storage, placement, topology and validation for GPU clusters,\n"
      "runnable on one machine through a built-in virtual cluster.",
      "railyard");
  app.require_subcommand(1);
  app.footer(
      "Examples:\n"
      "  railyard demo                                # the tour, on a 4-host virtual cluster\n"
      "  railyard vcluster up --hosts 8 --leaves 2    # a virtual two-level fabric\n"
      "  railyard vcluster exec node3 -- ip addr      # run a command on a virtual host\n"
      "  railyard vcluster down\n"
      "  railyard topo show --topology topology.conf\n"
      "  railyard place --topology topology.conf --nodes 16 --json\n"
      "  railyard ckpt verify /lustre/run42/ckpt\n\n"
      "Run 'railyard COMMAND --help' for a command's flags. Docs: docs/README.md\n");
  std::string log_level;
  app.add_option("--log-level", log_level,
                 "trace, debug, info, warn (default), error or off; overrides RAILYARD_LOG")
      ->envname("")
      ->type_name("LEVEL");
  app.set_version_flag("--version", "railyard 0.1.0");

  Action action;
  RegisterVclusterCommand(app, &action);
  RegisterProbeCommand(app, &action);
  RegisterDemoCommand(app, &action);
  RegisterTopoCommand(app, &action);
  RegisterDiscoverCommand(app, &action);
  RegisterPlaceCommand(app, &action);
  RegisterServeCommand(app, &action);
  RegisterCkptCommand(app, &action);
  RegisterDataCommand(app, &action);
  RegisterBenchCommand(app, &action);
  RegisterValidateCommand(app, &action);
  RegisterRunCommand(app, &action);

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::string what = e.what();
    fmt::print(stderr,
               "railyard: error: {}\nRun 'railyard --help' (or 'railyard COMMAND --help') "
               "for usage.\n",
               what);
    return 2;
  }

  std::optional<base::LogLevel> level;
  if (!log_level.empty()) {
    auto parsed = base::ParseLogLevel(log_level);
    if (!parsed.ok()) {
      PrintError(parsed.status().WithContext("--log-level"));
      return 2;
    }
    level = *parsed;
  }
  base::InitLogging(level);

  if (!action) {
    PrintError(InvalidArgument("no command given; run 'railyard --help'"));
    return 2;
  }
  Outcome outcome = action();
  if (const int* code = std::get_if<int>(&outcome)) return *code;
  const Status& st = std::get<Status>(outcome);
  if (!st.ok()) PrintError(st);
  return st.ExitCode();
}

}  // namespace
}  // namespace railyard::cli

int main(int argc, char** argv) { return railyard::cli::Main(argc, argv); }
