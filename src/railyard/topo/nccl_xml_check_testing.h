// Test support: a check of an NCCL topology file (NCCL_TOPO_FILE), written here from NCCL's
// loading code, so that tests can ask "does NCCL load this, and what path class does it give
// each GPU-NIC pair?" without a GPU.
//
//   NcclTopoReport r = CheckNcclTopology(xml_text);
//   EXPECT_TRUE(r.errors.empty()) << r.Errors();
//   EXPECT_EQ(r.Path("0000:17:00.0", "0000:18:00.0"), "PIX");
//
// Follows NVIDIA/nccl v2.30.7-1 (commit 73cf112295c33aee2b895f329f592f2a9b4b0f97):
//   src/graph/xml.cc   xmlGetNode, xmlGetToken, xmlGetValue (the tokenizer: what ends a name,
//                      which quotes, the 253-character value limit, no entities, no "<?xml");
//                      ncclTopoXmlLoadSystem/Cpu/Pci/Gpu/Nic (which element NCCL reads under
//                      which; any other is skipped with an INFO line); ncclTopoFillGpu,
//                      ncclTopoFillNet, ncclTopoGetXmlFromSys, ncclTopoGetXmlFromCpu (what NCCL
//                      adds itself: <gpu> and <nic><net/></nic> under a <pci> it finds by bus
//                      id, sysfs attributes only for devices it detects, never for a made-up
//                      bridge or a NIC found by name).
//   src/graph/xml.h    MAX_STR_LEN, MAX_ATTR_COUNT; xmlGetAttrStr/xmlGetAttrInt (a read that
//                      fails with "Attribute X of node Y not found") against xmlGetAttr and
//                      xmlGetAttrIntDefault (optional).
//   src/graph/topo.cc  ncclTopoAddCpu, ncclTopoAddPci, ncclTopoAddNic, ncclTopoAddNet,
//                      ncclTopoAddGpu (the attributes each reads), kvDictPciClass,
//                      kvDictPciGen, kvDictCpuArch (values that would fall back silently).
//   src/graph/paths.cc ncclTopoSetPaths: a path's type is the worst of its hops; a PCI hop is
//                      PIX, PXB when both ends are PCI switches, PHB when one end is a CPU;
//                      CPUs are joined by SYS links.
// v2.18.1-1 has the same required attributes, dictionaries and hop rules (compared function
// by function; the numbering of path types changed, their order did not). Where the reader
// differs, the check takes the strictest: values in double quotes (a value opened with a
// single quote runs to the next '"' before v2.27), at most 253 characters (longer ones overrun
// NCCL's buffer before v2.27), at most 32 elements under one element (MAX_SUBS in v2.18-v2.20;
// 128 from v2.21), and room in NCCL_TOPO_XML_MAX_NODES (256 elements from v2.21, the file's
// and those NCCL adds for one GPU and every NIC).
//
// The check is stricter than NCCL where NCCL would load a file but not as its author meant:
// an element NCCL skips, a value that falls back to a default, an empty attribute (a space
// before '>'), an attribute past the 16th (never read), a <pci> that NCCL would drop for
// holding nothing, and x86 familyid/modelid on every x86 CPU (NCCL fills them in only the ranks
// that reach the CPU through a device they detect; fusing the ranks' topologies then keeps the
// CPU twice).
// Path classes are the topology's (ncclTopoComputePaths before it reroutes pairs without
// GPUDirect RDMA through the CPU or adds PXN).
//
// Test-only: header-only, no gtest dependency.
#pragma once

#include <algorithm>
#include <cstdlib>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace railyard::topo::testing {

struct NcclXmlElement {
  std::string name;
  std::vector<std::pair<std::string, std::string>> attrs;
  std::vector<NcclXmlElement> children;
  const std::string* Attr(std::string_view key) const {
    for (const auto& [k, v] : attrs) {
      if (k == key) return &v;
    }
    return nullptr;
  }
};

