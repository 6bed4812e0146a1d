#include "railyard/topo/slurm_format.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <map>
#include <utility>

#include "railyard/base/config.h"
#include "railyard/base/strings.h"
#include "railyard/topo/hostlist.h"
#include "railyard/topo/internal/yaml_quote.h"

namespace railyard::topo {
namespace {

using base::FieldContext;

// Node and switch names over the whole file; keeps a hostlist typo repeated on many lines
// from exhausting memory.
constexpr size_t kMaxNames = 1'000'000;

// The format-neutral content of a tree or block topology, with the line of each entry.
struct SwitchSpec {
  std::string name;
  std::vector<std::string> children;
  std::vector<std::string> nodes;
  int line = 0;
};

struct BlockSpec {
  std::string name;
  std::vector<std::string> nodes;
  int line = 0;
};

// How each format names things in messages ("Switches=" vs "children").
struct Words {
  std::string_view children;
  std::string_view nodes;
};

Result<Cluster> BuildTree(const std::vector<SwitchSpec>& specs, std::string_view source,
                          std::string name, const Words& words) {
  if (specs.empty()) return InvalidArgument("{}: the tree has no switches", source);
  std::map<std::string, int, std::less<>> index;
  for (size_t i = 0; i < specs.size(); ++i) {
    auto [it, fresh] = index.emplace(specs[i].name, static_cast<int>(i));
    if (!fresh) {
      return InvalidArgument("{}: switch '{}' is defined twice (first on line {})",
                             base::Where(source, specs[i].line), specs[i].name,
                             specs[it->second].line);
    }
  }
  std::vector<int> parent(specs.size(), -1);
  for (size_t i = 0; i < specs.size(); ++i) {
    const SwitchSpec& s = specs[i];
    if (!s.children.empty() && !s.nodes.empty()) {
      return InvalidArgument(
          "{}: switch '{}' lists both {} and {}; railyard needs nodes only on leaf switches",
          base::Where(source, s.line), s.name, words.children, words.nodes);
    }
    for (const std::string& child : s.children) {
      auto it = index.find(child);
      if (it == index.end()) {
        return InvalidArgument("{}: switch '{}' lists child switch '{}', which is not defined",
                               base::Where(source, s.line), s.name, child);
      }
      int c = it->second;
      if (c == static_cast<int>(i)) {
        return InvalidArgument("{}: switch '{}' lists itself as a child (a cycle)",
                               base::Where(source, s.line), s.name);
      }
      if (parent[c] == static_cast<int>(i)) {
        return InvalidArgument("{}: switch '{}' lists child switch '{}' twice",
                               base::Where(source, s.line), s.name, child);
      }
      if (parent[c] >= 0) {
        return InvalidArgument(
            "{}: switch '{}' is listed under two parents: '{}' (line {}) and '{}' (line {})",
            base::Where(source, s.line), child, specs[parent[c]].name, specs[parent[c]].line,
            s.name, s.line);
      }
      parent[c] = static_cast<int>(i);
    }
  }
  // Depth of every switch, walking up; a walk that meets itself is a cycle.
  constexpr int kUnknown = -1, kVisiting = -2;
  std::vector<int> depth(specs.size(), kUnknown);
  for (size_t i = 0; i < specs.size(); ++i) {
    std::vector<int> chain;
    int s = static_cast<int>(i);
    while (s >= 0 && depth[s] == kUnknown) {
      depth[s] = kVisiting;
      chain.push_back(s);
      s = parent[s];
    }
    if (s >= 0 && depth[s] == kVisiting) {
      std::vector<std::string> cycle;
      for (auto it = std::find(chain.begin(), chain.end(), s); it != chain.end(); ++it) {
        cycle.push_back(specs[*it].name);
      }
      cycle.push_back(specs[s].name);
      return InvalidArgument(
          "{}: switches form a cycle with no top switch (each is listed under the next): {}",
          base::Where(source, specs[s].line), fmt::join(cycle, " -> "));
    }
    int d = s < 0 ? -1 : depth[s];
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) depth[*it] = ++d;
  }
  // Leaves are switches without child switches; all must be equally deep.
  int leaf = -1;
  for (size_t i = 0; i < specs.size(); ++i) {
    if (!specs[i].children.empty()) continue;
    if (leaf < 0) {
      leaf = static_cast<int>(i);
    } else if (depth[i] != depth[leaf]) {
      int shallow = depth[i] < depth[leaf] ? static_cast<int>(i) : leaf;
      int deep = shallow == leaf ? static_cast<int>(i) : leaf;
      return InvalidArgument(
          "{}: the tree is unbalanced: leaf switch '{}' is {} level(s) below the top but leaf "
          "switch '{}' (line {}) is {}; railyard needs every leaf switch at the same depth "
          "(add a pass-through switch above '{}')",
          base::Where(source, specs[shallow].line), specs[shallow].name, depth[shallow],
          specs[deep].name, specs[deep].line, depth[deep], specs[shallow].name);
    }
  }
  std::vector<std::string> levels = SlurmLevelNames(depth[leaf] + 1);
  ClusterBuilder b{std::string(source)};
  b.SetName(std::move(name));
  b.SetLevels(levels);
  for (size_t i = 0; i < specs.size(); ++i) {
    b.AddSwitch(specs[i].name, levels[depth[i]], parent[i] < 0 ? "" : specs[parent[i]].name, 0,
                specs[i].line);
  }
  for (const SwitchSpec& s : specs) {
    for (const std::string& n : s.nodes) {
      Node node;
      node.name = n;
      b.AddNode(std::move(node), s.name, s.line);
    }
  }
  return std::move(b).Finish();
}

Result<Cluster> BuildBlocks(const std::vector<BlockSpec>& blocks, std::vector<int> sizes,
                            std::string_view source, std::string name) {
  if (blocks.empty()) return InvalidArgument("{}: the block topology has no blocks", source);
  ClusterBuilder b{std::string(source)};
  b.SetName(std::move(name));
  b.SetLevels({"block"});
  b.SetBlockSizes(std::move(sizes));
  for (const BlockSpec& block : blocks) b.AddSwitch(block.name, "block", "", 0, block.line);
  for (const BlockSpec& block : blocks) {
    for (const std::string& n : block.nodes) {
      Node node;
      node.name = n;
      b.AddNode(std::move(node), block.name, block.line);
    }
  }
  return std::move(b).Finish();
}

// ---- topology.conf ----

std::string Lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// "unknown key 'Switchs' (did you mean 'Switches'? allowed here: ...)".
std::string UnknownKey(std::string_view key, const std::vector<std::string_view>& allowed) {
  std::string_view best;
  size_t best_distance = std::numeric_limits<size_t>::max();
  for (std::string_view a : allowed) {
    size_t d = base::EditDistance(Lower(key), Lower(a));
    if (d < best_distance) best = a, best_distance = d;
  }
  std::string hint = best_distance <= 2 ? fmt::format("did you mean '{}'? ", best) : "";
  return fmt::format("unknown key '{}' ({}allowed here: {})", key, hint, fmt::join(allowed, ", "));
}

struct Pair {
  std::string key;  // lower case
  std::string raw_key;
  std::string value;
};

Result<std::vector<Pair>> SplitPairs(std::string_view line, std::string_view where) {
  std::vector<Pair> pairs;
  size_t i = 0;
  while (i < line.size()) {
    while (i < line.size() && std::isspace(static_cast<unsigned char>(line[i]))) ++i;
    if (i == line.size()) break;
    size_t start = i;
    bool quoted = false;
    while (i < line.size() && (quoted || !std::isspace(static_cast<unsigned char>(line[i])))) {
      if (line[i] == '"') quoted = !quoted;
      ++i;
    }
    std::string_view token = line.substr(start, i - start);
    size_t eq = token.find('=');
    if (eq == std::string_view::npos || eq == 0) {
      return InvalidArgument("{}: expected Key=Value, got '{}'", where, token);
    }
    std::string_view value = token.substr(eq + 1);
    if (value.size() >= 2 && value.front() == '"' && value.back() == '"') {
      value = value.substr(1, value.size() - 2);
    }
    Pair p{Lower(token.substr(0, eq)), std::string(token.substr(0, eq)), std::string(value)};
    for (const Pair& q : pairs) {
      if (q.key == p.key) return InvalidArgument("{}: '{}' is given twice", where, p.raw_key);
    }
    pairs.push_back(std::move(p));
  }
  return pairs;
}

Result<std::vector<std::string>> Names(const Pair& p, std::string_view where, size_t& total) {
  if (p.value.empty()) return InvalidArgument("{}: {}= is empty", where, p.raw_key);
  Result<std::vector<std::string>> names = ExpandHostlist(p.value);
  if (!names.ok()) {
    return InvalidArgument("{}: {}=: {}", where, p.raw_key, names.status().message());
  }
  total += names->size();
  if (total > kMaxNames) {
    return InvalidArgument("{}: the file names more than {} switches and nodes", where, kMaxNames);
  }
  return names;
}

Result<std::vector<int>> ParseSizes(std::string_view text, std::string_view where) {
  std::vector<int> sizes;
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string_view part = base::StripAsciiWhitespace(
        text.substr(start, comma == text.npos ? text.npos : comma - start));
    bool digits =
        !part.empty() && part.size() <= 9 &&
        std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    if (!digits) {
      return InvalidArgument(
          "{}: BlockSizes: '{}' is not a positive integer (expected a list "
          "like 32,64)",
          where, part);
    }
    sizes.push_back(std::stoi(std::string(part)));
    if (comma == text.npos) break;
    start = comma + 1;
  }
  Status valid = ValidateBlockSizes(sizes);
  if (!valid.ok()) return InvalidArgument("{}: BlockSizes: {}", where, valid.message());
  return sizes;
}

