// The ofi transport: Railyard's Transport over libfabric (RDM endpoints, tagged messages, RMA).
//
// One reliable-datagram endpoint per rank, with a completion queue and an address vector
// holding every rank. The provider is chosen by name: `verbs;ofi_rxm`, `efa` or `cxi` on
// real fabrics, `tcp;ofi_rxm` on plain Ethernet and in tests. libfabric is dlopen'ed
// (net/ofi/fabric_library.h), never linked.
//
//   RY_ASSIGN_OR_RETURN(auto t, NewOfiTransport(options, OfiOptions{.domain = "lo"}));
//   RY_RETURN_IF_ERROR(t->Start(deadline));
//
// Tags: user tags must be below 2^60 (kOfiMaxUserTag). The top four bits of the 64-bit
// libfabric tag mark control traffic: HELLO (the secret proof) and CTRL (probe ping/pong,
// abort). Receives are directed (FI_DIRECTED_RECV on the peer's fi_addr) with no ignore
// bits, so a user receive can match only a user message from that peer. Ordering per
// (peer, tag) comes from FI_ORDER_SAS and from posting each peer's operations in order.
//
// Clear-to-send: a user message longer than 4 KiB leaves only after the receiver has posted
// its receive and said so (a CTRL clear-to-send naming the tag, the message's index among
// that (peer, tag)'s messages, and the receive's length); shorter ones go at once, except
// behind a held one with the same tag. Why: rxm (libfabric 1.17) sends long messages by
// segmentation or rendezvous, and a receive posted against such a message that waits
// unexpected from a peer whose connection has since broken crashed inside fi_trecv
// (SIGSEGV, about 1 run in 12 of the killed-rank test). With the receive posted first, the
// long message is never unexpected; rxm reports the broken connection on the posted
// receive instead. The cost is one short message per long one, sent as the receive is
// posted, so it overlaps with the sender's own preparation in pipelined collectives. A
// held message announces its length (a CTRL request-to-send), so a receive too short for
// it fails at once with DATA_LOSS naming both lengths, on both ranks (a CTRL reject), as a
// clear-to-send for a too-short receive does; message k of a (peer, tag) matches receive
// k, which is what the indices rely on.
//
// Progress: providers such as tcp;ofi_rxm progress only when the completion queue is read,
// so everything moves inside WaitAll and Probe (and Abort, for its own messages): they
// read the CQ, spin briefly, then sleep in fi_cq_sread (or short naps where the CQ has no
// wait object), never longer than 20 ms or the deadline.
//
// The per-job secret: the first message a rank sends to each peer is a HELLO carrying
// HmacSha256(secret, "railyard-ofi/<sender>/<receiver>/" + receiver's nonce), the nonce
// being what the receiver published in the store. Until a peer's HELLO checks out, no
// receive from it (user or control) is handed to libfabric, so its data stays in the
// provider's unexpected queue and never reaches user memory; a bad HELLO fails the peer
// with PERMISSION_DENIED. Limits: the proof authenticates a peer once, not each message
// (libfabric has no per-message authentication), so a party that can spoof a proven
// peer's address after the proof could inject data; and RMA writes are one-sided, guarded
// only by unguessable random keys where the application chooses them (tcp) or the
// provider's keys (verbs, efa).
//
// Memory registration: where the provider requires FI_MR_LOCAL every send, receive and
// write buffer is registered for the life of its request; RMA targets are addressed by
// virtual address under FI_MR_VIRT_ADDR and by offset otherwise; keys come from the
// provider under FI_MR_PROV_KEY and are random otherwise. The remote_key blob of
// RegisterRma encodes key, base address and length.
//
// After DEADLINE_EXCEEDED, as after any error, the transport is failed (transport.h):
// pending receives are cancelled (fi_cancel); sends already handed to the provider cannot
// be cancelled and may still read their buffers until they complete or the transport is
// destroyed.
//
// A peer that dies: rxm (1.17, over tcp) fails nothing posted when a peer's process exits;
// it retries the connection and only logs the refusal. So every 100 ms a wait checks the
// peers it waits on that run on this kernel (same boot id, published with the address;
// the virtual cluster's hosts included) through a pidfd, and fails the wait naming the
// peer once its process has exited. Limit: a peer on another kernel that dies is found
// only at the wait's deadline (the communicator's probe then reports it unresponsive).
//
// Thread-safety: as for Transport: one thread at a time, Abort() from any thread.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "railyard/base/status.h"
#include "railyard/net/transport.h"

namespace railyard::net {

// Tags at or above this are reserved for the transport's control traffic.
inline constexpr Tag kOfiMaxUserTag = Tag{1} << 60;

struct OfiOptions {
  // A libfabric provider name as fi_info prints it: "tcp;ofi_rxm", "verbs;ofi_rxm", "efa".
  std::string provider = "tcp;ofi_rxm";
  // The domain (for socket providers: the interface, "lo", "eth0"; for verbs "mlx5_0") to
  // use; empty means the first the provider lists, preferring IPv4 addressing.
  std::string domain;
  // Local address to bind (fi_getinfo's node with FI_SOURCE), e.g. "127.0.0.1"; empty: the
  // domain's own.
  std::string node;
};

// Opens the fabric, domain, CQ, AV and endpoint for `ofi.provider`. NOT_FOUND listing the
// available providers (or the provider's domains) when the name matches none;
// FAILED_PRECONDITION when libfabric cannot be loaded; INVALID_ARGUMENT for bad options.
Result<std::unique_ptr<Transport>> NewOfiTransport(const TransportOptions& options,
                                                   const OfiOptions& ofi);

// The providers offering RDM endpoints with tagged messages here, in libfabric's order,
// each once: {"tcp;ofi_rxm", "udp;ofi_rxd", "shm", "net", ...}.
Result<std::vector<std::string>> ListOfiProviders();

}  // namespace railyard::net
