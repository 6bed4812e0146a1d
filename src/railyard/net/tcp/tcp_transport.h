// The tcp backend of net::Transport: non-blocking sockets and one epoll set per rank.
//
// Each rank listens on one address (the interface chosen by TransportOptions::socket_ifname,
// NCCL_SOCKET_IFNAME syntax) and connects to a peer only when it first sends to it: a ring
// opens 2 connections per rank instead of all N-1, and start-up has no N-squared storm of
// simultaneous connects. Connections are one-way: a rank's sends to a peer travel on the
// streams it opened to that peer, its receives arrive on the streams the peer opened to it,
// so two ranks that connect to each other at the same moment need no tie-break.
//
// A message longer than a chunk is split across TcpOptions::streams_per_peer connections so
// one TCP connection does not cap bandwidth; the first chunk of every message travels on
// stream 0, which fixes the order in which messages are matched (see connection.h).
//
// Every connection proves the job secret: the acceptor sends a random nonce, the connector
// answers HMAC-SHA-256(secret, nonce and both ranks); a wrong answer is refused and logged
// with the remote address. Frame lengths from the network are bounds-checked, never trusted.
//
// Thread-safety: as net::Transport.
#pragma once

#include <cstddef>
#include <memory>
#include <string>

#include "railyard/base/status.h"
#include "railyard/net/transport.h"

namespace railyard::net {

// The tcp backend's own options (net/select.h passes them as BackendOptions::tcp).
struct TcpOptions {
  // Connections per peer and direction: a long message is split across them.
  int streams_per_peer = 2;
  // Socket send and receive buffer bytes; 0 leaves the kernel's autotuning.
  size_t socket_buffer_bytes = 4 << 20;
  // Congestion control: "auto", "system" or an algorithm name (tcp/congestion.h).
  std::string congestion = "auto";
  // Most polls at the start of a wait before it sleeps in epoll (each epoll_wait(0), then
  // sched_yield); 0 sleeps at once. Waits that keep ending in sleep lower it
  // (net/spin_budget.h); tcp_transport_impl.h says why polling first pays.
  int spin_polls = 100;
};

// Fails INVALID_ARGUMENT for bad options (rank outside [0, size), no store, streams outside
// 1-64, an unknown congestion control, negative spin_polls) and NOT_FOUND when no interface matches
// options.socket_ifname. Listens at once; call Start() next.
Result<std::unique_ptr<Transport>> NewTcpTransport(const TransportOptions& options,
                                                   const TcpOptions& tcp = {});

}  // namespace railyard::net
