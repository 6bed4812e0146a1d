#include "railyard/http/server.h"

#include <fmt/format.h>

#include <chrono>

#include "railyard/base/hmac.h"
#include "railyard/base/logging.h"

namespace railyard::http {

using nlohmann::json;

namespace {

base::Logger& Log() {
  static base::Logger log("extender");
  return log;
}

// Listed in /metrics even at zero, so a dashboard sees every series from the start.
constexpr std::string_view kInvalidReasons[] = {
    "bad_http",           "body_too_large", "busy",           "connection_limit",
    "header_too_large",   "invalid_args",   "malformed_json", "not_found",
    "method_not_allowed", "timeout",        "too_deep",       "unauthorized"};

HttpResponse JsonResponse(int status, const json& body) {
  return {status, "application/json", DumpJson(body), {}};
}

}  // namespace

Status AuthorizeBindingUpdate(const HttpRequest& request, std::string_view token) {
  if (token.empty()) {
    if (request.peer_is_loopback) return Status::Ok();
    return PermissionDenied(
        "{} {} from {}: binding updates are accepted from this host only unless the server "
        "was started with --token-file",
        request.method, request.path, request.peer);
  }
  const std::string* auth = request.Header("authorization");
  constexpr std::string_view kBearer = "Bearer ";
  if (auth == nullptr || auth->compare(0, kBearer.size(), kBearer) != 0) {
    return PermissionDenied("{} {} from {}: expected 'Authorization: Bearer <token>'",
                            request.method, request.path, request.peer);
  }
  if (!base::ConstantTimeEqual(std::string_view(*auth).substr(kBearer.size()), token)) {
    return PermissionDenied("{} {} from {}: the bearer token does not match", request.method,
                            request.path, request.peer);
  }
  return Status::Ok();
}

ExtenderServer::ExtenderServer(Extender* extender, ExtenderServerOptions options)
    : extender_(extender), options_(std::move(options)), server_(options_.http) {
  server_.Route("POST", "/filter", [this](HttpRequest& r) { return Verb(r, true); });
  server_.Route("POST", "/prioritize", [this](HttpRequest& r) { return Verb(r, false); });
  server_.Route("POST", "/bound", [this](HttpRequest& r) { return Binding(r, true); });
  server_.Route("POST", "/unbound", [this](HttpRequest& r) { return Binding(r, false); });
  server_.Route(
      "GET", "/healthz",
      [](HttpRequest&) {
        return HttpResponse{200, "text/plain", "ok\n", {}};
      },
      /*on_loop=*/true);
  // Not on the loop: it takes the extender's lock, which a long /filter may hold.
  server_.Route("GET", "/metrics", [this](HttpRequest&) {
    return HttpResponse{200, "text/plain; version=0.0.4", Metrics(), {}};
  });
}

HttpResponse ExtenderServer::Refuse(const HttpRequest& request, int status, std::string_view reason,
                                    std::string_view message) {
  server_.CountInvalid(reason);
  Log().Debug("{} from {}: {}", request.path, request.peer, message);
  return JsonResponse(status, json{{"Error", message}});
}

HttpResponse ExtenderServer::Verb(HttpRequest& request, bool filter) {
  const auto start = std::chrono::steady_clock::now();
  HttpResponse response;
  auto body = ParseJsonBody(request.body, options_.max_json_depth);
  std::string().swap(request.body);
  if (!body.ok()) {
    const bool deep = body.status().code() == StatusCode::kResourceExhausted;
    response = Refuse(request, 400, deep ? "too_deep" : "malformed_json", body.status().message());
  } else {
    Result<json> out = filter ? extender_->Filter(std::move(*body)) : extender_->Prioritize(*body);
    if (out.ok()) {
      response = JsonResponse(200, *out);
    } else {
      response = Refuse(request, 400, "invalid_args", out.status().message());
    }
  }
  requests_.fetch_add(1);
  request_nanos_.fetch_add(static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - start)
          .count()));
  return response;
}

