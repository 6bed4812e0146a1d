#include "railyard/validate/internal/proc_text.h"

#include <charconv>

#include "railyard/base/strings.h"

namespace railyard::validate::internal {
namespace {

// Calls fn(line) for each line of `text`.
template <typename Fn>
void ForEachLine(std::string_view text, Fn fn) {
  size_t at = 0;
  while (at < text.size()) {
    size_t end = text.find('\n', at);
    fn(text.substr(at, end == text.npos ? text.npos : end - at));
    at = end == text.npos ? text.size() : end + 1;
  }
}

std::string Unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\\' && i + 3 < s.size()) {
      int v = 0;
      auto [p, ec] = std::from_chars(s.data() + i + 1, s.data() + i + 4, v, 8);
      if (ec == std::errc() && p == s.data() + i + 4) {
        out += static_cast<char>(v);
        i += 3;
        continue;
      }
    }
    out += s[i];
  }
  return out;
}

}  // namespace

std::optional<uint64_t> ParseUnsigned(std::string_view text) {
  text = base::StripAsciiWhitespace(text);
  uint64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || p != text.data() + text.size()) return std::nullopt;
  return v;
}

std::optional<uint64_t> MeminfoValue(std::string_view text, std::string_view key) {
  std::optional<uint64_t> found;
  bool seen = false;
  ForEachLine(text, [&](std::string_view line) {
    if (seen || !line.starts_with(key) || line.size() <= key.size() || line[key.size()] != ':') {
      return;
    }
    seen = true;
    std::string_view rest = base::StripAsciiWhitespace(line.substr(key.size() + 1));
    std::string_view unit;
    if (rest.ends_with("kB")) {
      unit = "kB";
      rest = rest.substr(0, rest.size() - 2);
    }
    std::optional<uint64_t> v = ParseUnsigned(rest);
    if (v) found = unit.empty() ? *v : *v * 1024;
  });
  return found;
}

std::vector<MountEntry> ParseMounts(std::string_view text) {
  std::vector<MountEntry> out;
  ForEachLine(text, [&](std::string_view line) {
    std::vector<std::string_view> f;
    size_t at = 0;
    while (f.size() < 3 && at < line.size()) {
      size_t sp = line.find(' ', at);
      f.push_back(line.substr(at, sp == line.npos ? line.npos : sp - at));
      at = sp == line.npos ? line.size() : sp + 1;
    }
    if (f.size() == 3) out.push_back({Unescape(f[0]), Unescape(f[1]), std::string(f[2])});
  });
  return out;
}

const MountEntry* MountHolding(const std::vector<MountEntry>& mounts, std::string_view path) {
  const MountEntry* best = nullptr;
  for (const MountEntry& m : mounts) {
    std::string_view mp = m.mount_point;
    bool holds = path == mp || mp == "/" ||
                 (path.starts_with(mp) && path.size() > mp.size() && path[mp.size()] == '/');
    if (holds && (best == nullptr || mp.size() >= best->mount_point.size())) best = &m;
  }
  return best;
}

}  // namespace railyard::validate::internal
