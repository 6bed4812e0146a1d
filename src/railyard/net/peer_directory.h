// Publishing and collecting the ranks' PeerInfo through the rendezvous store.
//
// Every transport backend does the same at Start(): rank r writes its PeerInfo (host, pid,
// backend address) under "<prefix>/peer/<r>" and waits for all ranks'. A rank that never
// publishes is named in the DEADLINE_EXCEEDED error together with the store.
//
// Thread-safety: pure functions over a thread-safe Store.
#pragma once

#include <span>
#include <string>
#include <vector>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"
#include "railyard/net/store.h"
#include "railyard/net/transport.h"

namespace railyard::net {

// Fills self.rank, self.pid, self.host (from `host`, else gethostname()) and self.boot_id,
// and exchanges.
// Returns every rank's PeerInfo indexed by rank.
Result<std::vector<PeerInfo>> ExchangePeerInfo(Store& store, const std::string& prefix, int rank,
                                               int size, PeerInfo self, const std::string& host,
                                               base::Deadline deadline);

// The ranks whose keys (keys_by_rank[r] is rank r's) are in `missing`, ascending.
std::vector<int> MissingRanks(std::span<const std::string> keys_by_rank,
                              const std::vector<std::string>& missing);

// The host name reported when none is configured.
std::string LocalHostName();

// This kernel's boot id, or "" where /proc does not say.
std::string LocalBootId();

}  // namespace railyard::net
