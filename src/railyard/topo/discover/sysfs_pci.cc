// The PCI tree in sysfs: GPUs by PCI class code, bus ids, and the PCIe path class between
// two devices.
#include <algorithm>
#include <cctype>
#include <optional>

#include "railyard/base/strings.h"
#include "railyard/topo/discover.h"
#include "railyard/topo/discover/sources.h"
#include "railyard/topo/discover/sysfs.h"

namespace railyard::topo {
namespace {

using internal::IsBdf;

bool IsHex(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return std::isxdigit(static_cast<unsigned char>(c)) != 0;
  });
}

// "pci0000:00": a PCI root complex (host bridge) in /sys/devices.
bool IsRootComplex(std::string_view s) {
  if (s.substr(0, 3) != "pci") return false;
  s.remove_prefix(3);
  size_t c = s.find(':');
  return c != std::string_view::npos && c >= 4 && IsHex(s.substr(0, c)) && s.size() == c + 3 &&
         IsHex(s.substr(c + 1));
}

struct PciChain {
  std::string_view root;               // "pci0000:00"; empty when the path has none
  std::vector<std::string_view> bdfs;  // from the root port down to the device
};

PciChain ParsePciChain(std::string_view path) {
  std::vector<std::string_view> parts;
  while (!path.empty()) {
    size_t slash = path.find('/');
    std::string_view part = path.substr(0, slash);
    if (!part.empty()) parts.push_back(part);
    if (slash == std::string_view::npos) break;
    path.remove_prefix(slash + 1);
  }
  PciChain chain;
  size_t start = parts.size();
  for (size_t i = parts.size(); i-- > 0;) {
    if (IsRootComplex(parts[i])) {
      start = i;
      break;
    }
  }
  if (start == parts.size()) return chain;
  chain.root = parts[start];
  for (size_t i = start + 1; i < parts.size() && IsBdf(parts[i]); ++i) {
    chain.bdfs.push_back(parts[i]);
  }
  return chain;
}

}  // namespace

namespace internal {

bool IsBdf(std::string_view s) {
  size_t c1 = s.find(':');
  if (c1 == std::string_view::npos || c1 < 4) return false;
  std::string_view rest = s.substr(c1 + 1);
  return IsHex(s.substr(0, c1)) && rest.size() == 7 && IsHex(rest.substr(0, 2)) && rest[2] == ':' &&
         IsHex(rest.substr(3, 2)) && rest[5] == '.' && rest[6] >= '0' && rest[6] <= '7';
}

std::string PciDirOf(const std::string& real_path) {
  size_t end = std::string::npos;
  size_t pos = 0;
  while (pos <= real_path.size()) {
    size_t slash = real_path.find('/', pos);
    size_t stop = slash == std::string::npos ? real_path.size() : slash;
    if (IsBdf(std::string_view(real_path).substr(pos, stop - pos))) end = stop;
    if (slash == std::string::npos) break;
    pos = slash + 1;
  }
  return end == std::string::npos ? std::string() : real_path.substr(0, end);
}

// Display-class PCI functions from GPU vendors. 0x0380 (display controller, other) is what
// AMD Instinct accelerators report; NVSwitches are bridges (0x0680) and stay out.
std::vector<Gpu> GpusFromPciClass(const std::string& root) {
  constexpr int64_t kVendorNvidia = 0x10de, kVendorAmd = 0x1002;
  const std::string dir = root + "/bus/pci/devices";
  std::vector<std::string> bdfs;
  for (const std::string& name : ListDir(dir)) {
    if (!IsBdf(name)) continue;
    std::optional<int64_t> cls = ReadSysfsInt(dir + "/" + name + "/class");
    std::optional<int64_t> vendor = ReadSysfsInt(dir + "/" + name + "/vendor");
    if (!cls || !vendor) continue;
    int64_t base = *cls & 0xffff00;
    bool display = base == 0x030000 || base == 0x030200 || base == 0x038000;
    if (display && (*vendor == kVendorNvidia || *vendor == kVendorAmd)) bdfs.push_back(name);
  }
  // Bus order, as CUDA_DEVICE_ORDER=PCI_BUS_ID and NVML number them.
  std::sort(bdfs.begin(), bdfs.end());
  std::vector<Gpu> gpus;
  for (const std::string& bdf : bdfs) {
    Gpu gpu;
    gpu.index = static_cast<int>(gpus.size());
    gpu.pci_bus_id = NormalizePciBusId(bdf);
    gpus.push_back(std::move(gpu));
  }
  return gpus;
}

}  // namespace internal

std::string NormalizePciBusId(std::string_view bus_id) {
  std::string s(base::StripAsciiWhitespace(bus_id));
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  if (!IsBdf(s)) return s;
  size_t colon = s.find(':');
  size_t zeros = 0;
  while (colon - zeros > 4 && s[zeros] == '0') ++zeros;
  return s.substr(zeros);
}

PathClass ClassifyPciPath(std::string_view a_path, int a_numa, std::string_view b_path,
                          int b_numa) {
  PciChain a = ParsePciChain(a_path);
  PciChain b = ParsePciChain(b_path);
  if (a.root.empty() || b.root.empty() || a.bdfs.empty() || b.bdfs.empty() || a.root != b.root) {
    return a_numa == b_numa ? PathClass::kNODE : PathClass::kSYS;
  }
  size_t common = 0;
  while (common < a.bdfs.size() && common < b.bdfs.size() && a.bdfs[common] == b.bdfs[common]) {
    ++common;
  }
  if (common == 0) return PathClass::kPHB;  // separate root ports: through the host bridge
  // Below the deepest shared bridge each side may take one hop to a downstream port and one
  // to the device; anything deeper crosses another switch.
  size_t a_rest = a.bdfs.size() - common, b_rest = b.bdfs.size() - common;
  return a_rest <= 2 && b_rest <= 2 ? PathClass::kPIX : PathClass::kPXB;
}

}  // namespace railyard::topo