struct NcclTopoReport {
  std::vector<std::string> errors;  // empty: NCCL loads the file as written
  std::vector<std::string> gpus;    // GPU and NIC endpoints by bus id, in file order
  std::vector<std::string> nics;
  std::map<std::pair<std::string, std::string>, std::string> paths;  // (gpu, nic) -> "PIX"...

  std::string Path(const std::string& gpu, const std::string& nic) const {
    auto it = paths.find({gpu, nic});
    return it == paths.end() ? "none" : it->second;
  }
  std::string Errors() const {
    std::string s;
    for (const std::string& e : errors) s += e + "\n";
    return s;
  }
};

namespace nccl_check_internal {

// MAX_STR_LEN is 255; xmlGetValue fails once a value and its closing quote reach 254 bytes.
constexpr size_t kMaxValue = 253;
constexpr size_t kMaxName = 253;
constexpr size_t kMaxAttrs = 16;   // MAX_ATTR_COUNT
constexpr size_t kMaxSubs = 32;    // MAX_SUBS in v2.18-v2.20
constexpr size_t kMaxNodes = 256;  // NCCL_TOPO_XML_MAX_NODES from v2.21
// What NCCL adds to the file's elements in a rank: <gpu> with up to 18 <nvlink> and a <c2c>
// for its GPU, and <nic><net/></nic> for every NIC of its plugin.
constexpr size_t kGpuFill = 20, kNicFill = 2;

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  // The document's top-level elements; an error string on the first thing NCCL rejects.
  bool Parse(std::vector<NcclXmlElement>* top, std::string* error) {
    while (true) {
      Node n;
      if (!ReadNode(&n, error)) return false;
      if (n.kind == Kind::kEnd) return true;
      if (n.kind == Kind::kClose) return Fail(error, "closing </" + n.el.name + "> with none open");
      if (n.kind == Kind::kOpen && !ReadChildren(&n.el, error)) return false;
      top->push_back(std::move(n.el));
    }
  }

 private:
  enum class Kind { kEnd, kOpen, kSingle, kClose };
  struct Node {
    Kind kind = Kind::kEnd;
    NcclXmlElement el;
  };

  bool Fail(std::string* error, std::string what) {
    *error = "XML parse error at byte " + std::to_string(pos_) + ": " + std::move(what);
    return false;
  }
  bool Get(char* c) {
    if (pos_ >= s_.size()) return false;
    *c = s_[pos_++];
    return true;
  }
  static bool Ends(char c) { return c == ' ' || c == '>' || c == '/' || c == '\n' || c == '\r'; }

  // xmlGetToken: a name up to ' ', '>', '/', '\n' or '\r'; a '=' starts a quoted value.
  bool Token(std::string* name, std::string* value, bool* has_value, char* last,
             std::string* error) {
    name->clear();
    *has_value = false;
    char c;
    while (true) {
      if (!Get(&c)) return Fail(error, "unexpected end of file");
      if (c == '=') {
        if (value == nullptr) return Fail(error, "unexpected value with name '" + *name + "'");
        *has_value = true;
        return Value(value, last, error);
      }
      if (Ends(c)) break;
      *name += c;
      if (name->size() > kMaxName) return Fail(error, "name '" + *name + "' too long");
    }
    *last = c;
    return true;
  }

  // xmlGetValue: double-quoted (INT_OK is off), no escapes, at most kMaxValue bytes.
  bool Value(std::string* value, char* last, std::string* error) {
    char q;
    if (!Get(&q)) return Fail(error, "unexpected end of file");
    if (q == '\'')
      return Fail(error, "single-quoted value: NCCL before 2.27 reads it to the next '\"'");
    if (q != '"') return Fail(error, "expected (double) quote");
    value->clear();
    char c;
    while (true) {
      if (!Get(&c)) return Fail(error, "unexpected end of file in a value");
      if (c == q) break;
      *value += c;
      if (value->size() > kMaxValue) {
        return Fail(error, "value '" + value->substr(0, 40) + "...' too long (NCCL's limit is " +
                               std::to_string(kMaxValue) + " characters)");
      }
    }
    if (!Get(last)) return Fail(error, "unexpected end of file");
    return true;
  }

