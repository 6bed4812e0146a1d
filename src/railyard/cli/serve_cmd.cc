// `railyard serve --extender`: the Kubernetes scheduler extender over a topology.
#include <fmt/format.h>
#include <pthread.h>
#include <signal.h>

#include <cstdio>
#include <thread>

#include "railyard/base/files.h"
#include "railyard/base/strings.h"
#include "railyard/base/units.h"
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
  std::string token_file;
  int max_connections = 256;
  std::string request_timeout = "10s";
};

// The bearer token for /bound and /unbound: the file's content without surrounding whitespace.
Result<std::string> ReadToken(const std::string& path) {
  auto text = base::ReadFile(path);
  if (!text.ok()) return text.status().WithContext("--token-file");
  std::string_view t = base::StripAsciiWhitespace(*text);
  if (t.empty()) return InvalidArgument("--token-file {}: the file is empty", path);
  if (t.find_first_of(" \t\r\n") != std::string_view::npos) {
    return InvalidArgument("--token-file {}: the token must be one word (no whitespace)", path);
  }
  return std::string(t);
}

Status Serve(const ServeFlags& f) {
  if (!f.extender) {
    return InvalidArgument("nothing to serve: pass --extender (the only service so far)");
  }
  std::string host;
  uint16_t port = 0;
  if (Status s = base::SplitHostPort(f.listen, &host, &port); !s.ok()) {
    return InvalidArgument(
        "--listen {}; for serve, e.g. 127.0.0.1:8888 (this host), 0.0.0.0:8888 (every IPv4 "
        "address) or [::1]:8888",
        s.message());
  }
  if (f.max_connections < 1) {
    return InvalidArgument("--max-connections {}: expected at least 1", f.max_connections);
  }
  auto timeout = base::ParseDuration(f.request_timeout);
  if (!timeout.ok()) return timeout.status().WithContext("--request-timeout");
  if (timeout->count() == 0) return InvalidArgument("--request-timeout must be more than 0");

  http::ExtenderServerOptions options;
  options.http.max_connections = f.max_connections;
  options.http.request_deadline = *timeout;
  if (!f.token_file.empty()) {
    RY_ASSIGN_OR_RETURN(options.binding_token, ReadToken(f.token_file));
  }
  RY_ASSIGN_OR_RETURN(topo::Cluster cluster, topo::LoadTopology(f.topology));
  RY_ASSIGN_OR_RETURN(auto excluded, ReadHostsArg("--exclude", f.exclude));
  http::Extender extender(std::move(cluster), f.group_label);
  extender.SetExcluded({excluded.begin(), excluded.end()});
  http::ExtenderServer server(&extender, options);
  RY_RETURN_IF_ERROR(server.Bind(host, port));

  // Signals are taken by sigwait on this thread; the server thread never sees them.
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  Status served = Status::Ok();
  std::thread thread([&] { served = server.Serve(); });
  fmt::print(
      "railyard extender: {} nodes, listening on {} (POST /filter /prioritize /bound /unbound, "
      "GET /healthz /metrics); /bound and /unbound {}\n",
      extender.cluster().nodes.size(), server.bound_address(),
      f.token_file.empty() ? "from this host only" : "need the bearer token of --token-file");
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
  CLI::App* s =
      app.add_subcommand("serve", "Long-running services: the Kubernetes scheduler extender");
  s->add_flag("--extender", f->extender, "serve the scheduler-extender verbs");
  s->add_option("--topology", f->topology, "topology file (any supported format)")->required();
  s->add_option("--listen", f->listen, "ADDRESS:PORT to listen on ([::1]:PORT for IPv6)")
      ->capture_default_str();
  s->add_option("--group-label", f->group_label, "pod label that names a pod's gang")
      ->capture_default_str();
  s->add_option("--exclude", f->exclude,
                "hosts to fail in /filter: a hostlist (node[01-04]) or @FILE, one per line");
  s->add_option("--token-file", f->token_file,
                "file holding a bearer token that /bound and /unbound require; without it they "
                "are accepted from loopback peers only");
  s->add_option("--max-connections", f->max_connections,
                "connections open at once; one more is answered 503")
      ->capture_default_str();
  s->add_option("--request-timeout", f->request_timeout,
                "time for a client to send a whole request (head and body), e.g. 10s")
      ->capture_default_str();
  s->footer(
      "Example:\n"
      "  railyard serve --extender --topology /etc/railyard/topology.yaml --listen 0.0.0.0:8888\n"
      "Scheduler configuration and manifests: deploy/kubernetes/. Docs: docs/extender.md\n");
  s->callback([f, action] { *action = [f]() -> Outcome { return Serve(*f); }; });
}

}  // namespace railyard::cli
