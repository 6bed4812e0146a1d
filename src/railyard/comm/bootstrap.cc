#include "railyard/comm/bootstrap.h"

#include <algorithm>
#include <cstdlib>

#include "railyard/net/peer_directory.h"
#include "railyard/net/select.h"
#include "railyard/net/store/file_store.h"
#include "railyard/net/store/tcp_store_client.h"
#include "railyard/net/store/tcp_store_server.h"

namespace railyard::comm {
namespace {

// A started transport of `backend` for `rank` of `size` ranks meeting under `key_prefix`.
Result<std::unique_ptr<net::Transport>> StartTransport(const BootstrapConfig& config,
                                                       const std::string& backend, int rank,
                                                       int size, const std::string& key_prefix,
                                                       net::Store& store, base::Deadline deadline,
                                                       std::vector<int> job_ranks = {}) {
  net::TransportOptions o;
  o.job_ranks = std::move(job_ranks);
  o.rank = rank;
  o.size = size;
  o.store = &store;
  o.key_prefix = key_prefix;
  o.secret = config.secret;
  o.host = config.host;
  o.socket_ifname = config.socket_ifname;
  net::BackendOptions b;
  b.tcp = config.tcp;
  b.ofi.provider = config.ofi_provider;
  b.ofi.domain = config.ofi_domain;
  RY_ASSIGN_OR_RETURN(auto t, net::NewTransport(backend, o, b));
  RY_RETURN_IF_ERROR(t->Start(deadline));
  return t;
}

// One communicator of a subset of ranks, over `backend`.
Result<std::unique_ptr<Communicator>> SubCommunicator(const BootstrapConfig& config,
                                                      const std::string& backend, int rank,
                                                      int size, const std::string& key_prefix,
                                                      const std::string& name, net::Store& store,
                                                      base::Deadline deadline,
                                                      std::vector<int> job_ranks) {
  auto t = StartTransport(config, backend, rank, size, key_prefix, store, deadline,
                          std::move(job_ranks));
  if (!t.ok()) return t.status().WithContext(fmt::format("starting the {} ({})", name, backend));
  CommOptions co = config.comm;
  co.ring_order.clear();
  co.group_name = name;
  return Communicator::Create(std::move(*t), co);
}

// Ranks sharing a host form a host-local group over shm (its lowest rank leads); the
// leaders form a group over the inter-host transport. Only when some host has more than
// one rank: otherwise the flat communicator is already the leaders' group.
Status BuildHierarchy(const BootstrapConfig& config, const std::vector<net::PeerInfo>& all,
                      const std::string& backend, net::Store& store, Communicator& comm,
                      base::Deadline deadline) {
  std::vector<std::string> hosts;  // in order of first rank
  std::vector<int> local_ranks;    // ranks on my host, ascending
  for (const auto& p : all) {
    if (std::find(hosts.begin(), hosts.end(), p.host) == hosts.end()) hosts.push_back(p.host);
    if (p.host == all[config.rank].host) local_ranks.push_back(p.rank);
  }
  bool shared = false;
  for (const auto& h : hosts) {
    shared = shared || std::count_if(all.begin(), all.end(),
                                     [&](const net::PeerInfo& p) { return p.host == h; }) > 1;
  }
  if (!shared) return Status::Ok();
  const std::string& my_host = all[config.rank].host;
  int local_rank = static_cast<int>(std::find(local_ranks.begin(), local_ranks.end(), config.rank) -
                                    local_ranks.begin());
  int host_index = static_cast<int>(std::find(hosts.begin(), hosts.end(), my_host) - hosts.begin());
  std::string prefix = config.job_id + "/comm";
  RY_ASSIGN_OR_RETURN(
      auto local, SubCommunicator(config, "shm", local_rank, static_cast<int>(local_ranks.size()),
                                  prefix + "/local/" + my_host, fmt::format("ranks on {}", my_host),
                                  store, deadline, local_ranks));
  std::unique_ptr<Communicator> leaders;
  if (local_rank == 0) {
    std::vector<int> leader_ranks;  // each host's lowest rank, in the order of `hosts`
    for (const auto& h : hosts) {
      leader_ranks.push_back(std::find_if(all.begin(), all.end(), [&](const net::PeerInfo& p) {
                               return p.host == h;
                             })->rank);
    }
    RY_ASSIGN_OR_RETURN(
        leaders,
        SubCommunicator(config, backend, host_index, static_cast<int>(hosts.size()),
                        prefix + "/leaders", "host leaders", store, deadline, leader_ranks));
  }
  comm.AttachHierarchy(std::move(local), std::move(leaders));
  return Status::Ok();
}

}  // namespace

Result<TransportEnvironment> ReadTransportEnvironment(
    const std::map<std::string, std::string>* env) {
  return TransportEnvironment::FromEnv(env != nullptr ? MapEnv(*env) : ProcessEnv());
}

Result<BootstrapConfig> BootstrapConfigFrom(const RankEnvironment& env) {
  BootstrapConfig c;
  c.rank = env.rank;
  c.world_size = env.world_size;
  c.store_address = env.StoreAddress();
  c.store_dir = env.store_dir;
  c.secret = env.job_secret;
  const TransportEnvironment& te = env.transport;
  if (!te.transport.empty()) c.transport = te.transport;
  c.socket_ifname = te.socket_ifname;
  if (!te.ofi_provider.empty()) c.ofi_provider = te.ofi_provider;
  c.ofi_domain = te.ofi_domain;
  if (!te.tcp_congestion.empty()) c.tcp.congestion = te.tcp_congestion;
  if (!env.job_id.empty()) c.job_id = env.job_id;
  c.serve_store = env.serve_store;
  c.host = env.host;
  // On a virtual host (`vcluster exec`, `bench comm --vcluster`) the namespace shares the
  // machine's host name: report the virtual host's, so errors name node2, not the machine.
  c.virtual_host = !env.virtual_host.empty();
  if (c.host.empty()) c.host = env.virtual_host;
  return c;
}

Result<BootstrapConfig> BootstrapConfigFromEnvironment(
    const std::map<std::string, std::string>* env) {
  RY_ASSIGN_OR_RETURN(RankEnvironment re,
                      RankEnvironment::FromEnv(env != nullptr ? MapEnv(*env) : ProcessEnv()));
  RY_ASSIGN_OR_RETURN(BootstrapConfig c, BootstrapConfigFrom(re));
  if (env == nullptr) {
    RY_ASSIGN_OR_RETURN(c.comm, CommOptions::FromEnvironment());
  }
  return c;
}

Result<Bootstrapped> Bootstrap(const BootstrapConfig& config, base::Deadline deadline) {
  Bootstrapped b;
  if (config.serve_store) {
    auto colon = config.store_address.rfind(':');
    net::TcpStoreServerOptions so;
    so.bind_ip = config.store_address.substr(0, colon);
    so.port = std::atoi(config.store_address.c_str() + colon + 1);
    so.secret = config.secret;
    auto server = net::TcpStoreServer::Start(so);
    if (!server.ok()) {
      return server.status().WithContext(
          fmt::format("rank 0: serving the rendezvous store at {}", config.store_address));
    }
    b.store_server = std::move(*server);
  }
  if (!config.store_address.empty()) {
    auto s = net::ConnectTcpStore(config.store_address, config.secret, deadline);
    if (!s.ok()) return s.status().WithContext(fmt::format("rank {}: rendezvous", config.rank));
    b.store = std::move(*s);
  } else {
    RY_ASSIGN_OR_RETURN(b.store, net::OpenFileStore(config.store_dir, config.secret));
  }
  // Which hosts: decides whether shm can carry everything.
  std::string prefix = config.job_id + "/comm";
  net::PeerInfo self;
  RY_ASSIGN_OR_RETURN(std::vector<net::PeerInfo> all,
                      net::ExchangePeerInfo(*b.store, prefix + "/hosts", config.rank,
                                            config.world_size, self, config.host, deadline));
  bool one_host = true;
  for (const auto& p : all) one_host = one_host && p.host == all[0].host;
  RY_ASSIGN_OR_RETURN(b.transport, net::ResolveTransport(config.transport, one_host));
  auto transport = StartTransport(config, b.transport, config.rank, config.world_size, prefix,
                                  *b.store, deadline);
  if (!transport.ok()) {
    return transport.status().WithContext(
        fmt::format("rank {}: starting transport {}", config.rank, b.transport));
  }
  RY_ASSIGN_OR_RETURN(b.comm, Communicator::Create(std::move(*transport), config.comm));
  if (config.hierarchy && !one_host) {
    RY_RETURN_IF_ERROR(BuildHierarchy(config, all, b.transport, *b.store, *b.comm, deadline));
  }
  return b;
}

}  // namespace railyard::comm
