// Test helpers: a group of transports as threads of one process on an in-memory store.
//
//   TransportGroup g = StartTransportGroupForTest(NewTcpTransport, 4, "=lo");
//   RunRanksForTest(g, [](int rank, Transport& t) -> Status { ... });
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "railyard/base/logging.h"
#include "railyard/net/store.h"
#include "railyard/net/transport.h"

namespace railyard::net {

using TransportFactory = std::function<Result<std::unique_ptr<Transport>>(const TransportOptions&)>;

// Captures the lines logged at warn and above (from any thread) while it lives.
class LogCapture {
 public:
  LogCapture() {
    base::SetLogLevel(base::LogLevel::kWarn);
    base::SetLogSinkForTest([this](base::LogLevel, std::string_view line) {
      std::lock_guard lock(mu_);
      lines_ += std::string(line) + "\n";
    });
  }
  ~LogCapture() { base::SetLogSinkForTest({}); }
  LogCapture(const LogCapture&) = delete;
  LogCapture& operator=(const LogCapture&) = delete;
  std::string Lines() {
    std::lock_guard lock(mu_);
    return lines_;
  }

 private:
  std::mutex mu_;
  std::string lines_;
};

struct TransportGroup {
  std::unique_ptr<Store> store;
  std::vector<std::unique_ptr<Transport>> ranks;
  Status status;  // first creation/Start error
};

// Creates `size` transports (options copied from `base` with rank/size/store filled) and
// starts them concurrently, each Start in its own thread with a 20 s deadline.
inline TransportGroup StartTransportGroupForTest(const TransportFactory& factory, int size,
                                                 TransportOptions base = {}) {
  TransportGroup g;
  g.store = NewInMemoryStore();
  if (base.secret.empty()) base.secret = "test-secret";
  if (base.key_prefix.empty()) base.key_prefix = "test";
  if (base.socket_ifname.empty()) base.socket_ifname = "=lo";
  g.ranks.resize(size);
  std::vector<Status> st(size);
  for (int r = 0; r < size; ++r) {
    TransportOptions o = base;
    o.rank = r;
    o.size = size;
    o.store = g.store.get();
    auto t = factory(o);
    if (!t.ok()) {
      g.status = t.status();
      return g;
    }
    g.ranks[r] = std::move(*t);
  }
  std::vector<std::thread> threads;
  for (int r = 0; r < size; ++r) {
    threads.emplace_back(
        [&, r] { st[r] = g.ranks[r]->Start(base::Deadline::After(std::chrono::seconds(20))); });
  }
  for (auto& t : threads) t.join();
  for (auto& s : st) {
    if (!s.ok() && g.status.ok()) g.status = s;
  }
  return g;
}

// The same for a backend factory that takes its own options (NewTcpTransport, TcpOptions):
// `backend` is passed to every rank's factory call.
template <typename BackendOptions>
inline TransportGroup StartTransportGroupForTest(
    Result<std::unique_ptr<Transport>> (*factory)(const TransportOptions&, const BackendOptions&),
    int size, TransportOptions base = {}, BackendOptions backend = {}) {
  return StartTransportGroupForTest(
      [factory, backend](const TransportOptions& o) { return factory(o, backend); }, size,
      std::move(base));
}

// Runs fn(rank, transport) on one thread per rank and returns each rank's Status.
inline std::vector<Status> RunRanksForTest(TransportGroup& g,
                                           const std::function<Status(int, Transport&)>& fn) {
  std::vector<Status> st(g.ranks.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < g.ranks.size(); ++r) {
    threads.emplace_back([&, r] { st[r] = fn(static_cast<int>(r), *g.ranks[r]); });
  }
  for (auto& t : threads) t.join();
  return st;
}

}  // namespace railyard::net
