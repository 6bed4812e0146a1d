// The collective probe: an allreduce bus-bandwidth sweep over the live hosts of a validation
// run, with Railyard's own host-memory collectives (comm/), one rank per host.
//
// Every agent calls RunAllreduceSweep with the same store, key prefix, world and sizes, and
// its own rank. The ranks meet through the store (the coordinator's rendezvous store), start a
// tcp transport on this host's address, and run `railyard bench comm`'s measurement
// (comm/bench.h: nccl-tests' conventions, a few warm-up iterations then timed ones, results
// checked) for each size in order. busbw = algbw * 2(n-1)/n as in nccl-tests.
//
//   RY_ASSIGN_OR_RETURN(auto figures,
//                       RunAllreduceSweep(store, "validate/allreduce", rank, world, sizes,
//                                         Deadline::After(20s), {.secret = secret}));
//
// Errors: DEADLINE_EXCEEDED naming the ranks (and, where CollectiveProbeOptions::hosts says,
// the hosts) that never joined; the communicator's error naming the failed rank when one dies
// or stalls during the sweep; DATA_LOSS when a result was wrong; INVALID_ARGUMENT for a bad
// rank, world or size. Every wait ends by `deadline`, plus about a second for the
// communicator to name a culprit.
//
// Thread-safety: free function; concurrent sweeps need distinct key prefixes.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"
#include "railyard/net/store.h"
#include "railyard/validate/report.h"

namespace railyard::validate {

struct CollectiveProbeOptions {
  std::string secret;  // the job's secret, proven on every data connection
  // This host's IPv4 address, as the agent reported it: tcp listens on the interface that
  // holds it. Empty: the automatic choice of net/interfaces.h.
  std::string address;
  std::string host;                // reported to peers; empty: gethostname()
  std::vector<std::string> hosts;  // the host of each rank, for messages; may be empty
  int warmup = 2;                  // iterations per size before timing
  int iters = 5;                   // timed iterations per size
};

// One figure per size, in the order of `sizes` (bytes of one rank's buffer of f32, as
// `railyard bench comm --sizes`): the out-of-place variant's time, algbw and busbw (the
// slowest rank's mean). world 1 returns figures with zero bandwidth (nothing moves).
Result<std::vector<CollectiveFigure>> RunAllreduceSweep(net::Store& store,
                                                        std::string_view key_prefix, int rank,
                                                        int world, std::span<const uint64_t> sizes,
                                                        base::Deadline deadline,
                                                        const CollectiveProbeOptions& options = {});

}  // namespace railyard::validate
