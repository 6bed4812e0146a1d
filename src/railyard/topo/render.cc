#include "railyard/topo/render.h"

#include <fmt/format.h>

#include <algorithm>
#include <climits>
#include <set>

#include "railyard/topo/hostlist.h"

namespace railyard::topo {

namespace {

std::string Plural(long n, std::string_view one, std::string_view many) {
  return fmt::format("{} {}", n, n == 1 ? one : many);
}

class TreeRenderer {
 public:
  explicit TreeRenderer(const Cluster& c) : c_(c) {
    size_t n = c.switches.size();
    pre_.assign(n, 0);
    size_.assign(n, 1);
    nodes_.assign(n, 0);
    gpus_.assign(n, 0);
    leaves_.assign(n, 0);
    for (int s = 0; s < static_cast<int>(n); ++s) {
      if (c.switches[s].parent < 0) tops_.push_back(s);
    }
    for (int top : tops_) Number(top);
    // Children come after their parent in pre-order, so a reverse sweep sums subtrees.
    for (auto it = order_.rbegin(); it != order_.rend(); ++it) {
      const Switch& sw = c.switches[*it];
      for (int node : sw.nodes) gpus_[*it] += c.nodes[node].gpu_count;
      nodes_[*it] += static_cast<long>(sw.nodes.size());
      if (sw.level == c.leaf_level()) leaves_[*it] += 1;
      if (sw.parent >= 0) {
        nodes_[sw.parent] += nodes_[*it];
        gpus_[sw.parent] += gpus_[*it];
        leaves_[sw.parent] += leaves_[*it];
        size_[sw.parent] += size_[*it];
      }
    }
    show_gpus_ = c.TotalGpus() > 0;
    std::vector<int> leaf_order;
    for (int s : order_) {
      if (c.switches[s].level == c.leaf_level()) leaf_order.push_back(s);
    }
    if (static_cast<int>(leaf_order.size()) > kRenderMaxLeaves) {
      int keep = kRenderShownLeaves / 2;
      // Everything strictly between the last head leaf and the first tail leaf (in pre-order)
      // is hidden; switches wholly inside that span collapse into "… more …" lines.
      hide_lo_ = pre_[leaf_order[keep - 1]] + 1;
      hide_hi_ = pre_[leaf_order[leaf_order.size() - keep]] - 1;
    }
  }

  std::string Render() {
    out_ = c_.name.empty() ? "(unnamed cluster)" : c_.name;
    out_ += "\n";
    Children(tops_, "");
    std::vector<std::string> levels;
    for (int l = 0; l < static_cast<int>(c_.levels.size()); ++l) {
      int count = 0;
      for (const Switch& sw : c_.switches) count += sw.level == l;
      levels.push_back(fmt::format("{} ({})", c_.levels[l], count));
    }
    out_ += fmt::format("{}, {}; levels {}\n", Plural(c_.nodes.size(), "node", "nodes"),
                        Plural(c_.TotalGpus(), "GPU", "GPUs"), fmt::join(levels, " > "));
    return std::move(out_);
  }

 private:
  void Number(int s) {
    pre_[s] = static_cast<int>(order_.size());
    order_.push_back(s);
    for (int child : c_.switches[s].children) Number(child);
  }

  bool Hidden(int s) const { return pre_[s] >= hide_lo_ && pre_[s] + size_[s] - 1 <= hide_hi_; }

  std::string Label(int s) const {
    const Switch& sw = c_.switches[s];
    std::string line =
        fmt::format("{} ({}, {}", sw.name, c_.levels[sw.level], Plural(nodes_[s], "node", "nodes"));
    if (show_gpus_) line += ", " + Plural(gpus_[s], "GPU", "GPUs");
    line += ")";
    if (!sw.nodes.empty()) {
      std::vector<std::string> names;
      for (int n : sw.nodes) names.push_back(c_.nodes[n].name);
      line += ": " + CompressHostlist(names);
    }
    return line;
  }

  void Children(const std::vector<int>& kids, const std::string& prefix) {
    struct Item {
      int sw = -1;        // a drawn switch, or -1 for a run of hidden ones
      long leaves = 0;    // leaves in the hidden run
      long switches = 0;  // switches heading the hidden run's subtrees
    };
    std::vector<Item> items;
    for (int kid : kids) {
      if (!Hidden(kid)) {
        items.push_back({kid});
        continue;
      }
      if (items.empty() || items.back().sw >= 0) items.push_back({});
      items.back().leaves += leaves_[kid];
      items.back().switches += 1;
    }
    for (size_t i = 0; i < items.size(); ++i) {
      bool last = i + 1 == items.size();
      out_ += prefix + (last ? "└─ " : "├─ ");
      const Item& item = items[i];
      if (item.sw < 0) {
        out_ += item.leaves > 0 ? fmt::format("… {} more {} …\n", item.leaves,
                                              item.leaves == 1 ? "leaf" : "leaves")
                                : fmt::format("… {} more {} …\n", item.switches,
                                              item.switches == 1 ? "switch" : "switches");
        continue;
      }
      out_ += Label(item.sw) + "\n";
      Children(c_.switches[item.sw].children, prefix + (last ? "   " : "│  "));
    }
  }

  const Cluster& c_;
  std::vector<int> tops_, order_, pre_, size_;
  std::vector<long> nodes_, gpus_, leaves_;
  bool show_gpus_ = false;
  int hide_lo_ = INT_MAX, hide_hi_ = INT_MIN;
  std::string out_;
};

}  // namespace

std::string RenderTree(const Cluster& cluster) { return TreeRenderer(cluster).Render(); }

std::string Hostfile(const Cluster& cluster, const std::vector<int>& rank_order,
                     int slots_per_node) {
  std::vector<int> order = rank_order;
  if (order.empty()) {
    for (int s = 0; s < static_cast<int>(cluster.switches.size()); ++s) {
      if (cluster.switches[s].parent >= 0) continue;
      std::vector<int> under = cluster.NodesUnder(s);
      order.insert(order.end(), under.begin(), under.end());
    }
  }
  std::string out;
  std::set<int> seen;
  for (int n : order) {
    if (n < 0 || n >= static_cast<int>(cluster.nodes.size()) || !seen.insert(n).second) continue;
    const Node& node = cluster.nodes[n];
    int slots = slots_per_node > 0 ? slots_per_node : std::max(node.gpu_count, 1);
    out += fmt::format("{} slots={}\n", node.name, slots);
  }
  return out;
}

}  // namespace railyard::topo
