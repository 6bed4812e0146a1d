#include "railyard/vcluster/spec.h"

#include <fmt/format.h>

namespace railyard::vcluster {

std::string_view ModeName(Mode mode) { return mode == Mode::kNetns ? "netns" : "loopback"; }

Status ValidatePrefix(std::string_view prefix) {
  bool ok =
      !prefix.empty() && prefix.size() <= kMaxPrefixLength && prefix[0] >= 'a' && prefix[0] <= 'z';
  for (char c : prefix) {
    if (!((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9'))) ok = false;
  }
  if (!ok) {
    return InvalidArgument(
        "--prefix '{}': expected 1 to {} lowercase letters or digits starting with a letter "
        "(it prefixes interface names, which Linux limits to 15 characters)",
        prefix, kMaxPrefixLength);
  }
  return Status::Ok();
}

Status ValidateSpec(const ClusterSpec& spec) {
  RY_RETURN_IF_ERROR(ValidatePrefix(spec.prefix));
  if (spec.hosts < 1 || spec.hosts > kMaxHosts) {
    return InvalidArgument("--hosts {}: expected a number of hosts from 1 to {}", spec.hosts,
                           kMaxHosts);
  }
  if (spec.leaves < 1 || spec.leaves > spec.hosts) {
    return InvalidArgument(
        "--leaves {}: expected 1 to {} (every leaf needs at least one of the {} hosts)",
        spec.leaves, spec.hosts, spec.hosts);
  }
  return Status::Ok();
}

int LoopbackOctet(std::string_view prefix) {
  // FNV-1a, folded into 64..191: stable for a prefix, different for most pairs of prefixes.
  uint32_t h = 2166136261u;
  for (char c : prefix) h = (h ^ static_cast<unsigned char>(c)) * 16777619u;
  return 64 + static_cast<int>(h % 128);
}

std::string OwnedNamePrefix(std::string_view prefix) { return fmt::format("{}-", prefix); }

ClusterPlan MakePlan(const ClusterSpec& spec) {
  ClusterPlan plan;
  plan.spec = spec;
  const std::string& p = spec.prefix;
  plan.spine_bridge = fmt::format("{}-sp", p);
  const int base = spec.hosts / spec.leaves;
  const int extra = spec.hosts % spec.leaves;
  int next_host = 0;
  for (int l = 0; l < spec.leaves; ++l) {
    LeafPlan leaf;
    leaf.index = l;
    leaf.name = fmt::format("leaf{}", l);
    leaf.bridge = fmt::format("{}-l{}", p, l);
    leaf.uplink = fmt::format("{}-l{}u", p, l);
    leaf.spine_port = fmt::format("{}-s{}d", p, l);
    const int count = base + (l < extra ? 1 : 0);
    for (int k = 0; k < count; ++k) {
      HostPlan h;
      h.index = next_host++;
      h.name = fmt::format("node{}", h.index);
      h.leaf = l;
      h.address = spec.mode == Mode::kNetns
                      ? fmt::format("198.18.{}.{}", l, h.index + 1)
                      : fmt::format("127.{}.{}.{}", LoopbackOctet(p), l, h.index + 1);
      h.netns = fmt::format("{}-{}", p, h.name);
      h.bridge_port = fmt::format("{}-h{}", p, h.index);
      leaf.hosts.push_back(h.index);
      plan.hosts.push_back(std::move(h));
    }
    plan.leaves.push_back(std::move(leaf));
  }
  return plan;
}

const LeafPlan* ClusterPlan::FindLeaf(std::string_view name) const {
  for (const auto& l : leaves) {
    if (l.name == name) return &l;
  }
  return nullptr;
}

const HostPlan* ClusterPlan::FindHost(std::string_view name) const {
  for (const auto& h : hosts) {
    if (h.name == name) return &h;
  }
  return nullptr;
}

std::string ClusterPlan::HostList() const {
  if (hosts.size() == 1) return hosts[0].name;
  return fmt::format("node[0-{}]", hosts.size() - 1);
}

}  // namespace railyard::vcluster