  // xmlGetNode.
  bool ReadNode(Node* n, std::string* error) {
    char c = ' ';
    while (c == ' ' || c == '\n' || c == '\r') {
      if (!Get(&c)) {
        n->kind = Kind::kEnd;
        return true;
      }
    }
    if (c != '<') return Fail(error, std::string("expecting '<', got '") + c + "'");
    bool has_value;
    if (!Token(&n->el.name, nullptr, &has_value, &c, error)) return false;
    if (n->el.name.rfind("!--", 0) == 0) {  // comment
      size_t end = s_.find("-->", pos_ >= 3 ? pos_ - 3 : 0);
      if (end == std::string_view::npos) return Fail(error, "unterminated comment");
      pos_ = end + 3;
      return ReadNode(n, error);
    }
    if (n->el.name.empty() && c == '/') {
      n->kind = Kind::kClose;
      if (!Token(&n->el.name, nullptr, &has_value, &c, error)) return false;
      if (c != '>')
        return Fail(error,
                    "unexpected trailing '" + std::string(1, c) + "' in </" + n->el.name + ">");
      return true;
    }
    n->kind = Kind::kOpen;
    while (c == ' ') {
      std::string key, value;
      if (!Token(&key, &value, &has_value, &c, error)) return false;
      if (key.empty()) {
        return Fail(error, "<" + n->el.name +
                               "> has an empty attribute (two spaces, or a "
                               "space before '>' or '/>'): NCCL stores it and counts it");
      }
      if (!has_value)
        return Fail(error, "attribute '" + key + "' of <" + n->el.name + "> has no value");
      n->el.attrs.emplace_back(std::move(key), std::move(value));
    }
    if (n->el.attrs.size() > kMaxAttrs) {
      return Fail(error, "<" + n->el.name + "> has " + std::to_string(n->el.attrs.size()) +
                             " attributes; NCCL ignores those past the 16th");
    }
    if (c == '/') {
      n->kind = Kind::kSingle;
      std::string rest;
      if (!Token(&rest, nullptr, &has_value, &c, error)) return false;
    }
    if (c != '>') {
      return Fail(error,
                  "expected '>' in <" + n->el.name + ">, got " +
                      (c == '\n' ? std::string("a newline") : "'" + std::string(1, c) + "'"));
    }
    return true;
  }

  // xmlLoadSub for one open element: children up to the matching close.
  bool ReadChildren(NcclXmlElement* head, std::string* error) {
    while (true) {
      Node n;
      if (!ReadNode(&n, error)) return false;
      if (n.kind == Kind::kEnd) return Fail(error, "unterminated <" + head->name + ">");
      if (n.kind == Kind::kClose) {
        if (n.el.name != head->name) {
          return Fail(error, "mismatch: <" + head->name + "> closed by </" + n.el.name + ">");
        }
        return true;
      }
      if (n.kind == Kind::kOpen && !ReadChildren(&n.el, error)) return false;
      head->children.push_back(std::move(n.el));
      if (head->children.size() > kMaxSubs) {
        return Fail(error, "more than 32 elements under <" + head->name +
                               ">: NCCL before 2.21 stops there (MAX_SUBS)");
      }
    }
  }

  std::string_view s_;
  size_t pos_ = 0;
};

// Path types in NCCL's order (src/graph/topo.h): only the order matters.
enum PathType { kLOC = 0, kPIX = 4, kPXB = 5, kPHB = 8, kSYS = 9, kDIS = 11 };
inline const char* PathName(int t) {
  switch (t) {
    case kLOC:
      return "LOC";
    case kPIX:
      return "PIX";
    case kPXB:
      return "PXB";
    case kPHB:
      return "PHB";
    case kSYS:
      return "SYS";
    default:
      return "DIS";
  }
}

// NCCL's node types for the path search (GPU stands for the GPU and its DEV node).
enum class NodeType { kCpu, kPci, kGpu, kNic };
struct GraphNode {
  NodeType type;
  std::string name;                         // bus id, or "cpu N"
  std::vector<std::pair<int, bool>> links;  // (node, is SYS link)
};

