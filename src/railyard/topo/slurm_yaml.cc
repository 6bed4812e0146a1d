// Slurm topology.yaml (slurm_format.h, Slurm 25.05+): a list of named topologies, each a
// tree, a block topology or flat, read and written.
#include <fmt/format.h>

#include <algorithm>
#include <utility>

#include "railyard/base/config.h"
#include "railyard/base/strings.h"
#include "railyard/topo/hostlist.h"
#include "railyard/topo/internal/slurm_tree.h"
#include "railyard/topo/internal/yaml_quote.h"
#include "railyard/topo/slurm_format.h"

namespace railyard::topo {
namespace {

using base::FieldContext;

Result<std::vector<std::string>> YamlNames(const YAML::Node& map, std::string_view key,
                                           const FieldContext& ctx, size_t& total) {
  if (!base::YamlHas(map, key)) return std::vector<std::string>{};
  RY_ASSIGN_OR_RETURN(std::string text, base::RequireString(map, key, ctx));
  Result<std::vector<std::string>> names = ExpandHostlist(text);
  if (!names.ok()) return ctx.Child(key).Error(base::YamlGet(map, key), names.status().message());
  total += names->size();
  if (total > internal::kMaxSlurmNames) {
    return ctx.Child(key).Error(
        base::YamlGet(map, key),
        fmt::format("more than {} switches and nodes", internal::kMaxSlurmNames));
  }
  return names;
}

Result<Cluster> TreeFromYaml(const YAML::Node& tree, const FieldContext& ctx,
                             std::string_view source, std::string name) {
  RY_RETURN_IF_ERROR(base::ExpectMap(tree, ctx));
  RY_RETURN_IF_ERROR(base::RejectUnknownKeys(tree, {"switches"}, ctx));
  RY_ASSIGN_OR_RETURN(YAML::Node switches, base::RequireSequence(tree, "switches", ctx));
  std::vector<internal::SwitchSpec> specs;
  size_t total = 0;
  for (size_t i = 0; i < switches.size(); ++i) {
    FieldContext c = ctx.Child("switches").Index(i);
    const YAML::Node& sw = switches[i];
    RY_RETURN_IF_ERROR(base::ExpectMap(sw, c));
    RY_RETURN_IF_ERROR(base::RejectUnknownKeys(sw, {"switch", "children", "nodes"}, c));
    internal::SwitchSpec spec;
    RY_ASSIGN_OR_RETURN(spec.name, base::RequireString(sw, "switch", c));
    RY_ASSIGN_OR_RETURN(spec.children, YamlNames(sw, "children", c, total));
    RY_ASSIGN_OR_RETURN(spec.nodes, YamlNames(sw, "nodes", c, total));
    spec.line = base::YamlLine(sw);
    specs.push_back(std::move(spec));
  }
  if (specs.empty()) return ctx.Child("switches").Error(switches, "lists no switches");
  return internal::BuildTree(specs, source, std::move(name), {"children", "nodes"});
}

Result<Cluster> BlockFromYaml(const YAML::Node& block, const FieldContext& ctx,
                              std::string_view source, std::string name) {
  RY_RETURN_IF_ERROR(base::ExpectMap(block, ctx));
  RY_RETURN_IF_ERROR(base::RejectUnknownKeys(block, {"block_sizes", "blocks"}, ctx));
  std::vector<int> sizes;
  if (base::YamlHas(block, "block_sizes")) {
    RY_ASSIGN_OR_RETURN(YAML::Node seq, base::RequireSequence(block, "block_sizes", ctx));
    for (size_t i = 0; i < seq.size(); ++i) {
      FieldContext c = ctx.Child("block_sizes").Index(i);
      const std::string text = seq[i].IsScalar() ? seq[i].Scalar() : std::string();
      bool digits =
          !text.empty() && text.size() <= 9 &&
          std::all_of(text.begin(), text.end(), [](char ch) { return ch >= '0' && ch <= '9'; });
      if (!digits) return c.Error(seq[i], "expected a positive integer");
      sizes.push_back(std::stoi(text));
    }
    Status valid = ValidateBlockSizes(sizes);
    if (!valid.ok()) return ctx.Child("block_sizes").Error(seq, valid.message());
  }
  RY_ASSIGN_OR_RETURN(YAML::Node blocks, base::RequireSequence(block, "blocks", ctx));
  std::vector<internal::BlockSpec> specs;
  size_t total = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    FieldContext c = ctx.Child("blocks").Index(i);
    const YAML::Node& b = blocks[i];
    RY_RETURN_IF_ERROR(base::ExpectMap(b, c));
    RY_RETURN_IF_ERROR(base::RejectUnknownKeys(b, {"block", "nodes"}, c));
    internal::BlockSpec spec;
    RY_ASSIGN_OR_RETURN(spec.name, base::RequireString(b, "block", c));
    RY_ASSIGN_OR_RETURN(spec.nodes, YamlNames(b, "nodes", c, total));
    spec.line = base::YamlLine(b);
    specs.push_back(std::move(spec));
  }
  if (specs.empty()) return ctx.Child("blocks").Error(blocks, "lists no blocks");
  return internal::BuildBlocks(specs, std::move(sizes), source, std::move(name));
}

Result<Cluster> SlurmYamlImpl(const YAML::Node& root, std::string_view source,
                              std::string_view wanted) {
  FieldContext ctx{std::string(source)};
  if (!root.IsDefined() || root.IsNull()) {
    return InvalidArgument(
        "{}: the file is empty (expected a list of '- topology: NAME' "
        "entries)",
        source);
  }
  RY_RETURN_IF_ERROR(base::ExpectSequence(root, ctx));
  std::vector<std::string> names;
  int chosen = -1, first_usable = -1, first_default = -1;
  for (size_t i = 0; i < root.size(); ++i) {
    FieldContext c = ctx.Index(i);
    const YAML::Node& t = root[i];
    RY_RETURN_IF_ERROR(base::ExpectMap(t, c));
    RY_RETURN_IF_ERROR(base::RejectUnknownKeys(
        t, {"topology", "cluster_default", "tree", "block", "flat", "ring", "torus3d"}, c));
    RY_ASSIGN_OR_RETURN(std::string name, base::RequireString(t, "topology", c));
    RY_ASSIGN_OR_RETURN(bool is_default, base::OptionalBool(t, "cluster_default", false, c));
    bool usable = base::YamlHas(t, "tree") || base::YamlHas(t, "block");
    if (!wanted.empty() && name == wanted) chosen = static_cast<int>(i);
    if (usable && first_usable < 0) first_usable = static_cast<int>(i);
    if (usable && is_default && first_default < 0) first_default = static_cast<int>(i);
    names.push_back(std::move(name));
  }
  if (!wanted.empty() && chosen < 0) {
    return InvalidArgument("{}: no topology named '{}' (the file has: {})", source, wanted,
                           fmt::join(names, ", "));
  }
  if (wanted.empty()) chosen = first_default >= 0 ? first_default : first_usable;
  if (chosen < 0) {
    return InvalidArgument(
        "{}: none of the topologies ({}) is a tree or block topology; "
        "railyard imports only those",
        base::Where(source, base::YamlLine(root)), fmt::join(names, ", "));
  }
  const YAML::Node& t = root[chosen];
  FieldContext c = ctx.Index(chosen);
  if (base::YamlHas(t, "tree") && base::YamlHas(t, "block")) {
    return c.Error(t, "has both 'tree' and 'block'; a topology has exactly one type");
  }
  if (base::YamlHas(t, "tree")) {
    return TreeFromYaml(base::YamlGet(t, "tree"), c.Child("tree"), source, names[chosen]);
  }
  if (base::YamlHas(t, "block")) {
    return BlockFromYaml(base::YamlGet(t, "block"), c.Child("block"), source, names[chosen]);
  }
  return c.Error(t, fmt::format("topology '{}' is neither a tree nor a block topology; railyard "
                                "imports only those",
                                names[chosen]));
}

}  // namespace

