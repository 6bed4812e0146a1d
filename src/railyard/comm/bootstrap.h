// Building a Communicator from the environment a launcher (railyard, torchrun, srun, an
// Indexed Job) gives each rank; the variables are read by RankEnvironment (comm/rank_env.h).
//
//   RAILYARD_RANK / RANK, RAILYARD_WORLD_SIZE / WORLD_SIZE      who and how many (required)
//   RAILYARD_STORE=host:port (TcpStore) or RAILYARD_STORE_DIR=/shared/dir (FileStore);
//     else MASTER_ADDR + MASTER_PORT (TcpStore, torchrun's names)
//   RAILYARD_JOB_SECRET        proven by every store and data connection (required)
//   RAILYARD_TRANSPORT         auto (default), tcp, shm, ofi
//   RAILYARD_SOCKET_IFNAME     interface for tcp, NCCL_SOCKET_IFNAME syntax
//   RAILYARD_OFI_PROVIDER, RAILYARD_OFI_DOMAIN   libfabric provider and domain
//   RAILYARD_COMM_TIMEOUT, RAILYARD_COMM_ALGO, RAILYARD_COMM_CHECK   CommOptions (communicator.h)
//   RAILYARD_JOB_ID            separates communicators of different jobs on one store
//   RAILYARD_STORE_SERVE=1     on rank 0: serve the TcpStore at RAILYARD_STORE itself
//   RAILYARD_HOST              the host name this rank reports (default: RAILYARD_VHOST on
//                              a virtual host, else gethostname)
//   RAILYARD_TCP_CC            tcp congestion control: auto (default: cubic between ranks on
//                              one host, the system's across hosts), system, or a name
//
// Tuning (tcp streams and socket buffers, the ring's piece size, reducing on receive, the
// host hierarchy) is no environment variable: it is set in BootstrapConfig by code, and by
// `railyard bench comm` flags for measurements.
//
// Errors name the variable and what was expected.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>

#include "railyard/base/clock.h"
#include "railyard/base/status.h"
#include "railyard/comm/communicator.h"
#include "railyard/comm/rank_env.h"
#include "railyard/net/store.h"
#include "railyard/net/store/tcp_store_server.h"
#include "railyard/net/tcp/tcp_transport.h"

namespace railyard::comm {

struct BootstrapConfig {
  int rank = -1;
  int world_size = 0;
  std::string store_address;  // host:port
  std::string store_dir;
  std::string secret;
  std::string transport = "auto";
  std::string socket_ifname;
  std::string ofi_provider = "tcp;ofi_rxm";
  std::string ofi_domain;
  std::string job_id = "job";
  bool serve_store = false;
  std::string host;           // empty: gethostname()
  bool virtual_host = false;  // RAILYARD_VHOST is set: a host of a virtual cluster
  // Host-local and leader sub-communicators when ranks share hosts and span several.
  bool hierarchy = true;
  net::TcpOptions tcp;  // congestion from RAILYARD_TCP_CC; the rest left at their defaults
  CommOptions comm;
};

// The transport settings of the variables above (RAILYARD_TRANSPORT, _SOCKET_IFNAME,
// _OFI_PROVIDER, _OFI_DOMAIN, _TCP_CC), read by TransportEnvironment::FromEnv
// (comm/rank_env.h): for a rank as part of its RankEnvironment, and here for a launcher
// (`railyard bench comm`) that checks them once before it starts ranks. Empty: not set.
// INVALID_ARGUMENT for a RAILYARD_TCP_CC that is not "auto", "system" or an algorithm name.
Result<TransportEnvironment> ReadTransportEnvironment(
    const std::map<std::string, std::string>* env = nullptr);

// Reads the variables above through `getenv` (tests pass their own map), with
// RankEnvironment::FromEnv, and turns them into a configuration.
Result<BootstrapConfig> BootstrapConfigFromEnvironment(
    const std::map<std::string, std::string>* env = nullptr);
// The same from an environment already read.
Result<BootstrapConfig> BootstrapConfigFrom(const RankEnvironment& env);

struct Bootstrapped {
  std::unique_ptr<net::TcpStoreServer> store_server;  // rank 0 with serve_store
  std::unique_ptr<net::Store> store;
  std::unique_ptr<Communicator> comm;
  std::string transport;  // the backend chosen
};

// Connects to the store, learns whether all ranks share this host, creates and starts the
// transport and the communicator. Every step is bounded by `deadline`.
Result<Bootstrapped> Bootstrap(const BootstrapConfig& config, base::Deadline deadline);

}  // namespace railyard::comm
