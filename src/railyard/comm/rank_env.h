// RankEnvironment: the one description of a rank's place in a job that a launcher writes into
// each rank's environment and the rank reads back (comm/bootstrap.h reads it through
// RankEnvironment::FromEnv and nowhere else).
//
// ToEnv writes Railyard's own variables and, for programs written for torchrun, torchrun's:
//
//   RAILYARD_RANK             RANK                        this rank, 0 .. world_size-1
//   RAILYARD_WORLD_SIZE       WORLD_SIZE                  ranks in the job
//   RAILYARD_LOCAL_RANK       LOCAL_RANK                  this rank's index on its host
//   RAILYARD_LOCAL_WORLD_SIZE LOCAL_WORLD_SIZE            ranks on this host
//   RAILYARD_GROUP_RANK       GROUP_RANK                  the host's index in the job
//   RAILYARD_RESTART_COUNT    TORCHELASTIC_RESTART_COUNT  how many times the gang restarted
//   RAILYARD_STORE=host:port                              Railyard's rendezvous store (tcp)
//                             MASTER_ADDR, MASTER_PORT    torchrun's; the store when
//                                                         RAILYARD_STORE and _STORE_DIR are unset
//   RAILYARD_STORE_DIR, RAILYARD_STORE_SERVE=1, RAILYARD_JOB_SECRET, RAILYARD_JOB_ID,
//   RAILYARD_HOST, RAILYARD_VHOST, RAILYARD_CKPT_DIR, RAILYARD_PROGRESS, and the transport
//   variables RAILYARD_TRANSPORT, _SOCKET_IFNAME, _OFI_PROVIDER, _OFI_DOMAIN, _TCP_CC.
//
// FromEnv reads them back: where both names exist Railyard's wins; a value set but empty
// counts as unset. Errors are INVALID_ARGUMENT naming the variable, its value and what was
// expected. docs/launch.md has the table with who writes and reads each variable.
//
// Thread-safety: plain values; FromEnv calls the getter from the calling thread only.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "railyard/base/status.h"

namespace railyard::comm {

// The value of an environment variable, "" when unset.
using EnvGetter = std::function<std::string(std::string_view name)>;

// Reads the process environment (getenv).
EnvGetter ProcessEnv();
// Reads `env` only (tests; a launcher checking what it is about to write). `env` must
// outlive the getter.
EnvGetter MapEnv(const std::map<std::string, std::string>& env);

using EnvList = std::vector<std::pair<std::string, std::string>>;

// The transport settings (RAILYARD_TRANSPORT, _SOCKET_IFNAME, _OFI_PROVIDER, _OFI_DOMAIN,
// _TCP_CC); empty: not set, the rank's default. Read by a rank as part of RankEnvironment,
// and on their own by a launcher that checks them before it starts ranks.
struct TransportEnvironment {
  std::string transport;
  std::string socket_ifname;
  std::string ofi_provider;
  std::string ofi_domain;
  std::string tcp_congestion;

  // INVALID_ARGUMENT for a RAILYARD_TCP_CC that is not "auto", "system" or an algorithm name.
  static Result<TransportEnvironment> FromEnv(const EnvGetter& get);
  // The set fields only, so that a rank inherits what the launcher did not decide.
  void AppendTo(EnvList& env) const;

  bool operator==(const TransportEnvironment&) const = default;
};

struct RankEnvironment {
  int rank = -1;
  int world_size = 0;
  int local_rank = -1;       // -1: not known (not written)
  int local_world_size = 0;  // 0: not known
  int group_rank = -1;       // the host's index; -1: not known
  int restart_count = 0;

  std::string store_address;  // RAILYARD_STORE as given; see StoreAddress()
  std::string store_dir;
  bool serve_store = false;  // written as "1" on the rank that serves, read only on rank 0
  std::string master_addr;   // torchrun's rendezvous, for the program's own store
  int master_port = 0;       // 0: not set

  std::string job_secret;
  std::string job_id;        // empty: "job" in BootstrapConfig
  std::string host;          // RAILYARD_HOST: the host name this rank reports
  std::string virtual_host;  // RAILYARD_VHOST: set by `vcluster exec` on a virtual host
  std::string ckpt_dir;      // RAILYARD_CKPT_DIR: where the job checkpoints
  std::string progress;      // RAILYARD_PROGRESS: where the rank reports progress
  TransportEnvironment transport;

  // Reads and checks every variable above: rank and world size (Railyard's or torchrun's
  // names), a store (RAILYARD_STORE, RAILYARD_STORE_DIR, or MASTER_ADDR with MASTER_PORT)
  // and the job secret are required; whole numbers must be whole numbers in range.
  static Result<RankEnvironment> FromEnv(const EnvGetter& get);

  // Both names of every field that is set (rank, world size, restart count always), in a
  // fixed order; transport fields only when set.
  EnvList ToEnv() const;

  // The tcp store to meet at: RAILYARD_STORE, else MASTER_ADDR:MASTER_PORT unless a store
  // directory is given; "" for a file store.
  std::string StoreAddress() const;

  bool operator==(const RankEnvironment&) const = default;
};

}  // namespace railyard::comm