inline bool IsInt(const std::string& s) {
  if (s.empty()) return false;
  char* end = nullptr;
  std::strtol(s.c_str(), &end, 0);
  return *end == '\0';
}

inline bool IsBusId(const std::string& s) {
  if (s.size() != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9, 11}) {
    char c = s[i];
    if (!((c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'))) return false;
  }
  return true;
}

inline bool IsAffinity(const std::string& s) {
  // sysfs cpumap: 8-hex-digit groups separated by commas (ncclStrToCpuset).
  if (s.empty() || (s.size() + 1) % 9 != 0) return false;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    bool hex = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F');
    if ((i % 9 == 8) ? c != ',' : !hex) return false;
  }
  return true;
}

class Checker {
 public:
  explicit Checker(NcclTopoReport* r) : r_(r) {}

  void System(const std::vector<NcclXmlElement>& top) {
    int systems = 0;
    for (const NcclXmlElement& e : top) {
      if (e.name != "system") {
        Error("top-level <" + e.name + "> is skipped by NCCL (it reads only <system>)");
        continue;
      }
      ++systems;
      Count(e);
      const std::string* v = e.Attr("version");
      if (v == nullptr) {
        Error("Attribute version of node system not found");
      } else if (!IsInt(*v) || std::strtol(v->c_str(), nullptr, 0) != 1) {
        Error("XML Topology has wrong version " + *v + ", 1 needed");
      }
      for (const NcclXmlElement& c : e.children) {
        if (c.name != "cpu") {
          Skipped(c, e);
        } else {
          Cpu(c);
        }
      }
    }
    if (systems != 1) Error("expected one <system>, found " + std::to_string(systems));
    Paths();
    size_t fill = kGpuFill + kNicFill * bare_nics_;
    if (elements_ + fill > kMaxNodes) {
      Error("the file's " + std::to_string(elements_) + " elements and the " +
            std::to_string(fill) + " NCCL adds exceed its 256 (NCCL_TOPO_XML_MAX_NODES)");
    }
  }

 private:
  void Error(std::string e) { r_->errors.push_back(std::move(e)); }
  void Count(const NcclXmlElement& e) {
    ++elements_;
    for (const NcclXmlElement& c : e.children) Count(c);
  }
  void Skipped(const NcclXmlElement& child, const NcclXmlElement& parent) {
    Error("<" + child.name + "> under <" + parent.name + "> is skipped by NCCL");
  }
  bool Need(const NcclXmlElement& e, const char* key, const std::string& where) {
    if (e.Attr(key) != nullptr) return true;
    Error(std::string("Attribute ") + key + " of node " + e.name + " not found (" + where + ")");
    return false;
  }
  int Add(NodeType t, std::string name) {
    nodes_.push_back({t, std::move(name), {}});
    return static_cast<int>(nodes_.size()) - 1;
  }
  void Link(int a, int b, bool sys) {
    nodes_[a].links.push_back({b, sys});
    nodes_[b].links.push_back({a, sys});
  }

  // ncclTopoAddCpu; ncclTopoGetXmlFromCpu fills affinity, arch, and on x86 vendor, familyid
  // and modelid, but only in ranks that reach this CPU through a device they detect.
  void Cpu(const NcclXmlElement& e) {
    std::string where = "cpu";
    if (Need(e, "numaid", where)) {
      const std::string& id = *e.Attr("numaid");
      where = "cpu numaid=" + id;
      if (!IsInt(id)) Error(where + ": numaid is not an integer");
      if (!numa_ids_.insert(id).second) Error(where + ": a second <cpu> with this numaid");
    }
    if (const std::string* a = e.Attr("affinity"); a != nullptr && !IsAffinity(*a)) {
      Error(where + ": affinity '" + *a + "' is not a sysfs cpumap");
    }
    if (Need(e, "arch", where)) {
      const std::string& arch = *e.Attr("arch");
      if (arch != "x86_64" && arch != "arm64" && arch != "ppc64") {
        Error(where + ": arch '" + arch + "' is not in kvDictCpuArch (x86_64, arm64, ppc64)");
      }
      if (arch == "x86_64") {
        Need(e, "vendor", where);
        for (const char* k : {"familyid", "modelid"}) {
          if (Need(e, k, where) && !IsInt(*e.Attr(k))) {
            Error(where + ": " + k + " is not an integer");
          }
        }
      }
    }
    int cpu = Add(NodeType::kCpu, where);
    cpus_.push_back(cpu);
    for (const NcclXmlElement& c : e.children) {
      if (c.name == "pci") {
        Pci(c, cpu);
      } else if (c.name == "nic") {
        Nic(c, where);
        nics_.push_back({Add(NodeType::kNic, where + " nic"), where + " nic"});
        Link(cpu, nics_.back().first, false);
      } else {
        Skipped(c, e);
      }
    }
  }

  // ncclTopoAddPci: class, busid, link_width and link_speed are read with xmlGetAttrStr/Int
  // on every <pci>, and NCCL fills them only for devices it detects in sysfs or NVML.
  void Pci(const NcclXmlElement& e, int parent) {
    std::string where = "pci";
    std::string bus;
    if (Need(e, "busid", where)) {
      bus = *e.Attr("busid");
      where = "pci busid=" + bus;
      if (!IsBusId(bus)) {
        Error(where +
              ": expected dddd:bb:dd.f in lowercase hex, as sysfs spells it (NCCL "
              "matches bus ids as text)");
      }
      if (!bus_ids_.insert(bus).second) Error(where + ": a second <pci> with this busid");
    }
    std::string cls;
    if (Need(e, "class", where)) cls = *e.Attr("class");
    Need(e, "link_width", where);
    Need(e, "link_speed", where);
    if (const std::string* w = e.Attr("link_width"); w != nullptr) {
      long v = IsInt(*w) ? std::strtol(w->c_str(), nullptr, 0) : -1;
      if (v < 1 || v > 32) Error(where + ": link_width '" + *w + "' is no PCIe width");
    }
    if (const std::string* s = e.Attr("link_speed"); s != nullptr) {
      static const std::set<std::string> kGen = {
          "2.5 GT/s",       "5 GT/s",         "8 GT/s",        "16 GT/s",
          "32 GT/s",        "2.5 GT/s PCIe",  "5.0 GT/s PCIe", "8.0 GT/s PCIe",
          "16.0 GT/s PCIe", "32.0 GT/s PCIe", "64.0 GT/s PCIe"};
      if (!kGen.count(*s)) {
        Error(where + ": link_speed '" + *s + "' is not in kvDictPciGen (NCCL falls back to Gen3)");
      }
    }

    const NcclXmlElement* gpu = nullptr;
    const NcclXmlElement* nic = nullptr;
    std::vector<const NcclXmlElement*> pcis;
    for (const NcclXmlElement& c : e.children) {
      if (c.name == "gpu") {
        if (gpu == nullptr) gpu = &c;
      } else if (c.name == "nic") {
        if (nic == nullptr) nic = &c;
      } else if (c.name == "pci") {
        pcis.push_back(&c);
      } else if (c.name != "pcilink") {
        Skipped(c, e);
      }
    }
    // kvDictPciClass: 0x060400 bridge, 0x03* GPU, 0x02* NIC; anything else a PCI node.
    bool gpu_class = cls.rfind("0x03", 0) == 0;
    bool nic_class = cls.rfind("0x02", 0) == 0;
    if (gpu != nullptr || gpu_class) {
      if (!gpu_class) Error(where + ": <gpu> under a <pci> whose class is not 0x03...");
      if (nic != nullptr || !pcis.empty()) {
        Error(where + ": a GPU's <pci> holds <nic> or <pci>, which NCCL does not read");
      }
      r_->gpus.push_back(bus);
      Link(parent, Add(NodeType::kGpu, bus), false);
      return;
    }
    if (nic != nullptr || nic_class) {
      if (!pcis.empty()) Error(where + ": a NIC's <pci> holds <pci>, which NCCL does not read");
      if (nic != nullptr) Nic(*nic, where);
      if (nic == nullptr) ++bare_nics_;
      // Without <nic>, ncclTopoFillNet adds one for the plugin's device at this bus id.
      int n = Add(NodeType::kNic, bus);
      nics_.push_back({n, bus});
      Link(parent, n, false);
      return;
    }
    if (pcis.empty()) {
      Error(where + ": class " + cls + " and nothing under it: NCCL drops it (ncclTopoTrimXml)");
      return;
    }
    int node = Add(NodeType::kPci, bus);
    Link(parent, node, false);
    for (const NcclXmlElement* c : pcis) Pci(*c, node);
  }

  // ncclTopoFillNet finds a <net> by name; a <net> without one is never matched and trimmed.
  void Nic(const NcclXmlElement& e, const std::string& where) {
    for (const NcclXmlElement& c : e.children) {
      if (c.name != "net") {
        Skipped(c, e);
      } else if (c.Attr("name") == nullptr) {
        Error(where + ": <net> without a name: ncclTopoFillNet never matches it");
      }
    }
  }

  // ncclTopoConnectCpus joins every pair of CPUs by a SYS link; then ncclTopoSetPaths.
  void Paths() {
    for (size_t i = 0; i < cpus_.size(); ++i) {
      for (size_t j = i + 1; j < cpus_.size(); ++j) Link(cpus_[i], cpus_[j], true);
    }
    for (size_t g = 0; g < nodes_.size(); ++g) {
      if (nodes_[g].type != NodeType::kGpu) continue;
      std::vector<int> best(nodes_.size(), kDIS);
      best[g] = kLOC;
      std::vector<int> frontier = {static_cast<int>(g)};
      while (!frontier.empty()) {  // types only grow along a path: this settles
        std::vector<int> next;
        for (int u : frontier) {
          // NCCL's search does not go through a GPU or NIC to reach another device.
          if (u != static_cast<int>(g) &&
              (nodes_[u].type == NodeType::kGpu || nodes_[u].type == NodeType::kNic)) {
            continue;
          }
          for (const auto& [v, sys] : nodes_[u].links) {
            int hop = kPIX;
            if (sys)
              hop = kSYS;
            else if (nodes_[u].type == NodeType::kCpu || nodes_[v].type == NodeType::kCpu) {
              hop = kPHB;
            } else if (nodes_[u].type == NodeType::kPci && nodes_[v].type == NodeType::kPci) {
              hop = kPXB;
            }
            int t = std::max(best[u], hop);
            if (t < best[v]) {
              best[v] = t;
              next.push_back(v);
            }
          }
        }
        frontier = std::move(next);
      }
      for (const auto& [n, name] : nics_) r_->paths[{nodes_[g].name, name}] = PathName(best[n]);
    }
    for (const auto& [n, name] : nics_) r_->nics.push_back(name);
  }

  NcclTopoReport* r_;
  std::vector<GraphNode> nodes_;
  std::vector<int> cpus_;
  std::vector<std::pair<int, std::string>> nics_;
  std::set<std::string> numa_ids_, bus_ids_;
  size_t elements_ = 0, bare_nics_ = 0;
};

}  // namespace nccl_check_internal

// Parses `text` as NCCL's reader does and checks it as NCCL's loader would; see the header.
inline NcclTopoReport CheckNcclTopology(std::string_view text) {
  NcclTopoReport r;
  std::vector<NcclXmlElement> top;
  std::string error;
  nccl_check_internal::Parser parser(text);
  if (!parser.Parse(&top, &error)) {
    r.errors.push_back(error);
    return r;
  }
  nccl_check_internal::Checker(&r).System(top);
  return r;
}

// The element tree as NCCL's reader sees it (for tests that look at the structure).
inline bool ParseNcclXml(std::string_view text, std::vector<NcclXmlElement>* top,
                         std::string* error) {
  return nccl_check_internal::Parser(text).Parse(top, error);
}

}  // namespace railyard::topo::testing