Result<Cluster> SlurmTopologyFromYaml(const YAML::Node& root, std::string_view source,
                                      std::string_view topology) {
  try {
    return SlurmYamlImpl(root, source, topology);
  } catch (const YAML::Exception& e) {
    return InvalidArgument("{}: error: {}", source, e.what());
  }
}

Result<Cluster> ParseSlurmTopologyYaml(std::string_view text, std::string_view source,
                                       std::string_view topology) {
  RY_ASSIGN_OR_RETURN(YAML::Node root, base::ParseYaml(text, source));
  return SlurmTopologyFromYaml(root, source, topology);
}

std::string WriteSlurmTopologyYaml(const Cluster& c) {
  YAML::Emitter out;
  out << YAML::BeginSeq << YAML::BeginMap;
  out << YAML::Key << "topology" << YAML::Value;
  internal::EmitYamlString(out, c.name.empty() ? "default" : c.name);
  out << YAML::Key << "cluster_default" << YAML::Value << true;
  if (internal::WritesBlocks(c)) {
    out << YAML::Key << "block" << YAML::Value << YAML::BeginMap;
    if (!c.block_sizes.empty()) {
      out << YAML::Key << "block_sizes" << YAML::Value << c.block_sizes;
    }
    out << YAML::Key << "blocks" << YAML::Value << YAML::BeginSeq;
    int level = internal::BlockLevel(c);
    for (size_t s = 0; s < c.switches.size(); ++s) {
      if (c.switches[s].level != level) continue;
      std::vector<int> nodes = c.NodesUnder(static_cast<int>(s));
      out << YAML::BeginMap << YAML::Key << "block" << YAML::Value;
      internal::EmitYamlString(out, c.switches[s].name);
      if (!nodes.empty()) {
        out << YAML::Key << "nodes" << YAML::Value;
        internal::EmitYamlString(out, internal::SlurmHostlist(internal::NodeNames(c, nodes)));
      }
      out << YAML::EndMap;
    }
    out << YAML::EndSeq << YAML::EndMap;
  } else {
    out << YAML::Key << "tree" << YAML::Value << YAML::BeginMap;
    out << YAML::Key << "switches" << YAML::Value << YAML::BeginSeq;
    for (const Switch& s : c.switches) {
      out << YAML::BeginMap << YAML::Key << "switch" << YAML::Value;
      internal::EmitYamlString(out, s.name);
      if (!s.children.empty()) {
        out << YAML::Key << "children" << YAML::Value;
        internal::EmitYamlString(out, internal::SlurmHostlist(internal::ChildNames(c, s)));
      }
      if (!s.nodes.empty()) {
        out << YAML::Key << "nodes" << YAML::Value;
        internal::EmitYamlString(out, internal::SlurmHostlist(internal::NodeNames(c, s.nodes)));
      }
      out << YAML::EndMap;
    }
    out << YAML::EndSeq << YAML::EndMap;
  }
  out << YAML::EndMap << YAML::EndSeq;
  return internal::Header(c, "Slurm topology.yaml") + out.c_str() + "\n";
}

}  // namespace railyard::topo
