#include "railyard/topo/aws_format.h"

#include <fmt/format.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "railyard/base/config.h"

namespace railyard::topo {
namespace {

using base::FieldContext;
using Json = nlohmann::json;

constexpr size_t kMaxInstances = 1'000'000;

// JSON keeps no positions, so an instance's line is found by searching the text for its quoted
// id. Instances come in text order, so one forward scan serves them all (linear, not
// quadratic, in the size of the file).
class LineFinder {
 public:
  explicit LineFinder(std::string_view text) : text_(text) {}

  // Line of the next occurrence of "\"id\"" after the previous hit, or 0 if there is none.
  int Next(std::string_view id) {
    if (text_.empty() || id.empty()) return 0;
    std::string needle = fmt::format("\"{}\"", id);
    size_t pos = text_.find(needle, cursor_);
    if (pos == std::string_view::npos) return 0;
    for (size_t i = cursor_; i < pos; ++i) line_ += text_[i] == '\n';
    cursor_ = pos + needle.size();  // the needle holds no newline
    return line_;
  }

 private:
  std::string_view text_;
  size_t cursor_ = 0;
  int line_ = 1;
};

struct Instance {
  std::string id;
  std::string type;
  std::vector<std::string> network_nodes;
  int line = 0;
};

std::string Where(std::string_view source, int line) {
  return line > 0 ? fmt::format("{}:{}", source, line) : std::string(source);
}

Status ReadPage(const Json& page, const FieldContext& ctx, LineFinder& lines,
                std::map<std::string, int>& seen, std::vector<Instance>& out) {
  if (!page.is_object()) {
    return ctx.Error(
        fmt::format("expected a DescribeInstanceTopology response (an object with "
                    "\"Instances\"), got {}",
                    page.type_name()));
  }
  RY_ASSIGN_OR_RETURN(const Json* instances, base::RequireArray(page, "Instances", ctx));
  for (size_t i = 0; i < instances->size(); ++i) {
    FieldContext c = ctx.Child("Instances").Index(i);
    const Json& inst = (*instances)[i];
    if (!inst.is_object())
      return c.Error(fmt::format("expected an object, got {}", inst.type_name()));
    Instance in;
    RY_ASSIGN_OR_RETURN(in.id, base::RequireString(inst, "InstanceId", c));
    if (in.id.empty()) return c.Error("InstanceId is empty");
    RY_ASSIGN_OR_RETURN(in.type, base::OptionalString(inst, "InstanceType", "", c));
    in.line = lines.Next(in.id);
    std::string where = Where(c.source(), in.line);
    auto [first, fresh] = seen.emplace(in.id, in.line);
    if (!fresh) {
      return InvalidArgument("{}: instance '{}' is listed twice (first on line {})", where, in.id,
                             first->second);
    }
    auto nn = inst.find("NetworkNodes");
    if (nn == inst.end() || nn->is_null() || (nn->is_array() && nn->empty())) {
      return InvalidArgument(
          "{}: instance '{}' ({}) lists no network nodes: AWS leaves them out for instances "
          "that are not running and for types without instance topology; leave the instance "
          "out (describe-instance-topology --instance-ids ...)",
          where, in.id, in.type.empty() ? "type not given" : in.type);
    }
    if (!nn->is_array()) {
      return InvalidArgument("{}: instance '{}': NetworkNodes must be an array of ids, got {}",
                             where, in.id, nn->type_name());
    }
    for (const Json& id : *nn) {
      if (!id.is_string() || id.get<std::string>().empty()) {
        return InvalidArgument(
            "{}: instance '{}': NetworkNodes must hold non-empty strings, "
            "got {}",
            where, in.id, id.dump());
      }
      in.network_nodes.push_back(id.get<std::string>());
    }
    if (in.network_nodes.size() != 3 && in.network_nodes.size() != 4) {
      return InvalidArgument(
          "{}: instance '{}' lists {} network nodes; expected 3 or 4 layers, "
          "top first",
          where, in.id, in.network_nodes.size());
    }
    if (out.size() >= kMaxInstances) {
      return InvalidArgument("{}: more than {} instances", where, kMaxInstances);
    }
    out.push_back(std::move(in));
  }
  return Status::Ok();
}

}  // namespace

int AwsInstanceGpus(std::string_view type) {
  // Instance types with EC2 instance topology support and NVIDIA GPUs.
  static const std::map<std::string_view, int> kGpus = {
      {"p3dn.24xlarge", 8},      {"p4d.24xlarge", 8},     {"p4de.24xlarge", 8},
      {"p5.4xlarge", 1},         {"p5.48xlarge", 8},      {"p5e.48xlarge", 8},
      {"p5en.48xlarge", 8},      {"p6-b200.48xlarge", 8}, {"p6-b300.48xlarge", 8},
      {"p6e-gb200.36xlarge", 4},
  };
  auto it = kGpus.find(type);
  return it == kGpus.end() ? 0 : it->second;
}

Result<Cluster> AwsTopologyFromJson(const Json& doc, std::string_view text,
                                    std::string_view source) {
  LineFinder lines(text);
  FieldContext ctx{std::string(source)};
  std::vector<Instance> instances;
  std::map<std::string, int> seen;
  if (doc.is_array()) {
    for (size_t p = 0; p < doc.size(); ++p) {
      RY_RETURN_IF_ERROR(ReadPage(doc[p], ctx.Index(p), lines, seen, instances));
    }
  } else {
    RY_RETURN_IF_ERROR(ReadPage(doc, ctx, lines, seen, instances));
  }
  if (instances.empty()) {
    return InvalidArgument("{}: the instance topology lists no instances", source);
  }
  const Instance& first = instances[0];
  size_t layers = first.network_nodes.size();
  std::vector<std::string> levels;
  for (size_t l = 1; l <= layers; ++l) levels.push_back(fmt::format("layer{}", l));

  struct Known {
    size_t layer;
    std::string parent;
    const Instance* by;
  };
  std::map<std::string, Known> known;
  ClusterBuilder b{std::string(source)};
  b.SetLevels(levels);
  for (const Instance& in : instances) {
    std::string where = Where(source, in.line);
    if (in.network_nodes.size() != layers) {
      return InvalidArgument(
          "{}: instance '{}' lists {} network nodes but instance '{}' (line "
          "{}) lists {}; every instance must have the same number of layers",
          where, in.id, in.network_nodes.size(), first.id, first.line, layers);
    }
    for (size_t l = 0; l < layers; ++l) {
      const std::string& nn = in.network_nodes[l];
      std::string parent = l == 0 ? "" : in.network_nodes[l - 1];
      auto [it, fresh] = known.emplace(nn, Known{l, parent, &in});
      if (fresh) {
        b.AddSwitch(nn, levels[l], parent, 0, in.line);
        continue;
      }
      const Known& k = it->second;
      if (k.layer != l) {
        return InvalidArgument(
            "{}: network node '{}' is at layer {} for instance '{}' but at "
            "layer {} for instance '{}' (line {})",
            where, nn, l + 1, in.id, k.layer + 1, k.by->id, k.by->line);
      }
      if (k.parent != parent) {
        return InvalidArgument(
            "{}: network node '{}' sits under '{}' for instance '{}' but "
            "under '{}' for instance '{}' (line {}); a network node has one "
            "parent",
            where, nn, parent, in.id, k.parent, k.by->id, k.by->line);
      }
    }
    Node node;
    node.name = in.id;
    node.gpu_count = AwsInstanceGpus(in.type);
    b.AddNode(std::move(node), in.network_nodes.back(), in.line);
  }
  return std::move(b).Finish();
}

Result<Cluster> ParseAwsInstanceTopology(std::string_view text, std::string_view source) {
  RY_ASSIGN_OR_RETURN(Json doc, base::ParseJson(text, source));
  return AwsTopologyFromJson(doc, text, source);
}

}  // namespace railyard::topo
