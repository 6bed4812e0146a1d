#include "railyard/cli/agents_common.h"

#include <fmt/format.h>
#include <poll.h>
#include <unistd.h>

#include <cstdlib>

#include "railyard/base/files.h"
#include "railyard/base/hmac.h"
#include "railyard/base/strings.h"
#include "railyard/base/units.h"
#include "railyard/cli/cli_common.h"
#include "railyard/validate/agent.h"

namespace railyard::cli {

namespace v = railyard::validate;

Result<std::chrono::milliseconds> ParseTimeout(std::string_view flag, const std::string& text) {
  auto d = base::ParseDuration(text);
  if (!d.ok() || *d < std::chrono::milliseconds(100) || *d > std::chrono::hours(24)) {
    return InvalidArgument("{} {}: expected a duration from 100ms to 24h (5s, 2m)", flag, text);
  }
  return std::chrono::duration_cast<std::chrono::milliseconds>(*d);
}

Result<std::string> ReadJobSecret(const std::string& secret_file, bool may_make) {
  std::string secret;
  if (!secret_file.empty()) {
    auto text = base::ReadFile(secret_file);
    if (!text.ok()) return text.status().WithContext("--secret-file");
    secret = std::string(base::StripAsciiWhitespace(*text));
    if (secret.empty()) return InvalidArgument("--secret-file {}: the file is empty", secret_file);
  } else if (const char* env = std::getenv(kJobSecretEnv); env != nullptr && *env) {
    secret = std::string(base::StripAsciiWhitespace(env));
  } else if (may_make) {
    secret = base::ToHex(base::RandomBytes(16));
  }
  return secret;
}

Result<std::pair<std::string, int>> StoreListenAddress(const std::string& listen,
                                                       bool external_agents,
                                                       const v::HostList& list) {
  if (!listen.empty()) {
    std::string ip;
    uint16_t port = 0;
    Status st = base::SplitHostPort(listen, &ip, &port);
    if (!st.ok()) return st.WithContext("--listen");
    return std::pair{ip, static_cast<int>(port)};
  }
  if (external_agents) {
    return InvalidArgument(
        "--agents external: give --listen ADDR:PORT, the address the running agents dial");
  }
  if (list.vcluster) {
    // `vcluster up` records where the hosts reach the root namespace (the spine bridge's
    // address; 127.0.0.1 in loopback mode).
    if (!list.vcluster->control_address.empty()) {
      return std::pair{list.vcluster->control_address, 0};
    }
    if (list.vcluster->spec().mode == vcluster::Mode::kLoopback) {
      return std::pair{std::string("127.0.0.1"), 0};
    }
    return FailedPrecondition(
        "virtual cluster '{}' records no control address (brought up by an older railyard?): "
        "give --listen ADDR:PORT with an address of this machine its hosts route to",
        list.vcluster->spec().prefix);
  }
  std::string first = list.addresses[0].empty() ? list.hosts[0] : list.addresses[0];
  auto local = v::AgentAddress(first + ":9");
  if (!local.ok()) {
    return local.status().WithContext(fmt::format(
        "finding this machine's address towards {} (give --listen ADDR:PORT)", list.hosts[0]));
  }
  return std::pair{*local, 0};
}

Result<std::unique_ptr<v::AgentStarter>> MakeAgentStarter(const std::string& agents,
                                                          const std::string& agent_command,
                                                          const std::string& agent_binary,
                                                          const v::HostList& list) {
  std::string railyard = agent_binary.empty() ? SelfExecutable() : agent_binary;
  if (!agent_command.empty()) {
    RY_ASSIGN_OR_RETURN(auto t, v::TemplateStarter::Create(agent_command, railyard));
    return std::unique_ptr<v::AgentStarter>(std::move(t));
  }
  if (agents == "external") return std::unique_ptr<v::AgentStarter>();
  if (agents == "vcluster") {
    if (!list.vcluster) {
      return InvalidArgument(
          "--agents vcluster: --hosts {} is not a virtual cluster (give --hosts vcluster)",
          list.spec);
    }
    return std::unique_ptr<v::AgentStarter>(new v::VclusterStarter(*list.vcluster, railyard));
  }
  RY_ASSIGN_OR_RETURN(auto t, v::TemplateStarter::Create(agents, railyard));
  return std::unique_ptr<v::AgentStarter>(std::move(t));
}

Result<std::string> ReadStdinLine(base::Deadline deadline) {
  std::string text;
  for (;;) {
    pollfd p{STDIN_FILENO, POLLIN, 0};
    int r = ::poll(&p, 1, deadline.PollTimeoutMs());
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return ErrnoStatus(errno, "reading stdin");
    if (r == 0) return DeadlineExceeded("no line on stdin before the deadline");
    char buf[256];
    ssize_t n = ::read(STDIN_FILENO, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, "reading stdin");
    if (n == 0) return text;
    text.append(buf, static_cast<size_t>(n));
    if (size_t nl = text.find('\n'); nl != std::string::npos) return text.substr(0, nl);
    if (text.size() > 4096) return InvalidArgument("stdin: a line longer than 4096 bytes");
  }
}

std::optional<int> LocalHostCount(const std::string& spec) {
  if (spec == "local") return 1;
  if (!spec.starts_with("local:")) return std::nullopt;
  std::string digits = spec.substr(6);
  if (digits.empty() || digits.size() > 4) return 0;
  int n = 0;
  for (char c : digits) {
    if (c < '0' || c > '9') return 0;
    n = n * 10 + (c - '0');
  }
  return n;
}

}  // namespace railyard::cli
