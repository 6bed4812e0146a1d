// The shm transport: ranks on one host exchange messages through shared memory.
//
// Each rank creates one POSIX shm segment (net/shm/shm_ring.h) holding an inbound ring per
// sending peer, publishes "<key_prefix>/shm/peer/<rank>" = host, pid and segment name, maps
// every peer's segment and, once all ranks have mapped everything (a second store round),
// unlinks its own name, so a crash later leaves nothing in /dev/shm. A sender copies its
// payload into its ring in the receiver's segment in large chunks and the receiver copies
// it out (two memcpys, no system call, no kernel copy); messages longer than the ring stream
// through it. Messages that arrive before their receive is posted are copied into an
// unexpected-message buffer, so any posting order completes.
//
// Waiting polls for `ShmOptions::spin`, yielding the CPU between polls, then sleeps on a
// futex in the rank's segment with a timeout of at most 50 ms; peers ring it only when the
// sleeper has said it sleeps. On each
// timeout the transport checks the peers it waits for (pidfd): a peer that exited fails the
// wait at once ("rank 2 (node1 pid 77): process exited ..."). Probe answers come from peers
// inside WaitAll/Probe; a peer that does not answer is looked up in /proc, so a SIGSTOPped
// one is reported as "process is stopped (SIGSTOP)".
//
// The shared window: each segment may end in a window (ShmOptions::window_bytes) that peers
// read in place (the SharedWindow capability of transport.h); the allreduce uses it.
//
// Security: segments are mode 0600 (same user only) and carry HmacSha256(secret, name, rank,
// pid): a segment created by a rank that does not know the job secret is refused.
//
// Errors: as transport.h says, any error from WaitAll or WaitWindow (a missed deadline
// included) fails the transport; later calls return that first error.
//
// Messages waiting for their receive hold at most 1 GiB in all (net/internal/
// unexpected_budget.h); a message beyond that fails the transport with RESOURCE_EXHAUSTED
// naming its sender.
//
// Limits: a send abandoned after part of it entered the ring (a WaitAll that also named an
// unknown request) breaks the stream to that peer (later sends to it fail
// FAILED_PRECONDITION).
//
// Thread-safety: as Transport (one thread at a time; Abort from any thread).
#pragma once

#include <chrono>
#include <cstddef>
#include <memory>
#include <string>
#include <string_view>

#include "railyard/base/status.h"
#include "railyard/net/transport.h"

namespace railyard::net {

struct ShmOptions {
  // Bytes of each inbound ring, a multiple of 4096. 0 picks 8 MiB per segment divided among
  // the peers, between 256 KiB and 1 MiB (small rings stay in cache; pages are only
  // allocated where data flows).
  size_t ring_bytes = 0;
  // How long a waiting rank polls (with sched_yield between polls) before it sleeps on its
  // futex. Zero sleeps at once.
  std::chrono::microseconds spin{20};
  // Bytes of this rank's shared window (SharedWindow in transport.h), preallocated in /dev/shm; 0
  // for none. Asked for only while /dev/shm has room for every rank's whole segment (the rings fill
  // on first touch, and a full /dev/shm would then be SIGBUS); a rank without one turns the window
  // off for all. 4 MiB: two 2 MiB halves, so a collective works on one while peers still read the
  // other, small enough to stay in cache (measured, 4 ranks on 2 cores: 4 MiB beat 1, 2, 8 and 16
  // MiB).
  size_t window_bytes = 4 << 20;
};

// Returns an unstarted transport. INVALID_ARGUMENT for a bad rank/size or a missing store.
Result<std::unique_ptr<Transport>> NewShmTransport(const TransportOptions& options,
                                                   const ShmOptions& shm_options = {});

// "railyard-shm-<hash of key_prefix>-": every segment of the communicator `key_prefix` has
// a name under /dev/shm starting with this (for cleanup tools and tests).
std::string ShmSegmentNamePrefix(std::string_view key_prefix);

}  // namespace railyard::net