// ---- topology.yaml ----

Result<std::vector<std::string>> YamlNames(const YAML::Node& map, std::string_view key,
                                           const FieldContext& ctx, size_t& total) {
  if (!base::YamlHas(map, key)) return std::vector<std::string>{};
  RY_ASSIGN_OR_RETURN(std::string text, base::RequireString(map, key, ctx));
  Result<std::vector<std::string>> names = ExpandHostlist(text);
  if (!names.ok()) return ctx.Child(key).Error(base::YamlGet(map, key), names.status().message());
  total += names->size();
  if (total > kMaxNames) {
    return ctx.Child(key).Error(base::YamlGet(map, key),
                                fmt::format("more than {} switches and nodes", kMaxNames));
  }
  return names;
}

Result<Cluster> TreeFromYaml(const YAML::Node& tree, const FieldContext& ctx,
                             std::string_view source, std::string name) {
  RY_RETURN_IF_ERROR(base::ExpectMap(tree, ctx));
  RY_RETURN_IF_ERROR(base::RejectUnknownKeys(tree, {"switches"}, ctx));
  RY_ASSIGN_OR_RETURN(YAML::Node switches, base::RequireSequence(tree, "switches", ctx));
  std::vector<SwitchSpec> specs;
  size_t total = 0;
  for (size_t i = 0; i < switches.size(); ++i) {
    FieldContext c = ctx.Child("switches").Index(i);
    const YAML::Node& sw = switches[i];
    RY_RETURN_IF_ERROR(base::ExpectMap(sw, c));
    RY_RETURN_IF_ERROR(base::RejectUnknownKeys(sw, {"switch", "children", "nodes"}, c));
    SwitchSpec spec;
    RY_ASSIGN_OR_RETURN(spec.name, base::RequireString(sw, "switch", c));
    RY_ASSIGN_OR_RETURN(spec.children, YamlNames(sw, "children", c, total));
    RY_ASSIGN_OR_RETURN(spec.nodes, YamlNames(sw, "nodes", c, total));
    spec.line = base::YamlLine(sw);
    specs.push_back(std::move(spec));
  }
  if (specs.empty()) return ctx.Child("switches").Error(switches, "lists no switches");
  return BuildTree(specs, source, std::move(name), {"children", "nodes"});
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
  std::vector<BlockSpec> specs;
  size_t total = 0;
  for (size_t i = 0; i < blocks.size(); ++i) {
    FieldContext c = ctx.Child("blocks").Index(i);
    const YAML::Node& b = blocks[i];
    RY_RETURN_IF_ERROR(base::ExpectMap(b, c));
    RY_RETURN_IF_ERROR(base::RejectUnknownKeys(b, {"block", "nodes"}, c));
    BlockSpec spec;
    RY_ASSIGN_OR_RETURN(spec.name, base::RequireString(b, "block", c));
    RY_ASSIGN_OR_RETURN(spec.nodes, YamlNames(b, "nodes", c, total));
    spec.line = base::YamlLine(b);
    specs.push_back(std::move(spec));
  }
  if (specs.empty()) return ctx.Child("blocks").Error(blocks, "lists no blocks");
  return BuildBlocks(specs, std::move(sizes), source, std::move(name));
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

// ---- writing ----

bool WritesBlocks(const Cluster& c) {
  return (c.levels.size() == 1 && c.levels[0] == "block") || !c.block_sizes.empty();
}

// The switches that become Slurm blocks.
int BlockLevel(const Cluster& c) {
  int level = c.FindLevel("block");
  return level >= 0 ? level : c.leaf_level();
}

std::vector<std::string> NodeNames(const Cluster& c, const std::vector<int>& nodes) {
  std::vector<std::string> names;
  names.reserve(nodes.size());
  for (int n : nodes) names.push_back(c.nodes[n].name);
  return names;
}

// A hostlist every slurmctld from 22.05 on reads. Before 23.02.5 (hostlist.c,
// _hostlist_create_bracketed at tag slurm-22-05-8-1) text may not follow the last ']' of an
// item: "su[0-1]-spine" fails with "fatal: Invalid switches". So only names that end in their
// number run are bracketed; the others are listed one by one ("su0-spine,su1-spine").
std::string SlurmHostlist(const std::vector<std::string>& names) {
  auto ends_in_digit = [](const std::string& n) {
    return !n.empty() && n.back() >= '0' && n.back() <= '9';
  };
  std::string out;
  std::vector<std::string> run;
  auto flush = [&] {
    if (run.empty()) return;
    out += (out.empty() ? "" : ",") + CompressHostlist(run);
    run.clear();
  };
  for (const std::string& n : names) {
    if (ends_in_digit(n)) {
      run.push_back(n);
      continue;
    }
    flush();
    out += (out.empty() ? "" : ",") + n;
  }
  flush();
  return out;
}

std::vector<std::string> ChildNames(const Cluster& c, const Switch& s) {
  std::vector<std::string> names;
  for (int ch : s.children) names.push_back(c.switches[ch].name);
  return names;
}

// Two comment lines saying where the file came from and what it leaves out.
std::string Header(const Cluster& c, std::string_view what) {
  return fmt::format(
      "# {} written by railyard{} (levels: {}).\n"
      "# Rates, addresses and node hardware are not part of this format.\n",
      what, c.name.empty() ? "" : fmt::format(" for cluster '{}'", c.name),
      fmt::join(c.levels, " > "));
}

}  // namespace

