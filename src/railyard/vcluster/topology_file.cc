#include "railyard/vcluster/topology_file.h"

#include <yaml-cpp/yaml.h>

#include "railyard/base/units.h"

namespace railyard::vcluster {
namespace {

std::string RateText(uint64_t bits) {
  return bits == 0 ? "unshaped" : base::FormatRateBits(static_cast<double>(bits));
}

}  // namespace

std::string TopologyYaml(const ClusterState& state) {
  const ClusterPlan& plan = state.plan;
  YAML::Emitter out;
  out << YAML::Comment("Railyard topology (schema: docs/formats.md). Written by `railyard vcluster up`.");
  out << YAML::BeginMap;
  out << YAML::Key << "version" << YAML::Value << 1;
  out << YAML::Key << "name" << YAML::Value << ("vcluster-" + plan.spec.prefix);
  out << YAML::Key << "levels" << YAML::Value << YAML::Flow << YAML::BeginSeq << "spine"
      << "leaf" << YAML::EndSeq;
  out << YAML::Key << "switches" << YAML::Value << YAML::BeginSeq;
  out << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << "spine0"
      << YAML::Key << "level" << YAML::Value << "spine" << YAML::EndMap;
  for (const auto& leaf : plan.leaves) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << leaf.name
        << YAML::Key << "level" << YAML::Value << "leaf" << YAML::Key << "parent" << YAML::Value
        << "spine0" << YAML::Key << "uplink_rate" << YAML::Value
        << RateText(plan.spec.spine_rate_bits) << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "nodes" << YAML::Value << YAML::BeginSeq;
  for (const auto& h : plan.hosts) {
    out << YAML::Flow << YAML::BeginMap << YAML::Key << "name" << YAML::Value << h.name
        << YAML::Key << "switch" << YAML::Value << plan.leaves[h.leaf].name << YAML::Key
        << "address" << YAML::Value << h.address << YAML::Key << "link_rate" << YAML::Value
        << RateText(plan.spec.leaf_rate_bits) << YAML::EndMap;
  }
  out << YAML::EndSeq;
  out << YAML::Key << "vcluster" << YAML::Value << YAML::BeginMap;
  out << YAML::Key << "prefix" << YAML::Value << plan.spec.prefix;
  out << YAML::Key << "mode" << YAML::Value << std::string(ModeName(plan.spec.mode));
  out << YAML::Key << "created" << YAML::Value << state.created;
  out << YAML::EndMap;
  out << YAML::EndMap;
  return std::string(out.c_str()) + "\n";
}

}  // namespace railyard::vcluster