HttpResponse ExtenderServer::Binding(HttpRequest& request, bool bound) {
  if (Status auth = AuthorizeBindingUpdate(request, options_.binding_token); !auth.ok()) {
    const bool with_token = !options_.binding_token.empty();
    HttpResponse r = Refuse(request, with_token ? 401 : 403, "unauthorized", auth.message());
    if (with_token) r.headers.emplace_back("WWW-Authenticate", "Bearer");
    return r;
  }
  auto body = ParseJsonBody(request.body, options_.max_json_depth);
  if (!body.ok()) {
    const bool deep = body.status().code() == StatusCode::kResourceExhausted;
    return Refuse(request, 400, deep ? "too_deep" : "malformed_json", body.status().message());
  }
  const json* group = FindKey(*body, "group");
  const json* node = FindKey(*body, "node");
  if (!group || !node || !group->is_string() || !node->is_string()) {
    return Refuse(request, 400, "invalid_args", "expected {\"group\": ..., \"node\": ...}");
  }
  Status st = Status::Ok();
  if (bound) {
    st = extender_->RecordBound(*group, *node);
  } else {
    extender_->ForgetBound(*group, *node);
  }
  if (!st.ok()) return Refuse(request, 400, "invalid_args", st.message());
  return JsonResponse(200, json{{"Error", ""}});
}

std::string ExtenderServer::Metrics() const {
  ExtenderCounters c = extender_->counters();
  std::map<std::string, uint64_t> invalid = server_.InvalidCounts();
  for (std::string_view reason : kInvalidReasons) invalid.try_emplace(std::string(reason), 0);
  std::string out;
  out += "# HELP railyard_extender_requests_total Extender verb requests.\n";
  out += "# TYPE railyard_extender_requests_total counter\n";
  out += fmt::format("railyard_extender_requests_total{{verb=\"filter\"}} {}\n", c.filter_requests);
  out += fmt::format("railyard_extender_requests_total{{verb=\"prioritize\"}} {}\n",
                     c.prioritize_requests);
  out += "# HELP railyard_extender_invalid_requests_total Requests refused, by reason.\n";
  out += "# TYPE railyard_extender_invalid_requests_total counter\n";
  for (const auto& [reason, count] : invalid) {
    out += fmt::format("railyard_extender_invalid_requests_total{{reason=\"{}\"}} {}\n", reason,
                       count);
  }
  out += "# HELP railyard_extender_open_connections HTTP connections open now.\n";
  out += "# TYPE railyard_extender_open_connections gauge\n";
  out += fmt::format("railyard_extender_open_connections {}\n", server_.open_connections());
  out += "# HELP railyard_extender_nodes_filtered_out_total Nodes failed by /filter.\n";
  out += "# TYPE railyard_extender_nodes_filtered_out_total counter\n";
  out += fmt::format("railyard_extender_nodes_filtered_out_total {}\n", c.nodes_filtered_out);
  out += "# HELP railyard_extender_request_seconds Time spent answering verbs.\n";
  out += "# TYPE railyard_extender_request_seconds summary\n";
  out += fmt::format("railyard_extender_request_seconds_sum {:.6f}\n",
                     static_cast<double>(request_nanos_.load()) / 1e9);
  out += fmt::format("railyard_extender_request_seconds_count {}\n", requests_.load());
  out += "# HELP railyard_extender_bound_pods (gang, node) pairs with at least one bound pod.\n";
  out += "# TYPE railyard_extender_bound_pods gauge\n";
  out += fmt::format("railyard_extender_bound_pods {}\n", extender_->bound_pods());
  out += "# HELP railyard_topology_nodes Nodes in the loaded topology.\n";
  out += "# TYPE railyard_topology_nodes gauge\n";
  out += fmt::format("railyard_topology_nodes {}\n", extender_->cluster().nodes.size());
  return out;
}

}  // namespace railyard::http