std::vector<std::string> SlurmLevelNames(int height) {
  switch (height) {
    case 1:
      return {"leaf"};
    case 2:
      return {"spine", "leaf"};
    case 3:
      return {"block", "spine", "leaf"};
    default:
      break;
  }
  std::vector<std::string> levels;
  for (int i = 0; i < height; ++i) levels.push_back(fmt::format("level{}", i));
  return levels;
}

Status ValidateBlockSizes(const std::vector<int>& sizes) {
  for (size_t i = 0; i < sizes.size(); ++i) {
    if (sizes[i] <= 0) return InvalidArgument("block size {} is not positive", sizes[i]);
    if (i == 0) continue;
    if (sizes[i] <= sizes[i - 1]) {
      return InvalidArgument("block sizes must increase ({} follows {})", sizes[i], sizes[i - 1]);
    }
    int ratio = sizes[i] / sizes[0];
    if (sizes[i] % sizes[0] != 0 || (ratio & (ratio - 1)) != 0) {
      return InvalidArgument("block size {} is not a power-of-two multiple of the base size {}",
                             sizes[i], sizes[0]);
    }
  }
  return Status::Ok();
}

Result<Cluster> ParseSlurmTopologyConf(std::string_view text, std::string_view source) {
  std::vector<SwitchSpec> switches;
  std::vector<BlockSpec> blocks;
  std::vector<int> sizes;
  int sizes_line = 0;
  size_t total = 0;
  int line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    std::string where = base::Where(source, line_no);
    if (size_t hash = line.find('#'); hash != std::string_view::npos) line = line.substr(0, hash);
    line = base::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    if (line.back() == '\\') {
      return InvalidArgument(
          "{}: line continuation ('\\') is not supported; put each entry on "
          "one line",
          where);
    }
    RY_ASSIGN_OR_RETURN(std::vector<Pair> pairs, SplitPairs(line, where));
    const Pair& head = pairs[0];
    auto only = [&](const std::vector<std::string_view>& allowed) -> Status {
      for (size_t i = 1; i < pairs.size(); ++i) {
        bool ok = std::any_of(allowed.begin(), allowed.end(),
                              [&](std::string_view a) { return Lower(a) == pairs[i].key; });
        if (!ok) return InvalidArgument("{}: {}", where, UnknownKey(pairs[i].raw_key, allowed));
      }
      return Status::Ok();
    };
    if (head.key == "switchname") {
      RY_RETURN_IF_ERROR(only({"Switches", "Nodes", "LinkSpeed"}));
      SwitchSpec spec;
      spec.name = head.value;
      spec.line = line_no;
      if (spec.name.empty()) return InvalidArgument("{}: SwitchName= is empty", where);
      for (const Pair& p : pairs) {
        if (p.key == "switches") {
          RY_ASSIGN_OR_RETURN(spec.children, Names(p, where, total));
        } else if (p.key == "nodes") {
          RY_ASSIGN_OR_RETURN(spec.nodes, Names(p, where, total));
        }
        // LinkSpeed is in arbitrary units that Slurm itself does not use; nothing to keep.
      }
      switches.push_back(std::move(spec));
    } else if (head.key == "blockname") {
      RY_RETURN_IF_ERROR(only({"Nodes"}));
      BlockSpec spec;
      spec.name = head.value;
      spec.line = line_no;
      if (spec.name.empty()) return InvalidArgument("{}: BlockName= is empty", where);
      if (pairs.size() > 1) {
        RY_ASSIGN_OR_RETURN(spec.nodes, Names(pairs[1], where, total));
      }
      blocks.push_back(std::move(spec));
    } else if (head.key == "blocksizes") {
      RY_RETURN_IF_ERROR(only({}));
      if (sizes_line > 0) {
        return InvalidArgument("{}: BlockSizes= is given twice (first on line {})", where,
                               sizes_line);
      }
      RY_ASSIGN_OR_RETURN(sizes, ParseSizes(head.value, where));
      sizes_line = line_no;
    } else if (head.key == "ringname") {
      return InvalidArgument(
          "{}: topology/ring (RingName=) cannot be imported; railyard reads "
          "tree (SwitchName=) and block (BlockName=) topologies",
          where);
    } else {
      return InvalidArgument(
          "{}: a line must start with SwitchName=, BlockName= or "
          "BlockSizes=, not '{}='",
          where, head.raw_key);
    }
    if (!switches.empty() && (!blocks.empty() || sizes_line > 0)) {
      int tree_line = switches[0].line;
      int block_line = blocks.empty() ? sizes_line : blocks[0].line;
      return InvalidArgument(
          "{}: the file mixes a tree (SwitchName= on line {}) and a block "
          "topology ({} on line {}); use one",
          where, tree_line, blocks.empty() ? "BlockSizes=" : "BlockName=", block_line);
    }
  }
  if (!switches.empty()) return BuildTree(switches, source, "", {"Switches=", "Nodes="});
  if (!blocks.empty()) return BuildBlocks(blocks, std::move(sizes), source, "");
  if (sizes_line > 0) {
    return InvalidArgument("{}: BlockSizes= without any BlockName= entries",
                           base::Where(source, sizes_line));
  }
  return InvalidArgument(
      "{}: no SwitchName= or BlockName= entries (the file is empty or all "
      "comments)",
      source);
}

