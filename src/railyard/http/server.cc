#include "railyard/http/server.h"

#include <chrono>

#include <fmt/format.h>
#include <httplib.h>

#include "railyard/base/logging.h"

namespace railyard::http {

using nlohmann::json;

namespace {
constexpr size_t kMaxBody = 16u << 20;
base::Logger& Log() {
  static base::Logger log("extender");
  return log;
}
}  // namespace

ExtenderServer::ExtenderServer(Extender* extender)
    : extender_(extender), server_(std::make_unique<httplib::Server>()) {
  auto& s = *server_;
  s.set_payload_max_length(kMaxBody);
  // cpp-httplib's default also sets SO_REUSEPORT, which lets a second server silently share
  // the port; a busy port must be an error instead.
  s.set_socket_options([](socket_t sock) {
    int yes = 1;
    ::setsockopt(sock, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
  });
  s.set_read_timeout(10, 0);
  s.set_write_timeout(10, 0);

  auto verb = [this](const char* path, Result<json> (Extender::*fn)(const json&)) {
    server_->Post(path, [this, fn, path](const httplib::Request& req, httplib::Response& res) {
      auto start = std::chrono::steady_clock::now();
      json body = json::parse(req.body, nullptr, /*allow_exceptions=*/false);
      Result<json> out = body.is_discarded()
                             ? Result<json>(InvalidArgument("request body is not valid JSON"))
                             : (extender_->*fn)(body);
      if (out.ok()) {
        res.set_content(out->dump(), "application/json");
      } else {
        Log().Warn("{} from {}: {}", path, req.remote_addr, out.status().message());
        res.status = 400;
        res.set_content(json{{"Error", out.status().message()}}.dump(), "application/json");
      }
      requests_.fetch_add(1);
      request_nanos_.fetch_add(static_cast<uint64_t>(
          std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() -
                                                               start)
              .count()));
    });
  };
  verb("/filter", &Extender::Filter);
  verb("/prioritize", &Extender::Prioritize);

  for (bool bound : {true, false}) {
    s.Post(bound ? "/bound" : "/unbound",
           [this, bound](const httplib::Request& req, httplib::Response& res) {
             json body = json::parse(req.body, nullptr, false);
             const json* group = FindKey(body, "group");
             const json* node = FindKey(body, "node");
             if (!group || !node || !group->is_string() || !node->is_string()) {
               res.status = 400;
               res.set_content(json{{"Error", "expected {\"group\": ..., \"node\": ...}"}}.dump(),
                               "application/json");
               return;
             }
             Status st = Status::Ok();
             if (bound) st = extender_->RecordBound(*group, *node);
             else extender_->ForgetBound(*group, *node);
             if (!st.ok()) {
               res.status = 400;
               res.set_content(json{{"Error", st.message()}}.dump(), "application/json");
               return;
             }
             res.set_content(json{{"Error", ""}}.dump(), "application/json");
           });
  }
  s.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  s.Get("/metrics", [this](const httplib::Request&, httplib::Response& res) {
    res.set_content(Metrics(), "text/plain; version=0.0.4");
  });
}

ExtenderServer::~ExtenderServer() { Stop(); }

Status ExtenderServer::Bind(const std::string& address, int port) {
  if (port == 0) {
    port_ = server_->bind_to_any_port(address.c_str());
    if (port_ < 0) return Unavailable("cannot listen on {} (any port)", address);
    return Status::Ok();
  }
  if (!server_->bind_to_port(address.c_str(), port)) {
    return Unavailable("cannot listen on {}:{} (in use, or not an address of this host)",
                       address, port);
  }
  port_ = port;
  return Status::Ok();
}

Status ExtenderServer::Serve() {
  if (!server_->listen_after_bind()) return Unavailable("extender server stopped with an error");
  return Status::Ok();
}

void ExtenderServer::Stop() {
  if (server_) server_->stop();
}

std::string ExtenderServer::Metrics() const {
  ExtenderCounters c = extender_->counters();
  std::string out;
  out += "# HELP railyard_extender_requests_total Extender verb requests.\n";
  out += "# TYPE railyard_extender_requests_total counter\n";
  out += fmt::format("railyard_extender_requests_total{{verb=\"filter\"}} {}\n", c.filter_requests);
  out += fmt::format("railyard_extender_requests_total{{verb=\"prioritize\"}} {}\n",
                     c.prioritize_requests);
  out += "# HELP railyard_extender_bad_requests_total Requests rejected as malformed.\n";
  out += "# TYPE railyard_extender_bad_requests_total counter\n";
  out += fmt::format("railyard_extender_bad_requests_total {}\n", c.bad_requests);
  out += "# HELP railyard_extender_nodes_filtered_out_total Nodes failed by /filter.\n";
  out += "# TYPE railyard_extender_nodes_filtered_out_total counter\n";
  out += fmt::format("railyard_extender_nodes_filtered_out_total {}\n", c.nodes_filtered_out);
  out += "# HELP railyard_extender_request_seconds Time spent answering verbs.\n";
  out += "# TYPE railyard_extender_request_seconds summary\n";
  out += fmt::format("railyard_extender_request_seconds_sum {:.6f}\n",
                     static_cast<double>(request_nanos_.load()) / 1e9);
  out += fmt::format("railyard_extender_request_seconds_count {}\n", requests_.load());
  out += "# HELP railyard_extender_bound_pods Pods known to be bound, by all groups.\n";
  out += "# TYPE railyard_extender_bound_pods gauge\n";
  out += fmt::format("railyard_extender_bound_pods {}\n", extender_->bound_pods());
  out += "# HELP railyard_topology_nodes Nodes in the loaded topology.\n";
  out += "# TYPE railyard_topology_nodes gauge\n";
  out += fmt::format("railyard_topology_nodes {}\n", extender_->cluster().nodes.size());
  return out;
}

}  // namespace railyard::http
