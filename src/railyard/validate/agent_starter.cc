#include "railyard/validate/agent_starter.h"

#include <fmt/format.h>
#include <signal.h>
#include <string.h>

#include <array>
#include <utility>

#include "railyard/validate/registry.h"
#include "railyard/vcluster/bandwidth_matrix.h"

namespace railyard::validate {
namespace {

constexpr std::array<std::pair<std::string_view, std::string_view>, 3> kBuiltins = {{
    {"ssh", "ssh -o BatchMode=yes {host} {command}"},
    {"srun", "srun --nodes=1 --ntasks=1 --nodelist={host} {command}"},
    {"kubectl", "kubectl exec -i {host} -- {command}"},
}};

constexpr std::array<std::string_view, 2> kPlaceholders = {"host", "command"};

// Calls `each(start, end, name)` for every "{name}" (name of letters and '_') not preceded
// by '$'.
template <typename F>
void ForEachPlaceholder(std::string_view tmpl, F each) {
  for (size_t open = tmpl.find('{'); open != std::string_view::npos;
       open = tmpl.find('{', open + 1)) {
    size_t close = tmpl.find('}', open);
    if (close == std::string_view::npos) return;
    std::string_view name = tmpl.substr(open + 1, close - open - 1);
    bool word = !name.empty();
    for (char c : name) word = word && (std::isalpha(static_cast<unsigned char>(c)) || c == '_');
    if (!word || (open > 0 && tmpl[open - 1] == '$')) continue;
    each(open, close + 1, name);
  }
}

std::string LastLine(std::string_view text) {
  text = text.substr(0, text.find_last_not_of(" \n\t\r") + 1);
  size_t nl = text.rfind('\n');
  return std::string(nl == std::string_view::npos ? text : text.substr(nl + 1));
}

}  // namespace

std::vector<std::string> AgentCommand(const std::string& railyard, const AgentInvocation& inv) {
  if (!inv.agent_args.empty()) {
    std::vector<std::string> command = {railyard};
    command.insert(command.end(), inv.agent_args.begin(), inv.agent_args.end());
    return command;
  }
  return {railyard, "validate", "agent",  "--coordinator", inv.store_address,
          "--run",  inv.run_id, "--host", inv.host,        "--secret-stdin"};
}

std::string_view BuiltinAgentTemplate(std::string_view name) {
  for (const auto& [n, t] : kBuiltins) {
    if (n == name) return t;
  }
  return {};
}

Status CheckAgentTemplate(std::string_view tmpl) {
  Status bad = Status::Ok();
  bool host = false, command = false;
  ForEachPlaceholder(tmpl, [&](size_t, size_t, std::string_view name) {
    if (name == "host") {
      host = true;
    } else if (name == "command") {
      command = true;
    } else if (bad.ok()) {
      std::string near =
          NearestName(name, std::vector<std::string>(kPlaceholders.begin(), kPlaceholders.end()));
      bad = InvalidArgument(
          "agent command template '{}': unknown placeholder {{{}}}{} (expected {{host}} and "
          "{{command}})",
          tmpl, name, near.empty() ? "" : fmt::format(" (did you mean {{{}}}?)", near));
    }
  });
  RY_RETURN_IF_ERROR(bad);
  if (!host || !command) {
    return InvalidArgument(
        "agent command template '{}': expected {} (for example 'ssh {{host}} "
        "{{command}}')",
        tmpl,
        !command ? "{command}, where the agent's command line goes"
                 : "{host}, where the host's name goes");
  }
  return Status::Ok();
}

std::string ExpandAgentTemplate(std::string_view tmpl, std::string_view host,
                                const std::vector<std::string>& command) {
  std::string line;
  for (const std::string& word : command) line += (line.empty() ? "" : " ") + ShellQuote(word);
  std::string out;
  size_t from = 0;
  ForEachPlaceholder(tmpl, [&](size_t start, size_t end, std::string_view name) {
    out.append(tmpl.substr(from, start - from));
    out += name == "host" ? ShellQuote(host) : line;
    from = end;
  });
  out.append(tmpl.substr(from));
  return out;
}

bool ChildAgentHandle::Running() {
  // A wait that returns at once: reaps the child when it has ended and drains its pipes,
  // so that an agent writing to stderr never blocks on a full pipe while we poll it.
  return !WaitEnded(base::Deadline::After(std::chrono::milliseconds(0)));
}

bool ChildAgentHandle::WaitEnded(base::Deadline deadline) {
  if (ended_) return true;
  auto done = child_.Wait(deadline);
  if (!done.ok()) {
    if (done.status().code() == StatusCode::kDeadlineExceeded) return false;
    exit_ = child_.KillAndReap();
    exit_.stderr_text += done.status().ToString();
  } else {
    exit_ = std::move(*done);
  }
  ended_ = true;
  return true;
}

std::string ChildAgentHandle::ExitReason() {
  if (Running()) return "still running";
  std::string how;
  if (stopped_) {
    how = "stopped by the coordinator";
  } else if (exit_.signal != 0) {
    const char* name = sigabbrev_np(exit_.signal);
    how = fmt::format("killed by SIG{}", name ? name : std::to_string(exit_.signal));
  } else {
    how = fmt::format("exited with {}", exit_.exit_code);
  }
  std::string last = LastLine(exit_.stderr_text);
  if (last.empty()) last = LastLine(exit_.stdout_text);
  return last.empty() ? how : fmt::format("{}: {}", how, last);
}

void ChildAgentHandle::Stop() {
  if (!Running()) return;
  exit_ = child_.KillAndReap();
  ended_ = true;
  stopped_ = true;
}

Result<base::SpawnOptions> VclusterStarter::SpawnFor(const AgentInvocation& invocation) const {
  const vcluster::HostPlan* host = state_.plan.FindHost(invocation.host);
  if (host == nullptr) {
    return NotFound("host '{}' is not in virtual cluster '{}' ({})", invocation.host,
                    state_.spec().prefix, state_.plan.HostList());
  }
  vcluster::HostExecution exec = vcluster::ExecutionFor(state_, *host);
  base::SpawnOptions s;
  s.argv = AgentCommand(railyard_, invocation);
  s.netns_path = exec.netns_path;
  s.env = exec.env;
  // As `bench comm` runs ranks there: inside a host's namespace its one link is eth0; in
  // loopback mode every host is an address on lo. The collective check runs comm/ there.
  const bool loopback = exec.netns_path.empty();
  s.env.push_back({"RAILYARD_SOCKET_IFNAME", loopback ? "=lo" : "=eth0"});
  s.env.push_back({"RAILYARD_OFI_DOMAIN", loopback ? "lo" : "eth0"});
  s.stdin_data = invocation.secret + "\n";
  return s;
}

Result<std::unique_ptr<AgentHandle>> VclusterStarter::Start(const AgentInvocation& invocation) {
  RY_ASSIGN_OR_RETURN(base::SpawnOptions s, SpawnFor(invocation));
  auto child = base::Child::Spawn(s);
  if (!child.ok()) {
    return child.status().WithContext(fmt::format("starting the agent of {}", invocation.host));
  }
  return std::unique_ptr<AgentHandle>(new ChildAgentHandle(std::move(*child)));
}

std::string VclusterStarter::Describe() const {
  return fmt::format("vcluster exec ({}, {} mode)", state_.spec().prefix,
                     vcluster::ModeName(state_.spec().mode));
}

Result<std::unique_ptr<TemplateStarter>> TemplateStarter::Create(std::string_view name_or_template,
                                                                 std::string railyard) {
  std::string_view tmpl = BuiltinAgentTemplate(name_or_template);
  if (!tmpl.empty()) {
    // A missing tool is one line now, not one exit 127 per host later.
    std::string tool(name_or_template);
    if (base::FindInPath(tool).empty()) {
      return FailedPrecondition("--agents {}: '{}' is not installed here (not found in PATH)", tool,
                                tool);
    }
  } else {
    tmpl = name_or_template;
    RY_RETURN_IF_ERROR(CheckAgentTemplate(tmpl));
  }
  if (railyard.empty()) return InvalidArgument("agent starter: empty railyard binary path");
  return std::unique_ptr<TemplateStarter>(new TemplateStarter(std::string(tmpl), railyard));
}

base::SpawnOptions TemplateStarter::SpawnFor(const AgentInvocation& invocation) const {
  base::SpawnOptions s;
  s.argv = {"sh", "-c",
            ExpandAgentTemplate(template_, invocation.host, AgentCommand(railyard_, invocation))};
  s.stdin_data = invocation.secret + "\n";
  return s;
}

Result<std::unique_ptr<AgentHandle>> TemplateStarter::Start(const AgentInvocation& invocation) {
  auto child = base::Child::Spawn(SpawnFor(invocation));
  if (!child.ok()) {
    return child.status().WithContext(fmt::format("starting the agent of {}", invocation.host));
  }
  return std::unique_ptr<AgentHandle>(new ChildAgentHandle(std::move(*child)));
}

}  // namespace railyard::validate
