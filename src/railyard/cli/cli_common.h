// Shared plumbing of the `railyard` subcommands: each command file registers its CLI11
// subcommand and stores the action to run after parsing; actions return a Status that
// main() turns into one "railyard: error: ..." line and an exit code (2 for bad input,
// 1 for failures), or an explicit exit code (`vcluster exec` passes its command's through).
#pragma once

#include <CLI/CLI.hpp>
#include <functional>
#include <string>
#include <variant>
#include <vector>

#include "railyard/base/status.h"

namespace railyard::cli {

// What an action returns: a Status, or an exit code to use as it is.
using Outcome = std::variant<Status, int>;
using Action = std::function<Outcome()>;

// Each Register* adds one top-level subcommand to `app`; when it is chosen on the command
// line its callback stores the work in *action.
void RegisterVclusterCommand(CLI::App& app, Action* action);
void RegisterProbeCommand(CLI::App& app, Action* action);
void RegisterDemoCommand(CLI::App& app, Action* action);
void RegisterTopoCommand(CLI::App& app, Action* action);
void RegisterDiscoverCommand(CLI::App& app, Action* action);
void RegisterPlaceCommand(CLI::App& app, Action* action);
void RegisterServeCommand(CLI::App& app, Action* action);
void RegisterBenchCommand(CLI::App& app, Action* action);
// `bench comm` (bench_comm_cmd.cc), added under `bench` by RegisterBenchCommand.
void RegisterBenchCommCommand(CLI::App* bench, Action* action);
// `bench validate` (bench_validate_cmd.cc), likewise.
void RegisterBenchValidateCommand(CLI::App* bench, Action* action);
// `bench recover` (bench_recover_cmd.cc), likewise.
void RegisterBenchRecoverCommand(CLI::App* bench, Action* action);
void RegisterCkptCommand(CLI::App& app, Action* action);
void RegisterDataCommand(CLI::App& app, Action* action);
void RegisterValidateCommand(CLI::App& app, Action* action);
void RegisterRunCommand(CLI::App& app, Action* action);

// Absolute path of the running railyard binary (for starting probes in namespaces).
std::string SelfExecutable();

// Host names from a flag value: a comma list or Slurm hostlist expression (node[01-04]),
// or @FILE with one such expression per line (# comments). Errors name the flag (and the
// file and line).
Result<std::vector<std::string>> ReadHostsArg(const std::string& flag, const std::string& spec);

// Prints "railyard: error: <message>" to stderr.
void PrintError(const Status& status);

}  // namespace railyard::cli
