// Slurm topology.conf (slurm_format.h): key=value lines in tree form (SwitchName= with
// Switches= or Nodes=) or block form (BlockName=, BlockSizes=), read and written.
#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <utility>

#include "railyard/base/config.h"
#include "railyard/base/strings.h"
#include "railyard/topo/hostlist.h"
#include "railyard/topo/internal/slurm_tree.h"
#include "railyard/topo/slurm_format.h"

namespace railyard::topo {
namespace {

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
  if (total > internal::kMaxSlurmNames) {
    return InvalidArgument("{}: the file names more than {} switches and nodes", where,
                           internal::kMaxSlurmNames);
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

}  // namespace

Result<Cluster> ParseSlurmTopologyConf(std::string_view text, std::string_view source) {
  std::vector<internal::SwitchSpec> switches;
  std::vector<internal::BlockSpec> blocks;
  std::vector<int> sizes;
  int sizes_line = 0;
  size_t total = 0;
  int line_no = 0;
  for (std::string_view line : base::SplitLines(text)) {
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
      internal::SwitchSpec spec;
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
      internal::BlockSpec spec;
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
  if (!switches.empty()) return internal::BuildTree(switches, source, "", {"Switches=", "Nodes="});
  if (!blocks.empty()) return internal::BuildBlocks(blocks, std::move(sizes), source, "");
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
  std::string out = internal::Header(c, "Slurm topology.conf");
  if (internal::WritesBlocks(c)) {
    int level = internal::BlockLevel(c);
    for (size_t s = 0; s < c.switches.size(); ++s) {
      if (c.switches[s].level != level) continue;
      std::vector<int> nodes = c.NodesUnder(static_cast<int>(s));
      out += "BlockName=" + c.switches[s].name;
      if (!nodes.empty()) out += " Nodes=" + internal::SlurmHostlist(internal::NodeNames(c, nodes));
      out += "\n";
    }
    if (!c.block_sizes.empty()) {
      out += fmt::format("BlockSizes={}\n", fmt::join(c.block_sizes, ","));
    }
    return out;
  }
  for (const Switch& s : c.switches) {
    out += "SwitchName=" + s.name;
    if (!s.children.empty())
      out += " Switches=" + internal::SlurmHostlist(internal::ChildNames(c, s));
    if (!s.nodes.empty())
      out += " Nodes=" + internal::SlurmHostlist(internal::NodeNames(c, s.nodes));
    out += "\n";
  }
  return out;
}

}  // namespace railyard::topo
