// Which TCP congestion control the tcp transport's connections use.
//
// Why the transport chooses at all: a pacing algorithm (BBR, the default on many hosts)
// paces every connection through a per-socket hrtimer when no fq qdisc is present, which is
// always the case on loopback. Between ranks on one host that caps a ring allreduce far below
// what the kernel can copy: on a 2-core host whose default is BBR, a 16 MiB allreduce moves
// 1.75 GB/s busbw under BBR against 3.10 under cubic with 2 ranks, 0.88 against 1.67 with 4
// (docs/performance.md, design decisions). The same holds between network namespaces on
// one kernel (virtual hosts, pods on one node) linked by unshaped veth: 2 ranks, 0.6-1.1
// GB/s under BBR against 2.0-2.7 under cubic. Across machines the operator's choice stands:
// pacing is what BBR is for there.
//
//   auto    connections that stay inside this kernel use cubic (reno where cubic is missing or
//           not permitted); connections to other machines keep the system default. The
//           default. "Inside this kernel": the peer is at a loopback address or at this
//           rank's own address, or it reported the same kernel boot id (PeerInfo::boot_id),
//           which also covers a peer in another network namespace.
//   system  every connection keeps the system default (net.ipv4.tcp_congestion_control).
//   NAME    every connection uses NAME; Check() fails if this process cannot set it.
#pragma once

#include <netinet/in.h>

#include <string>
#include <string_view>

#include "railyard/base/status.h"

namespace railyard::net {

class CongestionControl {
 public:
  // "auto", "system", or an algorithm name (letters, digits, '_', at most 15 bytes).
  // INVALID_ARGUMENT names the value and what was expected.
  static Result<CongestionControl> Parse(std::string_view text);

  // For a named algorithm: whether a TCP socket of this process accepts it. Fails with the
  // kernel's available (and, without CAP_NET_ADMIN, permitted) algorithms in the message.
  Status Check() const;

  // Sets the algorithm on socket `fd` of a connection that stays inside this kernel
  // (`same_kernel`) or leaves it. Returns the algorithm set, or "" when the system default
  // stays. Best effort in auto mode.
  std::string Apply(int fd, bool same_kernel) const;

  std::string_view text() const { return text_; }

 private:
  std::string text_ = "auto";
};

// True when `peer` is a loopback address (127/8) or the same IPv4 address as `self`: the
// connection never leaves this kernel's network stack.
bool SameHost(const sockaddr_in& self, const sockaddr_in& peer);

}  // namespace railyard::net
