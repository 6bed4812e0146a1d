// TcpStore: the rendezvous Store served over TCP by the launcher or by rank 0.
//
// One TcpStoreServer holds the keys; every rank connects with ConnectTcpStore. Store and
// client prove the per-job secret to each other (net/handshake.h): a client without it is
// refused, and a client never sends a key or value to a server that cannot prove it; the
// secret never crosses the network. Blocking Get/Wait are parked on the server until the key
// appears or the client's timeout passes, so waiting ranks cost no polling traffic; Add and
// CompareAndSet are atomic because one server thread applies every request in turn.
//
//   RY_ASSIGN_OR_RETURN(auto server, TcpStoreServer::Start({.bind_ip = nic.ipv4,
//                                                           .secret = secret}));
//   // publish server->address() to the ranks (environment, file, scheduler)
//   RY_ASSIGN_OR_RETURN(auto store, ConnectTcpStore(address, secret, deadline));
//
// The server trusts nothing from the network: a frame longer than the key/value limits, a
// malformed frame or a wrong proof closes that connection with a warning naming the peer;
// other clients are unaffected. At most kMaxPendingHandshakes connections may be inside the
// handshake, each for at most kHandshakeTimeout, so idle connects cannot exhaust the server.
//
// Thread-safety: the server runs one background thread; its methods may be called from any
// thread. The client Store may be called from several threads at once: each call borrows an
// idle connection or opens another, so a thread parked in Get does not block a Set.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"
#include "railyard/net/store.h"

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

// Connects to the store at "host:port"; store and client prove `secret` to each other.
// Connection refused, and a connection the store drops before proving itself, are retried
// with a short backoff until `deadline`, because ranks often start before the store.
// DEADLINE_EXCEEDED or UNAVAILABLE naming the address when it cannot be reached;
// PERMISSION_DENIED "tcp store <address> did not prove the job secret: ..." when the server
// there has another secret or is not Railyard's store; INVALID_ARGUMENT for a malformed
// address.
Result<std::unique_ptr<Store>> ConnectTcpStore(std::string_view host_port, std::string_view secret,
                                               base::Deadline deadline);

}  // namespace railyard::net
