// ConnectTcpStore: the client side of the rendezvous Store over TCP; the server is
// TcpStoreServer (net/store/tcp_store_server.h).
//
//   RY_ASSIGN_OR_RETURN(auto store, ConnectTcpStore(address, secret, deadline));
//   RY_RETURN_IF_ERROR(store->Set("job/addr/3", addr, deadline));
//
// Thread-safety: the Store may be called from several threads at once: each call borrows an
// idle connection or opens another, so a thread parked in Get does not block a Set.
#pragma once

#include <memory>
#include <string_view>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"
#include "railyard/net/store.h"

namespace railyard::net {

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
