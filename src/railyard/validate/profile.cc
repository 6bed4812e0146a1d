#include "railyard/validate/profile.h"

#include <algorithm>

namespace railyard::validate {

Profile ResolveProfile(const Profile& profile, const topo::Cluster& cluster, int node) {
  const topo::Node& n = cluster.nodes[node];
  Profile p = profile;
  if (p.nic_rate_bits == 0) p.nic_rate_bits = n.link_rate_bits;
  if (p.gpus < 0) p.gpus = n.gpu_count;
  if (!p.rdma) {
    p.rdma = std::any_of(n.nics.begin(), n.nics.end(), [](const topo::Nic& c) { return c.rdma; });
  }
  if (!p.memlock_bytes && *p.rdma) p.memlock_bytes = kUnlimited;
  if (p.gpu_nic_paths.empty()) p.gpu_nic_paths = n.gpu_nic_paths;
  return p;
}

}  // namespace railyard::validate
