// Parsing the small kernel files node checks read (/proc/meminfo, /proc/mounts, sysctl and
// sysfs values). Internal to checks/.
//
// Thread-safety: pure functions.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace railyard::validate::internal {

// The value of a "Key:   1234 kB" line of /proc/meminfo, in bytes ("kB" is KiB); a line
// without a unit ("HugePages_Total:  16") gives the plain number. nullopt when the key is
// absent or its value does not parse.
std::optional<uint64_t> MeminfoValue(std::string_view text, std::string_view key);

// A whole non-negative number, surrounding whitespace ignored ("16777216\n").
std::optional<uint64_t> ParseUnsigned(std::string_view text);

// One line of /proc/mounts, with the octal escapes (\040 for a space) decoded.
struct MountEntry {
  std::string device;
  std::string mount_point;
  std::string fs_type;
};
std::vector<MountEntry> ParseMounts(std::string_view text);

// The mount that holds `path` (the longest mount point that is `path` or one of its parent
// directories, the last such line when stacked); nullptr when none does.
const MountEntry* MountHolding(const std::vector<MountEntry>& mounts, std::string_view path);

}  // namespace railyard::validate::internal
