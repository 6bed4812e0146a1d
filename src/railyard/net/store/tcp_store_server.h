// TcpStoreServer: the server of the rendezvous Store over TCP, run by the launcher or by
// rank 0. Ranks reach it with ConnectTcpStore (net/store/tcp_store_client.h).
//
// Store and client prove the per-job secret to each other (net/handshake.h): a client
// without it is refused, and a client never sends a key or value to a server that cannot
// prove it; the secret never crosses the network. Blocking Get/Wait are parked on the server
// until the key appears or the client's timeout passes, so waiting ranks cost no polling
// traffic; Add and CompareAndSet are atomic because one server thread applies every request
// in turn. The wire format is in net/store/tcp_store_codec.h.
//
//   RY_ASSIGN_OR_RETURN(auto server, TcpStoreServer::Start({.bind_ip = nic.ipv4,
//                                                           .secret = secret}));
//   // publish server->address() to the ranks (environment, file, scheduler)
//
// The server trusts nothing from the network: a frame longer than the key/value limits, a
// malformed frame or a wrong proof closes that connection with a warning naming the peer;
// other clients are unaffected. At most kMaxPendingHandshakes connections may be inside the
// handshake, each for at most kHandshakeTimeout, so idle connects cannot exhaust the server.
//
// Thread-safety: the server runs one background thread; its methods may be called from any
// thread.
#pragma once

#include <memory>
#include <string>

#include "railyard/base/status.h"

namespace railyard::net {

struct TcpStoreServerOptions {
  std::string bind_ip = "127.0.0.1";  // an IPv4 literal; the server listens only there
  int port = 0;                       // 0: the kernel picks a free port (see port())
  std::string secret;                 // the job secret clients must prove
};

class TcpStoreServer {
 public:
  // Binds, listens and starts the serving thread. INVALID_ARGUMENT for a bind_ip that is not
  // an IPv4 literal or a port out of range; UNAVAILABLE naming ip:port when bind fails.
  static Result<std::unique_ptr<TcpStoreServer>> Start(const TcpStoreServerOptions& options);

  // Stops the thread and closes every connection; clients still connected get UNAVAILABLE.
  virtual ~TcpStoreServer() = default;

  virtual int port() const = 0;
  // "ip:port", what clients pass to ConnectTcpStore.
  virtual std::string address() const = 0;
  // Get/Wait requests parked now, waiting for keys; tests use it to order events.
  virtual size_t ParkedRequestsForTest() const = 0;
  // Accepted connections that have not finished the handshake.
  virtual size_t PendingHandshakesForTest() const = 0;
  // OK while serving; the error that stopped the serving thread otherwise.
  virtual Status health() const = 0;
};

}  // namespace railyard::net
