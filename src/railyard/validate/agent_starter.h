// Agent starters: how the coordinator (coordinator.h) gets one `railyard validate agent` onto
// every host.
//
//   VclusterStarter   the virtual cluster's exec: the agent runs inside the host's network
//                     namespace (loopback mode: on this machine with the host's address),
//                     exactly as `railyard vcluster exec` runs a command there;
//   TemplateStarter   a command template run by `sh -c`, with {host} and {command}:
//                       ssh      ssh -o BatchMode=yes {host} {command}
//                       srun     srun --nodes=1 --ntasks=1 --nodelist={host} {command}
//                       kubectl  kubectl exec -i {host} -- {command}
//                     or any template given as --agent-command ('pdsh -w {host} {command}').
//
// {command} becomes the agent's command line, `<railyard> validate agent --coordinator
// ADDR:PORT --run ID --host H --secret-stdin`, each word shell-quoted; {host} the host name,
// shell-quoted. For kubectl, {host} is the pod to exec into: with a DaemonSet, map each node
// to its pod first (the host list names the pods, or a template such as
// `kubectl exec -i -n railyard $(kubectl get pod -n railyard -l app=railyard-agent
// --field-selector spec.nodeName={host} -o name) -- {command}`). ssh hands its arguments to
// the remote shell, which splits them again: the agent's words are paths, addresses and names
// that need no quoting there, unless the agent binary's path has spaces.
//
// The job secret never appears on a command line or in an environment: every starter writes
// it, with a newline, to the command's stdin (ssh, srun and kubectl exec -i forward stdin to
// the remote command), and the agent reads it with --secret-stdin.
//
//   RY_ASSIGN_OR_RETURN(auto starter, TemplateStarter::Create("ssh", "railyard"));
//   RY_ASSIGN_OR_RETURN(auto handle, starter->Start(invocation));
//   if (!handle->Running()) log(handle->ExitReason());
//
// Thread-safety: Start may be called from one thread at a time; a handle is used by one
// thread at a time.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/base/subprocess.h"
#include "railyard/validate/coordinator.h"
#include "railyard/vcluster/state.h"

namespace railyard::validate {

// `railyard` (the binary to run) validate agent --coordinator ... --secret-stdin.
std::vector<std::string> AgentCommand(const std::string& railyard, const AgentInvocation& inv);

// base::ShellQuote (subprocess.h), which the agent templates and remediation quote with.
using base::ShellQuote;

// The template of a built-in name ("ssh", "srun", "kubectl"); empty for any other name.
std::string_view BuiltinAgentTemplate(std::string_view name);

// OK when `tmpl` has {command} and {host} and no other {placeholder} (INVALID_ARGUMENT
// naming the placeholder and the nearest valid one otherwise). "${VAR}" is the shell's.
Status CheckAgentTemplate(std::string_view tmpl);

// The shell command line for one agent: placeholders replaced as described above.
// Precondition: CheckAgentTemplate(tmpl).ok().
std::string ExpandAgentTemplate(std::string_view tmpl, std::string_view host,
                                const std::vector<std::string>& command);

// An agent carried by a local child process (the agent itself, or ssh/srun/kubectl).
class ChildAgentHandle final : public AgentHandle {
 public:
  explicit ChildAgentHandle(base::Child child) : child_(std::move(child)) {}
  ~ChildAgentHandle() override { Stop(); }
  bool Running() override;
  std::string ExitReason() override;
  void Stop() override;
  // Waits until the child has ended or `deadline` passes; true when it has ended.
  bool WaitEnded(base::Deadline deadline);

 private:
  base::Child child_;
  bool ended_ = false;
  bool stopped_ = false;  // by Stop, not by itself
  base::ExitInfo exit_;
};

class VclusterStarter final : public AgentStarter {
 public:
  // `railyard`: this binary (cli::SelfExecutable()), which the hosts share with us.
  VclusterStarter(vcluster::ClusterState state, std::string railyard)
      : state_(std::move(state)), railyard_(std::move(railyard)) {}
  // NOT_FOUND naming the host and the cluster's hosts when it is not one of them.
  Result<std::unique_ptr<AgentHandle>> Start(const AgentInvocation& invocation) override;
  std::string Describe() const override;
  // What Start runs, for tests and messages.
  Result<base::SpawnOptions> SpawnFor(const AgentInvocation& invocation) const;

 private:
  vcluster::ClusterState state_;
  std::string railyard_;
};

class TemplateStarter final : public AgentStarter {
 public:
  // `name_or_template`: a built-in name or a template (see above). `railyard`: the binary
  // the hosts run, as they find it ("railyard" from their PATH, or an absolute path).
  static Result<std::unique_ptr<TemplateStarter>> Create(std::string_view name_or_template,
                                                         std::string railyard);
  Result<std::unique_ptr<AgentHandle>> Start(const AgentInvocation& invocation) override;
  std::string Describe() const override { return template_; }
  // What Start runs: sh -c <expanded template>, the secret on stdin.
  base::SpawnOptions SpawnFor(const AgentInvocation& invocation) const;

 private:
  TemplateStarter(std::string tmpl, std::string railyard)
      : template_(std::move(tmpl)), railyard_(std::move(railyard)) {}
  std::string template_;
  std::string railyard_;
};

}  // namespace railyard::validate
