#include "railyard/vcluster/topology_file.h"

#include <yaml-cpp/yaml.h>

#include <utility>

#include "railyard/topo/yaml_format.h"

namespace railyard::vcluster {

Result<topo::Cluster> TopologyOf(const ClusterState& state) {
  const ClusterPlan& plan = state.plan;
  topo::ClusterBuilder builder("vcluster-" + plan.spec.prefix);
  builder.SetName("vcluster-" + plan.spec.prefix);
  builder.SetLevels({"spine", "leaf"});
  builder.AddSwitch("spine0", "spine", "", 0);
  for (const LeafPlan& leaf : plan.leaves) {
    builder.AddSwitch(leaf.name, "leaf", "spine0", plan.spec.spine_rate_bits);
  }
  for (const HostPlan& host : plan.hosts) {
    if (host.leaf < 0 || static_cast<size_t>(host.leaf) >= plan.leaves.size()) {
      return Internal("virtual cluster '{}': host {} is on leaf {}, but the plan has {} leaves",
                      plan.spec.prefix, host.name, host.leaf, plan.leaves.size());
    }
    topo::Node node;
    node.name = host.name;
    node.address = host.address;
    node.link_rate_bits = plan.spec.leaf_rate_bits;
    builder.AddNode(std::move(node), plan.leaves[host.leaf].name);
  }
  Result<topo::Cluster> cluster = std::move(builder).Finish();
  if (!cluster.ok()) {
    return Internal("virtual cluster '{}' does not make a topology tree: {}", plan.spec.prefix,
                    cluster.status().message());
  }
  return cluster;
}

Result<std::string> TopologyYaml(const ClusterState& state) {
  RY_ASSIGN_OR_RETURN(topo::Cluster cluster, TopologyOf(state));
  // The writer's document is one block map, so a top-level key appended after it extends
  // that map.
  YAML::Emitter out;
  out << YAML::BeginMap << YAML::Key << "vcluster" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "prefix" << YAML::Value << state.plan.spec.prefix;
  out << YAML::Key << "mode" << YAML::Value << std::string(ModeName(state.plan.spec.mode));
  out << YAML::Key << "created" << YAML::Value << state.created;
  out << YAML::EndMap << YAML::EndMap;
  return "# Written by `railyard vcluster up`.\n" + topo::WriteTopologyYaml(cluster) + out.c_str() +
         "\n";
}

}  // namespace railyard::vcluster
