// Test helpers: communicators as threads of one process, over any transport factory.
#pragma once

#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "railyard/comm/communicator.h"
#include "railyard/net/transport_testing.h"

namespace railyard::comm {

struct CommGroup {
  std::unique_ptr<net::Store> store;
  std::vector<std::unique_ptr<Communicator>> ranks;
  Status status;
};

inline CommGroup MakeCommGroupForTest(const net::TransportFactory& factory, int size,
                                      CommOptions options = {},
                                      net::TransportOptions transport_options = {}) {
  CommGroup g;
  net::TransportGroup tg = net::StartTransportGroupForTest(factory, size, transport_options);
  g.store = std::move(tg.store);
  g.status = tg.status;
  if (!g.status.ok()) return g;
  for (auto& t : tg.ranks) {
    auto c = Communicator::Create(std::move(t), options);
    if (!c.ok()) {
      g.status = c.status();
      return g;
    }
    g.ranks.push_back(std::move(*c));
  }
  return g;
}

inline std::vector<Status> RunCommRanksForTest(CommGroup& g,
                                               const std::function<Status(Communicator&)>& fn) {
  std::vector<Status> st(g.ranks.size());
  std::vector<std::thread> threads;
  for (size_t r = 0; r < g.ranks.size(); ++r) {
    threads.emplace_back([&, r] { st[r] = fn(*g.ranks[r]); });
  }
  for (auto& t : threads) t.join();
  return st;
}

}  // namespace railyard::comm
