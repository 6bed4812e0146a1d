// The HTTP face of the scheduler extender (cpp-httplib):
//   POST /filter, POST /prioritize   the extender verbs (ExtenderArgs in, see extender.h)
//   POST /bound, POST /unbound       {"group": g, "node": n}: a pod watcher reports bindings
//   GET  /healthz                    "ok"
//   GET  /metrics                    Prometheus text format
// Bodies larger than 16 MiB are refused; malformed JSON gets 400 and {"Error": "..."}.
//
// Thread-safety: Serve() blocks on the calling thread; Stop() may be called from any thread.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "railyard/base/status.h"
#include "railyard/http/extender.h"

namespace httplib {
class Server;
}

namespace railyard::http {

class ExtenderServer {
 public:
  // `extender` is not owned and must outlive the server.
  explicit ExtenderServer(Extender* extender);
  ~ExtenderServer();

  // Binds ADDRESS:PORT (port 0: any free port). UNAVAILABLE naming the address on failure.
  Status Bind(const std::string& address, int port);
  int port() const { return port_; }
  // Serves until Stop().
  Status Serve();
  void Stop();

  // The /metrics body.
  std::string Metrics() const;

 private:
  Extender* extender_;
  std::unique_ptr<httplib::Server> server_;
  int port_ = 0;
  std::atomic<uint64_t> request_nanos_{0};
  std::atomic<uint64_t> requests_{0};
};

}  // namespace railyard::http
