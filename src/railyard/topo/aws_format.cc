#include "railyard/topo/aws_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <utility>
#include <vector>

#include "railyard/base/config.h"
#include "railyard/base/strings.h"

namespace railyard::topo {
namespace {

using base::FieldContext;
using Json = nlohmann::json;

constexpr size_t kMaxInstances = 1'000'000;
// The layer-4 switch under a layer-3 node that holds the 3-layer instances of a mixed fleet.
constexpr std::string_view kDirectSuffix = "-direct";

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

Status ReadPage(const Json& page, const FieldContext& ctx, LineFinder& lines,
                std::map<std::string, int>& seen, std::vector<Instance>& out,
                std::vector<std::string>& skipped) {
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
    std::string where = base::Where(c.source(), in.line);
    auto [first, fresh] = seen.emplace(in.id, in.line);
    if (!fresh) {
      return InvalidArgument("{}: instance '{}' is listed twice (first on line {})", where, in.id,
                             first->second);
    }
    auto nn = inst.find("NetworkNodes");
    if (nn == inst.end() || nn->is_null() || (nn->is_array() && nn->empty())) {
      // AWS leaves them out for instances that are not running and for types without
      // instance topology: such an instance has no place in the tree.
      skipped.push_back(fmt::format("{} ({}, line {}): no network nodes", in.id,
                                    in.type.empty() ? "type not given" : in.type, in.line));
      continue;
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

Result<AwsImport> ImportAwsInstanceTopologyJson(const Json& doc, std::string_view text,
                                                std::string_view source,
                                                const AwsImportOptions& options) {
  LineFinder lines(text);
  FieldContext ctx{std::string(source)};
  std::vector<Instance> instances;
  std::map<std::string, int> seen;
  AwsImport result;
  if (doc.is_array()) {
    for (size_t p = 0; p < doc.size(); ++p) {
      RY_RETURN_IF_ERROR(ReadPage(doc[p], ctx.Index(p), lines, seen, instances, result.skipped));
    }
  } else {
    RY_RETURN_IF_ERROR(ReadPage(doc, ctx, lines, seen, instances, result.skipped));
  }
  if (instances.empty()) {
    return InvalidArgument("{}: the instance topology lists no instances{}", source,
                           result.skipped.empty() ? std::string()
                                                  : fmt::format(" with network nodes ({} without)",
                                                                result.skipped.size()));
  }
  // Layers: 3 unless some instance lists 4 (see the header on mixed fleets).
  size_t layers = 3;
  for (const Instance& in : instances) layers = std::max(layers, in.network_nodes.size());
  std::vector<std::string> levels;
  for (size_t l = 1; l <= layers; ++l) levels.push_back(fmt::format("layer{}", l));

  struct Known {
    size_t layer;
    std::string parent;
    const Instance* by;
  };
  std::map<std::string, Known> known;
  std::map<std::string, const Instance*> host_of;  // node name -> instance
  ClusterBuilder b{std::string(source)};
  b.SetLevels(levels);
  for (const Instance& in : instances) {
    std::string where = base::Where(source, in.line);
    std::vector<std::string> path = in.network_nodes;
    if (path.size() < layers) path.push_back(path.back() + std::string(kDirectSuffix));
    for (size_t l = 0; l < layers; ++l) {
      const std::string& nn = path[l];
      std::string parent = l == 0 ? "" : path[l - 1];
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
    if (options.hosts != nullptr) {
      auto h = options.hosts->find(in.id);
      if (h == options.hosts->end()) {
        return InvalidArgument(
            "{}: instance '{}' ({}) has no host name in {}; Slurm and Kubernetes know nodes by "
            "host name, so every instance needs a line '{} <host-name>' there",
            where, in.id, in.type.empty() ? "type not given" : in.type,
            options.hosts_source.empty() ? "the host map" : options.hosts_source, in.id);
      }
      node.name = h->second;
      auto [other, fresh] = host_of.emplace(node.name, &in);
      if (!fresh) {
        return InvalidArgument(
            "{}: instances '{}' (line {}) and '{}' both map to host '{}' in {}", where,
            other->second->id, other->second->line, in.id, node.name,
            options.hosts_source.empty() ? "the host map" : options.hosts_source);
      }
    }
    node.gpu_count = AwsInstanceGpus(in.type);
    b.AddNode(std::move(node), path.back(), in.line);
  }
  RY_ASSIGN_OR_RETURN(result.cluster, std::move(b).Finish());
  return result;
}

Result<AwsImport> ImportAwsInstanceTopology(std::string_view text, std::string_view source,
                                            const AwsImportOptions& options) {
  RY_ASSIGN_OR_RETURN(Json doc, base::ParseJson(text, source));
  return ImportAwsInstanceTopologyJson(doc, text, source, options);
}

Result<Cluster> AwsTopologyFromJson(const Json& doc, std::string_view text,
                                    std::string_view source) {
  RY_ASSIGN_OR_RETURN(AwsImport in, ImportAwsInstanceTopologyJson(doc, text, source));
  return std::move(in.cluster);
}

Result<Cluster> ParseAwsInstanceTopology(std::string_view text, std::string_view source) {
  RY_ASSIGN_OR_RETURN(AwsImport in, ImportAwsInstanceTopology(text, source));
  return std::move(in.cluster);
}

Result<std::map<std::string, std::string>> ParseAwsHostMap(std::string_view text,
                                                           std::string_view source) {
  std::map<std::string, std::string> hosts;
  std::map<std::string, int> line_of;
  int line = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view raw = text.substr(pos, end - pos);
    pos = end + 1;
    ++line;
    std::vector<std::string> fields;
    size_t i = 0;
    while (i < raw.size()) {
      while (i < raw.size() && (raw[i] == ' ' || raw[i] == '\t' || raw[i] == '\r')) ++i;
      size_t start = i;
      while (i < raw.size() && raw[i] != ' ' && raw[i] != '\t' && raw[i] != '\r') ++i;
      if (i > start) fields.emplace_back(raw.substr(start, i - start));
    }
    if (fields.empty() || fields[0][0] == '#') continue;
    if (fields.size() != 2) {
      return InvalidArgument("{}:{}: expected '<instance-id> <host-name>', got {} field(s): '{}'",
                             source, line, fields.size(), raw);
    }
    if (fields[0].rfind("i-", 0) != 0) {
      return InvalidArgument("{}:{}: '{}' is not an EC2 instance id (i-...)", source, line,
                             fields[0]);
    }
    auto [it, fresh] = hosts.emplace(fields[0], fields[1]);
    if (!fresh && it->second != fields[1]) {
      return InvalidArgument("{}:{}: instance '{}' is mapped to '{}' here and to '{}' on line {}",
                             source, line, fields[0], fields[1], it->second, line_of[fields[0]]);
    }
    line_of.emplace(fields[0], line);
  }
  return hosts;
}

}  // namespace railyard::topo