std::string WriteSlurmTopologyConf(const Cluster& c) {
  std::string out = Header(c, "Slurm topology.conf");
  if (WritesBlocks(c)) {
    int level = BlockLevel(c);
    for (size_t s = 0; s < c.switches.size(); ++s) {
      if (c.switches[s].level != level) continue;
      std::vector<int> nodes = c.NodesUnder(static_cast<int>(s));
      out += "BlockName=" + c.switches[s].name;
      if (!nodes.empty()) out += " Nodes=" + SlurmHostlist(NodeNames(c, nodes));
      out += "\n";
    }
    if (!c.block_sizes.empty()) {
      out += fmt::format("BlockSizes={}\n", fmt::join(c.block_sizes, ","));
    }
    return out;
  }
  for (const Switch& s : c.switches) {
    out += "SwitchName=" + s.name;
    if (!s.children.empty()) out += " Switches=" + SlurmHostlist(ChildNames(c, s));
    if (!s.nodes.empty()) out += " Nodes=" + SlurmHostlist(NodeNames(c, s.nodes));
    out += "\n";
  }
  return out;
}

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
  if (WritesBlocks(c)) {
    out << YAML::Key << "block" << YAML::Value << YAML::BeginMap;
    if (!c.block_sizes.empty()) {
      out << YAML::Key << "block_sizes" << YAML::Value << c.block_sizes;
    }
    out << YAML::Key << "blocks" << YAML::Value << YAML::BeginSeq;
    int level = BlockLevel(c);
    for (size_t s = 0; s < c.switches.size(); ++s) {
      if (c.switches[s].level != level) continue;
      std::vector<int> nodes = c.NodesUnder(static_cast<int>(s));
      out << YAML::BeginMap << YAML::Key << "block" << YAML::Value;
      internal::EmitYamlString(out, c.switches[s].name);
      if (!nodes.empty()) {
        out << YAML::Key << "nodes" << YAML::Value;
        internal::EmitYamlString(out, SlurmHostlist(NodeNames(c, nodes)));
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
        internal::EmitYamlString(out, SlurmHostlist(ChildNames(c, s)));
      }
      if (!s.nodes.empty()) {
        out << YAML::Key << "nodes" << YAML::Value;
        internal::EmitYamlString(out, SlurmHostlist(NodeNames(c, s.nodes)));
      }
      out << YAML::EndMap;
    }
    out << YAML::EndSeq << YAML::EndMap;
  }
  out << YAML::EndMap << YAML::EndSeq;
  return Header(c, "Slurm topology.yaml") + out.c_str() + "\n";
}

}  // namespace railyard::topo
