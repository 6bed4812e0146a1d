// The HTTP face of the scheduler extender, on Railyard's own HttpServer (http_server.h):
//   POST /filter, POST /prioritize   the extender verbs (ExtenderArgs in, see extender.h)
//   POST /bound, POST /unbound       {"group": g, "node": n}: a pod watcher reports bindings;
//                                    authorised (AuthorizeBindingUpdate), as they change state
//   GET  /healthz                    "ok", answered on the event loop even when busy
//   GET  /metrics                    Prometheus text format
//
// Hostile input is refused before it costs much: bodies over the size limit (413), JSON
// nested deeper than max_json_depth (400, before parsing), heads and bodies not complete
// within the request deadline (408), connections over the cap (503). Every refusal is
// counted in /metrics as railyard_extender_invalid_requests_total{reason=...}.
//
// Thread-safety: Serve() blocks on the calling thread; Stop() may be called from any thread.
#pragma once

#include <atomic>
#include <map>
#include <string>
#include <string_view>

#include "railyard/base/status.h"
#include "railyard/http/extender.h"
#include "railyard/http/http_server.h"
#include "railyard/http/json_body.h"

namespace railyard::http {

struct ExtenderServerOptions {
  HttpServerOptions http;
  int max_json_depth = kDefaultMaxJsonDepth;
  // Required as "Authorization: Bearer <token>" on /bound and /unbound. Empty: those two
  // are accepted from loopback peers only (the binding watcher runs in the same pod).
  std::string binding_token;
};

// Whether `request` may change bindings. With a token: PERMISSION_DENIED unless it carries
// "Authorization: Bearer <token>" (compared in constant time). Without one: PERMISSION_DENIED
// unless the peer is a loopback address.
Status AuthorizeBindingUpdate(const HttpRequest& request, std::string_view token);

class ExtenderServer {
 public:
  // `extender` is not owned and must outlive the server.
  explicit ExtenderServer(Extender* extender, ExtenderServerOptions options = {});

  // Binds ADDRESS:PORT (port 0: any free port). UNAVAILABLE naming the address on failure.
  Status Bind(const std::string& address, int port) { return server_.Bind(address, port); }
  int port() const { return server_.port(); }
  // "127.0.0.1:8888", "[::1]:8888": what Bind actually bound.
  const std::string& bound_address() const { return server_.bound_address(); }
  // Serves until Stop().
  Status Serve() { return server_.Serve(); }
  void Stop() { server_.Stop(); }

  // The /metrics body.
  std::string Metrics() const;
  // Refused requests by reason, as in /metrics.
  std::map<std::string, uint64_t> InvalidCounts() const { return server_.InvalidCounts(); }

 private:
  HttpResponse Verb(HttpRequest& request, bool filter);
  HttpResponse Binding(HttpRequest& request, bool bound);
  // A 4xx with {"Error": message}, counted under `reason`.
  HttpResponse Refuse(const HttpRequest& request, int status, std::string_view reason,
                      std::string_view message);

  Extender* extender_;
  ExtenderServerOptions options_;
  HttpServer server_;
  std::atomic<uint64_t> request_nanos_{0};
  std::atomic<uint64_t> requests_{0};
};

}  // namespace railyard::http
