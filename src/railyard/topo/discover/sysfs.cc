#include "railyard/topo/discover/sysfs.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <charconv>
#include <filesystem>

#include "railyard/base/files.h"
#include "railyard/topo/node_json.h"

namespace railyard::topo::internal {
namespace {

namespace fs = std::filesystem;

// "mlx5_2" < "mlx5_10": digit runs compare by value, so devices list in the order people
// count them.
bool NaturalLess(const std::string& a, const std::string& b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (std::isdigit(static_cast<unsigned char>(a[i])) &&
        std::isdigit(static_cast<unsigned char>(b[j]))) {
      size_t i2 = i, j2 = j;
      while (i2 < a.size() && a[i2] == '0') ++i2;
      while (j2 < b.size() && b[j2] == '0') ++j2;
      size_t ie = i2, je = j2;
      while (ie < a.size() && std::isdigit(static_cast<unsigned char>(a[ie]))) ++ie;
      while (je < b.size() && std::isdigit(static_cast<unsigned char>(b[je]))) ++je;
      if (ie - i2 != je - j2) return ie - i2 < je - j2;
      int c = a.compare(i2, ie - i2, b, j2, je - j2);
      if (c != 0) return c < 0;
      i = ie;
      j = je;
    } else {
      if (a[i] != b[j]) return a[i] < b[j];
      ++i;
      ++j;
    }
  }
  return a.size() - i < b.size() - j;
}

}  // namespace

std::optional<int64_t> ReadSysfsInt(const std::string& path) {
  std::optional<std::string> text = base::ReadTrimmedFile(path);
  if (!text || text->empty()) return std::nullopt;
  std::string_view s = *text;
  int base = 10;
  if (s.size() > 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X')) {
    s.remove_prefix(2);
    base = 16;
  }
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v, base);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

std::string RealPath(const std::string& path) {
  std::error_code ec;
  fs::path p = fs::canonical(path, ec);
  return ec ? std::string() : p.string();
}

std::vector<std::string> ListDir(const std::string& dir) {
  std::vector<std::string> out;
  std::error_code ec;
  for (fs::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    out.push_back(it->path().filename().string());
  }
  return out;
}

std::vector<std::string> SortedNatural(std::vector<std::string> v) {
  std::sort(v.begin(), v.end(), NaturalLess);
  return v;
}

std::string LastComponent(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

Result<std::vector<int>> ReadCpuList(std::string_view text, const std::string& path) {
  Result<std::vector<int>> cpus = ParseCpuList(text);
  if (!cpus.ok()) return cpus.status().WithContext(path);
  return cpus;
}

std::string JoinSome(const std::vector<std::string>& names, size_t limit) {
  std::string out;
  for (size_t i = 0; i < names.size() && i < limit; ++i) {
    if (i) out += ", ";
    out += names[i];
  }
  if (names.size() > limit) out += fmt::format(" and {} more", names.size() - limit);
  return out;
}

int NumaOfDevice(const std::string& device_dir, const std::string& pci_dir) {
  std::optional<int64_t> numa = ReadSysfsInt(device_dir + "/numa_node");
  if (!numa && !pci_dir.empty()) numa = ReadSysfsInt(pci_dir + "/numa_node");
  return numa && *numa >= 0 && *numa < (1 << 16) ? static_cast<int>(*numa) : -1;
}

}  // namespace railyard::topo::internal
