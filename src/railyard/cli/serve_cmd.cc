// `railyard serve --extender`: the Kubernetes scheduler extender over a topology.
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <thread>

#include <fmt/format.h>

#include "railyard/cli/cli_common.h"
#include "railyard/http/server.h"
#include "railyard/topo/load.h"

namespace railyard::cli {
namespace {

struct ServeFlags {
  bool extender = false;
  std::string topology;
  std::string listen = "127.0.0.1:8888";
  std::string group_label = "railyard.io/group";
  std::string exclude;
};

Status Serve(const ServeFlags& f) {
  if (!f.extender) {
    return InvalidArgument("nothing to serve: pass --extender (the only service so far)");
  }
  std::string host;
  int port = 0;
  auto colon = f.listen.rfind(':');
  if (colon == std::string::npos) {
    return InvalidArgument("--listen '{}': expected ADDRESS:PORT, e.g. 0.0.0.0:8888", f.listen);
  }
  host = f.listen.substr(0, colon);
  try {
    port = std::stoi(f.listen.substr(colon + 1));
  } catch (...) {
    port = -1;
  }
  if (port < 0 || port > 65535) {
    return InvalidArgument("--listen '{}': port is not a number from 0 to 65535", f.listen);
  }
  RY_ASSIGN_OR_RETURN(topo::Cluster cluster, topo::LoadTopology(f.topology));
  RY_ASSIGN_OR_RETURN(auto excluded, ReadHostsArg("--exclude", f.exclude));
  http::Extender extender(std::move(cluster), f.group_label);
  extender.SetExcluded({excluded.begin(), excluded.end()});
  http::ExtenderServer server(&extender);
  RY_RETURN_IF_ERROR(server.Bind(host, port));

  // Signals are taken by sigwait on this thread; the server thread never sees them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  Status served = Status::Ok();
  std::thread thread([&] { served = server.Serve(); });
  fmt::print("railyard extender: {} nodes, listening on {}:{} (POST /filter /prioritize /bound, "
             "GET /healthz /metrics)\n",
             extender.cluster().nodes.size(), host, server.port());
  std::fflush(stdout);
  int sig = 0;
  sigwait(&set, &sig);
  fmt::print("railyard extender: stopping on signal {}\n", sig);
  server.Stop();
  thread.join();
  return served;
}

}  // namespace

void RegisterServeCommand(CLI::App& app, Action* action) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* s = app.add_subcommand("serve", "Long-running services: the Kubernetes scheduler extender");
  s->add_flag("--extender", f->extender, "serve the scheduler-extender verbs");
  s->add_option("--topology", f->topology, "topology file (any supported format)")->required();
  s->add_option("--listen", f->listen, "ADDRESS:PORT to listen on")->capture_default_str();
  s->add_option("--group-label", f->group_label, "pod label that names a pod's gang")
      ->capture_default_str();
  s->add_option("--exclude", f->exclude,
                "hosts to fail in /filter: a hostlist (node[01-04]) or @FILE, one per line");
  s->footer(
      "Example:\n"
      "  railyard serve --extender --topology /etc/railyard/topology.yaml --listen 0.0.0.0:8888\n"
      "Scheduler configuration and manifests: deploy/kubernetes/. Docs: docs/extender.md\n");
  s->callback([f, action] {
    *action = [f]() -> Outcome { return Serve(*f); };
  });
}

}  // namespace railyard::cli
