// Flags and plumbing shared by the commands that start one agent per host and serve them a
// rendezvous store: `railyard validate` (its coordinator and `validate agent`) and
// `railyard run` (its launcher and `run agent`).
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"
#include "railyard/validate/agent_starter.h"
#include "railyard/validate/host_list.h"

namespace railyard::cli {

inline constexpr const char* kJobSecretEnv = "RAILYARD_JOB_SECRET";

// A duration flag from 100ms to 24h ("5s", "2m"); INVALID_ARGUMENT naming the flag.
Result<std::chrono::milliseconds> ParseTimeout(std::string_view flag, const std::string& text);

// The job secret: --secret-file, else $RAILYARD_JOB_SECRET, else (only when `may_make`) a
// fresh random one, as `bench comm` makes its ranks'; "" when none and !may_make.
// Surrounding whitespace is dropped.
Result<std::string> ReadJobSecret(const std::string& secret_file, bool may_make);

// Where the store listens: `listen` (ADDR:PORT), else the virtual cluster's control address,
// else this machine's address on the route to the first host (any free port). Agents that
// are started elsewhere (`external_agents`) need `listen`: they dial a known address.
Result<std::pair<std::string, int>> StoreListenAddress(const std::string& listen,
                                                       bool external_agents,
                                                       const validate::HostList& list);

// The starter for `agents` (vcluster, ssh, srun, kubectl, external: none) or the template
// `agent_command`; `agent_binary` is the railyard the hosts run (default: this binary).
Result<std::unique_ptr<validate::AgentStarter>> MakeAgentStarter(const std::string& agents,
                                                                 const std::string& agent_command,
                                                                 const std::string& agent_binary,
                                                                 const validate::HostList& list);

// `local:N` (or `local`, 1): the number of pretend hosts of this machine (local0, local1,
// ...) that `railyard run --hosts` and `bench recover` take; nullopt for any other spec, 0 for
// `local:` followed by something that is not a number up to 9999.
std::optional<int> LocalHostCount(const std::string& spec);

// The first line of stdin (the starters write the secret and a newline), or what came before
// EOF. DEADLINE_EXCEEDED when nothing ends the line by `deadline`: a terminal left open must
// not hold the agent forever.
Result<std::string> ReadStdinLine(base::Deadline deadline);

}  // namespace railyard::cli
